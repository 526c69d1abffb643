//! Missing entities: the anti-join of the history read against the drop's
//! key index (`[completeness]`).
//!
//! An entity is expected in a period of the drop when its latest state
//! before that period is open (`closed_when` is not true of it); it is
//! missing when neither the drop nor Silver holds a row of it in that period.
//! States come from the rows the history read streams anyway: the committed
//! rows of the drop's periods and of the month before the first one (for the
//! entities the drop leaves out: only their states are kept, so memory follows
//! the absent entities, not the history), and, in a drop of several periods,
//! the drop's own rows and its entities' history (a backfill's February
//! expects the accounts open in its January). An entity still recorded
//! missing (an open `missing` exception) is searched in older months too, back
//! to the lookback, so that one left out two months running is missing twice.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, BooleanArray, Date32Array, StringArray, UInt32Array};
use arrow::compute::{cast, concat_batches, take_record_batch};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::record_batch::RecordBatch;
use chrono::{Datelike, Months, NaiveDate};
use datafusion::prelude::SessionContext;

use super::{Bucket, Entities, History, key_columns};
use crate::config::contract::Contract;
use crate::config::rules::Completeness;
use crate::config::values::UNIX_EPOCH_FROM_CE;
use crate::core::keys::KeyIndex;
use crate::error::{Error, Result};
use crate::stage::Stage;
use crate::transient::{CLOSED, MISSING_PERIOD};

/// The entities a drop leaves out, with their last state.
#[derive(Debug, Clone)]
pub struct Missing {
    /// One row per missing entity and period: the state columns of its last
    /// state before the period, then `_missing_period`.
    pub rows: RecordBatch,
    /// How many entities each period of the drop leaves out (every period listed).
    pub by_period: BTreeMap<NaiveDate, u64>,
}

impl Missing {
    /// The missing entities of every bucket, as one list.
    pub(crate) fn merge(parts: Vec<Missing>) -> Result<Option<Missing>> {
        let mut parts = parts.into_iter();
        let Some(mut all) = parts.next() else {
            return Ok(None);
        };
        let mut rows = vec![all.rows.clone()];
        for part in parts {
            for (period, count) in part.by_period {
                *all.by_period.entry(period).or_default() += count;
            }
            rows.push(part.rows);
        }
        let rows =
            concat_batches(&all.rows.schema(), &rows).map_err(Error::arrow(Stage::Baseline))?;
        all.rows = by_period(&rows)?;
        Ok(Some(all))
    }

    /// How many entities `period` (days since the epoch) leaves out.
    pub fn count_in(&self, period: i32) -> u64 {
        to_date(period)
            .and_then(|p| self.by_period.get(&p).copied())
            .unwrap_or(0)
    }
}

/// States of entities, each row with its entity, day and closed flag.
pub(super) struct States {
    schema: SchemaRef,
    batches: Vec<RecordBatch>,
    entities: Vec<u32>,
    days: Vec<i32>,
    closed: Vec<bool>,
}

impl States {
    /// No states yet, of the given columns (contract types).
    pub(super) fn new(schema: SchemaRef) -> States {
        States {
            schema,
            batches: Vec::new(),
            entities: Vec::new(),
            days: Vec::new(),
            closed: Vec::new(),
        }
    }

    /// Adds the rows `rows` of `batch` (which has the state columns, the
    /// order column and `_closed`), of the given entities.
    fn add(
        &mut self,
        contract: &Contract,
        batch: &RecordBatch,
        rows: Vec<u32>,
        entities: impl IntoIterator<Item = u32>,
    ) -> Result<()> {
        if rows.is_empty() {
            return Ok(());
        }
        let taken = take_record_batch(batch, &UInt32Array::from(rows))
            .map_err(Error::arrow(Stage::Baseline))?;
        let order = taken
            .column_by_name(&contract.order_column)
            .and_then(|c| c.as_any().downcast_ref::<Date32Array>().cloned())
            .ok_or_else(|| internal("the order column is not a date"))?;
        let closed = taken
            .column_by_name(CLOSED)
            .and_then(|c| c.as_any().downcast_ref::<BooleanArray>().cloned())
            .ok_or_else(|| internal("the closed flag is missing"))?;
        self.entities.extend(entities);
        self.days
            .extend(order.iter().map(|d| d.unwrap_or(i32::MIN)));
        self.closed.extend(closed.iter().map(|c| c == Some(true)));
        self.batches.push(self.projected(&taken)?);
        Ok(())
    }

