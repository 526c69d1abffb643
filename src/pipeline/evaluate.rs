//! Evaluate: every rule, in one pass over the baselined rows.
//!
//! In: the [`Baselined`] frame and the contributor's rules. Out: [`Judged`]
//! rows carrying their verdict (DESIGN.md invariant 2): `_dq_errors` (a list
//! of rule, severity, message), `_dq_passed` and the worst severity that
//! fired, plus per-rule counts of passes, failures and skips.
//!
//! Each rule becomes one outcome column computed by DataFusion: 1 = pass,
//! 0 = fail (false *or NULL*: an expression describes a valid row), 2 = skipped
//! because a trend rule found no previous state.

use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, BooleanArray, BooleanBuilder, Int64Array, ListBuilder, StringBuilder,
    StructBuilder,
};
use arrow::datatypes::{DataType, Field, Fields, Schema};
use arrow::record_batch::RecordBatch;
use serde::Serialize;

use crate::config::rules::{Rule, Severity};
use crate::error::{Error, Result};
use crate::pipeline::baseline::Baselined;
use crate::transient::{DQ_ERRORS, DQ_PASSED, HAS_BASELINE, PREV_PREFIX};

/// The transient column holding the worst severity that fired on a row (null: none).
pub const DQ_SEVERITY: &str = "_dq_severity";

const PASS: i64 = 1;
const FAIL: i64 = 0;
const SKIPPED: i64 = 2;

/// Counts for one rule over one run.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct RuleOutcome {
    /// Rule name.
    pub rule: String,
    /// Its severity.
    pub severity: Severity,
    /// Whether it reads the previous state.
    pub trend: bool,
    /// Rows that passed.
    pub passed: u64,
    /// Rows that failed.
    pub failed: u64,
    /// Rows not checked because they had no previous state.
    pub skipped_no_baseline: u64,
}

/// The drop's rows with their verdicts.
pub struct Judged {
    /// Contract + provenance + `_has_baseline` + `_dq_errors` + `_dq_passed` + `_dq_severity`.
    pub rows: Vec<RecordBatch>,
    /// Per-rule counts, in rule order.
    pub outcomes: Vec<RuleOutcome>,
    /// Rows that found a previous state.
    pub with_baseline: u64,
    /// Rows that did not.
    pub without_baseline: u64,
}

/// Evaluates `rules` over the baselined rows.
pub async fn evaluate_rules(baselined: Baselined, rules: &[&Rule]) -> Result<Judged> {
    let frame = baselined.frame;
    let kept: Vec<String> = frame
        .schema()
        .fields()
        .iter()
        .map(|f| f.name().clone())
        .filter(|n| !n.starts_with(PREV_PREFIX))
        .collect();
    let mut exprs: Vec<String> = kept.iter().map(|n| format!("\"{n}\"")).collect();
    exprs.extend(rules.iter().map(|r| outcome_sql(r)));
    let expr_refs: Vec<&str> = exprs.iter().map(String::as_str).collect();
    let batches = frame
        .select_exprs(&expr_refs)
        .map_err(Error::query("evaluate"))?
        .collect()
        .await
        .map_err(Error::query("evaluate"))?;
    let mut judged = Judged {
        rows: Vec::with_capacity(batches.len()),
        outcomes: rules
            .iter()
            .map(|r| RuleOutcome {
                rule: r.name.clone(),
                severity: r.severity,
                trend: r.is_trend(),
                passed: 0,
                failed: 0,
                skipped_no_baseline: 0,
            })
            .collect(),
        with_baseline: 0,
        without_baseline: 0,
    };
    for batch in batches {
        let rows = judge_batch(&batch, kept.len(), rules, &mut judged)?;
        judged.rows.push(rows);
    }
    Ok(judged)
}

