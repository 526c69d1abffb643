//! Evaluate: every rule over the baselined rows, bucket by bucket.
//!
//! In: each bucket's [`Baselined`] frame and the contributor's rules.
//! Out: first each bucket's [`BucketOutcomes`]; then, once the periods are
//! measured and every bucket counted ([`Verdicts`]), each bucket's rows
//! carrying their verdict (DESIGN.md invariant 2): `_dq_errors` (a list of
//! rule, severity, message), `_dq_passed` and the worst severity that
//! fired, plus per-rule counts.
//!
//! Row and reference rules become one outcome column each, computed by
//! DataFusion ([`reference`] joins the reference tables first); aggregate
//! rules are computed per period ([`aggregate`]) and folded into every row of
//! their period. An outcome is 1 pass, 0 fail (false *or NULL*: an expression
//! describes a valid row), 2 skipped for want of history (no previous state,
//! or no previous value of an optional column a trend rule reads: a state
//! written before the column was added to the contract), 3 not applicable
//! (outside the rule's filter). Escalation is decided once all rows are
//! counted: past its rate, a rule acts with its escalated severity.

pub mod aggregate;
pub mod committed;
pub mod kept_keys;
pub mod metrics;
pub mod reference;

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, BooleanArray, BooleanBuilder, Date32Array, Int8Array, ListBuilder,
    StringBuilder, StructBuilder, UInt8Builder, UInt32Array,
};
use arrow::datatypes::{DataType, Field, Fields};
use arrow::record_batch::RecordBatch;
use serde::{Deserialize, Serialize};

use crate::config::Plan;
use crate::config::contract::Contract;
use crate::config::plan::Reference;
use crate::config::rules::{Rule, Scope, Severity};
use crate::core::parallel::{concat_batches, over_row_slices};
use crate::core::sql::quote;
use crate::error::{Error, Result};
use crate::pipeline::baseline::Baselined;
use crate::stage::Stage;
use crate::transient::{
    DQ_ERRORS, DQ_PASSED, HAS_BASELINE, PERIOD, ROW, prev_column, with_columns,
};
use aggregate::{PeriodOutcomes, PeriodReport};
use reference::KnownKeys;

/// The transient column holding the worst severity that fired on a row, as
/// its small-integer code ([`Severity::code`]; null: none).
pub const DQ_SEVERITY: &str = "_dq_severity";

/// What a rule said of one row or period, kept in query results as a small integer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The rule failed.
    Fail,
    /// The rule passed.
    Pass,
    /// Skipped: no previous state or period.
    Skipped,
    /// Outside the rule's filter.
    NotApplicable,
}

impl Outcome {
    const ALL: [Outcome; 4] = [
        Outcome::Fail,
        Outcome::Pass,
        Outcome::Skipped,
        Outcome::NotApplicable,
    ];

    /// The code queries produce for this outcome.
    pub fn code(self) -> i64 {
        self as i64
    }

    /// The outcome a query produced; an unknown code is a bug, named.
    pub fn from_code(code: i64) -> Result<Outcome> {
        usize::try_from(code)
            .ok()
            .and_then(|i| Outcome::ALL.get(i).copied())
            .ok_or_else(|| unknown_code(code))
    }

    /// A human label, as summaries show it.
    pub fn label(self) -> &'static str {
        match self {
            Outcome::Fail => "fail",
            Outcome::Pass => "pass",
            Outcome::Skipped => "skipped",
            Outcome::NotApplicable => "not_applicable",
        }
    }
}

/// A rule outcome code no outcome has: a bug, named.
fn unknown_code(code: i64) -> Error {
    Error::Internal(format!("evaluate: unknown rule outcome code {code}"))
}

/// Counts for one rule over one run.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct RuleOutcome {
    /// Rule name.
    pub rule: String,
    /// Its scope.
    pub scope: Scope,
    /// The severity it acted with (escalated, if it escalated).
    pub severity: Severity,
    /// Whether it reads the previous state.
    pub trend: bool,
    /// Rows that passed.
    pub passed: u64,
    /// Rows that failed.
    pub failed: u64,
    /// Rows not checked because they had no previous state (or period), or
    /// no previous value of an optional column the rule reads.
    pub skipped_no_baseline: u64,
    /// Rows outside the rule's filter.
    pub not_applicable: u64,
    /// Whether the failure rate passed the rule's escalation threshold.
    pub escalated: bool,
}

/// One bucket's rows with the outcome of every row and reference rule:
/// their final verdicts wait for the periods' outcomes and the
/// escalations, which need every bucket's.
pub struct BucketOutcomes {
    /// `_row`, `_has_baseline` and `_period`, then one outcome column per
    /// row or reference rule, in rule order, in no particular row order.
    pub rows: Vec<RecordBatch>,
    /// The bucket's share of the metrics, when aggregate rules are measured.
    pub metrics: Option<aggregate::BucketMetrics>,
}

/// The verdicts of a drop's rows, bucket after bucket, once every bucket's
/// outcomes are counted.
pub struct Verdicts<'a> {
    rules: &'a [&'a Rule],
    sources: Vec<OutcomeSource>,
    periods: PeriodOutcomes,
    /// Per-rule counts, in rule order.
    pub outcomes: Vec<RuleOutcome>,
    /// Rows that found a previous state.
    pub with_baseline: u64,
    /// Rows that did not.
    pub without_baseline: u64,
}

/// Where a rule's outcome for a row comes from.
enum OutcomeSource {
    /// The n-th outcome column of the row batch (after its own columns).
    Column(usize),
    /// The period table, by aggregate rule index.
    Period(usize),
}

/// The references `rules` read.
pub fn references_read_by(plan: &Plan, rules: &[&Rule]) -> Vec<Reference> {
    plan.references
        .iter()
        .filter(|r| rules.iter().any(|rule| rule.references.contains(&r.name)))
        .cloned()
        .collect()
}