    /// `batch`'s state columns, cast to the contract's types.
    fn projected(&self, batch: &RecordBatch) -> Result<RecordBatch> {
        let columns = self
            .schema
            .fields()
            .iter()
            .map(|field| {
                let column = batch
                    .column_by_name(field.name())
                    .ok_or_else(|| internal("a state column is missing"))?;
                cast(column, field.data_type()).map_err(Error::arrow(Stage::Baseline))
            })
            .collect::<Result<Vec<ArrayRef>>>()?;
        RecordBatch::try_new(self.schema.clone(), columns).map_err(Error::arrow(Stage::Baseline))
    }
}

/// What finding missing entities needs from outside the history.
pub struct Expected<'a> {
    /// What counts as closed.
    pub completeness: &'a Completeness,
    /// The entity keys (parts joined by `|`) still recorded missing, by
    /// period (`YYYY-MM-01`): those of the month before the drop are expected.
    pub still_missing: &'a BTreeMap<String, BTreeSet<String>>,
}

/// The states of the entities a drop leaves out, gathered while the history
/// streams by, newest month first.
pub(super) struct Absent {
    index: KeyIndex,
    states: States,
    /// Entities still recorded missing from the month before the drop,
    /// whose latest state may be older (an account left out two months running).
    carried: Carried,
    /// Whether the month streaming now keeps every row of an entity the drop
    /// leaves out (the drop's periods and the month before), or only the
    /// rows of carried entities not found in a newer month.
    whole_month: bool,
}

/// Entities recorded missing from the month before the drop and not
/// declared since: still expected, from their latest committed state within
/// the lookback, which may be older than that month.
pub(super) struct Carried {
    index: KeyIndex,
    /// Per carried entity: its latest state has been found in a newer month
    /// (or the drop declares it), so older months need not be searched for it.
    found: Vec<bool>,
    /// Found in the month streaming now (all its rows of that month are kept).
    found_now: Vec<u32>,
    left: usize,
}

impl Carried {
    /// The carried entities of `keys` (entity key parts joined by `|`) in
    /// `bucket`, none found yet except those the drop (`drop_keys`) declares.
    pub(super) fn new(
        contract: &Contract,
        keys: &BTreeSet<String>,
        drop_keys: &[ArrayRef],
        bucket: &Bucket<'_>,
    ) -> Result<Carried> {
        let mut index = KeyIndex::new(Stage::Baseline);
        index.insert(&bucket.own_keys(key_parts(contract, keys))?)?;
        let mut carried = Carried {
            found: vec![false; index.len()],
            found_now: Vec::new(),
            left: index.len(),
            index,
        };
        carried.found_now = carried
            .index
            .find(drop_keys)?
            .into_iter()
            .flatten()
            .collect();
        carried.end_month();
        Ok(carried)
    }

    /// The carried entity of each row of `batch`, if any.
    fn of_rows(&self, contract: &Contract, batch: &RecordBatch) -> Result<Vec<Option<u32>>> {
        if self.left == 0 {
            return Ok(vec![None; batch.num_rows()]);
        }
        self.index.find(&key_columns(contract, batch)?)
    }

    /// Records the entities found in the month that streamed.
    fn end_month(&mut self) {
        for entity in std::mem::take(&mut self.found_now) {
            if !std::mem::replace(&mut self.found[entity as usize], true) {
                self.left -= 1;
            }
        }
    }
}

