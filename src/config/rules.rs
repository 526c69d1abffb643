//! Rules: the validated form of a rule (scope, severity, filter, escalation)
//! and the check that its SQL parses into a boolean over what the rule may
//! read. A bad rule is a configuration error before any data is read.
//!
//! One polarity everywhere: every expression describes a *valid* row or
//! period. True passes; false or NULL fails.

use std::collections::BTreeSet;

use arrow::datatypes::{DataType, Field, Schema};
use datafusion::common::DFSchema;
use datafusion::common::tree_node::{TreeNode, TreeNodeRecursion};
use datafusion::logical_expr::ExprSchemable;
use datafusion::logical_expr::utils::find_aggregate_exprs;
use datafusion::prelude::{Expr, SessionContext};

use crate::config::contract::Contract;
use crate::core::digest::nul_terminated_hex;
use crate::transient::{
    DROP_CONTRIBUTOR, HAS_BASELINE, KEY_COMMITTED, KEY_OCCURRENCES, PREV_PREFIX, REF_PREFIX,
    prev_column,
};

/// What happens to a row that fails a rule.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    serde::Serialize,
    serde::Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Goes to Silver, counted as warned.
    Warn,
    /// Set aside until the reference catches up, then replayed (reference rules).
    Pending,
    /// Kept out of Silver, written to dq_error as dropped.
    Drop,
    /// Kept out of Silver, quarantined.
    Quarantine,
    /// Stops the run; nothing committed.
    Fail,
}

impl Severity {
    /// Every severity, in the order of their small-integer codes.
    const ALL: [Severity; 5] = [
        Severity::Warn,
        Severity::Pending,
        Severity::Drop,
        Severity::Quarantine,
        Severity::Fail,
    ];

    /// The severity as a small integer, as rows carry it (`_dq_severity`).
    pub fn code(self) -> u8 {
        self as u8
    }

    /// The severity of a code made by [`Severity::code`].
    pub fn from_code(code: u8) -> Option<Severity> {
        Severity::ALL.get(usize::from(code)).copied()
    }

    /// Parses a severity in silverline's or dlt-meta's vocabulary (the `expect_all*`
    /// blocks mean what their `expect*` twins mean).
    pub fn parse(text: &str) -> Option<Severity> {
        match text.trim().to_ascii_lowercase().as_str() {
            "warn" | "warning" | "expect" | "expect_all" => Some(Severity::Warn),
            "pending" => Some(Severity::Pending),
            "drop" | "expect_or_drop" | "expect_all_or_drop" => Some(Severity::Drop),
            "quarantine" | "critical" | "expect_or_quarantine" => Some(Severity::Quarantine),
            "fail" | "fatal" | "expect_or_fail" | "expect_all_or_fail" => Some(Severity::Fail),
            _ => None,
        }
    }

    /// The lowercase name used in outputs.
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Warn => "warn",
            Severity::Pending => "pending",
            Severity::Drop => "drop",
            Severity::Quarantine => "quarantine",
            Severity::Fail => "fail",
        }
    }
}

/// What a rule looks at.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    /// One row (and its `prev_*` state: then it is a trend rule).
    Row,
    /// One period's metrics of one contributor, with `prev_<metric>` and `avg_<metric>`.
    Aggregate,
    /// One row joined (LEFT) to reference tables through `_ref_<name>`.
    Reference,
}

impl Scope {
    /// Parses `row`, `aggregate` or `reference`.
    pub fn parse(text: &str) -> Option<Scope> {
        match text.trim().to_ascii_lowercase().as_str() {
            "row" => Some(Scope::Row),
            "aggregate" => Some(Scope::Aggregate),
            "reference" => Some(Scope::Reference),
            _ => None,
        }
    }

    /// The lowercase name.
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Row => "row",
            Scope::Aggregate => "aggregate",
            Scope::Reference => "reference",
        }
    }
}

/// "Warn per row, but act with `to` when more than `above` of the checked rows fail."
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Escalation {
    /// The share of failing rows (0..1) past which the rule escalates.
    pub above: f64,
    /// The severity it then acts with.
    pub to: Severity,
}

