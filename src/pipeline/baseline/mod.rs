//! Baseline: the account's own history, joined to every row by a LAG.
//!
//! In: the drop's typed rows and the Silver table. Out: the drop's rows with
//! `prev_<column>` for every column a trend rule reads, plus `_has_baseline`,
//! `_key_occurrences` and `_key_committed`, computed once and held in memory
//! for the rules.
//!
//! Only this contributor's Silver rows are read, only from the lookback window
//! before the drop's earliest period, only the columns rules need, and, month
//! by month newest first, only for the entities still lacking a state
//! (DESIGN.md invariant 7). They are unioned with the drop and LAGged over the
//! order column per entity ([`lag`]), so a backfill's February finds its
//! January in the same pass (invariant 8); an entity with no history gets null
//! `prev_*` and `_has_baseline = false` (invariant 9).
//!
//! With `[completeness]`, the same pass keeps the states of the entities the
//! drop leaves out and finds the missing entities (`missing.rs`).

mod bucket;
mod carried;
mod lag;
mod missing;

pub(crate) use bucket::{Bucket, SpilledHistory};
pub use carried::CommittedMonth;
pub(crate) use carried::{HeldFiles, MonthKeeper, ReadColumns, files_holding, fresh_months};
pub use missing::{Expected, Missing};

use std::collections::BTreeSet;
use std::sync::Arc;

use arrow::array::{ArrayRef, UInt32Array};
use arrow::record_batch::RecordBatch;
use chrono::{Datelike, Months, NaiveDate};
use datafusion::dataframe::DataFrame;
use datafusion::datasource::MemTable;
use datafusion::prelude::SessionContext;
use iceberg::table::Table;
use iceberg_datafusion::IcebergStaticTableProvider;

use crate::config::contract::Contract;
use crate::config::rules::{Completeness, Metric, Rule, Scope};
use crate::config::values::UNIX_EPOCH_FROM_CE;
use crate::core::keys::KeyIndex;
use crate::core::sql::{
    QueryMemory, logged_stream, new_session, quote, read_ahead, register_table, sql_string,
};
use crate::error::{Error, Result};
use crate::infra::evolve::read_with_current_schema;
use crate::stage::Stage;
use datafusion::execution::SendableRecordBatchStream;
use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};

/// The drop's rows with their previous state attached, not yet computed.
pub struct Baselined {
    /// The query session the frame belongs to.
    pub ctx: SessionContext,
    /// Drop rows + `prev_*` + `_key_occurrences` + `_key_committed` + `_has_baseline`.
    pub rows: RecordBatch,
    /// The same rows as a frame of the session (table `baselined`).
    pub frame: DataFrame,
    /// The history window that was read, if the drop had any rows to baseline.
    pub window: Option<(NaiveDate, NaiveDate)>,
    /// The entities the drop leaves out (with `[completeness]`).
    pub missing: Option<Missing>,
}

/// The history a drop's rows are LAGged over, read but not yet joined: the
/// drop's rows, their entities, and the committed rows of those entities.
pub(crate) struct HistoryLoaded<'a> {
    ctx: SessionContext,
    contract: &'a Contract,
    completeness: Option<&'a Completeness>,
    contributor: &'a str,
    prev: BTreeSet<String>,
    rows: RecordBatch,
    window: Option<(NaiveDate, NaiveDate)>,
    entities: Entities,
    history: History,
    absent: Option<missing::Absent>,
    /// The drop's periods, sorted (with `[completeness]` only).
    periods: Vec<i32>,
    /// The drop's periods Silver holds rows of, when the history is one
    /// bucket's (`None`: the history shows them).
    held: Option<BTreeSet<i32>>,
}

/// What the whole drop sets for the baseline of each of its buckets: the
/// window of history read and the drop's periods.
pub(crate) struct DropShape {
    window: Option<(NaiveDate, NaiveDate)>,
    /// The drop's periods, sorted (with `[completeness]` only).
    periods: Vec<i32>,
}

