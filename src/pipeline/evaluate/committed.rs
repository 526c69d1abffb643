//! The committed periods aggregate rules compare a drop's periods with: each
//! month's metrics over this contributor's Silver rows.
//!
//! They do not depend on the drop, so they are computed in the background
//! while the drop is read and baselined, one month at a time (the distinct
//! values a metric counts are held for one period, not the whole window).
//! Iceberg data files never change, so a month's metrics are kept under
//! `<dq_error>/metrics/`, addressed by the metric queries and the exact files
//! holding the month: later runs reuse them, a month that gained or lost a
//! file is computed afresh, and deleting the folder only costs time.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Cursor;
use std::sync::Arc;

use arrow::array::{ArrayRef, Date32Array, Float64Array};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::ipc::reader::FileReader;
use arrow::ipc::writer::FileWriter;
use arrow::record_batch::RecordBatch;
use chrono::{Datelike, Months, NaiveDate};
use datafusion::execution::disk_manager::RefCountedTempFile;
use datafusion::prelude::SessionContext;
use futures::TryStreamExt;
use iceberg::table::Table;

use super::metrics::{committed_metric_columns, committed_metrics, metrics_by_period_sql};
use crate::config::Plan;
use crate::config::contract::Contract;
use crate::config::rules::{MISSING_ENTITIES_METRIC, Rule, Scope};
use crate::config::values::UNIX_EPOCH_FROM_CE;
use crate::core::digest::nul_terminated_hex;
use crate::core::distinct::DistinctCount;
use crate::core::keys::Buckets;
use crate::core::spill::{SpillDir, SpilledTable};
use crate::core::sql::{MemoryBudget, QueryMemory, new_session, register_spilled};
use crate::core::sql::{quote, register_frame_on_disk, register_table, run_frame, sql_string};
use crate::error::{Error, Result};
use crate::infra::storage::Location;
use crate::pipeline::background::Background;
use crate::pipeline::baseline::{
    CommittedMonth, HeldFiles, files_holding, register_history_source,
};
use crate::stage::Stage;
use crate::transient::named_columns;

/// Each committed period's metrics (one row per period: the period, then
/// each metric), for the periods a drop is compared with.
pub struct CommittedPeriods {
    /// The rows' schema.
    pub schema: SchemaRef,
    /// One row per committed period.
    pub batches: Vec<RecordBatch>,
}

/// Where the run's committed periods come from.
pub struct CommittedSources<'a> {
    /// Silver.
    pub silver: &'a Table,
    /// The dq_error root, under which computed months are kept.
    pub dq_error: &'a Location,
    /// Whether months measured now are kept there (a dry run reads kept
    /// months but writes none).
    pub keep: bool,
    /// With `[completeness]`: how many entities the exception store recorded
    /// missing from each period, each committed period's `missing_entities`.
    pub missing: Option<BTreeMap<String, u64>>,
    /// The run's memory pool, which the measuring shares.
    pub(crate) memory: QueryMemory,
    /// The month the run before committed, measured in place of Silver's.
    pub carried: Option<Arc<CommittedMonth>>,
}

/// Starts computing, in the background, the committed periods the drop's
/// `rows` are compared with; `None` when `rules` hold no aggregate rule.
pub fn start_committed_periods(
    plan: &Plan,
    rules: &[&Rule],
    contributor: &str,
    window: Option<(NaiveDate, NaiveDate)>,
    sources: CommittedSources<'_>,
) -> Result<Option<Background<CommittedPeriods>>> {
    let has_aggregates = rules.iter().any(|r| r.scope == Scope::Aggregate);
    if !has_aggregates || plan.metrics.is_empty() {
        return Ok(None);
    }
    let Some(window) = window else {
        return Ok(None);
    };
    let months = ComparedMonths::new(plan, contributor, window);
    let silver = sources.silver.clone();
    let (dq_error, keep) = (sources.dq_error.clone(), sources.keep);
    let contract = plan.contract.clone();
    let memory = sources.memory;
    let missing = sources.missing;
    let carried = sources.carried;
    let budget = plan.resources.clone();
    Ok(Some(Background::spawn(
        "measuring the committed periods",
        async move {
            let silver = (&silver, carried.as_deref());
            let measuring = Measuring {
                contract: &contract,
                memory: &memory,
                budget: &budget,
            };
            let mut periods = months
                .compute(&measuring, silver, (&dq_error, keep))
                .await?;
            if let Some(counts) = missing {
                periods.batches = periods
                    .batches
                    .iter()
                    .map(|batch| with_recorded_missing(batch, &counts))
                    .collect::<Result<_>>()?;
            }
            Ok(periods)
        },
    )))
}

