//! Where rules come from besides the main TOML file: control CSVs (one row
//! per rule, kept by data-operations teams under version control) and
//! dlt-meta expectation files (JSON or YAML, as Databricks DLT users already
//! have them). Both become [`RuleConfig`]s carrying their origin (file and
//! line), so every later error names where the rule was written.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;

use crate::config::raw::RuleConfig;

/// A rule as written, with where it was written.
#[derive(Debug, Clone)]
pub struct RuleDraft {
    /// The rule's settings.
    pub config: RuleConfig,
    /// File and line, or file and block.
    pub origin: String,
}

/// The columns a control CSV must have.
pub const CONTROL_CSV_COLUMNS: [&str; 7] = [
    "rule_id",
    "contributor_type",
    "scope",
    "expression",
    "severity",
    "description",
    "enabled",
];

/// Reads a rule file by its extension; `types` applies to dlt-meta files.
pub fn read_rule_file(path: &Path, types: &[String]) -> Result<Vec<RuleDraft>, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("{}: cannot read: {e}", path.display()))?;
    let extension = path
        .extension()
        .and_then(|e| e.to_str())
        .unwrap_or("")
        .to_ascii_lowercase();
    match extension.as_str() {
        "csv" => read_control_csv(&text, &path.display().to_string()),
        "json" | "yaml" | "yml" => {
            read_dlt_expectations(&text, &path.display().to_string(), &extension, types)
        }
        _ => Err(format!(
            "{}: unknown rule file type (expected .csv, .json, .yaml or .yml)",
            path.display()
        )),
    }
}

/// One row of a control CSV; optional columns may be absent.
#[derive(Debug, Deserialize)]
struct ControlRow {
    rule_id: String,
    contributor_type: String,
    scope: String,
    expression: String,
    severity: String,
    description: String,
    enabled: String,
    #[serde(default)]
    filter: Option<String>,
    #[serde(default)]
    escalate_above: Option<f64>,
    #[serde(default)]
    escalate_to: Option<String>,
}

/// Reads a control CSV: one rule per row, `contributor_type` a type or `*`.
pub fn read_control_csv(text: &str, file: &str) -> Result<Vec<RuleDraft>, String> {
    let mut reader = csv::ReaderBuilder::new()
        .trim(csv::Trim::All)
        .from_reader(text.as_bytes());
    let headers = reader
        .headers()
        .map_err(|e| format!("{file}: cannot read the header: {e}"))?
        .clone();
    let missing: Vec<&str> = CONTROL_CSV_COLUMNS
        .iter()
        .copied()
        .filter(|c| !headers.iter().any(|h| h == *c))
        .collect();
    if !missing.is_empty() {
        return Err(format!(
            "{file}:1: missing column(s) {}",
            missing.join(", ")
        ));
    }
    let mut drafts = Vec::new();
    for record in reader.records() {
        let record = record.map_err(|e| format!("{file}: {e}"))?;
        let line = record.position().map_or(0, |p| p.line());
        let row: ControlRow = record
            .deserialize(Some(&headers))
            .map_err(|e| format!("{file}:{line}: {e}"))?;
        let enabled = parse_enabled(&row.enabled).ok_or_else(|| {
            format!(
                "{file}:{line}: rule '{}': enabled must be true or false, not '{}'",
                row.rule_id, row.enabled
            )
        })?;
        drafts.push(RuleDraft {
            origin: format!("{file}:{line}"),
            config: RuleConfig {
                name: row.rule_id,
                expression: row.expression,
                severity: row.severity,
                contributor_types: vec![row.contributor_type],
                description: Some(row.description).filter(|d| !d.is_empty()),
                scope: row.scope,
                filter: row.filter.filter(|f| !f.is_empty()),
                escalate_above: row.escalate_above,
                escalate_to: row.escalate_to.filter(|s| !s.is_empty()),
                enabled,
            },
        });
    }
    Ok(drafts)
}

fn parse_enabled(text: &str) -> Option<bool> {
    match text.to_ascii_lowercase().as_str() {
        "true" | "yes" | "1" | "y" => Some(true),
        "false" | "no" | "0" | "n" => Some(false),
        _ => None,
    }
}

/// The four blocks of a dlt-meta expectations file, each rule name -> SQL.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct DltExpectations {
    #[serde(default)]
    expect: BTreeMap<String, String>,
    #[serde(default)]
    expect_or_drop: BTreeMap<String, String>,
    #[serde(default)]
    expect_or_quarantine: BTreeMap<String, String>,
    #[serde(default)]
    expect_or_fail: BTreeMap<String, String>,
}

