//! A backfill's month kept as the next month's history: the rows a run
//! committed, held in memory by the process, read in place of Silver's
//! rows of the same months (DESIGN.md invariant 8 holds either way).
//!
//! They stand for Silver's rows only where that is exact: the whole months
//! of the drop's periods, when Silver held no row of the contributor in them
//! before the run (so what the run committed is all those months hold), and
//! only while every snapshot since the run's is a compaction or another
//! contributor's run. Anywhere else the history is read from Silver.

use std::collections::BTreeSet;
use std::sync::Arc;

use arrow::datatypes::{Schema, SchemaRef};
use arrow::record_batch::RecordBatch;
use chrono::{Datelike, Months, NaiveDate};
use datafusion::prelude::SessionContext;
use futures::TryStreamExt;
use iceberg::expr::Reference;
use iceberg::spec::Datum;
use iceberg::table::Table;

use crate::config::contract::Contract;
use crate::config::rules::{Completeness, Metric, Rule};
use crate::config::values::UNIX_EPOCH_FROM_CE;
use crate::core::sql::register_table;
use crate::error::{Error, Result};
use crate::infra::append::rows_of_unchanged_since;
use crate::stage::Stage;

/// The table a kept month is registered as in a query session, beside `silver`.
pub(crate) const CARRIED_TABLE: &str = "carried";

/// The rows of one contributor that a run committed in whole months that
/// held nothing of that contributor before, as the next run of the same
/// process reads them.
pub struct CommittedMonth {
    contributor: String,
    /// The snapshot the run committed.
    snapshot_id: i64,
    /// The months, `[first day, first day after)`.
    months: (NaiveDate, NaiveDate),
    /// The columns a history or a committed period reads, batch after batch.
    batches: Vec<RecordBatch>,
}

impl CommittedMonth {
    /// How many rows it holds.
    pub fn rows(&self) -> usize {
        self.batches.iter().map(RecordBatch::num_rows).sum()
    }

    /// Whether these rows are still all of `silver`'s rows of the
    /// contributor in their months.
    pub(crate) fn holds_on(&self, silver: &Table, contributor: &str) -> bool {
        self.contributor == contributor
            && rows_of_unchanged_since(silver, self.snapshot_id, contributor)
    }

    /// Whether `[start, end)` lies within the months held.
    pub(crate) fn covers(&self, (start, end): (NaiveDate, NaiveDate)) -> bool {
        start < end && self.months.0 <= start && end <= self.months.1
    }

    /// The table a query of the contributor's rows of `range` reads, always
    /// filtered by contributor and range as Silver's are (a kept month
    /// holds every row the run committed, a row of another contributor or
    /// without an order date included): [`CARRIED_TABLE`] when `carried`
    /// covers the range, else `silver`.
    pub(crate) fn table_for(
        carried: Option<&CommittedMonth>,
        range: (NaiveDate, NaiveDate),
    ) -> &'static str {
        match carried.is_some_and(|month| month.covers(range)) {
            true => CARRIED_TABLE,
            false => "silver",
        }
    }

    /// Registers the rows as [`CARRIED_TABLE`] in `ctx`, each column of the
    /// type `silver` (Silver's schema as the session reads it) gives it.
    pub(crate) fn register(&self, ctx: &SessionContext, silver: &Schema) -> Result<()> {
        let Some(first) = self.batches.first() else {
            return Err(Error::Internal("a kept month without rows".to_string()));
        };
        let fields = first
            .schema()
            .fields()
            .iter()
            .map(|field| {
                silver
                    .field_with_name(field.name())
                    .cloned()
                    .map_err(Error::arrow(Stage::Baseline))
            })
            .collect::<Result<Vec<_>>>()?;
        let schema: SchemaRef = Arc::new(Schema::new(fields));
        let batches = self
            .batches
            .iter()
            .map(|batch| cast_to(batch, &schema))
            .collect::<Result<Vec<_>>>()?;
        // Spread over the session's partitions: a single partition is split
        // by a repartition that accounts each batch (a slice of the run's
        // rows) at the size of the whole buffers it shares, and so spilled
        // every batch to disk.
        register_table(ctx, CARRIED_TABLE, (schema, batches), Stage::Baseline)
    }
}

/// `batch` with each column cast to `schema`'s type (a column already of
/// it is shared, not copied).
fn cast_to(batch: &RecordBatch, schema: &SchemaRef) -> Result<RecordBatch> {
    let columns = batch
        .columns()
        .iter()
        .zip(schema.fields())
        .map(|(column, field)| arrow::compute::cast(column, field.data_type()))
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(Error::arrow(Stage::Baseline))?;
    RecordBatch::try_new(schema.clone(), columns).map_err(Error::arrow(Stage::Baseline))
}

