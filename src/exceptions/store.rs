//! The exception table: append-only status events, partitioned by
//! contributor, beside Silver in its namespace. Appends carry the run key as
//! a snapshot property, like Silver commits, so a run records its events once.
//! A table created before a column was added ([`ADDED_COLUMNS`]) gets it
//! when it is next loaded (optional: earlier events read it as empty).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, Int64Array, StringArray, TimestampMicrosecondArray};
use arrow::compute::cast;
use arrow::datatypes::{DataType, Int64Type, SchemaRef, TimeUnit, TimestampMicrosecondType};
use arrow::record_batch::RecordBatch;
use chrono::{DateTime, Utc};

use iceberg::arrow::schema_to_arrow_schema;
use iceberg::expr::{Predicate, Reference};
use iceberg::spec::{
    Datum, NestedField, PrimitiveType, Schema, Transform, Type, UnboundPartitionSpec,
};
use iceberg::table::Table;
use iceberg::transaction::{AddColumn, ApplyTransactionAction, Transaction};
use iceberg::{Catalog, TableCreation, TableIdent};

use datafusion::error::DataFusionError;
use futures::TryStreamExt;
use iceberg_datafusion::IcebergStaticTableProvider;

use super::backlog::{ExceptionState, state_of};
use super::{ExceptionEvent, ExceptionStatus};
use crate::config::Plan;
use crate::config::rules::MISSING_ENTITIES_METRIC;
use crate::core::place::RunPlace;
use crate::core::sql::{QueryMemory, log_spills, quote, sort_session, sql_string, stream_frame};
use crate::error::{Error, Result};
use crate::infra::append::{Committed, RunAppend, append_for_run};
use crate::infra::catalog::{
    Columns, connect, exceptions_ident, load_if_exists, load_or_create_table,
    owned_table_properties,
};
use crate::infra::datafile::SilverWriters;
use crate::infra::evolve::{read_with_current_schema, scan_current};
use crate::infra::ledger::find_committed;
use crate::infra::ledger::{RUN_ID_PROPERTY, RUN_KEY_PROPERTY};
use crate::infra::storage::Stores;
use crate::stage::Stage;

/// The columns of the exception table, in order: (name, type, required).
const COLUMNS: [(&str, PrimitiveType, bool); 17] = [
    ("exception_id", PrimitiveType::String, true),
    ("contributor", PrimitiveType::String, true),
    ("drop_id", PrimitiveType::String, true),
    ("run_id", PrimitiveType::String, true),
    ("status", PrimitiveType::String, true),
    ("rule", PrimitiveType::String, true),
    ("rules", PrimitiveType::String, true),
    ("severity", PrimitiveType::String, true),
    ("reasons", PrimitiveType::String, true),
    ("record_key", PrimitiveType::String, false),
    ("source_file", PrimitiveType::String, false),
    ("source_line", PrimitiveType::Long, false),
    ("dq_file", PrimitiveType::String, false),
    ("entered_at", PrimitiveType::Timestamptz, true),
    ("event_at", PrimitiveType::Timestamptz, true),
    ("actor", PrimitiveType::String, false),
    ("note", PrimitiveType::String, false),
];

/// Columns added after the table's first version (optional): a table
/// created before them gets them when it is next loaded.
const ADDED_COLUMNS: [&str; 2] = ["actor", "note"];

fn schema() -> iceberg::Result<Schema> {
    let fields = COLUMNS
        .iter()
        .zip(1..)
        .map(|((name, kind, required), id)| {
            let field = if *required {
                NestedField::required(id, *name, Type::Primitive(kind.clone()))
            } else {
                NestedField::optional(id, *name, Type::Primitive(kind.clone()))
            };
            Arc::new(field)
        })
        .collect::<Vec<_>>();
    Schema::builder().with_fields(fields).build()
}

fn creation(plan: &Plan) -> iceberg::Result<TableCreation> {
    let schema = schema()?;
    let spec = UnboundPartitionSpec::builder()
        .add_partition_field(2, "contributor", Transform::Identity)?
        .build();
    Ok(TableCreation::builder()
        .name(plan.exceptions.name.clone())
        .schema(schema)
        .partition_spec(spec)
        .properties(owned_table_properties())
        .build())
}