/// The outcome expression of one rule: 1 pass, 0 fail, 2 skipped for want of history.
fn outcome_sql(rule: &Rule) -> String {
    let check = format!(
        "CASE WHEN coalesce(({}), false) THEN {PASS} ELSE {FAIL} END",
        rule.expression
    );
    if rule.is_trend() {
        format!("CASE WHEN NOT \"{HAS_BASELINE}\" THEN {SKIPPED} ELSE {check} END")
    } else {
        check
    }
}

fn error_item_fields() -> Fields {
    Fields::from(vec![
        Field::new("rule", DataType::Utf8, false),
        Field::new("severity", DataType::Utf8, false),
        Field::new("message", DataType::Utf8, false),
    ])
}

fn errors_field() -> Field {
    let item = Field::new("item", DataType::Struct(error_item_fields()), true);
    Field::new(DQ_ERRORS, DataType::List(Arc::new(item)), false)
}

fn new_errors_builder() -> ListBuilder<StructBuilder> {
    ListBuilder::new(StructBuilder::from_fields(error_item_fields(), 0))
}

/// Turns the outcome columns of one batch into verdict columns and counts.
fn judge_batch(
    batch: &RecordBatch,
    kept: usize,
    rules: &[&Rule],
    judged: &mut Judged,
) -> Result<RecordBatch> {
    let outcomes: Vec<&Int64Array> = (0..rules.len())
        .map(|i| batch.column(kept + i).as_any().downcast_ref::<Int64Array>())
        .collect::<Option<_>>()
        .ok_or_else(|| Error::Internal("evaluate: an outcome column is not Int64".to_string()))?;
    let has_baseline = batch
        .column_by_name(HAS_BASELINE)
        .and_then(|c| c.as_any().downcast_ref::<BooleanArray>().cloned())
        .ok_or_else(|| Error::Internal("evaluate: _has_baseline is missing".to_string()))?;
    let mut errors = new_errors_builder();
    let mut passed = BooleanBuilder::with_capacity(batch.num_rows());
    let mut worst = StringBuilder::new();
    for row in 0..batch.num_rows() {
        if has_baseline.value(row) {
            judged.with_baseline += 1;
        } else {
            judged.without_baseline += 1;
        }
        let mut row_worst: Option<Severity> = None;
        for (i, rule) in rules.iter().enumerate() {
            let stats = &mut judged.outcomes[i];
            match outcomes[i].value(row) {
                PASS => stats.passed += 1,
                SKIPPED => stats.skipped_no_baseline += 1,
                _ => {
                    stats.failed += 1;
                    append_error(&mut errors, &rule.name, rule.severity, &rule.message);
                    row_worst = row_worst.max(Some(rule.severity));
                }
            }
        }
        errors.append(true);
        passed.append_value(row_worst.is_none_or(|s| s == Severity::Warn));
        worst.append_option(row_worst.map(Severity::as_str));
    }
    let mut fields: Vec<Field> = batch.schema().fields()[..kept]
        .iter()
        .map(|f| f.as_ref().clone())
        .collect();
    fields.push(errors_field());
    fields.push(Field::new(DQ_PASSED, DataType::Boolean, false));
    fields.push(Field::new(DQ_SEVERITY, DataType::Utf8, true));
    let mut columns: Vec<ArrayRef> = batch.columns()[..kept].to_vec();
    columns.push(Arc::new(errors.finish()));
    columns.push(Arc::new(passed.finish()));
    columns.push(Arc::new(worst.finish()));
    RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).map_err(Error::arrow("evaluate"))
}

/// Appends one (rule, severity, message) entry to the current row's error list.
pub fn append_error(
    errors: &mut ListBuilder<StructBuilder>,
    rule: &str,
    severity: Severity,
    message: &str,
) {
    let item = errors.values();
    for (i, value) in [rule, severity.as_str(), message].into_iter().enumerate() {
        if let Some(b) = item.field_builder::<StringBuilder>(i) {
            b.append_value(value);
        }
    }
    item.append(true);
}
