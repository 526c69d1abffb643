//! Aggregate rules: named metrics per contributor and period (the order
//! column's month), compared with the previous period (`prev_<metric>`) and
//! the mean of the last N periods (`avg_<metric>`).
//!
//! Previous periods come from committed Silver history with the same
//! union-and-LAG trick as rows: the drop's periods are unioned with the
//! history periods before the drop's earliest one, so a backfill's February
//! is compared with its January (DESIGN.md invariant 8). A period with no
//! previous period skips the rules (invariant 9).

use std::collections::{BTreeMap, HashMap};

use arrow::array::{Array, Date32Array, Float64Array, Int64Array};
use arrow::compute::cast;
use arrow::datatypes::DataType;
use arrow::record_batch::RecordBatch;
use chrono::{Datelike, NaiveDate};
use serde::Serialize;

use crate::config::contract::Contract;
use crate::config::plan::Metric;
use crate::config::rules::Rule;
use crate::error::{Error, Result};
use crate::pipeline::baseline::{Baselined, quote, register_frame, sql_string};
use crate::pipeline::evaluate::{FAIL, PASS, SKIPPED, outcome_label};
use crate::transient::{PERIOD, prev_column};

/// One period's metrics and rule outcomes, for the summary.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct PeriodReport {
    /// First day of the period.
    pub period: String,
    /// Metric values this period.
    pub metrics: BTreeMap<String, Option<f64>>,
    /// Metric values of the previous period.
    pub previous: BTreeMap<String, Option<f64>>,
    /// Mean over the last N periods.
    pub average: BTreeMap<String, Option<f64>>,
    /// pass / fail / skipped per aggregate rule.
    pub rules: BTreeMap<String, String>,
}

/// Aggregate outcomes by period (days since the epoch), in the order of the rules given.
#[derive(Debug, Default)]
pub struct PeriodOutcomes {
    by_period: HashMap<i32, Vec<i64>>,
    /// What each period measured.
    pub reports: Vec<PeriodReport>,
}

impl PeriodOutcomes {
    /// The outcome of aggregate rule `index` for `period`; skipped if the period was not measured.
    pub fn outcome(&self, period: i32, index: usize) -> i64 {
        self.by_period
            .get(&period)
            .and_then(|o| o.get(index))
            .copied()
            .unwrap_or(SKIPPED)
    }
}

/// Computes the metrics and evaluates `rules` (all of aggregate scope) for every period of the drop.
pub async fn evaluate_aggregates(
    baselined: &Baselined,
    contract: &Contract,
    metrics: &[Metric],
    rules: &[&Rule],
    average_periods: u32,
) -> Result<PeriodOutcomes> {
    let (Some((from, _)), Some(first_period)) = (baselined.window, baselined.first_period) else {
        return Ok(PeriodOutcomes::default());
    };
    if rules.is_empty() || metrics.is_empty() {
        return Ok(PeriodOutcomes::default());
    }
    let ctx = &baselined.ctx;
    let rows = rows_sql(
        contract,
        metrics,
        &baselined.contributor,
        (from, first_period),
    );
    let rows = ctx.sql(&rows).await.map_err(Error::query("aggregate"))?;
    register_frame(ctx, "aggregate_rows", rows).await?;
    let sql = periods_sql(metrics, rules, average_periods);
    let batches = ctx
        .sql(&sql)
        .await
        .map_err(Error::query("aggregate"))?
        .collect()
        .await
        .map_err(Error::query("aggregate"))?;
    ctx.deregister_table("aggregate_rows")
        .map_err(Error::query("aggregate"))?;
    let mut outcomes = PeriodOutcomes::default();
    for batch in &batches {
        read_periods(batch, metrics, rules, &mut outcomes)?;
    }
    outcomes.reports.sort_by(|a, b| a.period.cmp(&b.period));
    Ok(outcomes)
}

/// The drop's rows and the history periods' rows, with their period: only
/// the columns the metrics read.
fn rows_sql(
    contract: &Contract,
    metrics: &[Metric],
    contributor: &str,
    (from, first_period): (NaiveDate, NaiveDate),
) -> String {
    let order = quote(&contract.order_column);
    let mut columns: Vec<&str> = metrics
        .iter()
        .flat_map(|m| m.columns.iter().map(String::as_str))
        .collect();
    columns.sort_unstable();
    columns.dedup();
    let columns: String = columns.iter().map(|c| format!("{}, ", quote(c))).collect();
    let period = format!("CAST(date_trunc('month', {order}) AS DATE)");
    let first_day = from.with_day(1).unwrap_or(from);
    format!(
        "SELECT {columns}{period} AS p, TRUE AS in_batch FROM batch \
         UNION ALL \
         SELECT {columns}{period} AS p, FALSE AS in_batch FROM silver \
         WHERE {contributor_column} = {contributor} AND {order} >= DATE '{first_day}' \
           AND {order} < DATE '{first_period}'",
        contributor_column = quote(&contract.contributor_column),
        contributor = sql_string(contributor),
    )
}