/// A command's storage, catalog and exception store, opened.
pub struct Opened {
    /// The object stores (bronze, dq_error, warehouse).
    pub stores: Stores,
    /// The catalog.
    pub catalog: Arc<dyn Catalog>,
    /// The exception store (created on first use).
    pub exceptions: Table,
}

/// Opens `plan`'s storage, catalog and exception store, as every command
/// over the exceptions starts.
pub async fn open_exceptions(plan: &Plan) -> Result<Opened> {
    let stores = Stores::new(&plan.storage, plan.catalog.warehouse()).await?;
    let catalog = connect(&plan.catalog, &stores).await?;
    let exceptions = load_or_create_exceptions(catalog.as_ref(), plan).await?;
    Ok(Opened {
        stores,
        catalog,
        exceptions,
    })
}

/// Loads the exception table, creating it on first use; a table created by
/// an earlier version first gets the columns added since ([`ADDED_COLUMNS`]).
pub async fn load_or_create_exceptions(catalog: &dyn Catalog, plan: &Plan) -> Result<Table> {
    let ident = exceptions_ident(plan);
    let make = || creation(plan);
    let load = || {
        load_or_create_table(
            catalog,
            plan,
            &ident,
            &make,
            Columns::Exactly("exceptions.table"),
        )
    };
    let error = match load().await {
        Err(error @ Error::ConfigInvalid { .. }) => error,
        outcome => return outcome,
    };
    if add_missing_columns(catalog, &ident).await? {
        load().await
    } else {
        Err(error)
    }
}

/// Appends `events` in one snapshot for `run_key`, unless that run's
/// events are already there (no events: nothing appended, `None`).
pub async fn append_events(
    catalog: &Arc<dyn Catalog>,
    plan: &Plan,
    events: &[ExceptionEvent],
    run_key: &str,
    place: &RunPlace,
) -> Result<Option<Committed>> {
    let mut writer = EventWriter::new(catalog, plan, &place.run_id);
    writer.write(events).await?;
    writer.append(run_key, place).await
}

/// A run's events written to data files of the exception table as they
/// come, a chunk at a time (a run that set millions of rows aside never
/// holds their events at once), then appended in one snapshot. The table
/// is loaded (or created) at the first event.
pub struct EventWriter<'a> {
    catalog: &'a Arc<dyn Catalog>,
    plan: &'a Plan,
    run_id: String,
    open: Option<(Table, SilverWriters)>,
    events: u64,
}

impl<'a> EventWriter<'a> {
    /// A writer of the exception table's data files for run `run_id`.
    pub fn new(catalog: &'a Arc<dyn Catalog>, plan: &'a Plan, run_id: &str) -> EventWriter<'a> {
        EventWriter {
            catalog,
            plan,
            run_id: run_id.to_string(),
            open: None,
            events: 0,
        }
    }

    /// Writes `events`.
    pub async fn write(&mut self, events: &[ExceptionEvent]) -> Result<()> {
        if events.is_empty() {
            return Ok(());
        }
        if self.open.is_none() {
            let table = load_or_create_exceptions(self.catalog.as_ref(), self.plan).await?;
            let writers = SilverWriters::open(&table, &self.run_id);
            self.open = Some((table, writers));
        }
        if let Some((table, writers)) = &mut self.open {
            writers.write(&[to_batch(table, events)?]).await?;
        }
        self.events += events.len() as u64;
        Ok(())
    }

    /// How many events were written.
    pub fn events(&self) -> u64 {
        self.events
    }

    /// Appends what was written in one snapshot for `run_key`, unless that
    /// run's events are already there; `None` when nothing was written.
    pub async fn append(self, run_key: &str, place: &RunPlace) -> Result<Option<Committed>> {
        let Some((table, writers)) = self.open else {
            return Ok(None);
        };
        let data_files = writers.finish().await?;
        let append = RunAppend {
            run_key,
            place,
            properties: HashMap::from([
                (RUN_KEY_PROPERTY.to_string(), run_key.to_string()),
                (RUN_ID_PROPERTY.to_string(), place.run_id.clone()),
                ("silverline.events".to_string(), self.events.to_string()),
            ]),
            attempts: self.plan.commit_attempts,
            judged_on: None,
        };
        append_for_run(self.catalog, table.identifier(), data_files, &append)
            .await
            .map(Some)
    }
}