/// Evaluates the row and reference rules over one bucket's baselined
/// rows, with the keys of the references they read; with `measure`, keeps
/// the columns the metrics of aggregate rules read.
pub async fn bucket_outcomes(
    baselined: Baselined,
    rules: &[&Rule],
    plan: &Plan,
    (known, measure): (&[KnownKeys], bool),
) -> Result<BucketOutcomes> {
    let clock = std::time::Instant::now();
    let baselined = reference::flag_references(baselined, known).await?;
    tracing::debug!(ms = clock.elapsed().as_millis() as u64, "references joined");
    let metrics = match measure {
        true => Some(aggregate::bucket_metrics(&baselined, &plan.metrics).await?),
        false => None,
    };
    let rows = row_outcomes(baselined, rules, &plan.contract).await?;
    tracing::debug!(
        ms = clock.elapsed().as_millis() as u64,
        "row rules evaluated"
    );
    Ok(BucketOutcomes { rows, metrics })
}

/// A bucket's drop `rows` with their `outcomes` (a [`BucketOutcomes`]'
/// rows) beside them, in the drop's order: the rows' own columns,
/// `_has_baseline`, `_period`, then the outcome columns, as
/// [`Verdicts::judge`] reads them. Every row has exactly one outcome row.
pub fn in_drop_order(rows: RecordBatch, outcomes: &[RecordBatch]) -> Result<Vec<RecordBatch>> {
    let missing = |what: &str| Error::Internal(format!("evaluate: {what}"));
    let Some(first) = outcomes.first() else {
        return match rows.num_rows() {
            0 => Ok(Vec::new()),
            n => Err(missing(&format!("{n} rows without outcomes"))),
        };
    };
    let outcomes = concat_batches(&first.schema(), outcomes, Stage::Evaluate)?;
    let positions = outcomes
        .column_by_name(ROW)
        .and_then(|c| c.as_any().downcast_ref::<UInt32Array>())
        .ok_or_else(|| missing("the outcomes have no row positions"))?;
    if positions.len() != rows.num_rows() {
        return Err(missing(&format!(
            "{} outcomes for {} rows",
            positions.len(),
            rows.num_rows()
        )));
    }
    // order[p]: the outcome row of the drop row at position p.
    let mut order = vec![u32::MAX; rows.num_rows()];
    for (at, position) in (0u32..).zip(positions.values().iter()) {
        let slot = order
            .get_mut(*position as usize)
            .ok_or_else(|| missing("an outcome's row position is out of range"))?;
        *slot = at;
    }
    if order.contains(&u32::MAX) {
        return Err(missing("a row has no outcome"));
    }
    let order = UInt32Array::from(order);
    let schema = outcomes.schema();
    let extra = schema
        .fields()
        .iter()
        .zip(outcomes.columns())
        .filter(|(field, _)| field.name() != ROW)
        .map(|(field, column)| {
            let column = arrow::compute::take(column, &order, None)
                .map_err(Error::arrow(Stage::Evaluate))?;
            Ok((field.as_ref().clone(), column))
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(vec![with_columns(&rows, extra, Stage::Evaluate)?])
}

/// Where each rule's outcome comes from, in rule order.
fn outcome_sources(rules: &[&Rule]) -> Vec<OutcomeSource> {
    let (mut row_rules, mut aggregates) = (0, 0);
    rules
        .iter()
        .map(|rule| match rule.scope {
            Scope::Aggregate => {
                aggregates += 1;
                OutcomeSource::Period(aggregates - 1)
            }
            _ => {
                row_rules += 1;
                OutcomeSource::Column(row_rules - 1)
            }
        })
        .collect()
}

/// Every bucket's outcomes, counted as the first pass goes (escalation
/// needs every row's before any final verdict): each row and reference rule's,
/// and each period's rows (an aggregate rule's outcome is its period's,
/// known once every bucket is measured).
pub struct OutcomeCounts {
    sources: Vec<OutcomeSource>,
    outcomes: Vec<RuleOutcome>,
    /// Rows per period (`None`: no period).
    period_rows: BTreeMap<Option<i32>, u64>,
}

impl OutcomeCounts {
    /// Nothing counted yet.
    pub fn new(rules: &[&Rule]) -> OutcomeCounts {
        let outcomes = rules
            .iter()
            .map(|r| RuleOutcome {
                rule: r.name.clone(),
                scope: r.scope,
                severity: r.severity,
                trend: r.is_trend(),
                passed: 0,
                failed: 0,
                skipped_no_baseline: 0,
                not_applicable: 0,
                escalated: false,
            })
            .collect();
        OutcomeCounts {
            sources: outcome_sources(rules),
            outcomes,
            period_rows: BTreeMap::new(),
        }
    }

    /// Whether a row counted so far failed a `fail` rule (an aggregate
    /// rule's are known once the periods are measured): the run stops.
    pub fn stops(&self) -> bool {
        self.outcomes.iter().any(RuleOutcome::stops_the_run)
    }

    /// Counts one bucket's outcomes, a column at a time, a share of each
    /// batch's rows per core.
    pub fn count(&mut self, batches: &[RecordBatch]) -> Result<()> {
        for batch in batches {
            let sources = &self.sources;
            let what = (Stage::Evaluate, "an outcome counting thread");
            let shares = over_row_slices(what, batch, |share| ShareCounts::of(share, sources))?;
            for share in shares {
                self.add(share);
            }
        }
        Ok(())
    }

    /// Adds a share of a batch's counts.
    fn add(&mut self, share: ShareCounts) {
        for (outcome, tallied) in self.outcomes.iter_mut().zip(share.tallies) {
            for (seen, rows) in Outcome::ALL.into_iter().zip(tallied.into_iter().flatten()) {
                outcome.add(seen, rows);
            }
        }
        for (period, rows) in share.period_rows {
            *self.period_rows.entry(period).or_default() += rows;
        }
    }
}

/// The outcome counts of a share of a batch's rows.
struct ShareCounts {
    /// Per rule, in rule order, the rows of each outcome ([`tally`]);
    /// `None` for an aggregate rule (counted by period).
    tallies: Vec<Option<[u64; 4]>>,
    /// Rows per period (`None`: no period).
    period_rows: BTreeMap<Option<i32>, u64>,
}

impl ShareCounts {
    fn of(share: &RecordBatch, sources: &[OutcomeSource]) -> Result<ShareCounts> {
        let reader = BatchOutcomes::new(share, sources)?;
        let tallies = (reader.columns.iter())
            .map(|column| column.map(tally).transpose())
            .collect::<Result<_>>()?;
        let mut period_rows = BTreeMap::new();
        match reader.periods {
            Some(periods) => count_periods(periods, &mut period_rows),
            None => {
                period_rows.insert(None, share.num_rows() as u64);
            }
        }
        Ok(ShareCounts {
            tallies,
            period_rows,
        })
    }
}

/// Rows per outcome of one outcome column, in [`Outcome::ALL`]'s order;
/// an unknown code is a bug, named.
fn tally(column: &Int8Array) -> Result<[u64; 4]> {
    // Every code counted first, checked after: one add per row.
    let mut by_code = [0u64; 256];
    for code in column.values() {
        by_code[usize::from(*code as u8)] += 1;
    }
    let mut rows = [0u64; 4];
    for (byte, count) in by_code.into_iter().enumerate().filter(|(_, n)| *n > 0) {
        let outcome = Outcome::from_code(i64::from(byte as u8 as i8))?;
        rows[outcome as usize] += count;
    }
    Ok(rows)
}

/// The codes of an outcome column, once each is checked to be an
/// outcome's: an unknown code is a bug, named. (The count checked them
/// already; the verdicts of outcomes kept for a second judgement are
/// read back from a spill, and one check per column costs little.)
fn known_codes(column: &Int8Array) -> Result<&[i8]> {
    let codes: &[i8] = column.values();
    let known = 0..Outcome::ALL.len() as i8;
    match codes.iter().find(|code| !known.contains(code)) {
        Some(unknown) => Err(unknown_code(i64::from(*unknown))),
        None => Ok(codes),
    }
}

/// Adds each row of `periods` to its period's count; rows of one period
/// come in runs, counted as one entry each.
fn count_periods(periods: &Date32Array, period_rows: &mut BTreeMap<Option<i32>, u64>) {
    let mut run: Option<(Option<i32>, u64)> = None;
    for period in periods.iter() {
        match &mut run {
            Some((current, rows)) if *current == period => *rows += 1,
            _ => {
                if let Some((done, rows)) = run.replace((period, 1)) {
                    *period_rows.entry(done).or_default() += rows;
                }
            }
        }
    }
    if let Some((done, rows)) = run {
        *period_rows.entry(done).or_default() += rows;
    }
}

impl RuleOutcome {
    /// Whether the rule acts as `fail` and fired: the run stops.
    pub fn stops_the_run(&self) -> bool {
        self.severity == Severity::Fail && self.failed > 0
    }

    /// Adds `rows` rows of `outcome`.
    fn add(&mut self, outcome: Outcome, rows: u64) {
        match outcome {
            Outcome::Pass => self.passed += rows,
            Outcome::Skipped => self.skipped_no_baseline += rows,
            Outcome::NotApplicable => self.not_applicable += rows,
            Outcome::Fail => self.failed += rows,
        }
    }
}

impl<'a> Verdicts<'a> {
    /// Every bucket counted (`counts`) and the aggregate rules' outcomes
    /// per period (`periods`): each aggregate rule counts its periods' rows.
    pub fn new(
        rules: &'a [&'a Rule],
        periods: PeriodOutcomes,
        counts: OutcomeCounts,
    ) -> Verdicts<'a> {
        let OutcomeCounts {
            sources,
            mut outcomes,
            period_rows,
        } = counts;
        for (i, source) in sources.iter().enumerate() {
            if let OutcomeSource::Period(index) = source {
                for (period, rows) in &period_rows {
                    let outcome = period.map_or(Outcome::Skipped, |p| periods.outcome(p, *index));
                    outcomes[i].add(outcome, *rows);
                }
            }
        }
        Verdicts {
            rules,
            sources,
            periods,
            outcomes,
            with_baseline: 0,
            without_baseline: 0,
        }
    }

    /// The verdicts before any period is measured or any rule escalated:
    /// no period fails an aggregate rule and every rule acts with its own
    /// severity. They are the final ones when [`Verdicts::as_provisional`].
    pub fn provisional(rules: &'a [&'a Rule]) -> Verdicts<'a> {
        Verdicts::new(rules, PeriodOutcomes::default(), OutcomeCounts::new(rules))
    }

    /// Whether some row's final verdict may differ from the one these
    /// give: an aggregate rule's period may fail, or a rule may escalate to
    /// another severity. Otherwise [`Verdicts::as_provisional`] holds
    /// whatever is counted.
    pub fn may_differ(&self) -> bool {
        let periods = (self.sources.iter()).any(|s| matches!(s, OutcomeSource::Period(_)));
        let escalations = (self.rules.iter())
            .filter_map(|rule| rule.escalation.map(|e| (rule.severity, e.to)))
            .any(|(own, to)| own != to);
        periods || escalations
    }

    /// Whether every row's verdict is the one [`Verdicts::provisional`]
    /// gives: every rule acts with its own severity (none escalated to
    /// another) and no period failed an aggregate rule.
    pub fn as_provisional(&self) -> bool {
        let own_severities = (self.rules.iter().zip(&self.outcomes))
            .all(|(rule, outcome)| rule.severity == outcome.severity);
        let no_period_failed = self.sources.iter().all(|source| match source {
            OutcomeSource::Period(index) => self.periods.failed(*index).is_empty(),
            OutcomeSource::Column(_) => true,
        });
        own_severities && no_period_failed
    }

    /// What each period measured.
    pub fn periods(&self) -> &[PeriodReport] {
        &self.periods.reports
    }

    /// Once every bucket is counted: a rule whose failure rate among checked
    /// rows passes its threshold acts with its escalated severity.
    pub fn escalate(&mut self) {
        for (rule, outcome) in self.rules.iter().zip(self.outcomes.iter_mut()) {
            let Some(escalation) = rule.escalation else {
                continue;
            };
            let checked = outcome.passed + outcome.failed;
            if checked > 0 && outcome.failed as f64 > escalation.above * checked as f64 {
                outcome.severity = escalation.to;
                outcome.escalated = true;
            }
        }
    }

    /// One bucket's rows with their verdicts: own columns + `_dq_errors` +
    /// `_dq_passed` + `_dq_severity`, a judged batch per batch.
    pub fn judge(&mut self, batches: &[RecordBatch]) -> Result<Vec<RecordBatch>> {
        let judged = batches
            .iter()
            .map(|batch| self.judge_batch(batch))
            .collect::<Result<_>>()?;
        tracing::debug!("verdicts built");
        Ok(judged)
    }
}

