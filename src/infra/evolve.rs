//! Schema evolution of Silver: the contract compared with the table's
//! current schema and partition spec, and the compatible differences
//! committed as one schema update, its own commit before the run's data.
//!
//! In: the plan (`dataset.columns`, `table.partition`) and the table. Out:
//! the table as the contract wants it with the [`SchemaEvolution`] done (or,
//! for a dry run and `check-config`, previewed in memory and committed
//! nowhere), or a configuration error naming every column at fault and what
//! to do. Compatible, as Iceberg allows it: a new nullable column (a fresh
//! field id: rows written before read it as null), `int` to `long`, `float`
//! to `double`, a decimal's precision widened at the same scale, a required
//! column made optional, and the columns put in the contract's order.
//! Existing columns keep their field ids; nothing is dropped, renamed or
//! narrowed, and the partition spec is never changed: what Silver holds
//! stays readable as it was written.

use std::fmt;
use std::sync::Arc;

use iceberg::spec::{
    NestedField, NestedFieldRef, PrimitiveType, Schema, TableMetadata, TableMetadataBuilder, Type,
};
use iceberg::table::Table;
use iceberg::transaction::{ApplyTransactionAction, Transaction};
use iceberg::{Catalog, ErrorKind};
use serde::{Deserialize, Serialize};

use crate::config::Plan;
use crate::config::contract::Column;
use crate::error::{Error, Result};
use crate::infra::pinned::PinnedCatalog;

/// One change of Silver's schema that the contract asks for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "change", rename_all = "snake_case")]
pub enum SchemaChange {
    /// A new optional column.
    AddColumn {
        /// Its name.
        column: String,
        /// Its Iceberg type.
        #[serde(rename = "type")]
        column_type: String,
    },
    /// A column's type widened.
    WidenType {
        /// The column.
        column: String,
        /// Its type in the table.
        from: String,
        /// Its type in the contract.
        to: String,
    },
    /// A required column made optional.
    MakeOptional {
        /// The column.
        column: String,
    },
    /// The table's columns put in the contract's order.
    Reorder,
}

impl fmt::Display for SchemaChange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SchemaChange::AddColumn {
                column,
                column_type,
            } => write!(f, "add column {column} ({column_type}, optional)"),
            SchemaChange::WidenType { column, from, to } => {
                write!(f, "widen column {column} from {from} to {to}")
            }
            SchemaChange::MakeOptional { column } => write!(f, "make column {column} optional"),
            SchemaChange::Reorder => write!(f, "put the columns in the contract's order"),
        }
    }
}

/// What the contract changed in Silver's schema: the run summary's
/// `schema_evolution`, and a property of the run's data snapshot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SchemaEvolution {
    /// The table's schema before.
    pub from_schema_id: i32,
    /// The schema committed; none when only previewed (a dry run).
    pub to_schema_id: Option<i32>,
    /// What changed, in the contract's column order.
    pub changes: Vec<SchemaChange>,
}

impl fmt::Display for SchemaEvolution {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.to_schema_id {
            Some(to) => write!(f, "schema {} -> {to}: ", self.from_schema_id)?,
            None => write!(f, "schema {} -> (not committed): ", self.from_schema_id)?,
        }
        let changes: Vec<String> = self.changes.iter().map(ToString::to_string).collect();
        write!(f, "{}", changes.join("; "))
    }
}

/// Silver as a run uses it, and what the contract changed in its schema.
#[derive(Debug, Clone)]
pub struct EvolvedTable {
    /// The table.
    pub table: Table,
    /// The evolution committed (or, for a dry run, previewed); none: the
    /// table already had the contract's schema.
    pub evolution: Option<SchemaEvolution>,
}

/// How many times a schema update that meets a concurrent commit is tried in all.
const EVOLVE_ATTEMPTS: u32 = 5;