/// The columns of [`ADDED_COLUMNS`] that `table` lacks, with their types,
/// when it has every other column of [`COLUMNS`] in order (a table created by
/// an earlier version); None for any other table.
fn missing_columns(table: &Table) -> Option<Vec<(&'static str, PrimitiveType)>> {
    let schema = table.metadata().current_schema();
    let missing: Vec<(&'static str, PrimitiveType)> = COLUMNS
        .iter()
        .filter(|(name, _, _)| ADDED_COLUMNS.contains(name) && schema.field_by_name(name).is_none())
        .map(|(name, kind, _)| (*name, kind.clone()))
        .collect();
    let has: Vec<&str> = schema
        .as_struct()
        .fields()
        .iter()
        .map(|f| f.name.as_str())
        .collect();
    let others: Vec<&str> = COLUMNS
        .iter()
        .map(|(name, _, _)| *name)
        .filter(|name| missing.iter().all(|(m, _)| m != name))
        .collect();
    (has == others).then_some(missing)
}

/// Adds to the table `ident` the columns of [`ADDED_COLUMNS`] it lacks, as
/// optional columns; whether it had such columns to add. When the commit
/// fails, the table is looked at again: a concurrent writer may have added them.
async fn add_missing_columns(catalog: &dyn Catalog, ident: &TableIdent) -> Result<bool> {
    let target = ident.to_string();
    let load = || async {
        catalog
            .load_table(ident)
            .await
            .map_err(Error::catalog("load-table", &target))
    };
    let table = load().await?;
    let missing = match missing_columns(&table) {
        Some(missing) if !missing.is_empty() => missing,
        _ => return Ok(false),
    };
    let tx = Transaction::new(&table);
    let update = missing
        .iter()
        .fold(tx.update_schema(), |update, (name, kind)| {
            update.add_column(AddColumn::optional(name, Type::Primitive(kind.clone())))
        });
    let committed = match update.apply(tx) {
        Ok(tx) => tx.commit(catalog).await,
        Err(error) => Err(error),
    };
    match committed {
        Ok(_) => {
            tracing::info!(table = %target, added = missing.len(), "exception store: added the columns of this version")
        }
        Err(error) if missing_columns(&load().await?).is_some_and(|m| m.is_empty()) => {
            tracing::info!(table = %target, error = %error, "exception store: another writer added the columns");
        }
        Err(error) => return Err(Error::catalog("update-schema", &target)(error)),
    }
    Ok(true)
}

/// Whether the events of `run_key` are in the table.
pub fn has_run(table: &Table, run_key: &str) -> Result<bool> {
    Ok(find_committed(table, run_key)?.is_some())
}

/// Every event of exception `id`, in no particular order.
pub(crate) async fn read_exception(table: &Table, id: &str) -> Result<Vec<ExceptionEvent>> {
    let filter = Reference::new("exception_id").equal_to(Datum::string(id));
    scan_events(table, Some(filter)).await
}

/// Every event of the table, or of one contributor, in no particular order.
pub async fn read_events(table: &Table, contributor: Option<&str>) -> Result<Vec<ExceptionEvent>> {
    let filter = contributor.map(|c| Reference::new("contributor").equal_to(Datum::string(c)));
    scan_events(table, filter).await
}

/// The columns the backlog figures and alerts read of an event.
const HEAD_COLUMNS: [&str; 6] = [
    "exception_id",
    "contributor",
    "status",
    "rule",
    "entered_at",
    "event_at",
];

/// Which exceptions a read of the store visits.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct EventScope<'a> {
    /// One contributor's (`None`: every contributor's).
    pub(crate) contributor: Option<&'a str>,
    /// One rule's (`None`: every rule's).
    pub(crate) rule: Option<&'a str>,
}

impl<'a> From<Option<&'a str>> for EventScope<'a> {
    /// Every exception of `contributor` (of every contributor: `None`).
    fn from(contributor: Option<&'a str>) -> EventScope<'a> {
        EventScope {
            contributor,
            rule: None,
        }
    }
}

impl EventScope<'_> {
    /// The SQL `WHERE` clause keeping the scope's events (empty: all).
    fn filter_sql(&self) -> String {
        let conditions: Vec<String> = [("contributor", self.contributor), ("rule", self.rule)]
            .into_iter()
            .filter_map(|(column, value)| {
                Some(format!("{} = {}", quote(column), sql_string(value?)))
            })
            .collect();
        match conditions.is_empty() {
            true => String::new(),
            false => format!(" WHERE {}", conditions.join(" AND ")),
        }
    }
}