/// What a bucket's outcomes keep besides the rules' outcomes: the row's
/// position among the bucket's drop rows (the drop's columns are not kept:
/// [`in_drop_order`] puts the outcomes back beside them), whether it found
/// a previous state, and its period.
const OUTCOME_OWN: [&str; 3] = [ROW, HAS_BASELINE, PERIOD];

/// Computes one outcome column per row or reference rule after the
/// [`OUTCOME_OWN`] columns.
async fn row_outcomes(
    baselined: Baselined,
    rules: &[&Rule],
    contract: &Contract,
) -> Result<Vec<RecordBatch>> {
    let frame = baselined.frame;
    let mut exprs: Vec<String> = OUTCOME_OWN.iter().map(|n| quote(n)).collect();
    for (i, rule) in rules.iter().enumerate() {
        if rule.scope != Scope::Aggregate {
            exprs.push(format!(
                "{} AS \"_rule_{}\"",
                outcome_sql(rule, contract),
                i + 1
            ));
        }
    }
    let expr_refs: Vec<&str> = exprs.iter().map(String::as_str).collect();
    match collect_exprs(frame.clone(), &expr_refs).await {
        Ok(batches) => Ok(batches),
        Err(source) => Err(blame_row_rule(&frame, (rules, contract), source).await),
    }
}