/// Evolves `table` to the contract's schema when it differs compatibly: one
/// schema update that requires the table's schema to still be the one
/// compared. A concurrent commit makes it fail; the table is then reloaded
/// and compared again (one that already has the schema needs nothing).
pub async fn evolve(catalog: &dyn Catalog, plan: &Plan, mut table: Table) -> Result<EvolvedTable> {
    let name = table.identifier().to_string();
    let mut attempt = 1;
    loop {
        let Some(target) = target_schema(plan, &table)? else {
            return Ok(EvolvedTable {
                table,
                evolution: None,
            });
        };
        let from_schema_id = table.metadata().current_schema_id();
        match commit_schema(catalog, &table, target.schema).await {
            Ok(evolved) => {
                let evolution = SchemaEvolution {
                    from_schema_id,
                    to_schema_id: Some(evolved.metadata().current_schema_id()),
                    changes: target.changes,
                };
                tracing::info!(table = %name, evolution = %evolution, "evolved the table's schema to the contract's");
                return Ok(EvolvedTable {
                    table: evolved,
                    evolution: Some(evolution),
                });
            }
            Err(e)
                if e.kind() == ErrorKind::CatalogCommitConflicts && attempt < EVOLVE_ATTEMPTS =>
            {
                tracing::warn!(attempt, table = %name, error = %e, "schema update conflicted: reloading the table and comparing again");
                table = catalog
                    .load_table(table.identifier())
                    .await
                    .map_err(Error::catalog("load-table", &name))?;
                attempt += 1;
            }
            Err(e) => return Err(Error::catalog("evolve-schema", &name)(e)),
        }
    }
}

/// Refuses a contract `table` cannot evolve to, naming every column at fault.
pub(crate) fn check(plan: &Plan, table: &Table) -> Result<()> {
    target_schema(plan, table).map(|_| ())
}

/// `table` as the contract wants it, in memory and committed nowhere: what
/// a dry run judges against and `check-config` reports. Incompatible
/// differences are refused as [`evolve`] refuses them.
pub(crate) fn preview(plan: &Plan, table: Table) -> Result<EvolvedTable> {
    let Some(target) = target_schema(plan, &table)? else {
        return Ok(EvolvedTable {
            table,
            evolution: None,
        });
    };
    let name = table.identifier().to_string();
    let metadata = table.metadata().clone();
    let location = table.metadata_location().map(str::to_string);
    let previewed = TableMetadataBuilder::new_from_metadata(metadata, location)
        .add_current_schema(target.schema)
        .and_then(|builder| builder.build())
        .and_then(|built| with_metadata(&table, built.metadata))
        .map_err(Error::catalog("preview-schema", &name))?;
    Ok(EvolvedTable {
        evolution: Some(SchemaEvolution {
            from_schema_id: table.metadata().current_schema_id(),
            to_schema_id: None,
            changes: target.changes,
        }),
        table: previewed,
    })
}

/// The schema the contract asks of a table, and how it differs from the current one.
struct Target {
    /// The contract's columns in its order, with the table's field ids and
    /// fresh ones for new columns; it carries the current schema's id.
    schema: Schema,
    changes: Vec<SchemaChange>,
}

/// Compares the contract and `table.partition` with `table`: the target
/// schema when they differ compatibly, none when they agree, else a
/// configuration error listing every incompatible difference and what to do.
fn target_schema(plan: &Plan, table: &Table) -> Result<Option<Target>> {
    let name = table.identifier().to_string();
    let metadata = table.metadata();
    let current = metadata.current_schema();
    let mut problems = partition_problems(plan, metadata, &name);
    let new_columns: Vec<&str> = plan
        .contract
        .column_names()
        .filter(|c| current.as_struct().field_by_name(c).is_none())
        .collect();
    let mut last_id = metadata.last_column_id();
    let (mut fields, mut changes) = (Vec::new(), Vec::new());
    for column in &plan.contract.columns {
        let evolved = match current.as_struct().field_by_name(&column.name) {
            Some(field) => evolve_field(field, column, &name),
            None => new_field(column, metadata, &name, &mut last_id),
        };
        match evolved {
            Ok((field, change)) => {
                fields.push(field);
                changes.extend(change);
            }
            Err(problem) => problems.push(format!("dataset.columns: {problem}")),
        }
    }
    for field in current.as_struct().fields() {
        if plan.contract.column(&field.name).is_none() {
            problems.push(dropped(field, &name, &new_columns));
        }
    }
    if !problems.is_empty() {
        return Err(Error::ConfigInvalid {
            path: plan.source.clone(),
            problems,
        });
    }
    let kept: Vec<i32> = fields
        .iter()
        .map(|f| f.id)
        .filter(|id| *id <= metadata.last_column_id())
        .collect();
    let order: Vec<i32> = current.as_struct().fields().iter().map(|f| f.id).collect();
    if kept != order {
        changes.push(SchemaChange::Reorder);
    }
    if changes.is_empty() {
        return Ok(None);
    }
    let schema = Schema::builder()
        .with_schema_id(current.schema_id())
        .with_fields(fields)
        .with_identifier_field_ids(current.identifier_field_ids())
        .build()
        .map_err(|e| Error::Internal(format!("the evolved schema of {name} is invalid: {e}")))?;
    Ok(Some(Target { schema, changes }))
}