/// Folds each exception of `scope` into `visit`, one at a time: its events, as much of them as
/// `read` asks for, come from a query that sorts them by exception
/// and time within `memory`'s pool (spilling to its scratch folder past
/// it), so that a contributor's millions of events are never held at once.
/// Events of one exception at the same instant follow in no set order.
/// Returns how many times the sort spilled (logged too).
pub(crate) async fn for_each_state(
    table: &Table,
    (scope, read): (EventScope<'_>, Read),
    memory: &QueryMemory,
    mut visit: impl FnMut(&ExceptionState<'_>),
) -> Result<usize> {
    if table.metadata().current_snapshot().is_none() {
        return Ok(0);
    }
    let target = table.identifier().to_string();
    let provider = IcebergStaticTableProvider::try_new_from_table(read_with_current_schema(table)?)
        .await
        .map_err(Error::catalog("scan", &target))?;
    let failed = |source| scan_failure(&target, source);
    let ctx = sort_session(memory);
    ctx.register_table("events", Arc::new(provider))
        .map_err(failed)?;
    let only = scope.filter_sql();
    let (id, at) = (quote("exception_id"), quote("event_at"));
    let columns = match read {
        Read::Whole => "*".to_string(),
        Read::Heads => {
            let heads: Vec<String> = HEAD_COLUMNS.iter().map(|c| quote(c)).collect();
            heads.join(", ")
        }
    };
    let sql = format!("SELECT {columns} FROM events{only} ORDER BY {id}, {at}");
    let frame = ctx.sql(&sql).await.map_err(failed)?;
    let (plan, mut batches) = stream_frame(frame).await.map_err(failed)?;
    let mut history: Vec<ExceptionEvent> = Vec::new();
    while let Some(batch) = batches.try_next().await.map_err(failed)? {
        for event in from_batch(&batch, read)? {
            if history
                .last()
                .is_some_and(|last| last.exception_id != event.exception_id)
            {
                visit_history(&mut history, &mut visit);
            }
            history.push(event);
        }
    }
    visit_history(&mut history, &mut visit);
    Ok(log_spills(plan.as_ref()))
}

/// The latest event, every column read, of each exception in `scope` whose
/// state `wanted` accepts: the store is read one exception at a time
/// ([`for_each_state`]), so only those kept are held.
pub(crate) async fn latest_events(
    table: &Table,
    scope: EventScope<'_>,
    memory: &QueryMemory,
    wanted: impl Fn(&ExceptionState<'_>) -> bool,
) -> Result<Vec<ExceptionEvent>> {
    let mut kept = Vec::new();
    for_each_state(table, (scope, Read::Whole), memory, |state| {
        if wanted(state) {
            kept.push(state.latest.clone());
        }
    })
    .await?;
    Ok(kept)
}

/// A failure of a query over the exception table `target`: a read of its
/// files that failed (an Iceberg error under the engine's) is the catalog's,
/// as a scan's is; any other the query's.
fn scan_failure(target: &str, error: DataFusionError) -> Error {
    match error.find_root() {
        DataFusionError::External(source) => match source.downcast_ref::<iceberg::Error>() {
            Some(read) => {
                Error::catalog("scan", target)(iceberg::Error::new(read.kind(), read.to_string()))
            }
            None => Error::query(Stage::Exceptions)(error),
        },
        _ => Error::query(Stage::Exceptions)(error),
    }
}

/// Visits the state of the exception whose events in time order are
/// `history`, and empties it.
fn visit_history(history: &mut Vec<ExceptionEvent>, visit: &mut impl FnMut(&ExceptionState<'_>)) {
    if let Some(state) = state_of(history.iter()) {
        visit(&state);
    }
    history.clear();
}

/// Which of the store's exceptions are `contributor`'s missing entities
/// (every event of one carries the rule `missing_entities`).
pub(crate) fn missing_entities_of(contributor: &str) -> EventScope<'_> {
    EventScope {
        contributor: Some(contributor),
        rule: Some(MISSING_ENTITIES_METRIC),
    }
}

/// What the exception store recorded about a contributor's missing
/// entities (`[completeness]`), by period (`YYYY-MM-01`).
#[derive(Debug, Default)]
pub struct MissingRecord {
    /// How many entities each period was recorded missing from.
    pub by_period: BTreeMap<String, u64>,
    /// The entity keys (record keys without the period) still open per
    /// period: not declared, ignored or resolved since.
    pub still_open: BTreeMap<String, BTreeSet<String>>,
}

/// Reads `contributor`'s missing-entity exceptions from the exception store
/// `store`, when it exists (nothing is created), one exception at a time
/// ([`for_each_state`], within `memory`).
pub(crate) async fn read_missing_record(
    catalog: &dyn Catalog,
    store: &TableIdent,
    contributor: &str,
    memory: &QueryMemory,
) -> Result<MissingRecord> {
    let (_, table) = load_if_exists(catalog, store).await?;
    let Some(table) = table else {
        return Ok(MissingRecord::default());
    };
    let mut record = MissingRecord::default();
    let scope = missing_entities_of(contributor);
    for_each_state(&table, (scope, Read::Whole), memory, |state| {
        let Some((key, period)) = state
            .latest
            .record_key
            .as_deref()
            .and_then(|k| k.rsplit_once('|'))
        else {
            return;
        };
        *record.by_period.entry(period.to_string()).or_default() += 1;
        if state.latest.status == ExceptionStatus::Missing {
            record
                .still_open
                .entry(period.to_string())
                .or_default()
                .insert(key.to_string());
        }
    })
    .await?;
    Ok(record)
}

/// The events `filter` keeps (all without one), in no particular order.
async fn scan_events(table: &Table, filter: Option<Predicate>) -> Result<Vec<ExceptionEvent>> {
    let mut events = Vec::new();
    for batch in &scan_current(table, filter).await? {
        events.extend(from_batch(batch, Read::Whole)?);
    }
    Ok(events)
}

fn to_batch(table: &Table, events: &[ExceptionEvent]) -> Result<RecordBatch> {
    let target = table.identifier().to_string();
    let schema: SchemaRef = Arc::new(
        schema_to_arrow_schema(table.metadata().current_schema())
            .map_err(Error::catalog("write", &target))?,
    );
    let text = |f: fn(&ExceptionEvent) -> Option<&str>| -> ArrayRef {
        Arc::new(events.iter().map(f).collect::<StringArray>())
    };
    let time = |f: fn(&ExceptionEvent) -> DateTime<Utc>| -> ArrayRef {
        Arc::new(TimestampMicrosecondArray::from_iter_values(
            events.iter().map(|e| f(e).timestamp_micros()),
        ))
    };
    let columns: Vec<ArrayRef> = vec![
        text(|e| Some(&e.exception_id)),
        text(|e| Some(&e.contributor)),
        text(|e| Some(&e.drop_id)),
        text(|e| Some(&e.run_id)),
        text(|e| Some(e.status.as_str())),
        text(|e| Some(&e.rule)),
        text(|e| Some(&e.rules)),
        text(|e| Some(&e.severity)),
        text(|e| Some(&e.reasons)),
        text(|e| e.record_key.as_deref()),
        text(|e| e.source_file.as_deref()),
        Arc::new(events.iter().map(|e| e.source_line).collect::<Int64Array>()),
        text(|e| e.dq_file.as_deref()),
        time(|e| e.entered_at),
        time(|e| e.event_at),
        text(|e| e.actor.as_deref()),
        text(|e| e.note.as_deref()),
    ];
    let columns = columns
        .iter()
        .zip(schema.fields())
        .map(|(column, field)| cast(column, field.data_type()))
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(Error::arrow(Stage::Exceptions))?;
    RecordBatch::try_new(schema, columns).map_err(Error::arrow(Stage::Exceptions))
}

/// What a scan of the exception table reads of each event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Read {
    /// Every column.
    Whole,
    /// [`HEAD_COLUMNS`]: the others read as empty.
    Heads,
}

/// Column `name` of `batch` as `kind`; a column added since the table was
/// created ([`ADDED_COLUMNS`]) that a table not yet evolved lacks reads as
/// null, as does every column a [`Read::Heads`] scan left out.
fn column_as(batch: &RecordBatch, name: &str, kind: &DataType, read: Read) -> Result<ArrayRef> {
    let Some(column) = batch.column_by_name(name) else {
        if read == Read::Heads || ADDED_COLUMNS.contains(&name) {
            return Ok(arrow::array::new_null_array(kind, batch.num_rows()));
        }
        return Err(Error::Internal(format!(
            "exceptions: column {name} is missing"
        )));
    };
    cast(column, kind).map_err(Error::arrow(Stage::Exceptions))
}

fn from_batch(batch: &RecordBatch, read: Read) -> Result<Vec<ExceptionEvent>> {
    let text_columns: Vec<ArrayRef> = COLUMNS
        .iter()
        .map(|(name, _, _)| column_as(batch, name, &DataType::Utf8, read))
        .collect::<Result<_>>()?;
    let text = |i: usize, row: usize| -> Option<String> {
        let column = text_columns[i].as_string::<i32>();
        column.is_valid(row).then(|| column.value(row).to_string())
    };
    let micros = DataType::Timestamp(TimeUnit::Microsecond, None);
    let entered = column_as(batch, "entered_at", &micros, read)?;
    let event = column_as(batch, "event_at", &micros, read)?;
    let line = column_as(batch, "source_line", &DataType::Int64, read)?;
    let (entered, event) = (
        entered.as_primitive::<TimestampMicrosecondType>(),
        event.as_primitive::<TimestampMicrosecondType>(),
    );
    let line = line.as_primitive::<Int64Type>();
    let time = |micros: i64| DateTime::from_timestamp_micros(micros).unwrap_or_default();
    (0..batch.num_rows())
        .map(|row| {
            let status = text(4, row).unwrap_or_default();
            Ok(ExceptionEvent {
                exception_id: text(0, row).unwrap_or_default(),
                contributor: text(1, row).unwrap_or_default(),
                drop_id: text(2, row).unwrap_or_default(),
                run_id: text(3, row).unwrap_or_default(),
                status: ExceptionStatus::parse(&status).ok_or_else(|| {
                    Error::Internal(format!("exceptions: unknown status '{status}'"))
                })?,
                rule: text(5, row).unwrap_or_default(),
                rules: text(6, row).unwrap_or_default(),
                severity: text(7, row).unwrap_or_default(),
                reasons: text(8, row).unwrap_or_default(),
                record_key: text(9, row),
                source_file: text(10, row),
                source_line: line.is_valid(row).then(|| line.value(row)),
                dq_file: text(12, row),
                entered_at: time(entered.value(row)),
                event_at: time(event.value(row)),
                actor: text(15, row),
                note: text(16, row),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exceptions::backlog::states;
    use crate::exceptions::backlog::tests::{at, event};
    use chrono::Duration;

    fn plan() -> Plan {
        crate::config::load_plan(std::path::Path::new("config/credit_statements.toml"))
            .expect("the shipped config")
    }

    /// The shipped config and an empty in-memory catalog named `name`.
    async fn store(name: &str) -> (Plan, Arc<dyn Catalog>) {
        let catalog = crate::infra::catalog::memory_catalog(name).await.unwrap();
        (plan(), catalog)
    }

    /// `count` exceptions of `contributor`, each quarantined or pending on
    /// day `i % 40` and, for every third, closed or re-judged later.
    fn events(contributor: &str, count: usize) -> Vec<ExceptionEvent> {
        let statuses = [
            ExceptionStatus::Resolved,
            ExceptionStatus::Accepted,
            ExceptionStatus::Ignored,
            ExceptionStatus::Pending,
        ];
        (0..count)
            .flat_map(|i| {
                let entered = at(1) + Duration::days((i % 40) as i64);
                let opened = [ExceptionStatus::Quarantined, ExceptionStatus::Pending][i % 2];
                let first = ExceptionEvent {
                    exception_id: format!("{contributor}-{:06}", (i * 7919) % count),
                    contributor: contributor.to_string(),
                    entered_at: entered,
                    event_at: entered,
                    ..event("", &format!("rule_{}", i % 3), opened, 1, 1)
                };
                let later = (i % 3 == 0).then(|| ExceptionEvent {
                    status: statuses[(i / 3) % statuses.len()],
                    event_at: entered + Duration::days(3),
                    ..first.clone()
                });
                std::iter::once(first).chain(later)
            })
            .collect()
    }

    /// Each state as the figures read it.
    type Head = (String, ExceptionStatus, String, bool, bool, i64, i64);

    fn head(state: &ExceptionState<'_>) -> Head {
        let latest = state.latest;
        (
            latest.exception_id.clone(),
            latest.status,
            latest.rule.clone(),
            state.was_open,
            state.entered_open,
            latest.entered_at.timestamp(),
            latest.event_at.timestamp(),
        )
    }

    #[tokio::test]
    async fn states_folded_from_a_sort_that_spills_are_those_of_the_events_held_whole() {
        let (plan, catalog) = store("watch").await;
        // Two runs' appends (two data files), and another contributor's.
        let (a, b) = (events("BANK_A", 100_000), events("BANK_B", 500));
        let (first, second) = a.split_at(a.len() / 2);
        for (run, part) in [first, second, &b].into_iter().enumerate() {
            let place = RunPlace::for_run(&format!("key-{run}"), chrono::Utc::now().date_naive());
            append_events(&catalog, &plan, part, &format!("key-{run}"), &place)
                .await
                .unwrap();
        }
        let table = load_or_create_exceptions(catalog.as_ref(), &plan)
            .await
            .unwrap();

        // The smallest budget accepted, far below the events' size.
        let scratch = tempfile::tempdir().unwrap();
        let memory = QueryMemory::smallest(scratch.path());
        let mut folded = Vec::new();
        let spills = for_each_state(
            &table,
            (Some("BANK_A").into(), Read::Heads),
            &memory,
            |state| {
                folded.push(head(state));
            },
        )
        .await
        .unwrap();
        assert!(spills > 0, "the sort did not spill");

        let whole = states(&a);
        assert_eq!(whole.len(), 100_000);
        assert_eq!(folded, whole.iter().map(head).collect::<Vec<_>>());
        let closed = whole.iter().filter(|s| !s.is_open()).count();
        assert!(closed > 0 && closed < whole.len(), "{closed} closed");
    }

    /// `contributor`'s entity `i` recorded missing from `period`, and for
    /// `declared_later`, declared a day after.
    fn missing(
        contributor: &str,
        i: usize,
        period: &str,
        declared_later: bool,
    ) -> Vec<ExceptionEvent> {
        let entered = at(2);
        let first = ExceptionEvent {
            exception_id: format!("{contributor}-missing-{period}-{i}"),
            contributor: contributor.to_string(),
            record_key: Some(format!("{contributor}|acc-{i}|{period}")),
            ..event("", MISSING_ENTITIES_METRIC, ExceptionStatus::Missing, 2, 2)
        };
        let later = declared_later.then(|| ExceptionEvent {
            status: ExceptionStatus::Resolved,
            event_at: entered + Duration::days(1),
            ..first.clone()
        });
        std::iter::once(first).chain(later).collect()
    }

    #[tokio::test]
    async fn the_missing_record_folds_only_the_contributors_missing_entity_exceptions() {
        let (plan, catalog) = store("missing").await;
        let mut all = events("BANK_A", 300);
        for i in 0..30 {
            all.extend(missing("BANK_A", i, "2026-01-01", i % 3 == 0));
            all.extend(missing("BANK_A", i, "2026-02-01", false));
            all.extend(missing("BANK_B", i, "2026-01-01", false));
        }
        let place = RunPlace::for_run("key-0", chrono::Utc::now().date_naive());
        append_events(&catalog, &plan, &all, "key-0", &place)
            .await
            .unwrap();
        let memory = plan.query_memory().unwrap();
        let ident = crate::infra::catalog::exceptions_ident(&plan);
        let record = read_missing_record(catalog.as_ref(), &ident, "BANK_A", &memory)
            .await
            .unwrap();
        let counts: Vec<(&str, u64)> = record
            .by_period
            .iter()
            .map(|(period, count)| (period.as_str(), *count))
            .collect();
        assert_eq!(counts, [("2026-01-01", 30), ("2026-02-01", 30)]);
        let open: Vec<(&str, usize)> = record
            .still_open
            .iter()
            .map(|(period, keys)| (period.as_str(), keys.len()))
            .collect();
        assert_eq!(open, [("2026-01-01", 20), ("2026-02-01", 30)]);
        assert!(record.still_open["2026-01-01"].contains("BANK_A|acc-1"));
        assert!(!record.still_open["2026-01-01"].contains("BANK_A|acc-3"));
    }
}