impl DropShape {
    /// The shape of the drop whose distinct order dates are `days`; its
    /// periods only `with_periods` (they serve `[completeness]` alone).
    pub(crate) fn of(
        contract: &Contract,
        days: &BTreeSet<i32>,
        lookback_months: u32,
        with_periods: bool,
    ) -> Result<DropShape> {
        let periods = match with_periods {
            true => {
                let days: Vec<i32> = days.iter().copied().collect();
                lag::distinct_months(&days).into_iter().collect()
            }
            false => Vec::new(),
        };
        Ok(DropShape {
            window: order_window(contract, days, lookback_months)?,
            periods,
        })
    }

    /// The periods the drop's periods are compared with: from the first
    /// day of the lookback window to the first day of the drop's earliest
    /// period.
    pub(crate) fn comparison_window(&self, lookback_months: u32) -> Option<(NaiveDate, NaiveDate)> {
        self.window
            .map(|(from, _)| (from, first_period(from, lookback_months)))
    }
}

/// Reads the history the baseline of `rows` of `contributor` needs from
/// `silver`: the first half of the baseline, [`HistoryLoaded::lag`] the
/// second (a run finishes its background work between the two, so that
/// it does not add to the LAG's peak memory).
///
/// With `completeness`, the same history pass keeps the states of the
/// entities the drop leaves out.
pub(crate) async fn read_history<'a>(
    (contract, expected): (&'a Contract, Option<Expected<'a>>),
    (rules, metrics): (&[&Rule], &[Metric]),
    (lookback_months, memory): (u32, &QueryMemory),
    (shape, bucket): (&DropShape, &Bucket<'_>),
    contributor: &'a str,
    rows: RecordBatch,
    (silver, carried): (&Table, Option<&CommittedMonth>),
) -> Result<HistoryLoaded<'a>> {
    let ctx = new_session(memory);
    let window = shape.window;
    register_history_source(&ctx, contract, silver, carried).await?;
    let prev = prev_columns(contract, rules, metrics);
    let entities = Entities::of_drop(contract, &rows)?;
    let completeness = expected.as_ref().map(|e| e.completeness);
    let periods = match completeness {
        Some(_) => shape.periods.clone(),
        None => Vec::new(),
    };
    // Only the missing entities of a drop of several periods need the
    // history's keys and closed flags (`missing.rs`); the LAG reads the
    // `prev` columns alone.
    let whole_states = periods.len() > 1;
    let read = HistoryRead {
        contract,
        prev: &prev,
        completeness,
        contributor,
        lookback_months,
        entities: &entities,
        whole_states,
        bucket,
        carried,
    };
    let mut absent = match &expected {
        Some(expected) => {
            let drop_keys = key_columns(contract, &rows)?;
            // Entities recorded missing from the month before the drop.
            let month_before = window
                .map(|(from, _)| first_period(from, lookback_months))
                .and_then(|first| first.checked_sub_months(Months::new(1)))
                .map(|month| month.to_string());
            let none = BTreeSet::new();
            let keys = month_before
                .and_then(|month| expected.still_missing.get(&month))
                .unwrap_or(&none);
            let carried = missing::Carried::new(contract, keys, &drop_keys, bucket)?;
            Some(missing::Absent::new(read.state_schema(), carried))
        }
        None => None,
    };
    let history = read.read(&ctx, window, &mut absent).await?;
    tracing::debug!(rows = history.rows(), "history read");
    let held = match (bucket.history, window) {
        (Some(spilled), Some((from, to))) => {
            spilled
                .periods_of(drop_range(from, to, lookback_months))
                .await
        }
        _ => None,
    };
    Ok(HistoryLoaded {
        ctx,
        contract,
        completeness,
        contributor,
        prev,
        rows,
        window,
        entities,
        history,
        absent,
        periods,
        held,
    })
}