/// A validated rule.
#[derive(Debug, Clone)]
pub struct Rule {
    /// Rule name.
    pub name: String,
    /// SQL boolean expression describing a valid row (or period).
    pub expression: String,
    /// What it looks at.
    pub scope: Scope,
    /// What a failure does.
    pub severity: Severity,
    /// Contributor types it applies to; contains `*` for all.
    pub contributor_types: Vec<String>,
    /// Message written next to each failure.
    pub message: String,
    /// Rows outside this SQL condition are not checked.
    pub filter: Option<String>,
    /// Escalation past a failure rate.
    pub escalation: Option<Escalation>,
    /// Where the rule was defined (file, line or key).
    pub origin: String,
    /// Columns (or metrics) whose previous value the rule reads (`prev_<name>`).
    pub prev_columns: BTreeSet<String>,
    /// Reference tables the rule reads (`_ref_<name>`).
    pub references: BTreeSet<String>,
    /// The one contract column a row or reference rule reads (now or as
    /// `prev_<column>`), when it reads exactly one: what the rule checks.
    pub column: Option<String>,
}

impl Rule {
    /// A trend rule compares with the previous state (a row rule reading
    /// `prev_*`, or any aggregate rule: its period is compared with the
    /// previous one); it is skipped where there is none.
    pub fn is_trend(&self) -> bool {
        !self.prev_columns.is_empty() || self.scope == Scope::Aggregate
    }

    /// Whether the rule applies to a contributor of type `contributor_type`.
    pub fn applies_to(&self, contributor_type: &str) -> bool {
        self.contributor_types
            .iter()
            .any(|t| t == "*" || t == contributor_type)
    }

    /// Whether two rules could both apply to one contributor.
    pub fn overlaps(&self, other: &Rule) -> bool {
        self.contributor_types
            .iter()
            .any(|t| t == "*" || other.applies_to(t))
            || other.contributor_types.iter().any(|t| t == "*")
    }
}

/// The built-in metric counting a period's missing entities (with `[completeness]`).
pub const MISSING_ENTITIES_METRIC: &str = "missing_entities";

/// Which entities a period is expected to declare (`[completeness]`).
#[derive(Debug, Clone)]
pub struct Completeness {
    /// SQL boolean over contract columns: true for a closed state.
    pub closed_when: String,
    /// The contract columns it reads.
    pub columns: BTreeSet<String>,
}

impl Completeness {
    /// The built-in `missing_entities` metric: the count of the period's
    /// missing entities, put on every row of the period when the metrics
    /// are measured. A committed period's is the count of its `missing`
    /// exceptions.
    pub fn metric(&self) -> Metric {
        Metric {
            name: MISSING_ENTITIES_METRIC.to_string(),
            expression: format!("max(\"{}\")", crate::transient::MISSING_ENTITIES),
            columns: BTreeSet::from([crate::transient::MISSING_ENTITIES.to_string()]),
            prev_columns: BTreeSet::new(),
            counts_entities: false,
        }
    }
}

/// A named aggregate over one contributor's period.
#[derive(Debug, Clone)]
pub struct Metric {
    /// Name.
    pub name: String,
    /// SQL aggregate.
    pub expression: String,
    /// Contract columns it reads.
    pub columns: BTreeSet<String>,
    /// Contract columns whose previous value it reads (`prev_<column>`): such
    /// a metric is measured on the drop's periods only, which carry the
    /// previous state; committed periods have no value for it.
    pub prev_columns: BTreeSet<String>,
    /// Whether it counts distinct values of columns that hold every part
    /// of the entity key the drop's buckets split rows by
    /// (`count(DISTINCT account_id)`; see
    /// [`crate::config::contract::Contract::bucket_key_parts`]): it is then
    /// the sum of what each bucket counts.
    pub counts_entities: bool,
}

impl Metric {
    /// Whether it is measured on the drop's periods only (it reads previous
    /// values), so that it has no `prev_` or `avg_`.
    pub fn drop_only(&self) -> bool {
        !self.prev_columns.is_empty()
    }

    /// Whether committed periods measure it over their Silver rows; the
    /// built-in `missing_entities` of a committed period is what the
    /// exception store recorded for it instead.
    pub fn from_silver(&self) -> bool {
        !self.drop_only() && self.name != MISSING_ENTITIES_METRIC
    }
}

/// What a checked expression reads.
#[derive(Debug, Default)]
pub struct Reads {
    /// Names read through `prev_<name>`.
    pub prev: BTreeSet<String>,
    /// References read through `_ref_<name>`.
    pub references: BTreeSet<String>,
    /// Every other name read, `prev_<name>` read as `<name>`, less the
    /// engine's own (`_`-prefixed) columns.
    pub names: BTreeSet<String>,
}

