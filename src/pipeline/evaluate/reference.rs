//! Reference rules' data: each reference table a rule reads is joined to the
//! rows with a LEFT join (never inner: a row without a match must stay, to be
//! set aside as pending), adding `_ref_<name>`, true where the row's key was
//! found. Reference keys are de-duplicated first, so a repeated key in the
//! reference can never double a row.

use std::sync::Arc;

use arrow::datatypes::{DataType, Field, Schema};
use arrow::record_batch::RecordBatch;
use datafusion::datasource::MemTable;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

use crate::config::plan::{Reference, ReferenceFormat};
use crate::error::{Error, Result};
use crate::infra::storage::Stores;
use crate::pipeline::baseline::{Baselined, quote};
use crate::transient::REF_PREFIX;
use futures::TryStreamExt;
use iceberg::{Catalog, NamespaceIdent, TableIdent};

/// Joins every reference in `references` to the baselined rows.
pub async fn join_references(
    mut baselined: Baselined,
    references: &[&Reference],
    sources: ReferenceSources<'_>,
) -> Result<Baselined> {
    for reference in references {
        let batches = load_reference(reference, sources).await?;
        let schema = batches
            .first()
            .map(|b| b.schema())
            .ok_or_else(|| Error::Usage {
                arg: format!("references '{}'", reference.name),
                reason: format!("no rows found under {}", reference.location),
            })?;
        let table_name = format!("reference_{}", reference.name);
        let table = MemTable::try_new(schema, vec![batches]).map_err(Error::query("reference"))?;
        let ctx = &baselined.ctx;
        ctx.register_table(table_name.as_str(), Arc::new(table))
            .map_err(Error::query("reference"))?;
        ctx.register_table("rows_before_reference", baselined.frame.clone().into_view())
            .map_err(Error::query("reference"))?;
        let frame = ctx
            .sql(&join_sql(reference, &table_name))
            .await
            .map_err(Error::query("reference"))?;
        ctx.deregister_table("rows_before_reference")
            .map_err(Error::query("reference"))?;
        baselined.frame = frame;
    }
    Ok(baselined)
}

fn join_sql(reference: &Reference, table: &str) -> String {
    let (keys, on): (Vec<String>, Vec<String>) = reference
        .keys
        .iter()
        .enumerate()
        .map(|(i, (row_column, ref_column))| {
            let key = quote(&format!("_k{i}"));
            (
                format!("CAST({} AS VARCHAR) AS {key}", quote(ref_column)),
                format!("CAST(b.{} AS VARCHAR) = r.{key}", quote(row_column)),
            )
        })
        .unzip();
    format!(
        "SELECT b.*, (r.{first} IS NOT NULL) AS {flag} FROM rows_before_reference b \
         LEFT JOIN (SELECT DISTINCT {keys} FROM {table}) r ON {on}",
        first = quote("_k0"),
        flag = quote(&format!("{REF_PREFIX}{}", reference.name)),
        keys = keys.join(", "),
        table = quote(table),
        on = on.join(" AND "),
    )
}

/// Where reference tables are read from.
#[derive(Clone, Copy)]
pub struct ReferenceSources<'a> {
    /// Object storage, for CSV and Parquet references.
    pub stores: &'a Stores,
    /// The catalog, for Iceberg references.
    pub catalog: &'a dyn Catalog,
}

/// Reads a reference: an Iceberg table, or every file of a folder.
async fn load_reference(
    reference: &Reference,
    sources: ReferenceSources<'_>,
) -> Result<Vec<RecordBatch>> {
    if reference.format == ReferenceFormat::Iceberg {
        return load_iceberg_reference(reference, sources.catalog).await;
    }
    load_reference_files(reference, sources.stores).await
}

/// Scans the Iceberg table named `<namespace>.<table>` by the reference's location.
async fn load_iceberg_reference(
    reference: &Reference,
    catalog: &dyn Catalog,
) -> Result<Vec<RecordBatch>> {
    let target = reference.location.clone();
    let (namespace, table) = target.rsplit_once('.').unwrap_or(("", target.as_str()));
    let ident = TableIdent::new(
        NamespaceIdent::new(namespace.to_string()),
        table.to_string(),
    );
    let table = catalog
        .load_table(&ident)
        .await
        .map_err(Error::catalog("load-reference", &target))?;
    if table.metadata().current_snapshot().is_none() {
        return Ok(Vec::new());
    }
    let scan = table
        .scan()
        .build()
        .map_err(Error::catalog("scan-reference", &target))?;
    let stream = scan
        .to_arrow()
        .await
        .map_err(Error::catalog("scan-reference", &target))?;
    stream
        .try_collect()
        .await
        .map_err(Error::catalog("scan-reference", &target))
}

/// Reads every file of the reference's folder.
async fn load_reference_files(reference: &Reference, stores: &Stores) -> Result<Vec<RecordBatch>> {
    let location = stores.open(
        &reference.location,
        &format!("references '{}'", reference.name),
    )?;
    let mut batches = Vec::new();
    for object in location.list("").await? {
        let bytes = location.get(&object.relative).await?;
        let bad = |reason: String| Error::BadDrop {
            location: location.url_of(&object.relative),
            reason,
        };
        match reference.format {
            ReferenceFormat::Iceberg => {
                return Err(Error::Internal(format!(
                    "reference '{}' is a table, not files",
                    reference.name
                )));
            }
            ReferenceFormat::Parquet => {
                let reader = ParquetRecordBatchReaderBuilder::try_new(bytes)
                    .and_then(|b| b.build())
                    .map_err(|e| bad(format!("not a readable Parquet file: {e}")))?;
                for batch in reader {
                    batches.push(batch.map_err(|e| bad(e.to_string()))?);
                }
            }
            ReferenceFormat::Csv => batches.extend(read_csv_as_text(&bytes).map_err(bad)?),
        }
    }
    Ok(batches)
}

/// A reference CSV, every column as text (keys are compared as text).
fn read_csv_as_text(bytes: &[u8]) -> std::result::Result<Vec<RecordBatch>, String> {
    let mut header = csv::Reader::from_reader(bytes);
    let names = header
        .headers()
        .map_err(|e| format!("cannot read the header: {e}"))?
        .clone();
    let schema = Arc::new(Schema::new(
        names
            .iter()
            .map(|n| Field::new(n, DataType::Utf8, true))
            .collect::<Vec<_>>(),
    ));
    let reader = arrow::csv::ReaderBuilder::new(schema)
        .with_header(true)
        .build(bytes)
        .map_err(|e| e.to_string())?;
    reader
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|e| e.to_string())
}