/// Each period's metrics (one aggregation per metric, joined on the period:
/// a metric counting distinct values is then planned as a plain GROUP BY,
/// far cheaper than a distinct accumulator), compared with the previous
/// periods, and the rules' outcomes, over `aggregate_rows`.
fn periods_sql(metrics: &[Metric], rules: &[&Rule], average_periods: u32) -> String {
    let metric_tables: String = metrics
        .iter()
        .enumerate()
        .map(|(i, m)| {
            format!(
                ", metric_{i} AS (SELECT p, {} AS {} FROM aggregate_rows GROUP BY p)",
                m.expression,
                quote(&m.name)
            )
        })
        .collect();
    let metric_columns: String = metrics
        .iter()
        .enumerate()
        .map(|(i, m)| format!(", metric_{i}.{}", quote(&m.name)))
        .collect();
    let metric_joins: String = (0..metrics.len())
        .map(|i| format!(" LEFT JOIN metric_{i} ON metric_{i}.p = flags.p"))
        .collect();
    let windows: Vec<String> = metrics
        .iter()
        .flat_map(|m| {
            let name = quote(&m.name);
            [
                format!("LAG({name}) OVER (ORDER BY p) AS {}", quote(&prev_column(&m.name))),
                format!(
                    "AVG(CAST({name} AS DOUBLE)) OVER (ORDER BY p ROWS BETWEEN {average_periods} PRECEDING AND 1 PRECEDING) AS {}",
                    quote(&format!("avg_{}", m.name))
                ),
            ]
        })
        .collect();
    let outcomes: Vec<String> = rules
        .iter()
        .enumerate()
        .map(|(i, r)| {
            format!(
                "CASE WHEN NOT has_previous THEN {SKIPPED} WHEN coalesce(({}), false) THEN {PASS} ELSE {FAIL} END AS \"_rule_{i}\"",
                r.expression
            )
        })
        .collect();
    let metric_names: Vec<String> = metrics
        .iter()
        .flat_map(|m| {
            [
                quote(&m.name),
                quote(&prev_column(&m.name)),
                quote(&format!("avg_{}", m.name)),
            ]
        })
        .collect();
    format!(
        "WITH flags AS (SELECT p, bool_or(in_batch) AS in_batch FROM aggregate_rows GROUP BY p){metric_tables}, \
         periods AS (SELECT flags.p, flags.in_batch{metric_columns} FROM flags{metric_joins}), \
         compared AS (SELECT *, {windows}, LAG(p) OVER (ORDER BY p) IS NOT NULL AS has_previous FROM periods) \
         SELECT p AS {period_name}, {metric_names}, {outcomes} FROM compared WHERE in_batch",
        windows = windows.join(", "),
        period_name = quote(PERIOD),
        metric_names = metric_names.join(", "),
        outcomes = outcomes.join(", "),
    )
}

fn read_periods(
    batch: &RecordBatch,
    metrics: &[Metric],
    rules: &[&Rule],
    outcomes: &mut PeriodOutcomes,
) -> Result<()> {
    let internal = |what: &str| Error::Internal(format!("aggregate: {what}"));
    let periods = batch
        .column(0)
        .as_any()
        .downcast_ref::<Date32Array>()
        .ok_or_else(|| internal("period is not a date"))?;
    let values = (1..=metrics.len() * 3)
        .map(|i| cast(batch.column(i), &DataType::Float64).map_err(Error::arrow("aggregate")))
        .collect::<Result<Vec<_>>>()?;
    let first_rule = 1 + metrics.len() * 3;
    for row in 0..batch.num_rows() {
        let value = |i: usize| {
            let column = values[i].as_any().downcast_ref::<Float64Array>()?;
            column.is_valid(row).then(|| column.value(row))
        };
        let mut report = PeriodReport {
            period: NaiveDate::from_num_days_from_ce_opt(periods.value(row) + 719_163)
                .map(|d| d.to_string())
                .unwrap_or_default(),
            metrics: BTreeMap::new(),
            previous: BTreeMap::new(),
            average: BTreeMap::new(),
            rules: BTreeMap::new(),
        };
        for (m, metric) in metrics.iter().enumerate() {
            report.metrics.insert(metric.name.clone(), value(3 * m));
            report
                .previous
                .insert(metric.name.clone(), value(3 * m + 1));
            report.average.insert(metric.name.clone(), value(3 * m + 2));
        }
        let mut period_outcomes = Vec::with_capacity(rules.len());
        for (i, rule) in rules.iter().enumerate() {
            let column = batch
                .column(first_rule + i)
                .as_any()
                .downcast_ref::<Int64Array>()
                .ok_or_else(|| internal("an outcome is not Int64"))?;
            period_outcomes.push(column.value(row));
            report.rules.insert(
                rule.name.clone(),
                outcome_label(column.value(row)).to_string(),
            );
        }
        outcomes
            .by_period
            .insert(periods.value(row), period_outcomes);
        outcomes.reports.push(report);
    }
    Ok(())
}
