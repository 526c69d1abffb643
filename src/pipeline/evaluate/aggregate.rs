//! Aggregate rules: named metrics per contributor and period (the order
//! column's month), compared with the previous period (`prev_<metric>`) and
//! the mean of the last N periods (`avg_<metric>`).
//!
//! Previous periods come from committed Silver history with the same
//! union-and-LAG trick as rows: the drop's periods are unioned with the
//! history periods before the drop's earliest one, so a backfill's February
//! is compared with its January (DESIGN.md invariant 8). A period with no
//! previous period skips the rules (invariant 9).

use std::collections::BTreeMap;

use arrow::array::{Array, Date32Array, Float64Array, Int64Array};
use arrow::compute::cast;
use arrow::datatypes::{DataType, SchemaRef};
use arrow::record_batch::RecordBatch;
use chrono::NaiveDate;
use datafusion::prelude::SessionContext;
use serde::{Deserialize, Serialize};

use super::committed::CommittedPeriods;
use super::metrics::{drop_metric_columns, metrics_by_period_sql};
use crate::config::rules::Metric;
use crate::config::rules::Rule;
use crate::config::values::UNIX_EPOCH_FROM_CE;
use crate::core::spill::SpilledTable;
use crate::core::sql::{
    QueryMemory, collect, new_session, quote, register_spilled, register_table, run_frame,
};
use crate::error::{Error, Result};
use crate::pipeline::baseline::{Baselined, Missing};
use crate::pipeline::evaluate::{Outcome, rule_failure};
use crate::stage::Stage;
use crate::transient::{MISSING_ENTITIES, PERIOD, prev_column};

/// One period's metrics and rule outcomes, for the summary.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
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
    /// A drop holds a handful of periods: a list beats a hash map.
    by_period: Vec<(i32, Vec<Outcome>)>,
    /// What each period measured.
    pub reports: Vec<PeriodReport>,
}

impl PeriodOutcomes {
    /// The outcomes of the aggregate rules (in rule order) by period.
    #[cfg(test)]
    pub(crate) fn of(by_period: Vec<(i32, Vec<Outcome>)>) -> PeriodOutcomes {
        PeriodOutcomes {
            by_period,
            reports: Vec::new(),
        }
    }

    /// The periods aggregate rule `index` failed.
    pub fn failed(&self, index: usize) -> Vec<i32> {
        self.by_period
            .iter()
            .filter(|(_, outcomes)| outcomes.get(index) == Some(&Outcome::Fail))
            .map(|(period, _)| *period)
            .collect()
    }

    /// The outcome of aggregate rule `index` for `period`; skipped if the period was not measured.
    pub fn outcome(&self, period: i32, index: usize) -> Outcome {
        self.by_period
            .iter()
            .find(|(p, _)| *p == period)
            .and_then(|(_, o)| o.get(index))
            .copied()
            .unwrap_or(Outcome::Skipped)
    }
}

/// Rows of one schema, in memory.
pub type Rows = (SchemaRef, Vec<RecordBatch>);

/// One bucket's share of the drop's metrics.
pub struct BucketMetrics {
    /// The columns the metrics read and the period of every row, kept until
    /// every bucket is baselined.
    pub rows: Rows,
    /// What the bucket counts, per period, of each metric that counts
    /// entities (`None`: no metric does): the drop's count is the sum over
    /// its buckets, each bucket's distinct values counted while the bucket
    /// is in memory instead of over every row of the drop at the end.
    pub entity_counts: Option<Rows>,
}

/// The metric rows of `baselined`'s rows (one bucket's) and its counts of
/// the metrics that count entities.
pub async fn bucket_metrics(baselined: &Baselined, metrics: &[Metric]) -> Result<BucketMetrics> {
    let query = |sql: String| async move {
        let frame = baselined
            .ctx
            .sql(&sql)
            .await
            .map_err(Error::query(Stage::Aggregate))?;
        collect(frame, Stage::Aggregate).await
    };
    let rows = query(drop_rows_sql(metrics)).await?;
    let counting: Vec<Metric> = metrics
        .iter()
        .filter(|m| m.counts_entities)
        .cloned()
        .collect();
    let entity_counts = match counting.is_empty() {
        true => None,
        false => {
            // Counted from the metric rows just collected, not projected again.
            register_table(&baselined.ctx, BUCKET_ROWS, rows.clone(), Stage::Aggregate)?;
            let counts = query(metrics_by_period_sql(&counting, BUCKET_ROWS, None)).await;
            baselined
                .ctx
                .deregister_table(BUCKET_ROWS)
                .map_err(Error::query(Stage::Aggregate))?;
            Some(counts?)
        }
    };
    Ok(BucketMetrics {
        rows,
        entity_counts,
    })
}

