//! Names of the transient columns the engine adds to rows on their way
//! through a run. None of them ever reaches Silver (DESIGN.md invariant 3):
//! the Silver writer keeps only the contract's columns.

use crate::stage::Stage;

/// Prefix of the previous-state columns made by the baseline LAG (`prev_<column>`).
pub const PREV_PREFIX: &str = "prev_";
/// How many times the row's record key (entity key + order column) occurs in the drop.
pub const KEY_OCCURRENCES: &str = "_key_occurrences";
/// How many times the row's record key is already in Silver (a resubmission when > 0).
pub const KEY_COMMITTED: &str = "_key_committed";
/// The contributor whose drop is being run (the same on every row).
pub const DROP_CONTRIBUTOR: &str = "_drop_contributor";
/// Prefix of the reference-match columns (`_ref_<name>`: the row found its key in reference `<name>`).
pub const REF_PREFIX: &str = "_ref_";
/// The period (first day of the order column's month) a row belongs to.
pub const PERIOD: &str = "_period";
/// How many entities the drop leaves out of the row's period (the
/// `missing_entities` metric reads it; only with `[completeness]`).
pub const MISSING_ENTITIES: &str = "_missing_entities";
/// Whether a history row's state is closed (`[completeness] closed_when`).
pub const CLOSED: &str = "_closed";
/// The period a missing entity was expected in (the missing list's column).
pub const MISSING_PERIOD: &str = "_missing_period";
/// The row's position among its bucket's drop rows (a bucket's outcomes
/// are kept without the drop's columns and put back in the drop's order
/// by it).
pub const ROW: &str = "_row";
/// True when the row found a previous state of its entity within the lookback.
pub const HAS_BASELINE: &str = "_has_baseline";
/// The file the row came from (relative to the drop).
pub const SOURCE_FILE: &str = "_source_file";
/// The 1-based physical line (CSV) or row number (Parquet) where the record starts.
pub const SOURCE_LINE: &str = "_source_line";
/// The raw text of a record that could not be parsed.
pub const RAW_RECORD: &str = "_raw_record";
/// The rule failures of a row, as JSON in the dq_error files.
pub const DQ_ERRORS: &str = "_dq_errors";
/// Whether the row passed every rule that is not a warning.
pub const DQ_PASSED: &str = "_dq_passed";
/// The run that set the row aside.
pub const DQ_RUN_ID: &str = "_dq_run_id";
/// When the row was set aside (RFC 3339).
pub const DQ_TIMESTAMP: &str = "_dq_timestamp";

/// The `prev_` column name for a contract column.
pub fn prev_column(column: &str) -> String {
    format!("{PREV_PREFIX}{column}")
}
/// The id of the exception a row set aside is (dq_error files, replay).
pub const EXCEPTION_ID: &str = "_exception_id";

/// `batch` with `extra` columns appended; the batch's own columns are shared,
/// not copied. `stage` names the stage in an error.
pub fn with_columns(
    batch: &arrow::record_batch::RecordBatch,
    extra: Vec<(arrow::datatypes::Field, arrow::array::ArrayRef)>,
    stage: Stage,
) -> crate::Result<arrow::record_batch::RecordBatch> {
    let schema = batch.schema();
    let mut fields: Vec<arrow::datatypes::FieldRef> = schema.fields().iter().cloned().collect();
    let mut columns = batch.columns().to_vec();
    for (field, column) in extra {
        fields.push(std::sync::Arc::new(field));
        columns.push(column);
    }
    let schema = std::sync::Arc::new(arrow::datatypes::Schema::new(fields));
    arrow::record_batch::RecordBatch::try_new(schema, columns).map_err(crate::Error::arrow(stage))
}

/// The columns `names` of `batch`, in that order; one missing is a bug,
/// named with `stage`.
pub fn named_columns(
    batch: &arrow::record_batch::RecordBatch,
    names: &[String],
    stage: Stage,
) -> crate::Result<Vec<arrow::array::ArrayRef>> {
    names
        .iter()
        .map(|name| {
            batch
                .column_by_name(name)
                .cloned()
                .ok_or_else(|| crate::Error::Internal(format!("{stage}: column {name} is missing")))
        })
        .collect()
}

/// A text column of `value` on each of `rows` rows (a drop's contributor,
/// file, run id), its buffers allocated once at their exact size.
pub fn repeated_text(value: &str, rows: usize) -> arrow::array::StringArray {
    let mut builder = arrow::array::StringBuilder::with_capacity(rows, rows * value.len());
    for _ in 0..rows {
        builder.append_value(value);
    }
    builder.finish()
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_repeated_text_holds_the_value_on_every_row_and_no_slack() {
        use arrow::array::Array;
        let column = super::repeated_text("BANK_A", 3);
        assert_eq!(column.iter().collect::<Vec<_>>(), [Some("BANK_A"); 3]);
        assert_eq!(column.values().len(), 18);
        assert!(super::repeated_text("x", 0).is_empty());
    }
}