/// The months of a comparison window and the queries that measure them.
struct ComparedMonths {
    contributor: String,
    months: Vec<(NaiveDate, NaiveDate)>,
    /// The columns metrics read, quoted, each followed by a comma.
    metric_columns: String,
    /// The contributor and order columns, quoted.
    contributor_column: String,
    order_column: String,
    /// The first day of the window (its empty range gives the metrics'
    /// schema when there is no month).
    from: NaiveDate,
    /// The metrics of the rows registered as `committed_rows` (and the
    /// address of a kept month).
    by_period: String,
    /// The same, those that count entities summed from `committed_counts`;
    /// `None` when no metric counts entities.
    by_period_in_parts: Option<String>,
    /// The metrics that count entities: each one's name and the columns
    /// whose distinct values it counts.
    counting: Vec<(String, Vec<String>)>,
    /// The columns the other metrics read: all `committed_rows` holds when
    /// the counting metrics are counted apart.
    uncounted_columns: BTreeSet<String>,
}

/// What measuring a month needs beside the month.
struct Measuring<'a> {
    contract: &'a Contract,
    memory: &'a QueryMemory,
    /// The run's budget: in a month of more rows than the budget judges
    /// whole (as a drop: `Buckets::for_rows`, `bucket_rows`), the metrics
    /// that count entities count their values' fingerprints split into as
    /// many parts as a drop's buckets, in its scratch folder
    /// ([`DistinctCount`]).
    budget: &'a MemoryBudget,
}

/// The table of the counts of the metrics that count entities, when they
/// are counted apart: the period and each one's count.
const COMMITTED_COUNTS: &str = "committed_counts";

/// The month column of the rows measured (`DATE '...' AS p`), which the
/// metrics are grouped by.
const MONTH_COLUMN: &str = "p";

impl ComparedMonths {
    fn new(plan: &Plan, contributor: &str, window: (NaiveDate, NaiveDate)) -> ComparedMonths {
        let measured = committed_metrics(&plan.metrics);
        let (counting, uncounted): (Vec<_>, Vec<_>) =
            measured.iter().partition(|m| m.counts_entities);
        ComparedMonths {
            contributor: contributor.to_string(),
            months: months_of(window),
            metric_columns: committed_metric_columns(&plan.metrics, &[]),
            contributor_column: quote(&plan.contract.contributor_column),
            order_column: quote(&plan.contract.order_column),
            from: window.0,
            by_period: metrics_by_period_sql(&measured, "committed_rows", None),
            by_period_in_parts: (!counting.is_empty()).then(|| {
                metrics_by_period_sql(&measured, "committed_rows", Some(COMMITTED_COUNTS))
            }),
            counting: counting
                .iter()
                .map(|m| (m.name.clone(), m.columns.iter().cloned().collect()))
                .collect(),
            uncounted_columns: uncounted
                .iter()
                .flat_map(|m| m.columns.iter().cloned())
                .collect(),
        }
    }

    /// This contributor's committed rows of the month `[start, end)` in
    /// `table`, with their period: only the columns the metrics read (a
    /// kept month's address holds this query of `silver`).
    fn rows_sql(&self, month: (NaiveDate, NaiveDate), table: &str) -> String {
        self.select_sql(&self.metric_columns, month, table)
    }

    fn select_sql(
        &self,
        columns: &str,
        (start, end): (NaiveDate, NaiveDate),
        table: &str,
    ) -> String {
        let order = &self.order_column;
        format!(
            "SELECT {columns}DATE '{start}' AS {MONTH_COLUMN} FROM {table} \
             WHERE {contributor_column} = {contributor} AND {order} >= DATE '{start}' \
               AND {order} < DATE '{end}'",
            contributor_column = self.contributor_column,
            contributor = sql_string(&self.contributor),
        )
    }