/// The table's `field` as `column` wants it, and what that changes; or why it cannot be.
fn evolve_field(
    field: &NestedFieldRef,
    column: &Column,
    table: &str,
) -> std::result::Result<(NestedFieldRef, Vec<SchemaChange>), String> {
    let wanted = column.column_type.iceberg_type();
    let mut changes = Vec::new();
    match field.field_type.as_ref() {
        Type::Primitive(found) if *found == wanted => {}
        Type::Primitive(found) if widens(found, &wanted) => changes.push(SchemaChange::WidenType {
            column: column.name.clone(),
            from: found.to_string(),
            to: wanted.to_string(),
        }),
        found => {
            return Err(format!(
                "column '{}' is {found} in table {table} but {wanted} in the contract: Iceberg \
                 only widens a type (int to long, float to double, decimal(P, S) to decimal(P2, S) \
                 with P2 > P), so declare it as {found} again (or as a widening of it), or write \
                 to a new table (another table.name)",
                column.name
            ));
        }
    }
    match (field.required, column.nullable) {
        (true, true) => changes.push(SchemaChange::MakeOptional {
            column: column.name.clone(),
        }),
        (false, false) => {
            return Err(format!(
                "column '{0}' is optional in table {table} (its rows may hold nulls) but \
                 nullable = false in the contract: keep nullable = true, and add a rule \
                 '{0} IS NOT NULL' to refuse nulls from now on",
                column.name
            ));
        }
        _ => {}
    }
    let mut evolved = NestedField::clone(field);
    evolved.field_type = Box::new(Type::Primitive(wanted));
    evolved.required = !column.nullable;
    Ok((Arc::new(evolved), changes))
}

/// A column of the contract the table lacks, with the field id after
/// `last_id`; or why it cannot be added.
fn new_field(
    column: &Column,
    metadata: &TableMetadata,
    table: &str,
    last_id: &mut i32,
) -> std::result::Result<(NestedFieldRef, Vec<SchemaChange>), String> {
    if !column.nullable {
        return Err(format!(
            "column '{0}' is not in table {table} and is declared nullable = false: the rows \
             already there have no value for it, so a new column must be nullable; declare it \
             with nullable = true (and add a rule '{0} IS NOT NULL' to require it in new drops)",
            column.name
        ));
    }
    let spec = metadata.default_partition_spec();
    if spec.fields().iter().any(|p| p.name == column.name) {
        return Err(format!(
            "new column '{}' has the name of a partition field of table {table}: choose another name",
            column.name
        ));
    }
    *last_id += 1;
    let column_type = column.column_type.iceberg_type();
    let change = SchemaChange::AddColumn {
        column: column.name.clone(),
        column_type: column_type.to_string(),
    };
    let field = NestedField::optional(*last_id, &column.name, Type::Primitive(column_type));
    Ok((Arc::new(field), vec![change]))
}

/// The problem of a table column the contract lacks.
fn dropped(field: &NestedFieldRef, table: &str, new_columns: &[&str]) -> String {
    let rename = if new_columns.is_empty() {
        String::new()
    } else {
        format!(
            " (a rename is refused too: if {} is its new name, keep '{}' and add the new name \
             as a new nullable column)",
            new_columns.join(", "),
            field.name
        )
    };
    format!(
        "dataset.columns: table {table} has column '{0}' ({1}) that the contract lacks: a \
         column is never dropped or renamed, since its history would be lost; keep '{0}' in \
         dataset.columns, with nullable = true if drops no longer carry it{rename}",
        field.name, field.field_type
    )
}

