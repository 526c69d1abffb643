//! One bucket of a drop judged in several ([`Buckets`]): its share of the
//! carried keys, and its share of the history, which the first bucket to
//! ask for a month reads from Silver once and spreads over every bucket's
//! spill file.

use std::collections::btree_map::Entry;
use std::collections::{BTreeMap, BTreeSet};

use arrow::array::{ArrayRef, BooleanArray, Date32Array};
use arrow::record_batch::RecordBatch;
use chrono::NaiveDate;
use datafusion::execution::SendableRecordBatchStream;
use futures::TryStreamExt;

use super::{in_groups, key_columns};
use crate::config::contract::Contract;
use crate::core::keys::Buckets;
use crate::core::parallel::concat_batches;
use crate::core::spill::{Spill, SpillDir};
use crate::error::{Error, Result};
use crate::stage::Stage;

/// A bucket of the drop, and where its history comes from.
pub(crate) struct Bucket<'a> {
    /// Every bucket of the drop.
    pub(crate) buckets: &'a Buckets,
    /// This one.
    pub(crate) index: usize,
    /// The history spread over the buckets; `None`: one bucket, which
    /// streams its history straight from Silver.
    pub(crate) history: Option<&'a SpilledHistory<'a>>,
}

impl Bucket<'_> {
    /// The keys (one column per key part) of this bucket among `columns`.
    pub(super) fn own_keys(&self, columns: Vec<ArrayRef>) -> Result<Vec<ArrayRef>> {
        if self.buckets.count() == 1 {
            return Ok(columns);
        }
        let mine: BooleanArray = self
            .buckets
            .of_rows(&columns, Stage::Baseline)?
            .into_iter()
            .map(|b| Some(b as usize == self.index))
            .collect();
        columns
            .iter()
            .map(|c| arrow::compute::filter(c, &mine).map_err(Error::arrow(Stage::Baseline)))
            .collect()
    }
}

/// The months of history read for a drop of several buckets: per range
/// read, one spill per bucket, and the periods Silver held rows of.
pub(crate) struct SpilledHistory<'a> {
    buckets: &'a Buckets,
    dir: &'a SpillDir,
    read: tokio::sync::Mutex<BTreeMap<(NaiveDate, NaiveDate), SpreadRange>>,
}

/// One range of history, spread over the buckets.
struct SpreadRange {
    spills: Vec<Spill>,
    /// The first days of the months its rows fall in.
    periods: BTreeSet<i32>,
}

impl<'a> SpilledHistory<'a> {
    /// Nothing read yet.
    pub(crate) fn new(buckets: &'a Buckets, dir: &'a SpillDir) -> SpilledHistory<'a> {
        SpilledHistory {
            buckets,
            dir,
            read: tokio::sync::Mutex::new(BTreeMap::new()),
        }
    }

    /// Bucket `bucket`'s rows of `range`, as one batch. The first bucket
    /// to ask runs `scan` (Silver's rows of the range) and spreads them.
    pub(super) async fn rows(
        &self,
        (range, bucket): ((NaiveDate, NaiveDate), usize),
        contract: &Contract,
        scan: impl Future<Output = Result<SendableRecordBatchStream>>,
    ) -> Result<Option<RecordBatch>> {
        let mut read = self.read.lock().await;
        if let Entry::Vacant(vacant) = read.entry(range) {
            vacant.insert(self.spread(range, contract, scan.await?).await?);
        }
        let spread = &read[&range];
        let batches = spread.spills[bucket].read()?;
        let rows = match batches.first() {
            None => None,
            Some(first) => Some(concat_batches(&first.schema(), &batches, Stage::Baseline)?),
        };
        Ok(rows)
    }

    /// The periods (first days) of every bucket's rows of `range`, once read.
    pub(super) async fn periods_of(&self, range: (NaiveDate, NaiveDate)) -> Option<BTreeSet<i32>> {
        self.read
            .lock()
            .await
            .get(&range)
            .map(|r| r.periods.clone())
    }

    async fn spread(
        &self,
        (start, end): (NaiveDate, NaiveDate),
        contract: &Contract,
        stream: SendableRecordBatchStream,
    ) -> Result<SpreadRange> {
        let schema = stream.schema();
        let folder = self.dir.folder(&format!("history-{start}-{end}"))?;
        let mut writers =
            self.dir
                .bucket_writers((folder.as_deref(), "bucket"), self.buckets, &schema)?;
        let mut periods = BTreeSet::new();
        // A group at a time: a group's buckets are shared over the cores.
        let batches = stream.map_err(|e| Error::query(Stage::Baseline)(e));
        in_groups(batches, |group| {
            for batch in &group {
                periods.extend(month_starts(contract, batch)?);
            }
            let rows = concat_batches(&schema, &group, Stage::Baseline)?;
            writers.add(&rows, &key_columns(contract, &rows)?, Stage::Baseline)
        })
        .await?;
        let spills = writers.finish()?;
        Ok(SpreadRange { spills, periods })
    }
}

/// The first days (days since the epoch) of the months of `batch`'s order column.
fn month_starts(contract: &Contract, batch: &RecordBatch) -> Result<BTreeSet<i32>> {
    let days = batch
        .column_by_name(&contract.order_column)
        .and_then(|c| c.as_any().downcast_ref::<Date32Array>())
        .ok_or_else(|| {
            Error::Internal("baseline: the history's order column is not a date".to_string())
        })?;
    let days: Vec<i32> = days.iter().flatten().collect();
    Ok(super::lag::distinct_months(&days))
}