/// One text column per entity key column, from keys joined by `|` (a key
/// that does not split into as many parts is left out, with a warning).
fn key_parts(contract: &Contract, keys: &BTreeSet<String>) -> Vec<ArrayRef> {
    let width = contract.entity_key.len();
    let split: Vec<Vec<&str>> = keys
        .iter()
        .filter_map(|key| {
            let parts: Vec<&str> = key.splitn(width, '|').collect();
            if parts.len() != width {
                tracing::warn!(columns = width, "a missing entity's recorded key does not split into its key columns: it is not carried");
            }
            (parts.len() == width).then_some(parts)
        })
        .collect();
    (0..width)
        .map(|i| Arc::new(StringArray::from_iter_values(split.iter().map(|p| p[i]))) as ArrayRef)
        .collect()
}

impl Absent {
    /// Nothing gathered yet; `schema` holds the state columns.
    pub(super) fn new(schema: SchemaRef, carried: Carried) -> Absent {
        Absent {
            index: KeyIndex::new(Stage::Baseline),
            states: States::new(schema),
            carried,
            whole_month: true,
        }
    }

    /// Whether some carried entity's latest state is still to be found.
    pub(super) fn searching(&self) -> bool {
        self.carried.left > 0
    }

    /// A month starts streaming: `whole` when every row of an entity the
    /// drop leaves out is kept (else only carried entities' rows).
    pub(super) fn begin_month(&mut self, whole: bool) {
        self.whole_month = whole;
    }

    /// The month has streamed: the carried entities it held are found.
    pub(super) fn end_month(&mut self) {
        self.carried.end_month();
    }

    /// Keeps the rows of `batch` whose entity is not in the drop (`found` is
    /// `None`): all of them in a whole month, else those of carried entities
    /// not found in a newer month.
    pub(super) fn keep(
        &mut self,
        contract: &Contract,
        batch: &RecordBatch,
        found: &[Option<u32>],
    ) -> Result<()> {
        let carried = self.carried.of_rows(contract, batch)?;
        let rows: Vec<u32> = (0..found.len() as u32)
            .filter(|row| found[*row as usize].is_none())
            .filter(|row| {
                self.whole_month
                    || carried[*row as usize].is_some_and(|e| !self.carried.found[e as usize])
            })
            .collect();
        self.carried
            .found_now
            .extend(rows.iter().filter_map(|r| carried[*r as usize]));
        if rows.is_empty() {
            return Ok(());
        }
        let taken = take_record_batch(batch, &UInt32Array::from(rows.clone()))
            .map_err(Error::arrow(Stage::Baseline))?;
        let entities = self.index.insert(&key_columns(contract, &taken)?)?;
        let all: Vec<u32> = (0..rows.len() as u32).collect();
        self.states.add(contract, &taken, all, entities)
    }
}

/// What finding the missing entities needs besides the history.
pub(super) struct Expectation<'a> {
    pub(super) contract: &'a Contract,
    pub(super) completeness: &'a Completeness,
    pub(super) entities: &'a Entities,
    /// The drop's periods (first days, as days since the epoch), sorted.
    pub(super) periods: Vec<i32>,
    /// The periods (first days) Silver holds rows of, when the history
    /// read is one bucket's: then not all of them show in its rows.
    pub(super) held: Option<&'a BTreeSet<i32>>,
}

