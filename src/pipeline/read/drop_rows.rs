//! The drop's typed rows as the read hands them over, chunk by chunk: split
//! into the buckets of entities the run judges one after the other (kept in
//! the scratch folder when there are several), with what the run needs to
//! know of the whole drop gathered on the way: its count, nulls per column,
//! and order dates; and the records that could not be parsed, kept beside
//! the rows (a drop whose every line is broken is as large as its rows).

use std::collections::{BTreeMap, BTreeSet};

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, Date32Array, Int64Array, StringArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::record_batch::RecordBatch;

use super::ParseReject;
use crate::config::contract::Contract;
use crate::core::keys::Buckets;
use crate::core::merge::Batches;
use crate::core::parallel::concat_batches;
use crate::core::spill::{BucketWriters, Spill, SpillDir, SpillWriter};
use crate::error::{Error, Result};
use crate::pipeline::summary::ColumnNulls;
use crate::stage::Stage;

/// The drop's rows, by bucket.
#[derive(Debug)]
pub struct DropRows {
    buckets: Buckets,
    held: Held,
    /// Owns the spill files, deleted with it.
    _dir: SpillDir,
    schema: SchemaRef,
    nulls: ColumnNulls,
    days: BTreeSet<i32>,
    /// Positions of the entity key and order columns.
    declared: Vec<usize>,
    /// The records that could not be parsed, as [`reject_batch`]es (in the
    /// spill folder with the rows).
    rejects: Spill,
    rejected: u64,
}

/// Where the rows are.
#[derive(Debug)]
enum Held {
    /// One bucket: every row, in memory.
    Whole(RecordBatch),
    /// Several: one spill per bucket.
    Spilled(Vec<Spill>),
}

/// The drop's rows being read: each chunk split into the buckets.
pub struct DropRowsWriter {
    buckets: Buckets,
    dir: SpillDir,
    writers: BucketWriters,
    schema: SchemaRef,
    /// Positions of the key columns, the order column and the declared ones.
    keys: Vec<usize>,
    order: usize,
    declared: Vec<usize>,
    rows: u64,
    nulls: Vec<u64>,
    days: BTreeSet<i32>,
    rejects: SpillWriter,
    rejected: u64,
}

impl DropRows {
    /// A writer of rows of `contract` (the read's schema) into `buckets`,
    /// spilled in `dir`.
    pub(crate) fn writer(
        contract: &Contract,
        buckets: Buckets,
        dir: SpillDir,
    ) -> Result<DropRowsWriter> {
        let schema = super::batch_schema(contract);
        let at = |name: &String| {
            schema
                .index_of(name)
                .map_err(|_| Error::Internal(format!("read: column {name} is missing")))
        };
        let keys = contract
            .entity_key
            .iter()
            .map(at)
            .collect::<Result<Vec<_>>>()?;
        let order = at(&contract.order_column)?;
        let mut declared = keys.clone();
        declared.push(order);
        let writers = dir.bucket_writers((None, "drop"), &buckets, &schema)?;
        let rejects = dir.writer((None, "rejects"), &reject_schema())?;
        Ok(DropRowsWriter {
            rejects,
            rejected: 0,
            buckets,
            dir,
            writers,
            nulls: vec![0; schema.fields().len()],
            schema,
            keys,
            order,
            declared,
            rows: 0,
            days: BTreeSet::new(),
        })
    }

    /// How many rows.
    pub fn num_rows(&self) -> usize {
        self.nulls.rows as usize
    }

    /// The buckets the rows are split into.
    pub(crate) fn buckets(&self) -> &Buckets {
        &self.buckets
    }

    /// Bucket `bucket`'s rows, as one batch.
    pub(crate) fn bucket(&self, bucket: usize) -> Result<RecordBatch> {
        match &self.held {
            Held::Whole(rows) => Ok(rows.clone()),
            Held::Spilled(spills) => {
                let parts = spills[bucket].read()?;
                concat_batches(&self.schema, &parts, Stage::Read)
            }
        }
    }

    /// Every row, as one batch (the buckets one after the other).
    pub fn whole(&self) -> Result<RecordBatch> {
        match &self.held {
            Held::Whole(rows) => Ok(rows.clone()),
            Held::Spilled(_) => {
                let parts = (0..self.buckets.count())
                    .map(|b| self.bucket(b))
                    .collect::<Result<Vec<_>>>()?;
                concat_batches(&self.schema, &parts, Stage::Read)
            }
        }
    }

    /// The distinct order dates (days since the epoch) of the rows.
    pub(crate) fn days(&self) -> &BTreeSet<i32> {
        &self.days
    }