impl HistoryLoaded<'_> {
    /// The drop's rows with their previous state attached ([`lag`]) and,
    /// with `[completeness]`, the missing entities (the metrics put their
    /// count per period on the rows once every bucket is baselined).
    pub(crate) async fn lag(self) -> Result<Baselined> {
        let HistoryLoaded {
            ctx,
            contract,
            completeness,
            contributor,
            prev,
            rows,
            window,
            entities,
            history,
            absent,
            periods,
            held,
        } = self;
        // Missing entities first: the LAG then takes the history's columns
        // a few at a time, freeing them as it goes.
        let missing = match (completeness, absent) {
            (Some(completeness), Some(absent)) => {
                let expectation = missing::Expectation {
                    contract,
                    completeness,
                    entities: &entities,
                    periods,
                    held: held.as_ref(),
                };
                Some(expectation.find(&ctx, &rows, &history, absent).await?)
            }
            _ => None,
        };
        let lagged = lag::lag(contract, &prev, contributor, &rows, &entities, history)?;
        tracing::debug!("lagged");
        let frame = register_rows(&ctx, &lagged).await?;
        Ok(Baselined {
            ctx,
            rows: lagged,
            frame,
            window,
            missing,
        })
    }
}

impl Baselined {
    /// Replaces the rows (with more columns, say) and the frame over them.
    pub async fn replace_rows(&mut self, rows: RecordBatch) -> Result<()> {
        self.frame = register_rows(&self.ctx, &rows).await?;
        self.rows = rows;
        Ok(())
    }
}

/// Registers `rows` as the table `baselined`, sliced over the session's partitions.
async fn register_rows(ctx: &SessionContext, rows: &RecordBatch) -> Result<DataFrame> {
    register_table(
        ctx,
        "baselined",
        (rows.schema(), slices(rows)),
        Stage::Baseline,
    )?;
    ctx.table("baselined")
        .await
        .map_err(Error::query(Stage::Baseline))
}

/// Rows per slice of the in-memory tables, so the rules run on every core.
const SLICE_ROWS: usize = 65_536;

/// The rows of history handled together ([`in_groups`]): their entities
/// looked up together (the lookup gives each core a share of them), or
/// spread over the buckets together (each core a share of the buckets);
/// Silver's history is read that far ahead.
const GROUP_ROWS: usize = 65_536;

/// Hands `stream`'s batches to `each` in groups of at least [`GROUP_ROWS`]
/// rows (the last may hold fewer; an empty stream makes none).
async fn in_groups(
    mut stream: impl futures::Stream<Item = Result<RecordBatch>> + Unpin,
    mut each: impl FnMut(Vec<RecordBatch>) -> Result<()>,
) -> Result<()> {
    let (mut group, mut rows) = (Vec::new(), 0);
    while let Some(batch) = stream.try_next().await? {
        rows += batch.num_rows();
        group.push(batch);
        if rows >= GROUP_ROWS {
            each(std::mem::take(&mut group))?;
            rows = 0;
        }
    }
    match group.is_empty() {
        true => Ok(()),
        false => each(group),
    }
}

fn slices(batch: &RecordBatch) -> Vec<RecordBatch> {
    (0..batch.num_rows())
        .step_by(SLICE_ROWS)
        .map(|start| batch.slice(start, SLICE_ROWS.min(batch.num_rows() - start)))
        .collect()
}

/// The range of the drop's own periods, from the window (`from`, `to`):
/// the first day of its earliest period to the day after its latest row.
fn drop_range(from: NaiveDate, to: NaiveDate, lookback_months: u32) -> (NaiveDate, NaiveDate) {
    (
        first_period(from, lookback_months),
        to.succ_opt().unwrap_or(to),
    )
}

/// The first day of the drop's earliest period, from the window's start.
fn first_period(window_from: NaiveDate, lookback_months: u32) -> NaiveDate {
    window_from
        .checked_add_months(Months::new(lookback_months))
        .unwrap_or(window_from)
}

/// The drop's entities, numbered: every drop row's entity and the index that
/// finds a history row's entity.
pub(crate) struct Entities {
    index: KeyIndex,
    /// The entity of each drop row.
    of_rows: Vec<u32>,
}

