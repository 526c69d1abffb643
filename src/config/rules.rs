//! Rules: the validated form of a rule, its severity, and the check that its
//! SQL parses into a boolean over the contract (plus `prev_*` and the
//! engine's transient columns). A bad rule is a configuration error before
//! any data is read.

use std::collections::BTreeSet;

use arrow::datatypes::{DataType, Field, Schema};
use datafusion::common::DFSchema;
use datafusion::logical_expr::ExprSchemable;
use datafusion::prelude::SessionContext;

use crate::config::contract::Contract;
use crate::transient::{DROP_CONTRIBUTOR, HAS_BASELINE, KEY_OCCURRENCES, PREV_PREFIX, prev_column};

/// What happens to a row that fails a rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Goes to Silver, counted as warned.
    Warn,
    /// Kept out of Silver, written to dq_error as dropped.
    Drop,
    /// Kept out of Silver, quarantined.
    Quarantine,
    /// Stops the run; nothing committed.
    Fail,
}

impl Severity {
    /// Parses a severity in silverline's or dlt-meta's vocabulary.
    pub fn parse(text: &str) -> Option<Severity> {
        match text.trim().to_ascii_lowercase().as_str() {
            "warn" | "warning" | "expect" => Some(Severity::Warn),
            "drop" | "expect_or_drop" => Some(Severity::Drop),
            "quarantine" | "critical" | "expect_or_quarantine" => Some(Severity::Quarantine),
            "fail" | "fatal" | "expect_or_fail" => Some(Severity::Fail),
            _ => None,
        }
    }

    /// The lowercase name used in outputs.
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Warn => "warn",
            Severity::Drop => "drop",
            Severity::Quarantine => "quarantine",
            Severity::Fail => "fail",
        }
    }
}

/// A validated rule.
#[derive(Debug, Clone)]
pub struct Rule {
    /// Rule name.
    pub name: String,
    /// SQL boolean expression describing a valid row.
    pub expression: String,
    /// What a failure does.
    pub severity: Severity,
    /// Contributor types it applies to; contains `*` for all.
    pub contributor_types: Vec<String>,
    /// Message written next to each failure.
    pub message: String,
    /// Contract columns whose previous value the rule reads (`prev_<column>`).
    pub prev_columns: BTreeSet<String>,
}

impl Rule {
    /// A trend rule reads the previous state; it is skipped where there is none.
    pub fn is_trend(&self) -> bool {
        !self.prev_columns.is_empty()
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

/// Parses rule expressions against the schema rows have when rules run.
pub struct RuleChecker {
    ctx: SessionContext,
    schema: DFSchema,
}

impl RuleChecker {
    /// A checker for the contract: its columns, `prev_<column>` for each, and the
    /// transient columns the engine provides.
    pub fn new(contract: &Contract) -> Result<RuleChecker, String> {
        let schema = Schema::new(evaluation_fields(contract));
        let schema = DFSchema::try_from(schema).map_err(|e| e.to_string())?;
        Ok(RuleChecker {
            ctx: crate::infra::query::new_session(),
            schema,
        })
    }

    /// Checks that `sql` parses, names only known columns and is boolean; returns
    /// the contract columns whose `prev_` value it reads.
    pub fn check(&self, sql: &str) -> Result<BTreeSet<String>, String> {
        let expr = self
            .ctx
            .parse_sql_expr(sql, &self.schema)
            .map_err(|e| first_line(&e.to_string()))?;
        let data_type = expr
            .get_type(&self.schema)
            .map_err(|e| first_line(&e.to_string()))?;
        if !matches!(data_type, DataType::Boolean | DataType::Null) {
            return Err(format!("expression is {data_type}, not boolean"));
        }
        Ok(expr
            .column_refs()
            .iter()
            .filter_map(|c| c.name.strip_prefix(PREV_PREFIX).map(str::to_string))
            .collect())
    }
}

/// The fields a rule may read: contract columns, their `prev_` twins, and the
/// engine's transient columns.
pub fn evaluation_fields(contract: &Contract) -> Vec<Field> {
    let mut fields: Vec<Field> = contract
        .arrow_schema()
        .fields()
        .iter()
        .map(|f| f.as_ref().clone())
        .collect();
    let prev = contract
        .columns
        .iter()
        .map(|c| Field::new(prev_column(&c.name), c.column_type.arrow_type(), true));
    fields.extend(prev.collect::<Vec<_>>());
    fields.push(Field::new(KEY_OCCURRENCES, DataType::Int64, false));
    fields.push(Field::new(HAS_BASELINE, DataType::Boolean, false));
    fields.push(Field::new(DROP_CONTRIBUTOR, DataType::Utf8, false));
    fields
}

fn first_line(text: &str) -> String {
    text.lines().next().unwrap_or_default().to_string()
}

/// A fingerprint of a resolved rule set: every name, severity, scope of
/// application and expression, in order. Results carry it so they name the
/// exact rules that produced them.
pub fn rules_fingerprint(rules: &[&Rule]) -> String {
    use sha2::{Digest, Sha256};
    let mut hash = Sha256::new();
    for rule in rules {
        for part in [
            rule.name.as_str(),
            rule.severity.as_str(),
            &rule.contributor_types.join(","),
            &rule.expression,
        ] {
            hash.update(part.as_bytes());
            hash.update([0]);
        }
    }
    hex::encode(hash.finalize())[..16].to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn severities_accept_both_vocabularies() {
        let cases = [
            ("warn", Severity::Warn),
            ("expect", Severity::Warn),
            ("warning", Severity::Warn),
            ("expect_or_drop", Severity::Drop),
            ("critical", Severity::Quarantine),
            ("expect_or_quarantine", Severity::Quarantine),
            ("fatal", Severity::Fail),
            ("expect_or_fail", Severity::Fail),
        ];
        for (text, expected) in cases {
            assert_eq!(Severity::parse(text), Some(expected), "{text}");
        }
        assert_eq!(Severity::parse("sometimes"), None);
    }
}
