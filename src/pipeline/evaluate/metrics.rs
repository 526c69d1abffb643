//! The SQL of metrics: what the drop's periods and the committed periods are
//! both measured with.

use crate::config::plan::Metric;
use crate::core::sql::quote;

/// The columns the metrics read, quoted, each followed by a comma.
pub fn metric_columns(metrics: &[Metric]) -> String {
    let mut columns: Vec<&str> = metrics
        .iter()
        .flat_map(|m| m.columns.iter().map(String::as_str))
        .collect();
    columns.sort_unstable();
    columns.dedup();
    columns.iter().map(|c| format!("{}, ", quote(c))).collect()
}

/// Each period's metrics over the rows of `table` (one aggregation per
/// metric, joined on the period: a metric counting distinct values is then
/// planned as a plain GROUP BY, far cheaper than a distinct accumulator).
pub fn metrics_by_period_sql(metrics: &[Metric], table: &str) -> String {
    let metric_tables: String = metrics
        .iter()
        .enumerate()
        .map(|(i, m)| {
            format!(
                ", metric_{i} AS (SELECT p, {} AS {} FROM {table} GROUP BY p)",
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
        .map(|i| format!(" LEFT JOIN metric_{i} ON metric_{i}.p = periods.p"))
        .collect();
    format!(
        "WITH periods AS (SELECT DISTINCT p FROM {table}){metric_tables} \
         SELECT periods.p{metric_columns} FROM periods{metric_joins}"
    )
}