impl Entities {
    fn of_drop(contract: &Contract, rows: &RecordBatch) -> Result<Entities> {
        let mut index = KeyIndex::new(Stage::Baseline);
        let of_rows = index.insert(&key_columns(contract, rows)?)?;
        Ok(Entities { index, of_rows })
    }

    /// The entity of each drop row.
    pub(crate) fn of_rows(&self) -> &[u32] {
        &self.of_rows
    }

    /// How many distinct entities the drop holds.
    pub(crate) fn count(&self) -> usize {
        self.index.len()
    }

    /// The drop entity of each row of each of `batches` (`None`: not in
    /// the drop), their keys looked up together (one lookup, its rows
    /// shared over the cores).
    fn find(&self, contract: &Contract, batches: &[RecordBatch]) -> Result<Vec<Vec<Option<u32>>>> {
        let keys = batches
            .iter()
            .map(|batch| key_columns(contract, batch))
            .collect::<Result<Vec<_>>>()?;
        let together = match keys.as_slice() {
            [] => return Ok(Vec::new()),
            [one] => one.clone(),
            _ => (0..contract.entity_key.len())
                .map(|part| {
                    let columns: Vec<&dyn arrow::array::Array> =
                        keys.iter().map(|key| key[part].as_ref()).collect();
                    arrow::compute::concat(&columns).map_err(Error::arrow(Stage::Baseline))
                })
                .collect::<Result<Vec<_>>>()?,
        };
        let mut found = self.index.find(&together)?.into_iter();
        Ok(batches
            .iter()
            .map(|batch| found.by_ref().take(batch.num_rows()).collect())
            .collect())
    }
}

/// `batch` with only the columns named in `names` (in their order).
fn project(batch: &RecordBatch, names: &BTreeSet<String>) -> Result<RecordBatch> {
    let schema = batch.schema();
    let indices = names
        .iter()
        .map(|name| {
            schema
                .index_of(name)
                .map_err(|_| Error::Internal(format!("baseline: history column {name} not read")))
        })
        .collect::<Result<Vec<_>>>()?;
    batch
        .project(&indices)
        .map_err(Error::arrow(Stage::Baseline))
}

/// The entity key columns of `batch`.
pub(crate) fn key_columns(contract: &Contract, batch: &RecordBatch) -> Result<Vec<ArrayRef>> {
    crate::transient::named_columns(batch, &contract.entity_key, Stage::Baseline)
}

/// Committed rows the LAG reads, each with its drop entity: the `prev`
/// columns (the order column and those rules look back at), or, for the
/// missing entities of a drop of several periods, every column read.
#[derive(Default)]
pub(crate) struct History {
    /// The rows, in batches of the same schema.
    pub(crate) batches: Vec<RecordBatch>,
    /// The drop entity of every row, batch after batch.
    pub(crate) entities: Vec<u32>,
}

impl History {
    fn rows(&self) -> usize {
        self.entities.len()
    }

    /// Keeps the rows of `batch` whose entity is in the drop and `wanted`.
    fn keep(
        &mut self,
        batch: &RecordBatch,
        found: Vec<Option<u32>>,
        wanted: impl Fn(u32) -> bool,
    ) -> Result<()> {
        // `None` while the rows kept are exactly the first ones: then the
        // batch is kept as it is (or its head), without gathering rows.
        let mut rows: Option<Vec<u32>> = None;
        let before = self.entities.len();
        for (row, entity) in found.into_iter().enumerate() {
            let Some(entity) = entity.filter(|e| wanted(*e)) else {
                continue;
            };
            match &mut rows {
                Some(rows) => rows.push(row as u32),
                None if row > self.entities.len() - before => {
                    let mut gathered: Vec<u32> =
                        (0..(self.entities.len() - before) as u32).collect();
                    gathered.push(row as u32);
                    rows = Some(gathered);
                }
                None => {}
            }
            self.entities.push(entity);
        }
        let kept_rows = self.entities.len() - before;
        if kept_rows == 0 {
            return Ok(());
        }
        let kept = match rows {
            None => batch.slice(0, kept_rows),
            Some(rows) => arrow::compute::take_record_batch(batch, &UInt32Array::from(rows))
                .map_err(Error::arrow(Stage::Baseline))?,
        };
        self.batches.push(kept);
        Ok(())
    }
}

