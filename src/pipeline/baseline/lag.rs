//! The LAG, in memory and in one pass over hashes: every drop row gets its
//! entity's previous state, whether that state was committed (history) or
//! came earlier in the same drop (a backfill's February gets its January).
//!
//! It computes exactly `LAG(c) OVER (PARTITION BY <entity> ORDER BY <order>,
//! <in drop>)` over the union of history and drop, plus how many drop rows
//! and committed rows share each record key; but SQL window functions over
//! millions of one-row partitions spend their time slicing arrays, while this
//! groups rows by an encoded entity key and sorts plain integers.

use std::collections::BTreeSet;

use super::{Entities, History, project};
use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, BooleanArray, Date32Array, Int64Array, UInt32Array, new_null_array,
};
use arrow::compute::{cast, interleave};
use arrow::datatypes::{DataType, Field};
use arrow::record_batch::RecordBatch;
use chrono::{Datelike, NaiveDate};

use crate::config::contract::Contract;
use crate::config::values::UNIX_EPOCH_FROM_CE;
use crate::core::parallel::in_parallel;
use crate::error::{Error, Result};
use crate::stage::Stage;
use crate::transient::{
    DROP_CONTRIBUTOR, HAS_BASELINE, KEY_COMMITTED, KEY_OCCURRENCES, PERIOD, ROW, prev_column,
    repeated_text, with_columns,
};

/// Where a drop row's previous state is.
#[derive(Debug, Clone, Copy)]
enum Previous {
    /// An earlier row of the drop.
    Drop(usize),
    /// A committed row.
    History(usize),
}

/// One row of the union, as the sort sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Member {
    entity: u32,
    order: i32,
    in_drop: bool,
    index: u32,
}

/// The drop's rows with `prev_<c>` for each column of `prev`, then
/// `_key_occurrences`, `_key_committed`, `_has_baseline`,
/// `_drop_contributor`, `_period` and `_row` (the row's position).
pub(super) fn lag(
    contract: &Contract,
    prev: &BTreeSet<String>,
    contributor: &str,
    rows: &RecordBatch,
    entities: &Entities,
    history: History,
) -> Result<RecordBatch> {
    let History {
        batches,
        entities: history_entities,
    } = history;
    let mut committed = HistoryColumns::new(batches, prev)?;
    let drop_order = dates(column(rows, &contract.order_column)?)?;
    let Links {
        previous,
        occurrences,
        committed: committed_rows,
    } = {
        let history_order = committed.dates(&contract.order_column)?;
        let members = sorted_members(
            entities.count(),
            (entities.of_rows(), &drop_order),
            (&history_entities, &history_order),
        )?;
        drop(history_entities);
        link(&members, rows.num_rows())
    };
    let sources = previous_sources(&previous, &committed);
    let has_baseline: BooleanArray = previous.iter().map(|p| Some(p.is_some())).collect();
    drop(previous);

    let mut extra: Vec<(Field, ArrayRef)> = Vec::with_capacity(prev.len() + 6);
    // A few columns at a time, one per core (at most four), each taken out
    // of the history as it is read and freed once gathered, so that the
    // history shrinks while the previous values grow.
    let lanes = crate::core::parallel::lanes().min(4);
    let names: Vec<&String> = prev.iter().collect();
    for names in names.chunks(lanes) {
        let columns = names
            .iter()
            .map(|name| {
                let current = column(rows, name)?;
                Ok((current, committed.take(name, current.data_type())?))
            })
            .collect::<Result<Vec<_>>>()?;
        let previous = in_parallel("baseline: a LAG thread", columns, |(current, committed)| {
            previous_values(current, &committed, &sources)
        })?;
        // Each of the drop's type: the history's values are cast to it.
        for (name, previous) in names.iter().zip(previous) {
            let field = Field::new(prev_column(name), previous.data_type().clone(), true);
            extra.push((field, previous));
        }
    }
    drop(sources);
    let positions = u32::try_from(rows.num_rows())
        .map_err(|_| Error::Internal("baseline: more than 4 billion rows".to_string()))?;
    let flags: [(&str, ArrayRef); 6] = [
        (KEY_OCCURRENCES, Arc::new(Int64Array::from(occurrences))),
        (KEY_COMMITTED, Arc::new(Int64Array::from(committed_rows))),
        (HAS_BASELINE, Arc::new(has_baseline)),
        (
            DROP_CONTRIBUTOR,
            Arc::new(repeated_text(contributor, rows.num_rows())),
        ),
        (PERIOD, Arc::new(month_starts(&drop_order))),
        (ROW, Arc::new(UInt32Array::from_iter_values(0..positions))),
    ];
    extra.extend(
        flags
            .into_iter()
            .map(|(name, array)| (Field::new(name, array.data_type().clone(), true), array)),
    );
    with_columns(rows, extra, Stage::Baseline)
}