impl Expectation<'_> {
    /// The entities missing from each of the drop's periods, with the
    /// state that expected them.
    pub(super) async fn find(
        &self,
        ctx: &SessionContext,
        drop_rows: &RecordBatch,
        history: &History,
        absent: Absent,
    ) -> Result<Missing> {
        let judged = self.periods_to_judge(history, &absent.states)?;
        let drop_entities = self.entities.count() as u32;
        let mut states = absent.states;
        // Absent entities are numbered after the drop's.
        for entity in &mut states.entities {
            *entity += drop_entities;
        }
        if self.periods.len() > 1 {
            self.add_drop_entities(ctx, drop_rows, history, &mut states)
                .await?;
        }
        let found = missing_states(&states, &judged);
        self.missing(&states, found)
    }

    /// The drop's periods Silver holds no row of yet. A later drop for a
    /// period Silver holds (late rows, a correction, a replay) expects
    /// nothing: the drop that first brought the period was judged for it,
    /// and an account quarantined then was declared, not left out.
    fn periods_to_judge(&self, history: &History, absent: &States) -> Result<Vec<i32>> {
        if let Some(held) = self.held {
            return Ok(self
                .periods
                .iter()
                .copied()
                .filter(|p| !held.contains(p))
                .collect());
        }
        let mut committed_days: Vec<i32> = absent.days.clone();
        for batch in &history.batches {
            let order = batch
                .column_by_name(&self.contract.order_column)
                .and_then(|c| c.as_any().downcast_ref::<Date32Array>())
                .ok_or_else(|| internal("the history's order column is not a date"))?;
            committed_days.extend(order.iter().flatten());
        }
        Ok(self
            .periods
            .iter()
            .copied()
            .filter(|p| {
                let next = next_period(*p);
                !committed_days.iter().any(|d| *d >= *p && *d < next)
            })
            .collect())
    }

    /// A backfill's own rows and its entities' committed rows are states too.
    async fn add_drop_entities(
        &self,
        ctx: &SessionContext,
        drop_rows: &RecordBatch,
        history: &History,
        states: &mut States,
    ) -> Result<()> {
        let closed = closed_flags(ctx, self.completeness, drop_rows).await?;
        let flagged = crate::transient::with_columns(
            drop_rows,
            vec![(Field::new(CLOSED, DataType::Boolean, true), closed)],
            Stage::Baseline,
        )?;
        let all = (0..flagged.num_rows() as u32).collect();
        states.add(
            self.contract,
            &flagged,
            all,
            self.entities.of_rows().iter().copied(),
        )?;
        let mut at = 0;
        for batch in &history.batches {
            let rows = batch.num_rows();
            let entities = history.entities[at..at + rows].iter().copied();
            states.add(self.contract, batch, (0..rows as u32).collect(), entities)?;
            at += rows;
        }
        Ok(())
    }

    /// The rows of the missing entities' states, each with its period.
    fn missing(&self, states: &States, found: Vec<(usize, i32)>) -> Result<Missing> {
        let mut by_period: BTreeMap<NaiveDate, u64> = BTreeMap::new();
        for period in &self.periods {
            by_period.insert(date_of(*period)?, 0);
        }
        for (_, period) in &found {
            *by_period.entry(date_of(*period)?).or_default() += 1;
        }
        let all = concat_batches(&states.schema, &states.batches)
            .map_err(Error::arrow(Stage::Baseline))?;
        let rows: Vec<u32> = found.iter().map(|(row, _)| *row as u32).collect();
        let taken = take_record_batch(&all, &UInt32Array::from(rows))
            .map_err(Error::arrow(Stage::Baseline))?;
        let periods: ArrayRef =
            Arc::new(Date32Array::from_iter_values(found.iter().map(|(_, p)| *p)));
        let rows = crate::transient::with_columns(
            &taken,
            vec![(Field::new(MISSING_PERIOD, DataType::Date32, false), periods)],
            Stage::Baseline,
        )?;
        Ok(Missing { rows, by_period })
    }
}

/// Each row's `closed_when`, evaluated over `rows` (null counts as open).
async fn closed_flags(
    ctx: &SessionContext,
    completeness: &Completeness,
    rows: &RecordBatch,
) -> Result<ArrayRef> {
    let frame = ctx
        .read_batch(rows.clone())
        .map_err(Error::query(Stage::Baseline))?;
    let sql = format!("coalesce(({}), false)", completeness.closed_when);
    let expr = frame
        .parse_sql_expr(&sql)
        .map_err(Error::query(Stage::Baseline))?;
    let batches = frame
        .select(vec![expr])
        .map_err(Error::query(Stage::Baseline))?
        .collect()
        .await
        .map_err(Error::query(Stage::Baseline))?;
    let parts: Vec<&dyn Array> = batches.iter().map(|b| b.column(0).as_ref()).collect();
    if parts.is_empty() {
        return Ok(Arc::new(BooleanArray::from(Vec::<bool>::new())));
    }
    arrow::compute::concat(&parts).map_err(Error::arrow(Stage::Baseline))
}

/// The SQL column the history read adds: whether the state is closed.
pub(super) fn closed_column_sql(completeness: &Completeness) -> String {
    format!(
        ", coalesce(({}), false) AS {}",
        completeness.closed_when,
        crate::core::sql::quote(CLOSED)
    )
}

