//! The SQL of metrics: what the drop's periods and the committed periods are
//! both measured with. Every metric is a DOUBLE, whatever its expression
//! gives, so that the drop's periods and the committed ones line up.

use std::collections::BTreeSet;

use crate::config::rules::Metric;
use crate::core::sql::quote;
use crate::transient::{MISSING_ENTITIES, prev_column};

/// The columns the metrics read from the drop's rows (previous values
/// included), quoted, each followed by a comma; the count of missing
/// entities is left out (it is known per period once every bucket of the
/// drop is baselined, and joined then).
pub fn drop_metric_columns(metrics: &[Metric]) -> String {
    selected(
        metrics
            .iter()
            .flat_map(|m| {
                let prev = m.prev_columns.iter().map(|c| prev_column(c));
                m.columns.iter().cloned().chain(prev)
            })
            .filter(|c| c != MISSING_ENTITIES),
    )
}

/// The columns the metrics measured on committed periods read from Silver,
/// and the `also` columns, quoted, each followed by a comma.
pub fn committed_metric_columns(metrics: &[Metric], also: &[String]) -> String {
    selected(
        metrics
            .iter()
            .filter(|m| m.from_silver())
            .flat_map(|m| m.columns.iter().cloned())
            .chain(also.iter().cloned()),
    )
}

fn selected(columns: impl Iterator<Item = String>) -> String {
    let columns: BTreeSet<String> = columns.collect();
    columns.iter().map(|c| format!("{}, ", quote(c))).collect()
}

/// The metrics as measured on committed periods' Silver rows: one that is
/// not measured there (it reads previous values, or it is `missing_entities`)
/// is NULL.
pub fn committed_metrics(metrics: &[Metric]) -> Vec<Metric> {
    metrics
        .iter()
        .map(|m| match m.from_silver() {
            false => Metric {
                expression: "CAST(NULL AS DOUBLE)".to_string(),
                columns: BTreeSet::new(),
                prev_columns: BTreeSet::new(),
                counts_entities: false,
                ..m.clone()
            },
            true => m.clone(),
        })
        .collect()
}

/// Each period's metrics over the rows of `table` (one aggregation per
/// metric, joined on the period: a metric counting distinct values is then
/// planned as a plain GROUP BY, far cheaper than a distinct accumulator);
/// with `parts` (a table of the period and each metric that counts
/// entities: one row per bucket of a drop's rows, or per committed month
/// counted apart), those metrics are the sums of its counts.
pub fn metrics_by_period_sql(metrics: &[Metric], table: &str, parts: Option<&str>) -> String {
    let metric_tables: String = metrics
        .iter()
        .enumerate()
        .map(|(i, m)| {
            let name = quote(&m.name);
            match parts.filter(|_| m.counts_entities) {
                Some(parts) => format!(
                    ", metric_{i} AS (SELECT p, CAST(sum({name}) AS DOUBLE) AS {name} FROM {parts} GROUP BY p)"
                ),
                None => format!(
                    ", metric_{i} AS (SELECT p, CAST({} AS DOUBLE) AS {name} FROM {table} GROUP BY p)",
                    m.expression
                ),
            }
        })
        .collect();
    let metric_columns: String = metrics
        .iter()
        .enumerate()
        .map(|(i, m)| format!(", metric_{i}.{}", quote(&m.name)))
        .collect();
    let metric_joins: String = (0..metrics.len())
        .map(|i| format!(" LEFT JOIN metric_{i} ON metric_{i}.p = periods.p"))
        .collect();
    format!(
        "WITH periods AS (SELECT DISTINCT p FROM {table}){metric_tables} \
         SELECT periods.p{metric_columns} FROM periods{metric_joins}"
    )
}