/// The history batches the LAG reads its previous values from, never
/// concatenated: `interleave` picks the values straight out of them (a
/// concatenated copy of the history's columns cost as much memory as the
/// previous values themselves). History rows are numbered across the batches, in order.
struct HistoryColumns {
    /// The batches, holding only the columns not yet taken.
    batches: Vec<RecordBatch>,
    /// The number of the first row of each batch.
    starts: Vec<usize>,
}

impl HistoryColumns {
    /// The `prev` columns of `batches`; any other column read (with
    /// `whole_states`: the keys and closed flags) is freed.
    fn new(batches: Vec<RecordBatch>, prev: &BTreeSet<String>) -> Result<HistoryColumns> {
        let starts = batches
            .iter()
            .scan(0, |next, batch| {
                let start = *next;
                *next += batch.num_rows();
                Some(start)
            })
            .collect();
        let batches = batches
            .iter()
            .map(|batch| project(batch, prev))
            .collect::<Result<_>>()?;
        Ok(HistoryColumns { batches, starts })
    }

    /// The batch history row `row` is in, and its row in that batch.
    fn locate(&self, row: usize) -> (usize, usize) {
        let batch = self.starts.partition_point(|start| *start <= row) - 1;
        (batch, row - self.starts[batch])
    }

    /// One column of every batch, as `data_type` (the drop's type of it),
    /// taken out of the batches.
    fn take(&mut self, name: &str, data_type: &DataType) -> Result<Vec<ArrayRef>> {
        self.batches
            .iter_mut()
            .map(|batch| {
                let index = batch.schema().index_of(name).map_err(|_| {
                    Error::Internal(format!("baseline: history column {name} taken twice"))
                })?;
                cast(&batch.remove_column(index), data_type).map_err(Error::arrow(Stage::Baseline))
            })
            .collect()
    }

    /// The order column's dates over every batch.
    fn dates(&self, order_column: &str) -> Result<Vec<i32>> {
        let rows = self.batches.iter().map(RecordBatch::num_rows).sum();
        let mut all = Vec::with_capacity(rows);
        for batch in &self.batches {
            all.extend(dates(column(batch, order_column)?)?);
        }
        Ok(all)
    }
}

fn column<'b>(batch: &'b RecordBatch, name: &str) -> Result<&'b ArrayRef> {
    batch
        .column_by_name(name)
        .ok_or_else(|| Error::Internal(format!("baseline: column {name} is missing")))
}

/// Days since the epoch; a null date sorts last (as NULLS LAST would).
fn dates(array: &ArrayRef) -> Result<Vec<i32>> {
    if array.is_empty() {
        return Ok(Vec::new());
    }
    let dates = array
        .as_any()
        .downcast_ref::<Date32Array>()
        .ok_or_else(|| Error::Internal("baseline: the order column is not a date".to_string()))?;
    Ok(dates.iter().map(|d| d.unwrap_or(i32::MAX)).collect())
}

/// Every history and drop row, sorted by (entity, order, history before
/// drop): a counting sort on the entity, then each entity's few rows sorted.
fn sorted_members(
    entity_count: usize,
    (drop_entities, drop_order): (&[u32], &[i32]),
    (history_entities, history_order): (&[u32], &[i32]),
) -> Result<Vec<Member>> {
    let too_many = || Error::Internal("baseline: more than 4 billion rows".to_string());
    let sides = [
        (history_entities, history_order, false),
        (drop_entities, drop_order, true),
    ];
    let mut starts = vec![0usize; entity_count + 1];
    for (entities, _, _) in sides {
        for entity in entities {
            starts[*entity as usize + 1] += 1;
        }
    }
    for i in 1..starts.len() {
        starts[i] += starts[i - 1];
    }
    let total = starts[entity_count];
    let mut next = starts.clone();
    let unset = Member {
        entity: 0,
        order: 0,
        in_drop: false,
        index: 0,
    };
    let mut members = vec![unset; total];
    for (entities, order, in_drop) in sides {
        for (index, (entity, date)) in entities.iter().zip(order).enumerate() {
            let slot = &mut next[*entity as usize];
            members[*slot] = Member {
                entity: *entity,
                order: *date,
                in_drop,
                index: u32::try_from(index).map_err(|_| too_many())?,
            };
            *slot += 1;
        }
    }
    for bounds in starts.windows(2) {
        if bounds[1] - bounds[0] > 1 {
            members[bounds[0]..bounds[1]].sort_unstable();
        }
    }
    Ok(members)
}

/// What the sorted union says about each drop row.
struct Links {
    previous: Vec<Option<Previous>>,
    occurrences: Vec<i64>,
    committed: Vec<i64>,
}

