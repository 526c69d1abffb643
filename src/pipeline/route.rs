//! Route: where each row goes, decided by the worst severity that fired.
//!
//! In: judged rows, bucket by bucket, and the read stage's parse rejects.
//! Out: each bucket's Silver rows, stripped to the contract's columns
//! (DESIGN.md invariant 3), then [`Routed`]: the rows set aside per
//! destination in the dq_error shape: every contract
//! column, provenance, the raw record of unparseable lines, the errors as
//! JSON, the run id and a timestamp. Every row lands in exactly one place.

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, BooleanArray, Int64Array, ListArray, StringArray, StructArray, UInt8Array,
};
use arrow::compute::{SortColumn, filter_record_batch, lexsort_to_indices, take};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::record_batch::RecordBatch;
use serde_json::json;

use crate::config::contract::Contract;
use crate::config::rules::Severity;
use crate::core::set_aside::SetAside;
use crate::error::{Error, Result};
use crate::exceptions::record::ExceptionIds;
use crate::pipeline::evaluate::DQ_SEVERITY;
use crate::pipeline::mask::mask_set_aside;
use crate::pipeline::read::{PARSE_RULE, ParseReject};
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
    /// Rows kept out of Silver, in the dq_error shape.
    pub set_aside: BTreeMap<SetAside, RecordBatch>,
    /// Silver rows on which a warning fired.
    pub warned: u64,
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
/// Silver's rows go back to be written, the rows set aside are kept until
/// every bucket is routed.
pub struct Router<'a> {
    contract: &'a Contract,
    schema: SchemaRef,
    stamp: &'a RunStamp,
    set_aside: BTreeMap<SetAside, Vec<RecordBatch>>,
    warned: u64,
}

impl<'a> Router<'a> {
    /// Nothing routed yet.
    pub fn new(contract: &'a Contract, stamp: &'a RunStamp) -> Router<'a> {
        Router {
            contract,
            schema: dq_schema(contract),
            stamp,
            set_aside: BTreeMap::new(),
            warned: 0,
        }
    }

    /// Routes one bucket's judged rows; returns its Silver rows, stripped
    /// to the contract's columns.
    pub fn route(&mut self, judged: &[RecordBatch]) -> Result<Vec<RecordBatch>> {
        let mut silver = Vec::with_capacity(judged.len());
        for batch in judged {
            let severity = worst_severities(batch)?;
            let destinations: Vec<Option<SetAside>> =
                severity.iter().map(|s| set_aside_for(*s)).collect();
            let to_silver: BooleanArray = destinations.iter().map(|d| Some(d.is_none())).collect();
            self.warned += severity
                .iter()
                .filter(|s| **s == Some(Severity::Warn))
                .count() as u64;
            silver.push(contract_columns(
                self.contract,
                &filter(batch, &to_silver)?,
            )?);
            for destination in SetAside::ALL {
                let mask: BooleanArray = destinations
                    .iter()
                    .map(|d| Some(*d == Some(destination)))
                    .collect();
                let rows = filter(batch, &mask)?;
                if rows.num_rows() > 0 {
                    let rows = dq_rows(self.contract, &self.schema, &rows, self.stamp)?;
                    self.set_aside.entry(destination).or_default().push(rows);
                }
            }
        }
        Ok(silver)
    }

    /// Every row set aside, the parse `rejects` with them, in the order
    /// they stood in the drop; with `mask_sensitive`, their sensitive
    /// columns masked.
    pub fn finish(mut self, rejects: &[ParseReject], mask_sensitive: bool) -> Result<Routed> {
        if !rejects.is_empty() {
            let rows = reject_rows(self.contract, &self.schema, rejects, self.stamp)?;
            self.set_aside
                .entry(SetAside::Quarantine)
                .or_default()
                .push(rows);
        }
        let set_aside = std::mem::take(&mut self.set_aside)
            .into_iter()
            .map(|(k, parts)| {
                let rows = in_file_order(&self.schema, &parts)?;
                let rows = match mask_sensitive {
                    true => mask_set_aside(self.contract, &rows)?,
                    false => rows,
                };
                Ok((k, rows))
            })
            .collect::<Result<_>>()?;
        Ok(Routed {
            set_aside,
            warned: self.warned,
        })
    }
}

/// One batch of set-aside rows in the order they stood in the drop (file, line).
fn in_file_order(schema: &SchemaRef, parts: &[RecordBatch]) -> Result<RecordBatch> {
    let all = arrow::compute::concat_batches(schema, parts).map_err(Error::arrow(Stage::Route))?;
    let sort_by = [SOURCE_FILE, SOURCE_LINE]
        .iter()
        .map(|name| {
            let values = all
                .column_by_name(name)
                .cloned()
                .ok_or_else(|| Error::Internal(format!("route: {name} is missing")))?;
            Ok(SortColumn {
                values,
                options: None,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let order = lexsort_to_indices(&sort_by, None).map_err(Error::arrow(Stage::Route))?;
    let columns = all
        .columns()
        .iter()
        .map(|c| take(c.as_ref(), &order, None))
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(Error::arrow(Stage::Route))?;
    RecordBatch::try_new(schema.clone(), columns).map_err(Error::arrow(Stage::Route))
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
    columns.push(Arc::new(StringArray::from_iter_values((0..rows).map(
        |r| {
            stamp
                .exception_ids
                .id_of(files.value(r), lines.value(r).max(0) as u64)
        },
    ))));
    columns.push(Arc::new(files.clone()));
    columns.push(Arc::new(lines.clone()));
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

fn reject_rows(
    contract: &Contract,
    schema: &SchemaRef,
    rejects: &[ParseReject],
    stamp: &RunStamp,
) -> Result<RecordBatch> {
    let rows = rejects.len();
    let mut columns: Vec<ArrayRef> = schema.fields()[..contract.columns.len()]
        .iter()
        .map(|f| arrow::array::new_null_array(f.data_type(), rows))
        .collect();
    columns.push(Arc::new(StringArray::from_iter_values(
        rejects
            .iter()
            .map(|r| stamp.exception_ids.id_of(&r.file, r.line)),
    )));
    columns.push(Arc::new(StringArray::from_iter_values(
        rejects.iter().map(|r| r.file.as_str()),
    )));
    columns.push(Arc::new(Int64Array::from_iter_values(
        rejects.iter().map(|r| r.line as i64),
    )));
    columns.push(Arc::new(StringArray::from_iter_values(
        rejects.iter().map(|r| r.raw.as_str()),
    )));
    let errors = rejects.iter().map(|r| {
        json!([{"rule": PARSE_RULE, "severity": Severity::Quarantine.as_str(), "message": r.reason}]).to_string()
    });
    columns.push(Arc::new(StringArray::from_iter_values(errors)));
    columns.extend(stamp_columns(stamp, rows));
    RecordBatch::try_new(schema.clone(), columns).map_err(Error::arrow(Stage::Route))
}
