//! Route: where each row goes, decided by the worst severity that fired.
//!
//! In: judged rows, bucket by bucket, and the read stage's parse rejects.
//! Out: each bucket's Silver rows, stripped to the contract's columns
//! (DESIGN.md invariant 3), then [`Routed`]: the rows set aside per
//! destination (written as they are routed to spill files of the scratch
//! folder, whatever the drop's size) in the dq_error shape: every contract
//! column, provenance, the raw record of unparseable lines, the errors as
//! JSON, the run id and a timestamp. Every row lands in exactly one place.

use std::collections::BTreeMap;
use std::collections::btree_map::Entry;
use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, BooleanArray, Int64Array, ListArray, StringArray, StructArray, UInt8Array,
};
use arrow::compute::filter_record_batch;
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::record_batch::RecordBatch;
use serde_json::json;

use crate::config::contract::Contract;
use crate::config::rules::Severity;
use crate::core::set_aside::SetAside;
use crate::core::spill::{SpillDir, SpillWriter, SpilledTable};
use crate::core::sql::MemoryBudget;
use crate::error::{Error, Result};
use crate::exceptions::record::ExceptionIds;
use crate::pipeline::evaluate::DQ_SEVERITY;
use crate::pipeline::mask::mask_set_aside;
use crate::pipeline::read::{PARSE_RULE, reject_columns};
use crate::stage::Stage;
use crate::transient::{
    DQ_ERRORS, DQ_RUN_ID, DQ_TIMESTAMP, EXCEPTION_ID, RAW_RECORD, SOURCE_FILE, SOURCE_LINE,
    repeated_text,
};

/// Where a row whose worst severity is `severity` goes, if out of Silver.
fn set_aside_for(severity: Option<Severity>) -> Option<SetAside> {
    match severity {
        Some(Severity::Quarantine | Severity::Fail) => Some(SetAside::Quarantine),
        Some(Severity::Drop) => Some(SetAside::Dropped),
        Some(Severity::Pending) => Some(SetAside::Pending),
        Some(Severity::Warn) | None => None,
    }
}

/// Each row's worst severity, decoded once.
fn worst_severities(batch: &RecordBatch) -> Result<Vec<Option<Severity>>> {
    let codes = batch
        .column_by_name(DQ_SEVERITY)
        .and_then(|c| c.as_any().downcast_ref::<UInt8Array>())
        .ok_or_else(|| {
            Error::Internal(format!(
                "route: column {DQ_SEVERITY} is missing or not a code"
            ))
        })?;
    Ok(codes
        .iter()
        .map(|code| code.and_then(Severity::from_code))
        .collect())
}

/// Stamped on every row set aside.
#[derive(Debug, Clone)]
pub struct RunStamp {
    /// The run id.
    pub run_id: String,
    /// When the run started (RFC 3339).
    pub timestamp: String,
    /// The exception id of each row that may be set aside.
    pub exception_ids: ExceptionIds,
}

/// The rows set aside, by destination, once every bucket is routed.
#[derive(Debug)]
pub struct Routed {
    /// Rows kept out of Silver, in the dq_error shape (sensitive columns
    /// masked when the plan says so), as runs each in the drop's order
    /// (one per bucket, one of parse rejects): spilled to the scratch
    /// folder when the drop was judged in buckets.
    pub(crate) set_aside: BTreeMap<SetAside, SpilledTable>,
    /// Silver rows on which a warning fired.
    pub warned: u64,
    /// The folder of the runs, removed when the rows are dropped.
    _spill: SpillDir,
}

/// The schema of a dq_error file: contract, provenance, raw record, errors, run id, timestamp.
pub fn dq_schema(contract: &Contract) -> SchemaRef {
    let mut fields = contract.arrow_fields();
    fields.extend([
        Field::new(EXCEPTION_ID, DataType::Utf8, false),
        Field::new(SOURCE_FILE, DataType::Utf8, true),
        Field::new(SOURCE_LINE, DataType::Int64, true),
        Field::new(RAW_RECORD, DataType::Utf8, true),
        Field::new(DQ_ERRORS, DataType::Utf8, false),
        Field::new(DQ_RUN_ID, DataType::Utf8, false),
        Field::new(DQ_TIMESTAMP, DataType::Utf8, false),
    ]);
    Arc::new(Schema::new(fields))
}