/// For every entity and period: the row of its latest state before the
/// period when that state is open and no state falls in the period.
fn missing_states(states: &States, periods: &[i32]) -> Vec<(usize, i32)> {
    let mut order: Vec<usize> = (0..states.entities.len()).collect();
    order.sort_unstable_by_key(|i| (states.entities[*i], states.days[*i]));
    let mut found = Vec::new();
    for group in order.chunk_by(|a, b| states.entities[*a] == states.entities[*b]) {
        for period in periods {
            let next = next_period(*period);
            let before = group.iter().rev().find(|i| states.days[**i] < *period);
            let declared = group
                .iter()
                .any(|i| states.days[*i] >= *period && states.days[*i] < next);
            if let Some(last) = before
                && !declared
                && !states.closed[*last]
            {
                found.push((*last, *period));
            }
        }
    }
    found.sort_by_key(|(row, period)| (*period, *row));
    found
}

/// The first day of the month after `period` (days since the epoch).
fn next_period(period: i32) -> i32 {
    to_date(period)
        .and_then(|d| d.checked_add_months(Months::new(1)))
        .map_or(i32::MAX, days_of)
}

fn to_date(days: i32) -> Option<NaiveDate> {
    NaiveDate::from_num_days_from_ce_opt(days.checked_add(UNIX_EPOCH_FROM_CE)?)
}

fn date_of(days: i32) -> Result<NaiveDate> {
    to_date(days).ok_or_else(|| internal("a period is out of range"))
}

/// Days since the epoch of `date`.
pub(super) fn days_of(date: NaiveDate) -> i32 {
    date.num_days_from_ce() - UNIX_EPOCH_FROM_CE
}

/// `rows` (missing entities) by period, in their order within one, as a
/// drop judged whole lists them.
fn by_period(rows: &RecordBatch) -> Result<RecordBatch> {
    let periods = rows
        .column_by_name(MISSING_PERIOD)
        .and_then(|c| c.as_any().downcast_ref::<Date32Array>())
        .ok_or_else(|| internal("the missing period is not a date"))?;
    let mut order: Vec<u32> = (0..rows.num_rows() as u32).collect();
    order.sort_by_key(|row| (periods.value(*row as usize), *row));
    take_record_batch(rows, &UInt32Array::from(order)).map_err(Error::arrow(Stage::Baseline))
}

/// The schema of the state columns.
pub(super) fn state_schema(contract: &Contract, columns: &[&str]) -> SchemaRef {
    let fields: Vec<Field> = contract
        .columns
        .iter()
        .filter(|c| columns.contains(&c.name.as_str()))
        .map(|c| Field::new(&c.name, c.column_type.arrow_type(), true))
        .collect();
    Arc::new(Schema::new(fields))
}

fn internal(what: &str) -> Error {
    Error::Internal(format!("baseline: missing entities: {what}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn states(rows: &[(u32, i32, bool)]) -> States {
        let mut states = States::new(Arc::new(Schema::empty()));
        for (entity, day, closed) in rows {
            states.entities.push(*entity);
            states.days.push(*day);
            states.closed.push(*closed);
        }
        states
    }

    #[test]
    fn an_open_entity_without_a_state_in_a_period_is_missing_there() {
        let jan = days_of(NaiveDate::from_ymd_opt(2026, 1, 1).unwrap());
        let feb = days_of(NaiveDate::from_ymd_opt(2026, 2, 1).unwrap());
        let mar = days_of(NaiveDate::from_ymd_opt(2026, 3, 1).unwrap());
        let dec = jan - 10;
        let states = states(&[
            (0, dec, false),      // row 0: open in December, absent after
            (1, dec, true),       // row 1: closed in December
            (2, jan + 30, false), // row 2: in January (end), absent in February
            (2, mar + 5, false),  // row 3: back in March
            (3, dec, false),      // row 4: declared every month
            (3, jan, false),
            (3, feb, false),
            (3, mar, false),
        ]);
        let found = missing_states(&states, &[jan, feb, mar]);
        assert_eq!(found, vec![(0, jan), (0, feb), (2, feb), (0, mar)]);
    }
}