/// Reads the history the LAG needs, latest state first.
///
/// Every entity of the drop needs its latest committed state before the
/// drop's first period, which for almost every entity sits in the month just
/// before. So months are read newest first, each keeping only the rows of the
/// entities not found yet, and reading stops when none is left or the
/// lookback window ends: the cost follows the drop, not the table. Rows
/// committed in the drop's own periods are read too (resubmissions, backfill
/// overlap). Only this contributor's partitions and only the columns rules
/// need are read, streamed, and only rows of the drop's entities are kept.
struct HistoryRead<'a> {
    contract: &'a Contract,
    prev: &'a BTreeSet<String>,
    completeness: Option<&'a Completeness>,
    contributor: &'a str,
    lookback_months: u32,
    entities: &'a Entities,
    /// Whether the history keeps every column read (the missing entities
    /// of a drop of several periods need them), not just the `prev` ones.
    whole_states: bool,
    /// The bucket whose history is read.
    bucket: &'a Bucket<'a>,
    /// The month the run before committed, read in place of Silver's.
    carried: Option<&'a CommittedMonth>,
}

impl HistoryRead<'_> {
    /// The history rows: the drop's own periods, then each earlier month's
    /// rows of the entities not found in a later one.
    ///
    /// The drop's periods and the month before are read whole: the rows of
    /// entities the drop leaves out go to `absent`, when it is wanted.
    async fn read(
        &self,
        ctx: &SessionContext,
        window: Option<(NaiveDate, NaiveDate)>,
        absent: &mut Option<missing::Absent>,
    ) -> Result<History> {
        let mut history = History::default();
        let Some((from, to)) = window else {
            return Ok(history);
        };
        let range = drop_range(from, to, self.lookback_months);
        let first_period = range.0;
        let mut wanted = vec![true; self.entities.count()];
        let mut still_wanted = wanted.len();
        self.scan_month(ctx, range, (&mut history, absent), |_| true)
            .await?;
        let mut month_end = first_period;
        let searching = |absent: &Option<missing::Absent>| {
            absent.as_ref().is_some_and(missing::Absent::searching)
        };
        while month_end > from && (still_wanted > 0 || searching(absent)) {
            let month_start = month_end.checked_sub_months(Months::new(1)).unwrap_or(from);
            let before = history.rows();
            // Entities the drop leaves out are expected from the month
            // before the drop's first period (all its rows are kept); older
            // months keep the rows of entities still recorded missing.
            if let Some(absent) = absent.as_mut() {
                absent.begin_month(month_end == first_period);
            }
            self.scan_month(ctx, (month_start, month_end), (&mut history, absent), |e| {
                wanted[e as usize]
            })
            .await?;
            for entity in &history.entities[before..] {
                if std::mem::replace(&mut wanted[*entity as usize], false) {
                    still_wanted -= 1;
                }
            }
            tracing::debug!(month = %month_start, still_wanted, "history read");
            month_end = month_start;
        }
        Ok(history)
    }

    /// [`Self::scan`] of one month (or the drop's periods), then the month's
    /// findings of carried entities recorded.
    async fn scan_month(
        &self,
        ctx: &SessionContext,
        range: (NaiveDate, NaiveDate),
        (history, absent): (&mut History, &mut Option<missing::Absent>),
        wanted: impl Fn(u32) -> bool,
    ) -> Result<()> {
        self.scan(ctx, range, (history, absent.as_mut()), wanted)
            .await?;
        if let Some(absent) = absent.as_mut() {
            absent.end_month();
        }
        Ok(())
    }

    /// Streams this contributor's rows with `start <= order < end` (of
    /// this bucket), keeping those of wanted drop entities.
    async fn scan(
        &self,
        ctx: &SessionContext,
        range: (NaiveDate, NaiveDate),
        (history, mut absent): (&mut History, Option<&mut missing::Absent>),
        wanted: impl Fn(u32) -> bool,
    ) -> Result<()> {
        // Silver's rows decode a group ahead of the group looked up (or spread).
        let ahead = GROUP_ROWS.div_ceil(ctx.copied_config().batch_size().max(1));
        let silver = async { Ok(read_ahead(self.stream(ctx, range).await?, ahead)) };
        let stream: BoxStream<'_, Result<RecordBatch>> = match self.bucket.history {
            None => silver
                .await?
                .map_err(|e| Error::query(Stage::Baseline)(e))
                .boxed(),
            Some(spilled) => {
                let rows = spilled
                    .rows((range, self.bucket.index), self.contract, silver)
                    .await?;
                futures::stream::iter(rows.into_iter().map(Ok)).boxed()
            }
        };
        in_groups(stream, |group| {
            self.keep_found(&group, (history, absent.as_deref_mut()), &wanted)
        })
        .await
    }

    /// Finds the drop entity of each row of `batches` (their keys looked up
    /// together), then keeps the rows of wanted ones (and records those of
    /// entities the drop leaves out).
    fn keep_found(
        &self,
        batches: &[RecordBatch],
        (history, mut absent): (&mut History, Option<&mut missing::Absent>),
        wanted: impl Fn(u32) -> bool,
    ) -> Result<()> {
        let found = self.entities.find(self.contract, batches)?;
        for (batch, entities) in batches.iter().zip(found) {
            if let Some(absent) = absent.as_deref_mut() {
                absent.keep(self.contract, batch, &entities)?;
            }
            history.keep(&self.kept_columns(batch)?, entities, &wanted)?;
        }
        Ok(())
    }

    /// What the history keeps of `batch`: its `prev` columns, or all of
    /// them with `whole_states` (the keys, the `closed_when` columns and
    /// the closed flag would otherwise be held to the LAG for nothing).
    fn kept_columns(&self, batch: &RecordBatch) -> Result<RecordBatch> {
        if self.whole_states {
            return Ok(batch.clone());
        }
        project(batch, self.prev)
    }

    /// This contributor's rows with `start <= order < end`, streamed.
    async fn stream(
        &self,
        ctx: &SessionContext,
        (start, end): (NaiveDate, NaiveDate),
    ) -> Result<SendableRecordBatchStream> {
        let order = quote(&self.contract.order_column);
        let closed = self
            .completeness
            .map(missing::closed_column_sql)
            .unwrap_or_default();
        let table = CommittedMonth::table_for(self.carried, (start, end));
        let sql = format!(
            "SELECT {}{closed} FROM {} s WHERE s.{} = {} AND s.{order} >= DATE '{start}' AND s.{order} < DATE '{end}'",
            self.projection().join(", "),
            table,
            quote(&self.contract.contributor_column),
            sql_string(self.contributor)
        );
        let frame = ctx.sql(&sql).await.map_err(Error::query(Stage::Baseline))?;
        logged_stream(frame)
            .await
            .map_err(Error::query(Stage::Baseline))
    }
}