/// Sends a drop's judged rows to their destinations, bucket after bucket:
/// Silver's rows go back to be written, the rows set aside are kept (in
/// a spill folder of its own) until every bucket is routed, each
/// bucket's as one run in the drop's order.
pub struct Router<'a> {
    contract: &'a Contract,
    schema: SchemaRef,
    stamp: &'a RunStamp,
    mask_sensitive: bool,
    spill: SpillDir,
    set_aside: BTreeMap<SetAside, SpilledTable>,
    /// Runs kept so far (each named after its number).
    runs: usize,
    warned: u64,
}

/// Rows per batch of a run kept: a merge holds one batch of each run.
const RUN_BATCH_ROWS: usize = 4096;

/// Judged rows routed at once: their rows set aside, in the dq_error
/// shape, are written to their runs before the next slice is routed.
const ROUTED_ROWS: usize = 16 * RUN_BATCH_ROWS;

impl<'a> Router<'a> {
    /// Nothing routed yet; rows set aside will be kept in a spill folder
    /// of their own in `budget`'s scratch folder (whatever the drop's
    /// size: every row of a drop judged whole may be set aside, beside the
    /// drop held whole), removed when the router or what it routed is
    /// dropped; their sensitive columns masked when `mask_sensitive`.
    pub(crate) fn new(
        contract: &'a Contract,
        stamp: &'a RunStamp,
        (mask_sensitive, budget): (bool, &MemoryBudget),
    ) -> Result<Router<'a>> {
        let spill = SpillDir::new(true, budget.spilling())?;
        Ok(Router {
            contract,
            schema: dq_schema(contract),
            stamp,
            mask_sensitive,
            spill,
            set_aside: BTreeMap::new(),
            runs: 0,
            warned: 0,
        })
    }

    /// Routes one bucket's judged rows (in the drop's order), a slice of
    /// them at a time; returns its Silver rows, stripped to the contract's
    /// columns. Each destination's rows are written to its run as they are
    /// routed: a bucket whose every row is set aside is never held twice.
    pub fn route(&mut self, judged: &[RecordBatch]) -> Result<Vec<RecordBatch>> {
        let mut silver = Vec::with_capacity(judged.len());
        let mut runs: BTreeMap<SetAside, SpillWriter> = BTreeMap::new();
        for batch in judged {
            for start in (0..batch.num_rows()).step_by(ROUTED_ROWS) {
                let slice = batch.slice(start, ROUTED_ROWS.min(batch.num_rows() - start));
                silver.push(self.route_slice(&slice, &mut runs)?);
            }
        }
        for (destination, run) in runs {
            self.close_run(destination, run)?;
        }
        Ok(silver)
    }

    /// Routes `batch`: its rows set aside written to their destinations'
    /// `runs` (opened as needed), its Silver rows returned.
    fn route_slice(
        &mut self,
        batch: &RecordBatch,
        runs: &mut BTreeMap<SetAside, SpillWriter>,
    ) -> Result<RecordBatch> {
        let severity = worst_severities(batch)?;
        let destinations: Vec<Option<SetAside>> =
            severity.iter().map(|s| set_aside_for(*s)).collect();
        let to_silver: BooleanArray = destinations.iter().map(|d| Some(d.is_none())).collect();
        self.warned += severity
            .iter()
            .filter(|s| **s == Some(Severity::Warn))
            .count() as u64;
        for destination in SetAside::ALL {
            let mask: BooleanArray = destinations
                .iter()
                .map(|d| Some(*d == Some(destination)))
                .collect();
            let rows = filter(batch, &mask)?;
            if rows.num_rows() > 0 {
                let rows = dq_rows(self.contract, &self.schema, &rows, self.stamp)?;
                let run = match runs.entry(destination) {
                    Entry::Occupied(run) => run.into_mut(),
                    Entry::Vacant(new) => new.insert(self.open_run(destination)?),
                };
                self.write_to_run(run, &rows)?;
            }
        }
        contract_columns(self.contract, &filter(batch, &to_silver)?)
    }

    /// Keeps `batches` (in the dq_error shape, in the drop's order) as one
    /// run of `destination`.
    fn keep(
        &mut self,
        destination: SetAside,
        batches: impl Iterator<Item = Result<RecordBatch>>,
    ) -> Result<()> {
        let mut run = self.open_run(destination)?;
        for batch in batches {
            self.write_to_run(&mut run, &batch?)?;
        }
        self.close_run(destination, run)
    }

    /// A new run of `destination`, in its folder of the spill folder.
    fn open_run(&mut self, destination: SetAside) -> Result<SpillWriter> {
        let kept = match self.set_aside.entry(destination) {
            Entry::Occupied(kept) => kept.into_mut(),
            Entry::Vacant(new) => {
                let folder = self
                    .spill
                    .folder(&format!("set-aside-{}", destination.kind()))?;
                new.insert(SpilledTable {
                    schema: self.schema.clone(),
                    spills: Vec::new(),
                    folder,
                })
            }
        };
        let name = format!("run-{}", self.runs);
        self.runs += 1;
        self.spill
            .writer((kept.folder.as_deref(), &name), &self.schema)
    }

    /// Adds `batch` (in the dq_error shape) to `run`, masked if so, in
    /// small batches.
    fn write_to_run(&self, run: &mut SpillWriter, batch: &RecordBatch) -> Result<()> {
        let batch = match self.mask_sensitive {
            true => mask_set_aside(self.contract, batch)?,
            false => batch.clone(),
        };
        for start in (0..batch.num_rows()).step_by(RUN_BATCH_ROWS) {
            let rows = RUN_BATCH_ROWS.min(batch.num_rows() - start);
            run.write(&batch.slice(start, rows))?;
        }
        Ok(())
    }

    /// Adds the finished `run` to `destination`'s.
    fn close_run(&mut self, destination: SetAside, run: SpillWriter) -> Result<()> {
        let kept = self.set_aside.get_mut(&destination).ok_or_else(|| {
            Error::Internal(format!(
                "route: a run of {} never opened",
                destination.kind()
            ))
        })?;
        kept.spills.push(run.finish()?);
        Ok(())
    }

    /// Every row set aside, the parse `rejects` (batches of
    /// [`reject_columns`], in the drop's order) with them.
    pub fn finish(
        mut self,
        mut rejects: impl Iterator<Item = Result<RecordBatch>>,
    ) -> Result<Routed> {
        if let Some(first) = rejects.next() {
            let (contract, schema, stamp) = (self.contract, self.schema.clone(), self.stamp);
            let rows = std::iter::once(first)
                .chain(rejects)
                .map(|batch| reject_rows(contract, &schema, &batch?, stamp));
            self.keep(SetAside::Quarantine, rows)?;
        }
        Ok(Routed {
            set_aside: self.set_aside,
            warned: self.warned,
            _spill: self.spill,
        })
    }
}