impl Reads {
    /// The one name read, if exactly one is.
    pub fn single_name(&self) -> Option<String> {
        match self.names.len() {
            1 => self.names.first().cloned(),
            _ => None,
        }
    }
}

/// Parses expressions against the schema they will meet when they run.
pub struct ExprChecker {
    ctx: SessionContext,
    schema: DFSchema,
}

impl ExprChecker {
    /// A checker over `fields`.
    pub fn new(fields: Vec<Field>) -> Result<ExprChecker, String> {
        let schema = DFSchema::try_from(Schema::new(fields)).map_err(|e| e.to_string())?;
        Ok(ExprChecker {
            ctx: crate::core::sql::planning_session(),
            schema,
        })
    }

    /// Parses `sql` and resolves every column it names.
    pub fn parse(&self, sql: &str) -> Result<Expr, String> {
        self.ctx
            .parse_sql_expr(sql, &self.schema)
            .map_err(|e| first_line(&e.to_string()))
    }

    /// Checks that `sql` is one aggregate over the rows (a metric): it
    /// parses, its types agree, it nests no aggregate and holds no subquery.
    pub fn check_aggregate(&self, sql: &str) -> Result<Expr, String> {
        let expr = self.parse(sql)?;
        let aggregates = find_aggregate_exprs(std::slice::from_ref(&expr));
        if aggregates.is_empty() {
            return Err(format!("`{sql}` is not an aggregate (count, sum, avg...)"));
        }
        for aggregate in &aggregates {
            if let Expr::AggregateFunction(function) = aggregate
                && !find_aggregate_exprs(&function.params.args).is_empty()
            {
                return Err(format!("`{sql}` nests an aggregate in another"));
            }
        }
        refuse_subqueries(&expr)?;
        expr.get_type(&self.schema)
            .map_err(|e| first_line(&e.to_string()))?;
        Ok(expr)
    }

    /// Checks that `sql` parses, names only known columns, aggregates
    /// nothing, holds no subquery and is boolean.
    pub fn check_boolean(&self, sql: &str) -> Result<Reads, String> {
        let expr = self.parse(sql)?;
        if !find_aggregate_exprs(std::slice::from_ref(&expr)).is_empty() {
            return Err("a rule may not aggregate (count, sum, avg...): measure it as a metric and compare the metric in an aggregate rule".to_string());
        }
        refuse_subqueries(&expr)?;
        let data_type = expr
            .get_type(&self.schema)
            .map_err(|e| first_line(&e.to_string()))?;
        if !matches!(data_type, DataType::Boolean | DataType::Null) {
            return Err(format!("expression is {data_type}, not boolean"));
        }
        let names: Vec<String> = expr.column_refs().iter().map(|c| c.name.clone()).collect();
        Ok(Reads {
            prev: names
                .iter()
                .filter_map(|n| n.strip_prefix(PREV_PREFIX).map(str::to_string))
                .collect(),
            references: names
                .iter()
                .filter_map(|n| n.strip_prefix(REF_PREFIX).map(str::to_string))
                .collect(),
            names: names
                .iter()
                .map(|n| n.strip_prefix(PREV_PREFIX).unwrap_or(n))
                .filter(|n| !n.starts_with('_'))
                .map(str::to_string)
                .collect(),
        })
    }
}

/// The fields a row or reference rule may read: contract columns, their `prev_`
/// twins, the engine's transient columns and `_ref_<name>` for each reference.
pub fn row_fields(contract: &Contract, references: &[String]) -> Vec<Field> {
    let mut fields = metric_fields(contract);
    fields.push(Field::new(KEY_OCCURRENCES, DataType::Int64, false));
    fields.push(Field::new(KEY_COMMITTED, DataType::Int64, false));
    fields.push(Field::new(HAS_BASELINE, DataType::Boolean, false));
    fields.push(Field::new(DROP_CONTRIBUTOR, DataType::Utf8, false));
    fields.extend(
        references
            .iter()
            .map(|r| Field::new(format!("{REF_PREFIX}{r}"), DataType::Boolean, false)),
    );
    fields
}