/// Columns whose previous value is needed: what trend rules read, what the
/// metrics of aggregate rules read, plus the order column.
fn prev_columns(contract: &Contract, rules: &[&Rule], metrics: &[Metric]) -> BTreeSet<String> {
    let has_aggregates = rules.iter().any(|r| r.scope == Scope::Aggregate);
    let metric_columns = metrics
        .iter()
        .filter(|_| has_aggregates)
        .flat_map(|m| m.prev_columns.iter().cloned());
    let mut columns: BTreeSet<String> = rules
        .iter()
        .filter(|r| r.scope != Scope::Aggregate)
        .flat_map(|r| r.prev_columns.iter().cloned())
        .chain(metric_columns)
        .collect();
    columns.insert(contract.order_column.clone());
    columns
}

/// First day of the lookback period before the earliest of `days` (the
/// drop's distinct order dates), and the latest one.
fn order_window(
    contract: &Contract,
    days: &BTreeSet<i32>,
    lookback_months: u32,
) -> Result<Option<(NaiveDate, NaiveDate)>> {
    let (Some(min), Some(max)) = (days.first(), days.last()) else {
        return Ok(None);
    };
    let to_date = |days: i32| {
        NaiveDate::from_num_days_from_ce_opt(days + UNIX_EPOCH_FROM_CE).ok_or_else(|| {
            Error::BadDrop {
                location: contract.order_column.clone(),
                reason: format!("date out of range ({days} days since 1970-01-01)"),
            }
        })
    };
    let earliest = to_date(*min)?;
    let from = earliest
        .with_day(1)
        .and_then(|d| d.checked_sub_months(Months::new(lookback_months)))
        .unwrap_or(NaiveDate::MIN);
    Ok(Some((from, to_date(*max)?)))
}