fn filter(batch: &RecordBatch, mask: &BooleanArray) -> Result<RecordBatch> {
    filter_record_batch(batch, mask).map_err(Error::arrow(Stage::Route))
}

fn string_column<'a>(batch: &'a RecordBatch, name: &str) -> Result<&'a StringArray> {
    batch
        .column_by_name(name)
        .and_then(|c| c.as_any().downcast_ref::<StringArray>())
        .ok_or_else(|| Error::Internal(format!("route: column {name} is missing or not text")))
}

/// Keeps only the contract's columns: what Silver stores.
fn contract_columns(contract: &Contract, batch: &RecordBatch) -> Result<RecordBatch> {
    let indices = contract
        .column_names()
        .map(|n| batch.schema().index_of(n))
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(Error::arrow(Stage::Route))?;
    batch.project(&indices).map_err(Error::arrow(Stage::Route))
}

fn dq_rows(
    contract: &Contract,
    schema: &SchemaRef,
    batch: &RecordBatch,
    stamp: &RunStamp,
) -> Result<RecordBatch> {
    let rows = batch.num_rows();
    let mut columns: Vec<ArrayRef> = contract_columns(contract, batch)?.columns().to_vec();
    let files = string_column(batch, SOURCE_FILE)?;
    let lines = batch
        .column_by_name(SOURCE_LINE)
        .and_then(|c| c.as_any().downcast_ref::<Int64Array>())
        .ok_or_else(|| Error::Internal(format!("route: column {SOURCE_LINE} is missing")))?;
    columns.extend(provenance_columns(stamp, files, lines));
    columns.push(arrow::array::new_null_array(&DataType::Utf8, rows));
    let errors = batch
        .column_by_name(DQ_ERRORS)
        .and_then(|c| c.as_any().downcast_ref::<ListArray>())
        .ok_or_else(|| Error::Internal("route: _dq_errors is missing".to_string()))?;
    columns.push(Arc::new(StringArray::from_iter_values(
        (0..rows).map(|r| errors_json(errors, r)),
    )));
    columns.extend(stamp_columns(stamp, rows));
    RecordBatch::try_new(schema.clone(), columns).map_err(Error::arrow(Stage::Route))
}