/// Whether Iceberg lets a column of type `from` become `to`.
fn widens(from: &PrimitiveType, to: &PrimitiveType) -> bool {
    match (from, to) {
        (PrimitiveType::Int, PrimitiveType::Long)
        | (PrimitiveType::Float, PrimitiveType::Double) => true,
        (
            PrimitiveType::Decimal { precision, scale },
            PrimitiveType::Decimal {
                precision: wider,
                scale: same,
            },
        ) => same == scale && wider > precision,
        _ => false,
    }
}

/// The problem, if any, of a `table.partition` that is not the table's partition spec.
fn partition_problems(plan: &Plan, metadata: &TableMetadata, table: &str) -> Vec<String> {
    let schema = metadata.current_schema();
    let found: Vec<String> = metadata
        .default_partition_spec()
        .fields()
        .iter()
        .map(|p| {
            let source = schema
                .field_by_id(p.source_id)
                .map_or_else(|| format!("field {}", p.source_id), |f| f.name.clone());
            format!("{source} {}", p.transform)
        })
        .collect();
    let wanted: Vec<String> = plan
        .table
        .partition
        .iter()
        .map(|(column, transform)| format!("{column} {}", transform.iceberg()))
        .collect();
    if found == wanted {
        return Vec::new();
    }
    vec![format!(
        "table.partition: table {table} is partitioned by [{}] but the configuration says [{}]: \
         silverline never changes a table's partition spec; set table.partition back to the \
         table's, or write to a new table (another table.name)",
        found.join(", "),
        wanted.join(", ")
    )]
}

/// Commits `schema` as `table`'s current schema. iceberg-rust 0.10 offers
/// no direct way to commit a given schema (`TableCommit`'s builder is
/// private to the crate, and its schema update only adds or deletes
/// columns), so its schema update, with nothing to add, is committed from
/// `table` as if `schema` were already its current one: it then commits
/// exactly `AddSchema(schema)` and `SetCurrentSchema(that one)`, requiring
/// the table's current schema id to be unchanged.
async fn commit_schema(
    catalog: &dyn Catalog,
    table: &Table,
    schema: Schema,
) -> iceberg::Result<Table> {
    let state = with_metadata(table, as_current_schema(table.metadata(), &schema)?)?;
    let tx = Transaction::new(&state);
    let tx = tx.update_schema().apply(tx)?;
    tx.commit(&PinnedCatalog::serving(catalog, table, state))
        .await
}

/// Every row of `table` that `filter` may keep (all without one), read with
/// its current schema (columns added since a row was written read as null);
/// nothing for a table with no snapshot yet.
pub(crate) async fn scan_current(
    table: &Table,
    filter: Option<iceberg::expr::Predicate>,
) -> Result<Vec<arrow::record_batch::RecordBatch>> {
    if table.metadata().current_snapshot().is_none() {
        return Ok(Vec::new());
    }
    let target = table.identifier().to_string();
    let table = read_with_current_schema(table)?;
    let mut scan = table.scan();
    if let Some(filter) = filter {
        scan = scan.with_filter(filter);
    }
    let batches = scan
        .build()
        .map_err(Error::catalog("scan", &target))?
        .to_arrow()
        .await
        .map_err(Error::catalog("scan", &target))?;
    futures::TryStreamExt::try_collect(batches)
        .await
        .map_err(Error::catalog("scan", &target))
}