/// Registers `silver` as the history source, read with its current schema
/// (rows written before an evolution read the columns added since as null),
/// or an empty table of the contract's shape before the first commit; and
/// the `carried` month, if any, as [`CARRIED_TABLE`] beside it.
pub(crate) async fn register_history_source(
    ctx: &SessionContext,
    contract: &Contract,
    silver: &Table,
    carried: Option<&CommittedMonth>,
) -> Result<()> {
    let provider: Arc<dyn datafusion::catalog::TableProvider> =
        if silver.metadata().current_snapshot().is_some() {
            let provider =
                IcebergStaticTableProvider::try_new_from_table(read_with_current_schema(silver)?)
                    .await
                    .map_err(Error::catalog("scan", silver.identifier().to_string()))?;
            Arc::new(provider)
        } else {
            let empty = MemTable::try_new(contract.arrow_schema(), vec![vec![]])
                .map_err(Error::query(Stage::Baseline))?;
            Arc::new(empty)
        };
    if let Some(month) = carried {
        month.register(ctx, &provider.schema())?;
    }
    ctx.register_table("silver", provider)
        .map_err(Error::query(Stage::Baseline))?;
    Ok(())
}

impl HistoryRead<'_> {
    /// History rows carry only the key, the order column, the columns rules
    /// look back at and those `closed_when` reads, in the contract's order:
    /// nothing else is read.
    fn projected_columns(&self) -> Vec<&str> {
        let closed_when = self.completeness.map(|c| &c.columns);
        self.contract
            .columns
            .iter()
            .filter(|c| {
                self.prev.contains(&c.name)
                    || self.contract.entity_key.contains(&c.name)
                    || closed_when.is_some_and(|columns| columns.contains(&c.name))
            })
            .map(|c| c.name.as_str())
            .collect()
    }

    fn projection(&self) -> Vec<String> {
        self.projected_columns().into_iter().map(quote).collect()
    }

    /// The columns of an entity's state in the missing list: those read.
    fn state_schema(&self) -> arrow::datatypes::SchemaRef {
        missing::state_schema(self.contract, &self.projected_columns())
    }
}

#[cfg(test)]
mod tests {
    use arrow::array::Int64Array;

    use super::*;

    fn values(batch: &RecordBatch) -> Vec<i64> {
        batch
            .column(0)
            .as_any()
            .downcast_ref::<Int64Array>()
            .unwrap()
            .values()
            .to_vec()
    }