/// A dq_error file's exception id, source file and source line columns.
fn provenance_columns(stamp: &RunStamp, files: &StringArray, lines: &Int64Array) -> [ArrayRef; 3] {
    let ids = (0..files.len()).map(|r| {
        stamp
            .exception_ids
            .id_of(files.value(r), lines.value(r).max(0) as u64)
    });
    [
        Arc::new(StringArray::from_iter_values(ids)),
        Arc::new(files.clone()),
        Arc::new(lines.clone()),
    ]
}

fn errors_json(errors: &ListArray, row: usize) -> String {
    let entries = errors.value(row);
    let Some(entries) = entries.as_any().downcast_ref::<StructArray>() else {
        return "[]".to_string();
    };
    let field = |i: usize| {
        entries
            .column(i)
            .as_any()
            .downcast_ref::<StringArray>()
            .cloned()
    };
    let (Some(rule), Some(severity), Some(message)) = (field(0), field(1), field(2)) else {
        return "[]".to_string();
    };
    let list: Vec<_> = (0..entries.len())
        .map(|i| json!({"rule": rule.value(i), "severity": severity.value(i), "message": message.value(i)}))
        .collect();
    serde_json::Value::Array(list).to_string()
}

fn stamp_columns(stamp: &RunStamp, rows: usize) -> [ArrayRef; 2] {
    [
        Arc::new(repeated_text(&stamp.run_id, rows)),
        Arc::new(repeated_text(&stamp.timestamp, rows)),
    ]
}

/// Parse rejects (a batch of [`reject_columns`]) in the dq_error shape:
/// no typed value, their raw record and the parse rule's reason.
fn reject_rows(
    contract: &Contract,
    schema: &SchemaRef,
    rejects: &RecordBatch,
    stamp: &RunStamp,
) -> Result<RecordBatch> {
    let rows = rejects.num_rows();
    let text = |index: usize| {
        rejects
            .column(index)
            .as_any()
            .downcast_ref::<StringArray>()
            .ok_or_else(|| Error::Internal("route: a parse reject column is not text".to_string()))
    };
    let (files, raws, reasons) = (
        text(reject_columns::FILE)?,
        text(reject_columns::RAW)?,
        text(reject_columns::REASON)?,
    );
    let lines = rejects
        .column(reject_columns::LINE)
        .as_any()
        .downcast_ref::<Int64Array>()
        .ok_or_else(|| {
            Error::Internal("route: a parse reject's line is not a number".to_string())
        })?;
    let mut columns: Vec<ArrayRef> = schema.fields()[..contract.columns.len()]
        .iter()
        .map(|f| arrow::array::new_null_array(f.data_type(), rows))
        .collect();
    columns.extend(provenance_columns(stamp, files, lines));
    columns.push(Arc::new(raws.clone()));
    let errors = reasons.iter().map(|reason| {
        json!([{"rule": PARSE_RULE, "severity": Severity::Quarantine.as_str(), "message": reason.unwrap_or_default()}]).to_string()
    });
    columns.push(Arc::new(StringArray::from_iter_values(errors)));
    columns.extend(stamp_columns(stamp, rows));
    RecordBatch::try_new(schema.clone(), columns).map_err(Error::arrow(Stage::Route))
}