/// Rules and metrics are expressions over one row or one period: a subquery
/// would read tables the run does not register.
fn refuse_subqueries(expr: &Expr) -> Result<(), String> {
    let mut found = false;
    expr.apply(|e| {
        found |= matches!(
            e,
            Expr::ScalarSubquery(_) | Expr::InSubquery(_) | Expr::Exists(_)
        );
        Ok(TreeNodeRecursion::Continue)
    })
    .map_err(|e| first_line(&e.to_string()))?;
    match found {
        true => Err("subqueries (SELECT ...) are not supported in rules and metrics".to_string()),
        false => Ok(()),
    }
}

/// The fields a metric may read: contract columns and their `prev_` twins.
pub fn metric_fields(contract: &Contract) -> Vec<Field> {
    let mut fields = contract.arrow_fields();
    fields.extend(prev_fields(contract));
    fields
}

/// The `prev_<column>` twin of every contract column.
fn prev_fields(contract: &Contract) -> Vec<Field> {
    contract
        .columns
        .iter()
        .map(|c| Field::new(prev_column(&c.name), c.column_type.arrow_type(), true))
        .collect()
}

/// The fields an aggregate rule may read: each metric, and `prev_<metric>`
/// and `avg_<metric>` of each metric measured on committed periods too.
pub fn aggregate_fields(metrics: &[Metric]) -> Vec<Field> {
    metrics
        .iter()
        .flat_map(|m| {
            let mut names = vec![m.name.clone()];
            if !m.drop_only() {
                names.extend([prev_column(&m.name), format!("avg_{}", m.name)]);
            }
            names
                .into_iter()
                .map(|name| Field::new(name, DataType::Float64, true))
        })
        .collect()
}

/// A hint for an aggregate rule that reads `prev_<metric>` or `avg_<metric>`
/// of a metric that has no committed values.
pub fn drop_only_metric_hint(expression: &str, metrics: &[Metric]) -> Option<String> {
    let metric = metrics.iter().find(|m| {
        m.drop_only()
            && [prev_column(&m.name), format!("avg_{}", m.name)]
                .iter()
                .any(|name| expression.contains(name.as_str()))
    })?;
    Some(format!(
        "metric '{}' is measured on the drop's periods only (it reads prev_* columns), so it has no prev_{name} or avg_{name}: compare {name} with a constant or another metric",
        metric.name,
        name = metric.name
    ))
}

fn first_line(text: &str) -> String {
    text.lines().next().unwrap_or_default().to_string()
}

/// A fingerprint of a resolved rule set: every name, scope, severity, scope of
/// application, filter, escalation and expression, in order. Results carry it
/// so they name the exact rules that produced them.
pub fn rules_fingerprint(rules: &[&Rule]) -> String {
    let parts: Vec<String> = rules
        .iter()
        .flat_map(|rule| {
            let escalation = rule
                .escalation
                .map(|e| format!("{}>{}", e.above, e.to.as_str()))
                .unwrap_or_default();
            [
                rule.name.clone(),
                rule.scope.as_str().to_string(),
                rule.severity.as_str().to_string(),
                rule.contributor_types.join(","),
                rule.filter.clone().unwrap_or_default(),
                escalation,
                rule.expression.clone(),
            ]
        })
        .collect();
    nul_terminated_hex(parts.iter().map(String::as_bytes))[..16].to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_severity_code_reads_back_as_the_same_severity() {
        for severity in Severity::ALL {
            assert_eq!(Severity::from_code(severity.code()), Some(severity));
        }
        assert_eq!(Severity::from_code(200), None);
    }

    #[test]
    fn severities_accept_both_vocabularies() {
        let cases = [
            ("warn", Severity::Warn),
            ("expect", Severity::Warn),
            ("warning", Severity::Warn),
            ("pending", Severity::Pending),
            ("expect_or_drop", Severity::Drop),
            ("critical", Severity::Quarantine),
            ("expect_or_quarantine", Severity::Quarantine),
            ("fatal", Severity::Fail),
            ("expect_or_fail", Severity::Fail),
            ("expect_all", Severity::Warn),
            ("expect_all_or_drop", Severity::Drop),
            ("expect_all_or_fail", Severity::Fail),
        ];
        for (text, expected) in cases {
            assert_eq!(Severity::parse(text), Some(expected), "{text}");
        }
        assert_eq!(Severity::parse("sometimes"), None);
    }
}