    /// Every month's metrics: kept ones read back, the others computed (and
    /// kept, if `keep`), from the month `carried` from the run before where
    /// it covers them, else from Silver.
    async fn compute(
        &self,
        measuring: &Measuring<'_>,
        (silver, carried): (&Table, Option<&CommittedMonth>),
        (dq_error, keep): (&Location, bool),
    ) -> Result<CommittedPeriods> {
        let contract = measuring.contract;
        let ctx = new_session(measuring.memory);
        register_history_source(&ctx, contract, silver, carried).await?;
        let mut batches = Vec::with_capacity(self.months.len());
        for month in &self.months {
            let rows_sql = &self.rows_sql(*month, "silver");
            let files = files_holding(silver, contract, &self.contributor, *month).await?;
            let kept = self.kept_path(rows_sql, &files.paths);
            if let Some(batch) = read_kept(dq_error, &kept).await {
                batches.push(batch);
                continue;
            }
            let table = CommittedMonth::table_for(carried, *month);
            let in_parts = self.parts_of(measuring, &files);
            if let Some(parts) = &in_parts {
                // The parts are those of the counted values' fingerprints
                // (the message is older, and operators grep for it).
                tracing::info!(
                    month = %month.0,
                    parts = *parts,
                    estimated_rows = files.rows,
                    "measuring a committed month in parts of entities (resources.memory_limit, resources.bucket_rows)"
                );
            }
            let rows_sql = self.rows_sql(*month, table);
            let in_parts = in_parts.map(|parts| (measuring, month.0, parts));
            let batch = self.measure(&ctx, &rows_sql, in_parts).await?;
            if keep {
                keep_measured(dq_error, &kept, &batch).await;
            }
            batches.push(batch);
        }
        let schema = match batches.first() {
            Some(batch) => batch.schema(),
            None => self.measured_schema(&ctx).await?,
        };
        Ok(CommittedPeriods { schema, batches })
    }

    /// The parts the values a month held in `files` counts are split
    /// into, when a metric counts entities and the month's rows (at most
    /// `files.rows`) are more than the budget judges whole (`None`:
    /// measured whole).
    fn parts_of(&self, measuring: &Measuring<'_>, files: &HeldFiles) -> Option<usize> {
        self.by_period_in_parts.as_ref()?;
        let budget = measuring.budget;
        let rows = usize::try_from(files.rows).unwrap_or(usize::MAX);
        let judged_whole = Buckets::for_rows(rows, (budget.bytes, budget.bucket_rows)).count() == 1;
        (!judged_whole).then(|| DistinctCount::parts_for(rows, budget.bytes))
    }