async fn collect_exprs(
    frame: datafusion::dataframe::DataFrame,
    exprs: &[&str],
) -> datafusion::error::Result<Vec<RecordBatch>> {
    frame.select_exprs(exprs)?.collect().await
}

/// The rules evaluated together failed: evaluates each row or reference
/// rule alone to name the one at fault; the engine's error if none fails alone.
async fn blame_row_rule(
    frame: &datafusion::dataframe::DataFrame,
    (rules, contract): (&[&Rule], &Contract),
    together: datafusion::error::DataFusionError,
) -> Error {
    let checked = rules.iter().filter(|r| r.scope != Scope::Aggregate);
    for rule in checked {
        let alone = format!("{} AS outcome", outcome_sql(rule, contract));
        if let Err(source) = collect_exprs(frame.clone(), &[alone.as_str()]).await {
            return rule_failure(&format!("rule '{}'", rule.name), source);
        }
    }
    Error::query(Stage::Evaluate)(together)
}

/// `subject` (a rule or metric) could not be evaluated over the rows: an
/// I/O failure stays a (retryable) query error, anything else names it.
pub(crate) fn rule_failure(subject: &str, source: datafusion::error::DataFusionError) -> Error {
    let failure = crate::error::EngineFailure::of_query(&source);
    tracing::debug!(subject, %source, "could not be evaluated");
    if failure == crate::error::EngineFailure::Io {
        return Error::query(Stage::Evaluate)(source);
    }
    Error::Evaluation {
        subject: subject.to_string(),
        failure,
    }
}

/// The outcome expression of one row or reference rule. A trend rule is
/// skipped on a row without a previous state, and on one whose previous
/// state has no value in an optional column the rule reads (a state written
/// before the column was added to the contract, say): there is nothing to
/// compare with.
fn outcome_sql(rule: &Rule, contract: &Contract) -> String {
    let mut cases = Vec::new();
    if let Some(filter) = &rule.filter {
        cases.push(format!(
            "WHEN NOT coalesce(({filter}), false) THEN {}",
            Outcome::NotApplicable.code()
        ));
    }
    if rule.is_trend() {
        let missing = rule
            .prev_columns
            .iter()
            .filter(|c| contract.column(c).is_some_and(|c| c.nullable))
            .map(|c| format!(" OR {} IS NULL", quote(&prev_column(c))));
        cases.push(format!(
            "WHEN NOT \"{HAS_BASELINE}\"{} THEN {}",
            missing.collect::<String>(),
            Outcome::Skipped.code()
        ));
    }
    cases.push(format!(
        "WHEN coalesce(({}), false) THEN {}",
        rule.expression,
        Outcome::Pass.code()
    ));
    format!(
        "CAST(CASE {} ELSE {} END AS TINYINT)",
        cases.join(" "),
        Outcome::Fail.code()
    )
}