/// `table` as its readers should see it after an evolution: every snapshot
/// read with the current schema, by field id (a column added since reads as
/// null, a widened one as the wider type), as Java's and pyiceberg's scans
/// read it. iceberg-rust 0.10 reads a snapshot with the schema it was
/// committed under, which lacks what was added since; until the next data
/// commit, Silver's current snapshot is such a one (the only case in which
/// the metadata is rewritten here).
pub(crate) fn read_with_current_schema(table: &Table) -> Result<Table> {
    let metadata = table.metadata();
    let current = metadata.current_schema_id();
    let read_as_current = metadata
        .current_snapshot()
        .and_then(|s| s.schema_id())
        .is_none_or(|id| id == current);
    if read_as_current {
        return Ok(table.clone());
    }
    let every_snapshot = |json: &mut JsonObject| {
        let snapshots = json
            .get_mut("snapshots")
            .and_then(serde_json::Value::as_array_mut)
            .into_iter()
            .flatten();
        for snapshot in snapshots.filter_map(serde_json::Value::as_object_mut) {
            snapshot.insert("schema-id".to_string(), current.into());
        }
    };
    edit_metadata(metadata, every_snapshot)
        .and_then(|metadata| with_metadata(table, metadata))
        .map_err(Error::catalog("scan", table.identifier().to_string()))
}

/// `metadata` with `schema` in place of its current schema, under the same id.
fn as_current_schema(metadata: &TableMetadata, schema: &Schema) -> iceberg::Result<TableMetadata> {
    let id = i64::from(metadata.current_schema_id());
    let replacement = serde_json::to_value(schema).map_err(unreadable)?;
    let last_column_id = metadata.last_column_id().max(schema.highest_field_id());
    edit_metadata(metadata, |json| {
        json.insert("last-column-id".to_string(), last_column_id.into());
        let schemas = json
            .get_mut("schemas")
            .and_then(serde_json::Value::as_array_mut)
            .into_iter()
            .flatten();
        for entry in
            schemas.filter(|s| s.get("schema-id").and_then(serde_json::Value::as_i64) == Some(id))
        {
            *entry = replacement.clone();
        }
    })
}

type JsonObject = serde_json::Map<String, serde_json::Value>;

/// `metadata` edited in its JSON form (the Iceberg table metadata file's):
/// iceberg-rust offers no setter for what [`as_current_schema`] and
/// [`read_with_current_schema`] change.
fn edit_metadata(
    metadata: &TableMetadata,
    edit: impl FnOnce(&mut JsonObject),
) -> iceberg::Result<TableMetadata> {
    let mut json = serde_json::to_value(metadata).map_err(unreadable)?;
    let Some(fields) = json.as_object_mut() else {
        return Err(iceberg::Error::new(
            ErrorKind::DataInvalid,
            "table metadata is not a JSON object",
        ));
    };
    edit(fields);
    serde_json::from_value(json).map_err(unreadable)
}

fn unreadable(e: serde_json::Error) -> iceberg::Error {
    iceberg::Error::new(ErrorKind::DataInvalid, "cannot edit the table metadata").with_source(e)
}