    /// Bucket `bucket`'s entity key and order columns.
    pub(crate) fn declared(&self, bucket: usize) -> Result<RecordBatch> {
        self.bucket(bucket)?
            .project(&self.declared)
            .map_err(Error::arrow(Stage::Read))
    }

    /// Nulls per contract column (the engine's `_`-prefixed columns left out).
    pub fn column_nulls(&self) -> &ColumnNulls {
        &self.nulls
    }

    /// How many records could not be parsed.
    pub fn rejected(&self) -> u64 {
        self.rejected
    }

    /// The records that could not be parsed, a [`reject_batch`] at a time,
    /// in the drop's order.
    pub(crate) fn rejects(&self) -> Result<Batches<'_>> {
        self.rejects.batches()
    }
}

impl DropRowsWriter {
    /// Adds a chunk of rows.
    pub fn add(&mut self, rows: &RecordBatch) -> Result<()> {
        self.rows += rows.num_rows() as u64;
        for (count, column) in self.nulls.iter_mut().zip(rows.columns()) {
            *count += column.null_count() as u64;
        }
        let days = rows
            .column(self.order)
            .as_any()
            .downcast_ref::<Date32Array>()
            .ok_or_else(|| Error::Internal("read: the order column is not a date".to_string()))?;
        // Dates come in runs: a set insert per change, not per row.
        let mut last = None;
        for day in days.iter().flatten() {
            if last != Some(day) {
                self.days.insert(day);
                last = Some(day);
            }
        }
        let keys: Vec<ArrayRef> = self.keys.iter().map(|k| rows.column(*k).clone()).collect();
        self.writers.add(rows, &keys, Stage::Read)
    }

    /// Adds records that could not be parsed: one chunk's, whose lines
    /// follow the chunks' before (kept sorted by file and line, the
    /// rejects are in the drop's order).
    pub fn reject(&mut self, mut rejects: Vec<ParseReject>) -> Result<()> {
        if rejects.is_empty() {
            return Ok(());
        }
        rejects.sort_by(|a, b| (&a.file, a.line).cmp(&(&b.file, b.line)));
        self.rejected += rejects.len() as u64;
        self.rejects.write(&reject_batch(&rejects)?)
    }

    /// The rows read, by bucket.
    pub fn finish(self) -> Result<DropRows> {
        let spills = self.writers.finish()?;
        let held = match self.buckets.count() {
            1 => {
                let parts = spills.first().map(Spill::read).transpose()?;
                Held::Whole(concat_batches(
                    &self.schema,
                    &parts.unwrap_or_default(),
                    Stage::Read,
                )?)
            }
            _ => Held::Spilled(spills),
        };
        let nulls: BTreeMap<String, u64> = self
            .schema
            .fields()
            .iter()
            .zip(self.nulls)
            .filter(|(field, _)| !field.name().starts_with('_'))
            .map(|(field, nulls)| (field.name().clone(), nulls))
            .collect();
        Ok(DropRows {
            buckets: self.buckets,
            held,
            _dir: self.dir,
            schema: self.schema,
            nulls: ColumnNulls {
                rows: self.rows,
                nulls,
            },
            days: self.days,
            declared: self.declared,
            rejects: self.rejects.finish()?,
            rejected: self.rejected,
        })
    }
}

/// The columns of a [`reject_batch`].
pub(crate) mod reject_columns {
    /// The file, relative to the drop.
    pub const FILE: usize = 0;
    /// The line (or row number).
    pub const LINE: usize = 1;
    /// The record as it was.
    pub const RAW: usize = 2;
    /// Why it could not be parsed.
    pub const REASON: usize = 3;
}

fn reject_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("file", DataType::Utf8, false),
        Field::new("line", DataType::Int64, false),
        Field::new("raw", DataType::Utf8, false),
        Field::new("reason", DataType::Utf8, false),
    ]))
}

/// `rejects` as a batch of [`reject_columns`].
fn reject_batch(rejects: &[ParseReject]) -> Result<RecordBatch> {
    let text = |value: fn(&ParseReject) -> &str| -> ArrayRef {
        Arc::new(StringArray::from_iter_values(rejects.iter().map(value)))
    };
    let lines = Int64Array::from_iter_values(rejects.iter().map(|r| r.line as i64));
    let columns = vec![
        text(|r| &r.file),
        Arc::new(lines),
        text(|r| &r.raw),
        text(|r| &r.reason),
    ];
    RecordBatch::try_new(reject_schema(), columns).map_err(Error::arrow(Stage::Read))
}