/// Reads each rule's outcome for each row of a batch.
struct BatchOutcomes<'a> {
    /// The batch's rows.
    rows: usize,
    columns: Vec<Option<&'a Int8Array>>,
    periods: Option<&'a Date32Array>,
}

/// How many leading columns of a batch of outcomes (from `sources`) are
/// the rows' own.
fn own_columns(batch: &RecordBatch, sources: &[OutcomeSource]) -> Result<usize> {
    let row_rules = sources
        .iter()
        .filter(|s| matches!(s, OutcomeSource::Column(_)))
        .count();
    batch
        .num_columns()
        .checked_sub(row_rules)
        .ok_or_else(|| Error::Internal("evaluate: fewer columns than outcomes".to_string()))
}

impl<'a> BatchOutcomes<'a> {
    fn new(batch: &'a RecordBatch, sources: &[OutcomeSource]) -> Result<BatchOutcomes<'a>> {
        let kept = own_columns(batch, sources)?;
        let columns = sources
            .iter()
            .map(|source| match source {
                OutcomeSource::Column(i) => batch
                    .column(kept + *i)
                    .as_any()
                    .downcast_ref::<Int8Array>()
                    .map(Some)
                    .ok_or_else(|| {
                        Error::Internal("evaluate: an outcome column is not Int8".to_string())
                    }),
                OutcomeSource::Period(_) => Ok(None),
            })
            .collect::<Result<_>>()?;
        let periods = batch
            .column_by_name(PERIOD)
            .and_then(|c| c.as_any().downcast_ref::<Date32Array>());
        Ok(BatchOutcomes {
            rows: batch.num_rows(),
            columns,
            periods,
        })
    }

    /// Whether each row fails at least one rule (most rows fail none and
    /// need no look at each rule): a column at a time, an aggregate rule
    /// through the periods it failed.
    fn failing_rows(
        &self,
        sources: &[OutcomeSource],
        periods: &PeriodOutcomes,
    ) -> Result<Vec<bool>> {
        let mut failing = vec![false; self.rows];
        for (column, source) in self.columns.iter().zip(sources) {
            match (source, column) {
                (OutcomeSource::Column(_), Some(column)) => {
                    let fail = Outcome::Fail.code() as i8;
                    for (fails, code) in failing.iter_mut().zip(known_codes(column)?) {
                        *fails |= *code == fail;
                    }
                }
                (OutcomeSource::Period(index), _) => {
                    let failed = periods.failed(*index);
                    if let (Some(rows), false) = (self.periods, failed.is_empty()) {
                        for (fails, period) in failing.iter_mut().zip(rows) {
                            *fails |= period.is_some_and(|p| failed.contains(&p));
                        }
                    }
                }
                (OutcomeSource::Column(_), None) => {}
            }
        }
        Ok(failing)
    }

    fn outcome(
        &self,
        rule: usize,
        source: &OutcomeSource,
        row: usize,
        periods: &PeriodOutcomes,
    ) -> Result<Outcome> {
        match (source, self.columns[rule]) {
            (OutcomeSource::Column(_), Some(column)) => {
                Outcome::from_code(i64::from(column.value(row)))
            }
            (OutcomeSource::Period(index), _) => Ok(self
                .periods
                .filter(|p| p.is_valid(row))
                .map_or(Outcome::Skipped, |p| periods.outcome(p.value(row), *index))),
            (OutcomeSource::Column(_), None) => Ok(Outcome::Skipped),
        }
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

impl Verdicts<'_> {
    /// A batch's rows with their verdict columns, built a share of the rows
    /// per core.
    fn judge_batch(&mut self, batch: &RecordBatch) -> Result<RecordBatch> {
        let kept = own_columns(batch, &self.sources)?;
        let what = (Stage::Evaluate, "a judging thread");
        let shares = over_row_slices(what, batch, |share| self.verdicts_of(share))?;
        // Each share's columns, then each column's shares made one.
        let (mut fields, mut by_share) = (Vec::new(), Vec::new());
        for (share, baselines) in shares {
            self.with_baseline += baselines.rows;
            self.without_baseline += baselines.others;
            let (share_fields, columns): (Vec<Field>, Vec<ArrayRef>) = share.into_iter().unzip();
            fields = share_fields;
            by_share.push(columns);
        }
        let verdicts = (fields.into_iter().enumerate())
            .map(|(i, field)| {
                let shares: Vec<ArrayRef> = by_share.iter().map(|c| c[i].clone()).collect();
                Ok((field, concat_arrays(&shares)?))
            })
            .collect::<Result<Vec<_>>>()?;
        let own: Vec<usize> = (0..kept).collect();
        let own = batch.project(&own).map_err(Error::arrow(Stage::Evaluate))?;
        with_columns(&own, verdicts, Stage::Evaluate)
    }

    /// The verdict columns of a share of a batch's rows, and how many of
    /// them found a previous state.
    fn verdicts_of(&self, share: &RecordBatch) -> Result<(Vec<(Field, ArrayRef)>, Baselines)> {
        let reader = BatchOutcomes::new(share, &self.sources)?;
        let has_baseline = share
            .column_by_name(HAS_BASELINE)
            .and_then(|c| c.as_any().downcast_ref::<BooleanArray>())
            .ok_or_else(|| Error::Internal("evaluate: _has_baseline is missing".to_string()))?;
        let rows = has_baseline.values().count_set_bits() as u64;
        let baselines = Baselines {
            rows,
            others: share.num_rows() as u64 - rows,
        };
        let mut built = VerdictColumns::with_capacity(share.num_rows());
        let failing = reader.failing_rows(&self.sources, &self.periods)?;
        for (row, fails) in failing.into_iter().enumerate() {
            match fails {
                false => built.append(None),
                true => self.judge_row(&reader, row, &mut built)?,
            }
        }
        Ok((built.finish(), baselines))
    }

    /// The verdict of a row that fails at least one rule: each rule it
    /// fails, in rule order, and the worst severity among them.
    fn judge_row(
        &self,
        reader: &BatchOutcomes,
        row: usize,
        built: &mut VerdictColumns,
    ) -> Result<()> {
        let mut row_worst: Option<Severity> = None;
        for (i, source) in self.sources.iter().enumerate() {
            if reader.outcome(i, source, row, &self.periods)? == Outcome::Fail {
                let severity = self.outcomes[i].severity;
                let rule = self.rules[i];
                append_error(&mut built.errors, &rule.name, severity, &rule.message);
                row_worst = row_worst.max(Some(severity));
            }
        }
        built.append(row_worst);
        Ok(())
    }
}

/// How many rows of a share found a previous state, and how many did not.
struct Baselines {
    rows: u64,
    others: u64,
}

/// One column's shares as one array (the share itself when there is one).
fn concat_arrays(shares: &[ArrayRef]) -> Result<ArrayRef> {
    match shares {
        [one] => Ok(one.clone()),
        _ => {
            let shares: Vec<&dyn Array> = shares.iter().map(AsRef::as_ref).collect();
            arrow::compute::concat(&shares).map_err(Error::arrow(Stage::Evaluate))
        }
    }
}

/// The verdict columns of a batch, as they are built row after row.
struct VerdictColumns {
    errors: ListBuilder<StructBuilder>,
    passed: BooleanBuilder,
    worst: UInt8Builder,
}

impl VerdictColumns {
    fn with_capacity(rows: usize) -> VerdictColumns {
        VerdictColumns {
            errors: ListBuilder::new(StructBuilder::from_fields(error_item_fields(), 0)),
            passed: BooleanBuilder::with_capacity(rows),
            worst: UInt8Builder::with_capacity(rows),
        }
    }

    /// Ends a row whose errors are appended: it passes unless its worst
    /// severity keeps it out of Silver (`None`: it failed no rule).
    fn append(&mut self, worst: Option<Severity>) {
        self.errors.append(true);
        self.passed
            .append_value(worst.is_none_or(|s| s == Severity::Warn));
        self.worst.append_option(worst.map(Severity::code));
    }

    /// `_dq_errors`, `_dq_passed` and `_dq_severity`.
    fn finish(mut self) -> Vec<(Field, ArrayRef)> {
        vec![
            (errors_field(), Arc::new(self.errors.finish())),
            (
                Field::new(DQ_PASSED, DataType::Boolean, false),
                Arc::new(self.passed.finish()),
            ),
            (
                Field::new(DQ_SEVERITY, DataType::UInt8, true),
                Arc::new(self.worst.finish()),
            ),
        ]
    }
}

/// Appends one (rule, severity, message) entry to the current row's error list.
fn append_error(
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

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    #[test]
    fn an_outcome_code_reads_back_and_an_unknown_one_is_an_error() {
        for outcome in Outcome::ALL {
            assert_eq!(Outcome::from_code(outcome.code()).ok(), Some(outcome));
        }
        assert!(Outcome::from_code(9).is_err());
        assert!(Outcome::from_code(-1).is_err());
    }

    #[test]
    fn a_tally_counts_each_outcome_and_names_an_unknown_code() {
        let codes =
            |outcomes: &[Outcome]| -> Vec<i8> { outcomes.iter().map(|o| o.code() as i8).collect() };
        let (fail, pass, skipped, na) = (
            Outcome::Fail,
            Outcome::Pass,
            Outcome::Skipped,
            Outcome::NotApplicable,
        );
        let column = Int8Array::from(codes(&[pass, fail, pass, na, pass, skipped, na]));
        let mut expected = [0u64; 4];
        for (outcome, rows) in [(fail, 1), (pass, 3), (skipped, 1), (na, 2)] {
            expected[outcome as usize] = rows;
        }
        assert_eq!(tally(&column).unwrap(), expected);
        assert_eq!(tally(&Int8Array::from(Vec::<i8>::new())).unwrap(), [0; 4]);
        for bad in [-1i8, 4, 127, -128] {
            let column = Int8Array::from(vec![1, bad, 1]);
            let error = tally(&column).unwrap_err().to_string();
            assert!(error.contains(&format!("code {bad}")), "{error}");
        }
    }

    /// Outcome rows with positions `rows` and outcome `codes`, in two batches.
    fn outcomes(rows: &[u32], codes: &[i8]) -> Vec<RecordBatch> {
        let batch = RecordBatch::try_from_iter([
            (ROW, Arc::new(UInt32Array::from(rows.to_vec())) as ArrayRef),
            ("_rule_1", Arc::new(Int8Array::from(codes.to_vec()))),
        ])
        .unwrap();
        let half = rows.len() / 2;
        vec![batch.slice(0, half), batch.slice(half, rows.len() - half)]
    }

    #[test]
    fn outcomes_in_any_order_go_back_beside_their_own_rows_and_a_gap_is_an_error() {
        let drop = RecordBatch::try_from_iter([(
            "account",
            Arc::new(arrow::array::StringArray::from(vec!["a", "b", "c", "d"])) as ArrayRef,
        )])
        .unwrap();
        let judged = in_drop_order(drop.clone(), &outcomes(&[2, 0, 3, 1], &[12, 10, 13, 11]))
            .unwrap()
            .remove(0);
        let names: Vec<String> = judged
            .schema()
            .fields()
            .iter()
            .map(|f| f.name().clone())
            .collect();
        assert_eq!(names, ["account", "_rule_1"], "_row is not kept");
        let codes = judged
            .column(1)
            .as_any()
            .downcast_ref::<Int8Array>()
            .unwrap();
        assert_eq!(codes.values().to_vec(), [10, 11, 12, 13]);

        let doubled = in_drop_order(drop.clone(), &outcomes(&[2, 0, 2, 1], &[1, 1, 1, 1]));
        assert!(doubled.is_err(), "a row without an outcome is a bug, named");
        let short = in_drop_order(drop.clone(), &outcomes(&[0, 1, 2], &[1, 1, 1]));
        assert!(short.is_err());
        let empty = drop.slice(0, 0);
        assert!(in_drop_order(empty, &[]).unwrap().is_empty());
        assert!(in_drop_order(drop, &[]).is_err());
    }

    fn rule(name: &str, scope: Scope, severity: Severity) -> Rule {
        Rule {
            name: name.to_string(),
            expression: "true".to_string(),
            scope,
            severity,
            contributor_types: vec!["*".to_string()],
            message: format!("{name} failed"),
            filter: None,
            escalation: None,
            origin: "test".to_string(),
            prev_columns: BTreeSet::new(),
            references: BTreeSet::new(),
            column: None,
        }
    }

    /// A judged row's rules failed, whether it passed, and its worst severity code.
    fn verdict(batch: &RecordBatch, row: usize) -> (Vec<String>, bool, Option<u8>) {
        let errors = batch
            .column_by_name(DQ_ERRORS)
            .unwrap()
            .as_any()
            .downcast_ref::<arrow::array::ListArray>()
            .unwrap()
            .value(row);
        let rules = errors
            .as_any()
            .downcast_ref::<arrow::array::StructArray>()
            .unwrap()
            .column(0)
            .as_any()
            .downcast_ref::<arrow::array::StringArray>()
            .unwrap()
            .iter()
            .map(|r| r.unwrap().to_string())
            .collect();
        let passed = batch.column_by_name(DQ_PASSED).unwrap();
        let passed = passed.as_any().downcast_ref::<BooleanArray>().unwrap();
        let worst = batch.column_by_name(DQ_SEVERITY).unwrap();
        let worst = worst
            .as_any()
            .downcast_ref::<arrow::array::UInt8Array>()
            .unwrap();
        (
            rules,
            passed.value(row),
            worst.is_valid(row).then(|| worst.value(row)),
        )
    }

    /// January's and February's periods (days since the epoch).
    const JANUARY: i32 = 19_723;
    const FEBRUARY: i32 = 19_754;

    /// Six rows' outcomes of two row rules (`_rule_1`, `_rule_3`) around
    /// an aggregate rule's, in January, February or no period.
    fn six_rows() -> RecordBatch {
        let (january, february) = (JANUARY, FEBRUARY);
        let [fail, pass, skipped, not_applicable] = Outcome::ALL.map(|o| o.code() as i8);
        RecordBatch::try_from_iter([
            (
                ROW,
                Arc::new(UInt32Array::from(vec![0, 1, 2, 3, 4, 5])) as ArrayRef,
            ),
            (
                HAS_BASELINE,
                Arc::new(BooleanArray::from(vec![
                    true, true, true, true, false, true,
                ])),
            ),
            (
                PERIOD,
                Arc::new(Date32Array::from(vec![
                    Some(january),
                    Some(january),
                    Some(february),
                    Some(february),
                    None,
                    Some(january),
                ])),
            ),
            (
                "_rule_1",
                Arc::new(Int8Array::from(vec![pass, fail, pass, pass, skipped, pass])),
            ),
            (
                "_rule_3",
                Arc::new(Int8Array::from(vec![
                    pass,
                    pass,
                    pass,
                    fail,
                    not_applicable,
                    fail,
                ])),
            ),
        ])
        .unwrap()
    }

    /// A row rule that quarantines, an aggregate rule that quarantines and
    /// a row rule that warns, as [`six_rows`]' outcome columns are.
    fn complete_volume_watch() -> [Rule; 3] {
        [
            rule("complete", Scope::Row, Severity::Quarantine),
            rule("volume", Scope::Aggregate, Severity::Quarantine),
            rule("watch", Scope::Row, Severity::Warn),
        ]
    }

    #[test]
    fn rows_are_counted_and_judged_a_column_at_a_time_with_their_periods_outcomes() {
        let rules = complete_volume_watch();
        let rules: Vec<&Rule> = rules.iter().collect();
        let (january, february) = (JANUARY, FEBRUARY);
        let batch = six_rows();
        // Counted over two batches: a period's rows may span them.
        let mut counts = OutcomeCounts::new(&rules);
        counts
            .count(&[batch.slice(0, 3), batch.slice(3, 3)])
            .unwrap();
        let periods = PeriodOutcomes::of(vec![
            (january, vec![Outcome::Pass]),
            (february, vec![Outcome::Fail]),
        ]);
        let mut verdicts = Verdicts::new(&rules, periods, counts);
        let tallies: Vec<[u64; 4]> = verdicts
            .outcomes
            .iter()
            .map(|o| [o.failed, o.passed, o.skipped_no_baseline, o.not_applicable])
            .collect();
        assert_eq!(tallies, [[1, 4, 1, 0], [2, 3, 1, 0], [2, 3, 0, 1]]);

        let judged = verdicts.judge(&[batch]).unwrap().remove(0);
        let quarantine = Some(Severity::Quarantine.code());
        let expected = [
            (vec![], true, None),
            (vec!["complete".to_string()], false, quarantine),
            (vec!["volume".to_string()], false, quarantine),
            (
                vec!["volume".to_string(), "watch".to_string()],
                false,
                quarantine,
            ),
            (vec![], true, None),
            // A warning alone lets the row through, named.
            (vec!["watch".to_string()], true, Some(Severity::Warn.code())),
        ];
        for (row, expected) in expected.into_iter().enumerate() {
            assert_eq!(verdict(&judged, row), expected, "row {row}");
        }
        assert_eq!((verdicts.with_baseline, verdicts.without_baseline), (5, 1));
        assert_eq!(
            judged.num_columns(),
            3 + 3,
            "own columns, then the verdicts"
        );
    }

    #[test]
    fn a_large_batch_counted_and_judged_in_shares_per_core_gives_what_small_batches_give() {
        let rules = complete_volume_watch();
        let rules: Vec<&Rule> = rules.iter().collect();
        let periods = || {
            PeriodOutcomes::of(vec![
                (JANUARY, vec![Outcome::Pass]),
                (FEBRUARY, vec![Outcome::Fail]),
            ])
        };
        // 72,000 rows: over the rows from which work is shared over the cores.
        let copies = vec![six_rows(); 12_000];
        let large = arrow::compute::concat_batches(&six_rows().schema(), &copies).unwrap();
        let judged_as = |batches: &[RecordBatch]| {
            let mut counts = OutcomeCounts::new(&rules);
            counts.count(batches).unwrap();
            let mut verdicts = Verdicts::new(&rules, periods(), counts);
            let judged = verdicts.judge(batches).unwrap();
            // A judged batch per batch, whatever the shares it was judged in.
            assert_eq!(judged.len(), batches.len());
            let whole = arrow::compute::concat_batches(&judged[0].schema(), &judged).unwrap();
            let tallies: Vec<[u64; 4]> = (verdicts.outcomes.iter())
                .map(|o| [o.failed, o.passed, o.skipped_no_baseline, o.not_applicable])
                .collect();
            let baseline = (verdicts.with_baseline, verdicts.without_baseline);
            (tallies, baseline, whole)
        };
        let (tallies, baseline, whole) = judged_as(std::slice::from_ref(&large));
        let (small_tallies, small_baseline, small_whole) = judged_as(&copies);
        assert_eq!(
            tallies,
            [
                [12_000, 48_000, 12_000, 0],
                [24_000, 36_000, 12_000, 0],
                [24_000, 36_000, 0, 12_000]
            ]
        );
        assert_eq!((tallies, baseline), (small_tallies, small_baseline));
        assert_eq!(baseline, (60_000, 12_000));
        assert_eq!(whole, small_whole);
        assert_eq!(whole.num_rows(), 72_000);
        assert_eq!(
            verdict(&whole, 6 * 11_999 + 5),
            (vec!["watch".to_string()], true, Some(Severity::Warn.code()))
        );
    }

    #[test]
    fn provisional_verdicts_are_final_unless_a_period_fails_or_a_rule_escalates() {
        let watch = |above: f64, to: Severity| Rule {
            escalation: Some(crate::config::rules::Escalation { above, to }),
            ..rule("watch", Scope::Row, Severity::Warn)
        };
        let settled = |watch: Rule, february: Outcome| {
            let rules = [
                rule("complete", Scope::Row, Severity::Quarantine),
                rule("volume", Scope::Aggregate, Severity::Quarantine),
                watch,
            ];
            let rules: Vec<&Rule> = rules.iter().collect();
            let mut counts = OutcomeCounts::new(&rules);
            counts.count(&[six_rows()]).unwrap();
            let periods = PeriodOutcomes::of(vec![
                (JANUARY, vec![Outcome::Pass]),
                (FEBRUARY, vec![february]),
            ]);
            let mut verdicts = Verdicts::new(&rules, periods, counts);
            verdicts.escalate();
            let judged = verdicts.judge(&[six_rows()]).unwrap();
            let provisional = Verdicts::provisional(&rules).judge(&[six_rows()]).unwrap();
            (verdicts.as_provisional(), judged == provisional)
        };
        // watch fails 2 of 5 checked rows: 40%.
        let quarantine = Severity::Quarantine;
        assert_eq!(settled(watch(0.5, quarantine), Outcome::Pass), (true, true));
        assert_eq!(
            settled(watch(0.3, quarantine), Outcome::Pass),
            (false, false)
        );
        assert_eq!(
            settled(watch(0.5, quarantine), Outcome::Fail),
            (false, false)
        );
        // Escalated to the severity it has: the verdicts do not change.
        assert_eq!(
            settled(watch(0.3, Severity::Warn), Outcome::Pass),
            (true, true)
        );

        // Whether they may differ at all (else no outcome is kept for a
        // second judgement): an aggregate rule, or an escalation to
        // another severity.
        let may_differ = |rules: &[Rule]| {
            let rules: Vec<&Rule> = rules.iter().collect();
            Verdicts::provisional(&rules).may_differ()
        };
        let complete = || rule("complete", Scope::Row, Severity::Quarantine);
        assert!(!may_differ(&[complete()]));
        assert!(!may_differ(&[complete(), watch(0.3, Severity::Warn)]));
        assert!(may_differ(&[complete(), watch(0.3, quarantine)]));
        let volume = rule("volume", Scope::Aggregate, Severity::Quarantine);
        assert!(may_differ(&[complete(), volume]));
    }

    #[test]
    fn an_unknown_outcome_code_is_an_error_when_counted_and_when_judged() {
        let rules = [rule("complete", Scope::Row, Severity::Quarantine)];
        let rules: Vec<&Rule> = rules.iter().collect();
        let batch = RecordBatch::try_from_iter([
            (ROW, Arc::new(UInt32Array::from(vec![0])) as ArrayRef),
            (HAS_BASELINE, Arc::new(BooleanArray::from(vec![true]))),
            ("_rule_1", Arc::new(Int8Array::from(vec![9]))),
        ])
        .unwrap();
        let mut counts = OutcomeCounts::new(&rules);
        assert!(counts.count(std::slice::from_ref(&batch)).is_err());
        let mut verdicts = Verdicts::new(&rules, PeriodOutcomes::default(), counts);
        assert!(verdicts.judge(&[batch]).is_err());
    }
}