/// The metric rows of every bucket, spilled, and their counts of the
/// metrics that count entities.
pub(crate) struct DropMetricRows {
    /// The buckets' metric rows.
    pub(crate) rows: SpilledTable,
    /// Every bucket's counts (see [`BucketMetrics::entity_counts`]).
    pub(crate) entity_counts: Option<Rows>,
}

/// Computes the drop's periods' metrics and evaluates `rules` (all of
/// aggregate scope) for every period of the drop, against the committed
/// periods; `missing`: the entities the drop leaves out, counted per period.
pub(crate) async fn evaluate_aggregates(
    rows: Option<DropMetricRows>,
    (metrics, missing): (&[Metric], Option<&Missing>),
    rules: &[&Rule],
    (average_periods, committed): (u32, Option<CommittedPeriods>),
    memory: &QueryMemory,
) -> Result<PeriodOutcomes> {
    // Committed periods are measured only when there are aggregate rules,
    // metrics and rows to compare.
    let (Some(committed), Some(rows)) = (committed, rows) else {
        return Ok(PeriodOutcomes::default());
    };
    let ctx = &new_session(memory);
    register_metric_rows(ctx, rows.rows, missing).await?;
    let parts = match rows.entity_counts {
        Some(counts) => {
            register_table(ctx, ENTITY_COUNTS, counts, Stage::Aggregate)?;
            Some(ENTITY_COUNTS)
        }
        None => None,
    };
    register_table(
        ctx,
        "committed_periods",
        (committed.schema, committed.batches),
        Stage::Aggregate,
    )?;
    let sql = periods_sql(metrics, rules, (average_periods, parts));
    let batches = match collect_sql(ctx, &sql).await {
        Ok(batches) => batches,
        Err(source) => {
            let measured = (average_periods, parts);
            return Err(blame_aggregate(ctx, (metrics, rules), measured, source).await);
        }
    };
    let mut outcomes = PeriodOutcomes::default();
    for batch in &batches {
        read_periods(batch, metrics, rules, &mut outcomes)?;
    }
    outcomes.reports.sort_by(|a, b| a.period.cmp(&b.period));
    Ok(outcomes)
}

/// One bucket's metric rows, while its entities are counted.
const BUCKET_ROWS: &str = "bucket_metric_rows";

/// The table of the buckets' counts of the metrics that count entities.
const ENTITY_COUNTS: &str = "entity_counts";

/// Each row's count of the entities its period (`p`) leaves out.
fn missing_counts_sql(missing: &Missing) -> String {
    let cases: String = missing
        .by_period
        .iter()
        .map(|(period, count)| format!(" WHEN DATE '{period}' THEN CAST({count} AS BIGINT)"))
        .collect();
    match cases.is_empty() {
        true => "CAST(0 AS BIGINT)".to_string(),
        false => format!("CASE p{cases} ELSE CAST(0 AS BIGINT) END"),
    }
}

/// Registers the drop's metric rows as `aggregate_rows`, each with the
/// count of entities its period leaves out when `missing` is known.
async fn register_metric_rows(
    ctx: &SessionContext,
    rows: SpilledTable,
    missing: Option<&Missing>,
) -> Result<()> {
    register_spilled(ctx, "metric_rows", rows, Stage::Aggregate).await?;
    // The counts per period, as a CASE over the drop's few periods (a join
    // would hold every metric row in a hash table that cannot spill).
    let sql = match missing {
        Some(missing) => format!(
            "SELECT *, {} AS {} FROM metric_rows",
            missing_counts_sql(missing),
            quote(MISSING_ENTITIES)
        ),
        None => "SELECT * FROM metric_rows".to_string(),
    };
    let view = ctx
        .sql(&sql)
        .await
        .map_err(Error::query(Stage::Aggregate))?;
    ctx.register_table("aggregate_rows", view.into_view())
        .map_err(Error::query(Stage::Aggregate))?;
    Ok(())
}