    #[test]
    fn history_keeps_exactly_the_wanted_rows_of_drop_entities() {
        let batch = RecordBatch::try_from_iter([(
            "k",
            Arc::new(Int64Array::from(vec![10, 11, 12, 13, 14])) as ArrayRef,
        )])
        .unwrap();
        // (entity found per row, the unwanted entity, rows kept, entities kept)
        type Case = (Vec<Option<u32>>, u32, Vec<i64>, Vec<u32>);
        let cases: [Case; 4] = [
            (
                (0..5).map(Some).collect(),
                99,
                vec![10, 11, 12, 13, 14],
                vec![0, 1, 2, 3, 4],
            ),
            (
                vec![Some(0), Some(1), None, None, None],
                99,
                vec![10, 11],
                vec![0, 1],
            ),
            (
                vec![None, Some(1), Some(2), None, Some(4)],
                2,
                vec![11, 14],
                vec![1, 4],
            ),
            (
                vec![Some(0), None, Some(2), Some(3), None],
                99,
                vec![10, 12, 13],
                vec![0, 2, 3],
            ),
        ];
        for (found, unwanted, rows, entities) in cases {
            let mut history = History::default();
            history.keep(&batch, found, |e| e != unwanted).unwrap();
            let kept = &history.entities;
            assert_eq!(kept, &entities);
            assert_eq!(history.entities, entities);
            assert_eq!(values(&history.batches[0]), rows);
        }
        let mut history = History::default();
        history.keep(&batch, vec![None; 5], |_| true).unwrap();
        let kept = &history.entities;
        assert!(kept.is_empty() && history.batches.is_empty());
    }

    #[test]
    fn keys_of_several_batches_looked_up_together_come_back_per_batch_in_order() {
        use crate::config::contract::{Column, ColumnType};
        let column = |name: &str, column_type| Column {
            name: name.to_string(),
            column_type,
            nullable: false,
            sensitive: false,
        };
        let contract = Contract {
            name: "t".to_string(),
            columns: vec![
                column("bank", ColumnType::String),
                column("account", ColumnType::String),
                column("day", ColumnType::Date),
            ],
            entity_key: vec!["bank".to_string(), "account".to_string()],
            order_column: "day".to_string(),
            contributor_column: "bank".to_string(),
            input: Default::default(),
        };
        let keys = |rows: &[(String, String)]| {
            let (banks, accounts): (Vec<&str>, Vec<&str>) =
                rows.iter().map(|(b, a)| (b.as_str(), a.as_str())).unzip();
            RecordBatch::try_from_iter([
                (
                    "bank",
                    Arc::new(arrow::array::StringArray::from(banks)) as ArrayRef,
                ),
                (
                    "account",
                    Arc::new(arrow::array::StringArray::from(accounts)) as ArrayRef,
                ),
            ])
            .unwrap()
        };
        let key = |bank: &str, account: usize| (bank.to_string(), account.to_string());
        // The drop: bank A's even accounts below 50,000 and bank B's 1.
        let mut drop_rows: Vec<(String, String)> =
            (0..50_000).step_by(2).map(|a| key("A", a)).collect();
        drop_rows.push(key("B", 1));
        let entities = Entities::of_drop(&contract, &keys(&drop_rows)).unwrap();
        let ids: std::collections::HashMap<&(String, String), u32> = drop_rows
            .iter()
            .zip(entities.of_rows().iter().copied())
            .collect();
        let id_of = |row: &(String, String)| ids.get(row).copied();
        // History batches of 30,000, 0 and 20,001 rows (together past the
        // rows a lookup splits over the cores), one batch alone, none.
        let groups: Vec<Vec<Vec<(String, String)>>> = vec![
            vec![
                (0..30_000).map(|a| key("A", a)).collect(),
                Vec::new(),
                (30_000..50_000)
                    .map(|a| key("A", a))
                    .chain([key("B", 1)])
                    .collect(),
            ],
            vec![vec![key("B", 1), key("B", 2), key("A", 4)]],
            Vec::new(),
        ];
        for group in groups {
            let batches: Vec<RecordBatch> = group.iter().map(|rows| keys(rows)).collect();
            let found = entities.find(&contract, &batches).unwrap();
            let expected: Vec<Vec<Option<u32>>> = group
                .iter()
                .map(|rows| rows.iter().map(&id_of).collect())
                .collect();
            assert_eq!(found, expected);
        }
    }
}