/// `table` with `metadata`: same identifier, FileIO and metadata location.
fn with_metadata(table: &Table, metadata: TableMetadata) -> iceberg::Result<Table> {
    let mut builder = Table::builder()
        .metadata(metadata)
        .identifier(table.identifier().clone())
        .file_io(table.file_io().clone())
        .runtime(iceberg::Runtime::try_current()?)
        .readonly(table.readonly());
    if let Some(location) = table.metadata_location() {
        builder = builder.metadata_location(location);
    }
    builder.build()
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use iceberg::TableIdent;
    use iceberg::io::FileIO;

    use super::*;
    use crate::config::parse_plan;
    use crate::infra::catalog::table_creation;

    const V1: &str = concat!(
        r#"{ name = "id", type = "string", nullable = false }, "#,
        r#"{ name = "day", type = "date", nullable = false }, "#,
        r#"{ name = "n", type = "int", nullable = false }, "#,
        r#"{ name = "amount", type = "decimal(10,2)", nullable = false }, "#,
        r#"{ name = "note", type = "string" }"#
    );
    const N: &str = r#"{ name = "n", type = "int", nullable = false }"#;
    const BY_MONTH: &str = r#"{ column = "day", transform = "month" }"#;

    fn plan(columns: &str, partition: &str) -> Plan {
        let text = format!(
            r#"
            [dataset]
            name = "d"
            entity_key = ["id"]
            order_column = "day"
            contributor_column = "id"
            columns = [{columns}]
            [[rules]]
            name = "r"
            expression = "id IS NOT NULL"
            severity = "critical"
            [table]
            name = "t"
            partition = [{partition}]
            [storage]
            bronze = "/b"
            dq_error = "/q"
            [catalog]
            type = "sql"
            uri = "sqlite:///c.db"
            warehouse = "/w"
            "#
        );
        parse_plan(&text, Path::new("/x/c.toml"), &[]).unwrap()
    }

    /// Silver as the v1 contract creates it, in memory.
    fn v1_table() -> Table {
        let mut creation = table_creation(&plan(V1, BY_MONTH)).unwrap();
        creation.location = Some("memory:///w/t".to_string());
        let metadata = TableMetadataBuilder::from_table_creation(creation)
            .unwrap()
            .build()
            .unwrap()
            .metadata;
        Table::builder()
            .metadata(metadata)
            .identifier(TableIdent::from_strs(["default", "t"]).unwrap())
            .file_io(FileIO::new_with_memory())
            .runtime(iceberg::Runtime::try_current().unwrap())
            .build()
            .unwrap()
    }

    fn v2(from: &str, to: &str) -> String {
        assert!(V1.contains(from), "{from}");
        V1.replace(from, to)
    }

    fn changes(columns: &str) -> Vec<SchemaChange> {
        target_schema(&plan(columns, BY_MONTH), &v1_table())
            .unwrap()
            .map(|t| t.changes)
            .unwrap_or_default()
    }

    fn refusal(columns: &str, partition: &str) -> String {
        match target_schema(&plan(columns, partition), &v1_table()) {
            Err(Error::ConfigInvalid { problems, .. }) => problems.join("\n"),
            other => panic!("not refused: {:?}", other.map(|t| t.map(|t| t.changes))),
        }
    }

    #[tokio::test]
    async fn compatible_contract_changes_are_the_changes_iceberg_allows() {
        let widen = |column: &str, from: &str, to: &str| SchemaChange::WidenType {
            column: column.to_string(),
            from: from.to_string(),
            to: to.to_string(),
        };
        let cases: Vec<(String, Vec<SchemaChange>)> = vec![
            (V1.to_string(), vec![]),
            (
                format!("{V1}, {{ name = \"grade\", type = \"string\" }}"),
                vec![SchemaChange::AddColumn {
                    column: "grade".to_string(),
                    column_type: "string".to_string(),
                }],
            ),
            (
                v2("\"n\", type = \"int\"", "\"n\", type = \"long\""),
                vec![widen("n", "int", "long")],
            ),
            (
                v2("decimal(10,2)", "decimal(12,2)"),
                vec![widen("amount", "decimal(10, 2)", "decimal(12, 2)")],
            ),
            (
                v2(
                    "type = \"int\", nullable = false",
                    "type = \"long\", nullable = true",
                ),
                vec![
                    widen("n", "int", "long"),
                    SchemaChange::MakeOptional {
                        column: "n".to_string(),
                    },
                ],
            ),
            (
                format!(
                    "{}, {{ name = \"z\", type = \"boolean\" }}, {N}",
                    v2(&format!("{N}, "), "")
                ),
                vec![
                    SchemaChange::AddColumn {
                        column: "z".to_string(),
                        column_type: "boolean".to_string(),
                    },
                    SchemaChange::Reorder,
                ],
            ),
        ];
        for (columns, expected) in cases {
            assert_eq!(changes(&columns), expected, "{columns}");
        }
    }

    #[tokio::test]
    async fn the_target_schema_keeps_field_ids_and_gives_new_columns_fresh_ones() {
        let table = v1_table();
        let columns = format!("{{ name = \"grade\", type = \"string\" }}, {V1}");
        let target = target_schema(&plan(&columns, BY_MONTH), &table)
            .unwrap()
            .unwrap();
        let ids: Vec<(String, i32, bool)> = target
            .schema
            .as_struct()
            .fields()
            .iter()
            .map(|f| (f.name.clone(), f.id, f.required))
            .collect();
        let last = table.metadata().last_column_id();
        assert_eq!(ids[0], ("grade".to_string(), last + 1, false));
        for (name, id, _) in &ids[1..] {
            let before = table.metadata().current_schema().field_by_name(name);
            assert_eq!(before.map(|f| f.id), Some(*id), "{name}");
        }
        assert_eq!(
            target.schema.schema_id(),
            table.metadata().current_schema_id()
        );
    }

    #[tokio::test]
    async fn incompatible_contract_changes_are_refused_naming_the_column_and_the_way_out() {
        let cases: Vec<(String, &str, Vec<&str>)> = vec![
            (
                v2("\"n\", type = \"int\"", "\"n\", type = \"string\""),
                BY_MONTH,
                vec![
                    "'n'",
                    "int in table default.t but string",
                    "declare it as int",
                ],
            ),
            (
                v2("decimal(10,2)", "decimal(8,2)"),
                BY_MONTH,
                vec!["'amount'", "decimal(10, 2)", "widens"],
            ),
            (
                v2("decimal(10,2)", "decimal(12,3)"),
                BY_MONTH,
                vec!["'amount'", "decimal(12, 3)"],
            ),
            (
                v2(
                    "{ name = \"note\", type = \"string\" }",
                    "{ name = \"note\", type = \"string\", nullable = false }",
                ),
                BY_MONTH,
                vec![
                    "'note' is optional",
                    "keep nullable = true",
                    "note IS NOT NULL",
                ],
            ),
            (
                format!("{V1}, {{ name = \"grade\", type = \"string\", nullable = false }}"),
                BY_MONTH,
                vec!["'grade' is not in table", "nullable = true"],
            ),
            (
                v2(", { name = \"note\", type = \"string\" }", ""),
                BY_MONTH,
                vec!["column 'note' (string)", "never dropped", "keep 'note'"],
            ),
            (
                v2("\"note\"", "\"remark\""),
                BY_MONTH,
                vec!["column 'note'", "rename", "remark"],
            ),
            (
                V1.to_string(),
                r#"{ column = "day", transform = "day" }"#,
                vec!["table.partition", "[day month]", "[day day]"],
            ),
            (
                format!("{V1}, {{ name = \"day_month\", type = \"string\" }}"),
                BY_MONTH,
                vec!["'day_month' has the name of a partition field"],
            ),
        ];
        for (columns, partition, expected) in cases {
            let text = refusal(&columns, partition);
            for needle in expected {
                assert!(text.contains(needle), "no '{needle}' in: {text}");
            }
        }
    }

    #[tokio::test]
    async fn a_preview_has_the_contract_schema_and_commits_nothing() {
        let table = v1_table();
        let columns = format!("{V1}, {{ name = \"grade\", type = \"string\" }}");
        let previewed = preview(&plan(&columns, BY_MONTH), table.clone()).unwrap();
        let evolution = previewed.evolution.unwrap();
        assert_eq!(evolution.to_schema_id, None);
        assert_eq!(
            evolution.to_string(),
            "schema 0 -> (not committed): add column grade (string, optional)"
        );
        let names: Vec<String> = previewed
            .table
            .metadata()
            .current_schema()
            .as_struct()
            .fields()
            .iter()
            .map(|f| f.name.clone())
            .collect();
        assert_eq!(names, ["id", "day", "n", "amount", "note", "grade"]);
        assert_eq!(
            table.metadata().current_schema().as_struct().fields().len(),
            5
        );
    }

    #[tokio::test]
    async fn the_staged_state_has_the_target_schema_under_the_current_id() {
        let table = v1_table();
        let columns = v2("\"n\", type = \"int\"", "\"n\", type = \"long\"");
        let target = target_schema(&plan(&columns, BY_MONTH), &table)
            .unwrap()
            .unwrap();
        let staged = as_current_schema(table.metadata(), &target.schema).unwrap();
        assert_eq!(
            staged.current_schema_id(),
            table.metadata().current_schema_id()
        );
        assert_eq!(
            staged.current_schema().as_struct(),
            target.schema.as_struct()
        );
        assert_eq!(staged.schemas_iter().count(), 1);
    }
}