async fn collect_sql(
    ctx: &datafusion::prelude::SessionContext,
    sql: &str,
) -> datafusion::error::Result<Vec<RecordBatch>> {
    run_frame(ctx.sql(sql).await?).await
}

/// The metrics and aggregate rules measured together failed: measures each
/// metric alone over the drop's rows, then each rule alone, to name the one
/// at fault; the engine's error if none fails alone.
async fn blame_aggregate(
    ctx: &datafusion::prelude::SessionContext,
    (metrics, rules): (&[Metric], &[&Rule]),
    (average_periods, parts): (u32, Option<&str>),
    together: datafusion::error::DataFusionError,
) -> Error {
    let metric_alone = metrics.iter().map(|m| {
        let sql = metrics_by_period_sql(std::slice::from_ref(m), "aggregate_rows", parts);
        (format!("metric '{}'", m.name), sql)
    });
    let rule_alone = rules.iter().map(|r| {
        let sql = periods_sql(metrics, std::slice::from_ref(r), (average_periods, parts));
        (format!("rule '{}'", r.name), sql)
    });
    for (subject, sql) in metric_alone.chain(rule_alone) {
        if let Err(source) = collect_sql(ctx, &sql).await {
            return rule_failure(&subject, source);
        }
    }
    Error::query(Stage::Aggregate)(together)
}

/// The drop's rows with their period (computed by the baseline): only the
/// columns the metrics read.
fn drop_rows_sql(metrics: &[Metric]) -> String {
    format!(
        "SELECT {}{} AS p FROM baselined",
        drop_metric_columns(metrics),
        quote(PERIOD)
    )
}

/// The drop's periods' metrics (those that count entities summed from the
/// buckets' counts in `parts`) next to the committed periods', compared with
/// the previous periods, and the rules' outcomes for the drop's periods.
fn periods_sql(
    metrics: &[Metric],
    rules: &[&Rule],
    (average_periods, parts): (u32, Option<&str>),
) -> String {
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
                "CASE WHEN NOT has_previous THEN {} WHEN coalesce(({}), false) THEN {} ELSE {} END AS \"_rule_{i}\"",
                Outcome::Skipped.code(),
                r.expression,
                Outcome::Pass.code(),
                Outcome::Fail.code()
            )
        })
        .collect();
    let selected: Vec<String> = metrics
        .iter()
        .flat_map(|m| {
            [
                quote(&m.name),
                quote(&prev_column(&m.name)),
                quote(&format!("avg_{}", m.name)),
            ]
        })
        .chain(outcomes)
        .collect();
    format!(
        "WITH drop_periods AS ({drop_periods}), \
         periods AS (SELECT *, TRUE AS in_batch FROM drop_periods \
           UNION ALL SELECT *, FALSE AS in_batch FROM committed_periods), \
         compared AS (SELECT *, {windows}, LAG(p) OVER (ORDER BY p) IS NOT NULL AS has_previous FROM periods) \
         SELECT p AS {period_name}, {selected} FROM compared WHERE in_batch",
        drop_periods = metrics_by_period_sql(metrics, "aggregate_rows", parts),
        windows = windows.join(", "),
        period_name = quote(PERIOD),
        selected = selected.join(", "),
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
        .map(|i| cast(batch.column(i), &DataType::Float64).map_err(Error::arrow(Stage::Aggregate)))
        .collect::<Result<Vec<_>>>()?;
    let first_rule = 1 + metrics.len() * 3;
    for row in 0..batch.num_rows() {
        let value = |i: usize| {
            let column = values[i].as_any().downcast_ref::<Float64Array>()?;
            column.is_valid(row).then(|| column.value(row))
        };
        let mut report = PeriodReport {
            period: NaiveDate::from_num_days_from_ce_opt(periods.value(row) + UNIX_EPOCH_FROM_CE)
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
            let outcome = Outcome::from_code(column.value(row))?;
            period_outcomes.push(outcome);
            report
                .rules
                .insert(rule.name.clone(), outcome.label().to_string());
        }
        outcomes
            .by_period
            .push((periods.value(row), period_outcomes));
        outcomes.reports.push(report);
    }
    Ok(())
}