/// The Silver rows a run writes, kept as it writes them, to become a
/// [`CommittedMonth`] once committed.
pub(crate) struct MonthKeeper {
    contributor: String,
    months: (NaiveDate, NaiveDate),
    /// The contract columns kept, by name.
    columns: Vec<String>,
    batches: Vec<RecordBatch>,
}

/// What decides the columns a kept month holds: those a history or a
/// committed period's metrics read.
pub(crate) struct ReadColumns<'a> {
    pub(crate) contract: &'a Contract,
    pub(crate) rules: &'a [&'a Rule],
    pub(crate) metrics: &'a [Metric],
    pub(crate) completeness: Option<&'a Completeness>,
}

/// The whole months of the drop whose order dates are `days`, when
/// `silver` (the table the run is judged on) holds no row of `contributor`
/// in them: what the run commits will then be all they hold. `None`
/// otherwise, or for a drop without rows.
pub(crate) async fn fresh_months(
    silver: &Table,
    contract: &Contract,
    contributor: &str,
    days: &BTreeSet<i32>,
) -> Result<Option<(NaiveDate, NaiveDate)>> {
    let (Some(first), Some(last)) = (days.first(), days.last()) else {
        return Ok(None);
    };
    let Some(months) = whole_months(*first, *last) else {
        return Ok(None);
    };
    let held = files_holding(silver, contract, contributor, months).await?;
    Ok(held.paths.is_empty().then_some(months))
}

impl MonthKeeper {
    /// A keeper for the rows of `contributor` a run commits in `months`
    /// ([`fresh_months`]).
    pub(crate) fn new(
        months: (NaiveDate, NaiveDate),
        read: ReadColumns<'_>,
        contributor: &str,
    ) -> MonthKeeper {
        MonthKeeper {
            contributor: contributor.to_string(),
            months,
            columns: read.columns(),
            batches: Vec::new(),
        }
    }

    /// Keeps the columns read of `rows` (Silver rows of the contract).
    pub(crate) fn keep(&mut self, rows: &[RecordBatch]) -> Result<()> {
        for batch in rows.iter().filter(|b| b.num_rows() > 0) {
            let schema = batch.schema();
            let indices = self
                .columns
                .iter()
                .map(|name| schema.index_of(name).map_err(Error::arrow(Stage::Route)))
                .collect::<Result<Vec<_>>>()?;
            let kept = batch
                .project(&indices)
                .map_err(Error::arrow(Stage::Route))?;
            self.batches.push(kept);
        }
        Ok(())
    }

    /// The month as committed in `snapshot_id`; `None` when no row went to Silver.
    pub(crate) fn committed(self, snapshot_id: i64) -> Option<CommittedMonth> {
        (!self.batches.is_empty()).then_some(CommittedMonth {
            contributor: self.contributor,
            snapshot_id,
            months: self.months,
            batches: self.batches,
        })
    }
}

impl ReadColumns<'_> {
    /// The contract columns a history or a committed period reads: the
    /// keys, the contributor column, the history's `prev` columns (the
    /// order column among them), those metrics measure and those
    /// `closed_when` reads, in the contract's order.
    fn columns(&self) -> Vec<String> {
        let prev = super::prev_columns(self.contract, self.rules, self.metrics);
        let measured = self.metrics.iter().flat_map(|m| m.columns.iter());
        let closed = self.completeness.into_iter().flat_map(|c| c.columns.iter());
        let read: BTreeSet<&str> = self
            .contract
            .entity_key
            .iter()
            .chain([&self.contract.contributor_column])
            .chain(&prev)
            .chain(measured)
            .chain(closed)
            .map(String::as_str)
            .collect();
        self.contract
            .columns
            .iter()
            .filter(|c| read.contains(c.name.as_str()))
            .map(|c| c.name.clone())
            .collect()
    }
}

/// The whole months of the days `first` to `last` (days since 1970-01-01):
/// the first day of the first one, the first day after the last one.
fn whole_months(first: i32, last: i32) -> Option<(NaiveDate, NaiveDate)> {
    let date = |days: i32| NaiveDate::from_num_days_from_ce_opt(days + UNIX_EPOCH_FROM_CE);
    let start = date(first)?.with_day(1)?;
    let end = date(last)?
        .with_day(1)?
        .checked_add_months(Months::new(1))?;
    Some((start, end))
}

/// The files of `silver` that may hold some of a contributor's rows.
#[derive(Debug, Default)]
pub(crate) struct HeldFiles {
    /// The data and delete files, sorted.
    pub(crate) paths: Vec<String>,
    /// The rows of the data files, as their manifests count them: all of
    /// each file's rows (other contributors' and months' too, when a file
    /// holds more than the rows asked for; deleted or not), so at least the
    /// rows asked for.
    pub(crate) rows: u64,
}