/// Reads a dlt-meta expectations file as it is; every expression describes a valid row.
pub fn read_dlt_expectations(
    text: &str,
    file: &str,
    format: &str,
    types: &[String],
) -> Result<Vec<RuleDraft>, String> {
    let parsed: DltExpectations = if format == "json" {
        serde_json::from_str(text).map_err(|e| format!("{file}: {e}"))?
    } else {
        serde_yaml_ng::from_str(text).map_err(|e| format!("{file}: {e}"))?
    };
    let blocks = [
        ("expect", parsed.expect),
        ("expect_or_drop", parsed.expect_or_drop),
        ("expect_or_quarantine", parsed.expect_or_quarantine),
        ("expect_or_fail", parsed.expect_or_fail),
    ];
    Ok(blocks
        .into_iter()
        .flat_map(|(block, rules)| {
            rules.into_iter().map(move |(name, expression)| RuleDraft {
                origin: format!("{file} [{block}.{name}]"),
                config: RuleConfig {
                    name,
                    expression,
                    severity: block.to_string(),
                    contributor_types: types.to_vec(),
                    description: None,
                    scope: "row".to_string(),
                    filter: None,
                    escalate_above: None,
                    escalate_to: None,
                    enabled: true,
                },
            })
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_csv_rows_carry_their_line_and_optional_columns() {
        let text = "rule_id,contributor_type,scope,expression,severity,description,enabled,filter\n\
                    a,bank,row,x > 0,critical,x is positive,true,\n\
                    b,*,row,\"y IN ('A', 'B')\",warn,,false,y IS NOT NULL\n";
        let drafts = read_control_csv(text, "rules.csv").unwrap();
        assert_eq!(drafts.len(), 2);
        assert_eq!(drafts[0].origin, "rules.csv:2");
        assert_eq!(drafts[0].config.contributor_types, vec!["bank"]);
        assert_eq!(drafts[1].config.expression, "y IN ('A', 'B')");
        assert!(!drafts[1].config.enabled);
        assert_eq!(drafts[1].config.filter.as_deref(), Some("y IS NOT NULL"));
        assert_eq!(drafts[1].config.description, None);
    }

    #[test]
    fn a_control_csv_without_a_required_column_names_it() {
        let err = read_control_csv("rule_id,scope\nx,row\n", "r.csv").unwrap_err();
        assert!(
            err.contains("r.csv:1") && err.contains("expression") && err.contains("enabled"),
            "{err}"
        );
    }

    #[test]
    fn a_bad_enabled_value_names_file_line_and_rule() {
        let text = "rule_id,contributor_type,scope,expression,severity,description,enabled\nq,*,row,true,warn,,perhaps\n";
        let err = read_control_csv(text, "r.csv").unwrap_err();
        assert!(
            err.contains("r.csv:2") && err.contains("'q'") && err.contains("perhaps"),
            "{err}"
        );
    }

    #[test]
    fn dlt_json_and_yaml_twins_give_the_same_rules() {
        let json = r#"{"expect": {"w": "a > 0"}, "expect_or_quarantine": {"q": "b IS NOT NULL"}}"#;
        let yaml = "expect:\n  w: a > 0\nexpect_or_quarantine:\n  q: b IS NOT NULL\n";
        let types = vec!["*".to_string()];
        let from_json = read_dlt_expectations(json, "e.json", "json", &types).unwrap();
        let from_yaml = read_dlt_expectations(yaml, "e.yaml", "yaml", &types).unwrap();
        let shape = |d: &[RuleDraft]| {
            d.iter()
                .map(|r| {
                    (
                        r.config.name.clone(),
                        r.config.severity.clone(),
                        r.config.expression.clone(),
                    )
                })
                .collect::<Vec<_>>()
        };
        assert_eq!(shape(&from_json), shape(&from_yaml));
        assert_eq!(
            shape(&from_json)[1],
            (
                "q".into(),
                "expect_or_quarantine".into(),
                "b IS NOT NULL".into()
            )
        );
    }

    #[test]
    fn an_unknown_dlt_block_is_refused() {
        let err = read_dlt_expectations("{\"expect_or_explode\": {}}", "e.json", "json", &[])
            .unwrap_err();
        assert!(err.contains("expect_or_explode"), "{err}");
    }
}