/// Walks the sorted union once: each drop row's previous member of its
/// entity, and the drop and history rows sharing its record key.
fn link(members: &[Member], drop_rows: usize) -> Links {
    let mut links = Links {
        previous: vec![None; drop_rows],
        occurrences: vec![0; drop_rows],
        committed: vec![0; drop_rows],
    };
    let mut start = 0;
    while start < members.len() {
        let key = (members[start].entity, members[start].order);
        let end = start
            + members[start..]
                .iter()
                .take_while(|m| (m.entity, m.order) == key)
                .count();
        let same_key = &members[start..end];
        let in_drop = same_key.iter().filter(|m| m.in_drop).count() as i64;
        let committed = same_key.len() as i64 - in_drop;
        for position in start..end {
            let member = members[position];
            if !member.in_drop {
                continue;
            }
            let row = member.index as usize;
            links.occurrences[row] = in_drop;
            links.committed[row] = committed;
            links.previous[row] = position
                .checked_sub(1)
                .map(|p| members[p])
                .filter(|p| p.entity == member.entity)
                .map(|p| {
                    if p.in_drop {
                        Previous::Drop(p.index as usize)
                    } else {
                        Previous::History(p.index as usize)
                    }
                });
        }
        start = end;
    }
    links
}

/// Where each drop row's previous value is, as `interleave` indices over
/// (the drop's column, each history batch's column, a null).
fn previous_sources(
    previous: &[Option<Previous>],
    history: &HistoryColumns,
) -> Vec<(usize, usize)> {
    let null = 1 + history.batches.len();
    previous
        .iter()
        .map(|p| match p {
            Some(Previous::Drop(i)) => (0, *i),
            Some(Previous::History(i)) => {
                let (batch, row) = history.locate(*i);
                (1 + batch, row)
            }
            None => (null, 0),
        })
        .collect()
}

/// The previous value of one column for every drop row.
fn previous_values(
    current: &ArrayRef,
    committed: &[ArrayRef],
    sources: &[(usize, usize)],
) -> Result<ArrayRef> {
    let none = new_null_array(current.data_type(), 1);
    let arrays: Vec<&dyn Array> = std::iter::once(current.as_ref())
        .chain(committed.iter().map(AsRef::as_ref))
        .chain(std::iter::once(none.as_ref()))
        .collect();
    interleave(&arrays, sources).map_err(Error::arrow(Stage::Baseline))
}

/// The first day of each date's month (null for a null date).
/// The distinct first days of the months of `days`, sorted.
pub(super) fn distinct_months(days: &[i32]) -> BTreeSet<i32> {
    month_starts(days).iter().flatten().collect()
}

pub(super) fn month_starts(days: &[i32]) -> Date32Array {
    let month_start = |d: i32| {
        NaiveDate::from_num_days_from_ce_opt(d.checked_add(UNIX_EPOCH_FROM_CE)?)
            .and_then(|date| date.with_day(1))
            .map(|first| first.num_days_from_ce() - UNIX_EPOCH_FROM_CE)
    };
    // A drop holds few distinct dates, usually in runs: remember the last.
    let mut last: Option<(i32, Option<i32>)> = None;
    days.iter()
        .map(|d| match last {
            Some((day, start)) if day == *d => start,
            _ => {
                let start = month_start(*d);
                last = Some((*d, start));
                start
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(values: Vec<i32>) -> RecordBatch {
        let array: ArrayRef = Arc::new(arrow::array::Int32Array::from(values));
        RecordBatch::try_from_iter([("v", array)]).unwrap()
    }

    #[test]
    fn previous_values_come_from_the_right_history_batch() {
        // History rows 0-1, 2-4 and 5, in three batches, read as Int32 and
        // cast to the drop's Int64.
        let batches = [batch(vec![1, 2]), batch(vec![3, 4, 5]), batch(vec![6])];
        let prev = BTreeSet::from(["v".to_string()]);
        let mut history = HistoryColumns::new(batches.to_vec(), &prev).unwrap();
        assert_eq!(
            [0, 1, 2, 4, 5].map(|row| history.locate(row)),
            [(0, 0), (0, 1), (1, 0), (1, 2), (2, 0)]
        );
        let previous = [
            Some(Previous::History(0)),
            Some(Previous::History(4)),
            Some(Previous::History(5)),
            Some(Previous::Drop(0)),
            None,
            Some(Previous::History(2)),
        ];
        let current: ArrayRef = Arc::new(Int64Array::from(vec![100, 200, 300, 400, 500, 600]));
        let sources = previous_sources(&previous, &history);
        let committed = history.take("v", &DataType::Int64).unwrap();
        let values = previous_values(&current, &committed, &sources).unwrap();
        let values = values.as_any().downcast_ref::<Int64Array>().unwrap();
        let got: Vec<Option<i64>> = values.iter().collect();
        assert_eq!(got, [Some(1), Some(5), Some(6), Some(100), None, Some(3)]);
    }
}