/// The data and delete files of `silver` that may hold `contributor`'s
/// rows with `start <= order < end` (partition pruning and column
/// statistics decide).
pub(crate) async fn files_holding(
    silver: &Table,
    contract: &Contract,
    contributor: &str,
    (start, end): (NaiveDate, NaiveDate),
) -> Result<HeldFiles> {
    if silver.metadata().current_snapshot().is_none() {
        return Ok(HeldFiles::default());
    }
    let day = |date: NaiveDate| Datum::date(date.num_days_from_ce() - UNIX_EPOCH_FROM_CE);
    let order = Reference::new(contract.order_column.clone());
    let predicate = Reference::new(contract.contributor_column.clone())
        .equal_to(Datum::string(contributor))
        .and(order.clone().greater_than_or_equal_to(day(start)))
        .and(order.less_than(day(end)));
    let target = silver.identifier().to_string();
    let scan = silver
        .scan()
        .with_filter(predicate)
        .select_empty()
        .build()
        .map_err(Error::catalog("scan", &target))?;
    let tasks: Vec<_> = scan
        .plan_files()
        .await
        .map_err(Error::catalog("scan", &target))?
        .try_collect()
        .await
        .map_err(Error::catalog("scan", &target))?;
    let mut paths: Vec<String> = tasks
        .iter()
        .flat_map(|task| {
            std::iter::once(task.data_file_path.clone())
                .chain(task.deletes.iter().map(|d| d.file_path.clone()))
        })
        .collect();
    paths.sort_unstable();
    paths.dedup();
    // Every manifest entry records its file's count; a task without one
    // (none today) counts its bytes, a generous stand-in.
    let rows = tasks
        .iter()
        .map(|task| task.record_count.unwrap_or(task.file_size_in_bytes))
        .sum();
    Ok(HeldFiles { paths, rows })
}

#[cfg(test)]
mod tests {
    use arrow::array::{ArrayRef, Date32Array, Int64Array, StringArray};

    use super::*;
    use crate::core::sql::{QueryMemory, log_spills, new_session};

    fn day(y: i32, m: u32, d: u32) -> i32 {
        NaiveDate::from_ymd_opt(y, m, d).unwrap().num_days_from_ce() - UNIX_EPOCH_FROM_CE
    }

    #[test]
    fn whole_months_run_from_the_first_day_to_the_first_day_after_the_last_month() {
        let date = |y, m, d| NaiveDate::from_ymd_opt(y, m, d).unwrap();
        assert_eq!(
            whole_months(day(2024, 1, 31), day(2024, 1, 31)),
            Some((date(2024, 1, 1), date(2024, 2, 1)))
        );
        assert_eq!(
            whole_months(day(2023, 12, 15), day(2024, 2, 1)),
            Some((date(2023, 12, 1), date(2024, 3, 1)))
        );
    }

    #[tokio::test]
    async fn a_kept_month_is_read_without_spilling_though_its_batches_share_buffers() {
        // A run keeps its rows as slices of the batches it judged: each
        // slice shares (and reports) the whole batch's buffers, some 22 MB.
        let rows = 1_000_000;
        let whole = RecordBatch::try_from_iter([
            (
                "contributor_id",
                Arc::new(StringArray::from_iter_values(std::iter::repeat_n(
                    "BANK_A", rows,
                ))) as ArrayRef,
            ),
            (
                "statement_date",
                Arc::new(Date32Array::from(vec![day(2024, 1, 31); rows])),
            ),
            (
                "balance",
                Arc::new(Int64Array::from_iter_values(0..rows as i64)),
            ),
        ])
        .unwrap();
        let batches = (0..rows)
            .step_by(8192)
            .map(|start| whole.slice(start, 8192.min(rows - start)))
            .collect();
        let month = CommittedMonth {
            contributor: "BANK_A".to_string(),
            snapshot_id: 1,
            months: whole_months(day(2024, 1, 1), day(2024, 1, 31)).unwrap(),
            batches,
        };
        // The smallest budget accepted: a pool of 16 MiB.
        let scratch = tempfile::tempdir().unwrap();
        let memory = QueryMemory::smallest(scratch.path());
        // Four partitions whatever the cores: one partition read by four
        // is what DataFusion repartitions.
        let ctx = new_session(&memory);
        ctx.state_ref()
            .write()
            .config_mut()
            .options_mut()
            .execution
            .target_partitions = 4;
        month.register(&ctx, &whole.schema()).unwrap();
        let frame = ctx
            .sql(
                "SELECT balance FROM carried WHERE contributor_id = 'BANK_A' \
                 AND statement_date >= DATE '2024-01-01' AND statement_date < DATE '2024-02-01'",
            )
            .await
            .unwrap();
        let task = Arc::new(frame.task_ctx());
        let plan = frame.create_physical_plan().await.unwrap();
        let read = datafusion::physical_plan::collect(plan.clone(), task)
            .await
            .unwrap();
        assert_eq!(read.iter().map(RecordBatch::num_rows).sum::<usize>(), rows);
        assert_eq!(log_spills(plan.as_ref()), 0, "no batch went through disk");
    }
}