    /// One month's metrics, measured by `rows_sql` (from Silver or a kept
    /// month): with `in_parts` (the month's first day and how many parts),
    /// the metrics that count entities counted apart, in parts.
    async fn measure(
        &self,
        ctx: &SessionContext,
        rows_sql: &str,
        in_parts: Option<(&Measuring<'_>, NaiveDate, usize)>,
    ) -> Result<RecordBatch> {
        let rows = ctx
            .sql(rows_sql)
            .await
            .map_err(Error::query(Stage::Aggregate))?;
        // The month's rows: held until its metrics are measured.
        let _rows_held: (Option<RefCountedTempFile>, Option<SpillDir>);
        let by_period = match (&self.by_period_in_parts, in_parts) {
            (Some(by_period), Some(parts)) => {
                _rows_held = (None, Some(self.count_in_parts(ctx, rows, parts).await?));
                by_period
            }
            _ => {
                let file =
                    register_frame_on_disk(ctx, "committed_rows", rows, Stage::Aggregate).await?;
                _rows_held = (Some(file), None);
                &self.by_period
            }
        };
        let frame = ctx
            .sql(by_period)
            .await
            .map_err(Error::query(Stage::Aggregate))?;
        let schema = Arc::new(frame.schema().as_arrow().clone());
        let batches = run_frame(frame)
            .await
            .map_err(Error::query(Stage::Aggregate))?;
        arrow::compute::concat_batches(&schema, &batches).map_err(Error::arrow(Stage::Aggregate))
    }

    /// Streams a month's `rows` once: counts the distinct values of each
    /// metric that counts entities in `parts` parts ([`DistinctCount`], in
    /// `measuring`'s budget's scratch folder) and registers the counts as
    /// `committed_counts` (one row: the month `period` and each count);
    /// keeps the columns the other metrics read in a spill file registered
    /// as `committed_rows`. The spill folder must outlive the queries of
    /// the month.
    async fn count_in_parts(
        &self,
        ctx: &SessionContext,
        rows: datafusion::prelude::DataFrame,
        (measuring, period, parts): (&Measuring<'_>, NaiveDate, usize),
    ) -> Result<SpillDir> {
        let dir = SpillDir::new(true, measuring.budget.spilling())?;
        let folder = dir.folder("committed-month")?;
        let held = dir.held_per_bucket(parts);
        let mut counts = self
            .counting
            .iter()
            .enumerate()
            .map(|(i, (_, columns))| {
                let folder = dir.folder(&format!("distinct-{i}"))?.ok_or_else(|| {
                    Error::Internal("committed periods: a spill folder in memory".to_string())
                })?;
                let distinct = DistinctCount::new(parts, (&folder, held), Stage::Aggregate)?;
                Ok((columns, distinct))
            })
            .collect::<Result<Vec<_>>>()?;
        let schema = rows.schema().as_arrow().clone();
        let kept: Vec<usize> = (0..schema.fields().len())
            .filter(|&i| {
                let name = schema.field(i).name();
                name == MONTH_COLUMN || self.uncounted_columns.contains(name)
            })
            .collect();
        let kept_schema = Arc::new(
            schema
                .project(&kept)
                .map_err(Error::arrow(Stage::Aggregate))?,
        );
        let mut writer = dir.writer((folder.as_deref(), "rows"), &kept_schema)?;
        let mut stream = rows
            .execute_stream()
            .await
            .map_err(Error::query(Stage::Aggregate))?;
        while let Some(batch) = stream
            .try_next()
            .await
            .map_err(Error::query(Stage::Aggregate))?
        {
            for (columns, distinct) in &mut counts {
                distinct.add(&named_columns(&batch, columns, Stage::Aggregate)?)?;
            }
            writer.write(
                &batch
                    .project(&kept)
                    .map_err(Error::arrow(Stage::Aggregate))?,
            )?;
        }
        let counted = counts
            .into_iter()
            .map(|(_, distinct)| distinct.count())
            .collect::<Result<Vec<u64>>>()?;
        register_table(
            ctx,
            COMMITTED_COUNTS,
            self.counts_batch(period, &counted)?,
            Stage::Aggregate,
        )?;
        let rows = SpilledTable {
            schema: kept_schema,
            spills: vec![writer.finish()?],
            folder,
        };
        register_spilled(ctx, "committed_rows", rows, Stage::Aggregate).await?;
        Ok(dir)
    }

    /// The `committed_counts` of the month `period`: its first day, then
    /// each counting metric's count.
    fn counts_batch(
        &self,
        period: NaiveDate,
        counted: &[u64],
    ) -> Result<(SchemaRef, Vec<RecordBatch>)> {
        let mut fields = vec![Field::new(MONTH_COLUMN, DataType::Date32, false)];
        let mut columns = vec![period_column(period)];
        for ((name, _), count) in self.counting.iter().zip(counted) {
            fields.push(Field::new(name, DataType::Float64, false));
            columns.push(Arc::new(Float64Array::from(vec![*count as f64])));
        }
        let schema = Arc::new(Schema::new(fields));
        let batch = RecordBatch::try_new(schema.clone(), columns)
            .map_err(Error::arrow(Stage::Aggregate))?;
        Ok((schema, vec![batch]))
    }

    /// The schema of a month's metrics, when there is no month to measure.
    async fn measured_schema(&self, ctx: &SessionContext) -> Result<SchemaRef> {
        let no_rows = self.rows_sql((self.from, self.from), "silver");
        Ok(self.measure(ctx, &no_rows, None).await?.schema())
    }

    /// Where a month's metrics are kept: addressed by the queries and the files.
    fn kept_path(&self, rows_sql: &str, files: &[String]) -> String {
        let parts = [rows_sql, self.by_period.as_str()]
            .into_iter()
            .chain(files.iter().map(String::as_str));
        format!(
            "metrics/contributor={}/{}.arrow",
            self.contributor,
            nul_terminated_hex(parts.map(str::as_bytes))
        )
    }
}

/// A period of the drop (its first day, as text) and the metrics it measured.
pub(crate) type DropPeriod<'a> = (&'a str, &'a BTreeMap<String, Option<f64>>);

/// Keeps the metrics the drop measured of its periods (`reports`) as those
/// of the same months committed in `silver` (the table after the run's
/// commit), so that later runs read them back instead of measuring them.
/// The caller knows they are exactly what a measurement would give: every
/// row of the drop committed, in months (`from`, `to`) that held no row of
/// `contributor` before, and none of its rows committed since. A month that
/// gains or loses a file later is measured afresh, as any kept month is.
pub(crate) async fn keep_drop_periods(
    plan: &Plan,
    (contributor, (from, to), reports): (&str, (NaiveDate, NaiveDate), &[DropPeriod<'_>]),
    (silver, dq_error): (&Table, &Location),
    memory: &QueryMemory,
) -> Result<()> {
    let ctx = new_session(memory);
    register_history_source(&ctx, &plan.contract, silver, None).await?;
    let schema = ComparedMonths::new(plan, contributor, (from, from))
        .measured_schema(&ctx)
        .await?;
    for &(period, measured) in reports {
        // A period of rows without an order date is none of the months.
        let month = NaiveDate::parse_from_str(period, "%Y-%m-%d")
            .ok()
            .and_then(|start| Some((start, start.checked_add_months(Months::new(1))?)))
            .filter(|(start, end)| from <= *start && *end <= to);
        let Some(month) = month else {
            tracing::debug!(period, "a drop period outside its months: not kept");
            continue;
        };
        let months = ComparedMonths::new(plan, contributor, month);
        let files = files_holding(silver, &plan.contract, contributor, month).await?;
        let batch = report_batch(&schema, month.0, measured, &plan.metrics)?;
        keep_measured(
            dq_error,
            &months.kept_path(&months.rows_sql(month, "silver"), &files.paths),
            &batch,
        )
        .await;
    }
    Ok(())
}

/// The one-row month column of `period` (its first day).
fn period_column(period: NaiveDate) -> ArrayRef {
    Arc::new(Date32Array::from(vec![
        period.num_days_from_ce() - UNIX_EPOCH_FROM_CE,
    ]))
}

/// One period's metrics as a measurement of a committed month gives them
/// (`schema`): the period, then each metric, null where a committed month
/// does not measure it.
fn report_batch(
    schema: &SchemaRef,
    period: NaiveDate,
    measured: &BTreeMap<String, Option<f64>>,
    metrics: &[crate::config::rules::Metric],
) -> Result<RecordBatch> {
    let mut columns = vec![period_column(period)];
    for metric in metrics {
        let value = match metric.from_silver() {
            true => measured.get(&metric.name).copied().flatten(),
            false => None,
        };
        columns.push(Arc::new(Float64Array::from(vec![value])));
    }
    RecordBatch::try_new(schema.clone(), columns).map_err(Error::arrow(Stage::Aggregate))
}

/// `batch` (a month's metrics) with `missing_entities` set from `counts`:
/// the entities recorded missing from each period (0 when none were).
fn with_recorded_missing(
    batch: &RecordBatch,
    counts: &BTreeMap<String, u64>,
) -> Result<RecordBatch> {
    let Some((index, _)) = batch.schema().column_with_name(MISSING_ENTITIES_METRIC) else {
        return Ok(batch.clone());
    };
    let periods = batch
        .column_by_name("p")
        .and_then(|c| c.as_any().downcast_ref::<Date32Array>())
        .ok_or_else(|| Error::Internal("committed periods: the period is not a date".into()))?;
    let recorded: Float64Array = periods
        .iter()
        .map(|p| {
            let period =
                p.and_then(|day| NaiveDate::from_num_days_from_ce_opt(day + UNIX_EPOCH_FROM_CE))?;
            Some(counts.get(&period.to_string()).copied().unwrap_or(0) as f64)
        })
        .collect();
    let mut columns = batch.columns().to_vec();
    columns[index] = Arc::new(recorded);
    RecordBatch::try_new(batch.schema(), columns).map_err(Error::arrow(Stage::Aggregate))
}

/// Each month of `[from, to)`, as its own `[start, end)`.
fn months_of((from, to): (NaiveDate, NaiveDate)) -> Vec<(NaiveDate, NaiveDate)> {
    let mut months = Vec::new();
    let mut start = from;
    while start < to {
        let end = start
            .checked_add_months(Months::new(1))
            .map_or(to, |next| next.min(to));
        months.push((start, end));
        start = end;
    }
    months
}

/// A kept month's metrics; `None` when absent or unreadable (then measured again).
async fn read_kept(dq_error: &Location, path: &str) -> Option<RecordBatch> {
    let bytes = match dq_error.get_opt(path).await {
        Ok(bytes) => bytes?,
        Err(error) => {
            tracing::warn!(path, error = %error, "kept period metrics unreadable: measuring again");
            return None;
        }
    };
    let mut reader = FileReader::try_new(Cursor::new(bytes), None).ok()?;
    reader.next()?.ok()
}

/// Keeps a month's metrics for later runs; a failure only costs them time.
async fn keep_measured(dq_error: &Location, path: &str, batch: &RecordBatch) {
    let mut bytes = Vec::new();
    let written = FileWriter::try_new(&mut bytes, &batch.schema()).and_then(|mut writer| {
        writer.write(batch)?;
        writer.finish()
    });
    let result = match written {
        Ok(()) => dq_error.put(path, bytes).await,
        Err(error) => Err(Error::arrow(Stage::Aggregate)(error)),
    };
    if let Err(error) = result {
        tracing::warn!(path, error = %error, "could not keep the period metrics");
    }
}
