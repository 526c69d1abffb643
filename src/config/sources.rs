//! Where rules come from besides the main TOML file: control CSVs (one row
//! per rule, kept by data-operations teams under version control) and
//! dlt-meta expectation files (JSON or YAML, as Databricks DLT users already
//! have them). Both become [`RuleConfig`]s carrying their origin (file and
//! line), so every later error names where the rule was written.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;

use crate::config::raw::{QuarantineExpressions, RuleConfig, RuleFileConfig};

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

/// Reads a rule file by its extension, as its `rule_files` entry says
/// (`contributor_types` and `quarantine_expressions` apply to dlt-meta files).
pub fn read_rule_file(path: &Path, entry: &RuleFileConfig) -> Result<Vec<RuleDraft>, String> {
    let file = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| format!("{file}: cannot read: {e}"))?;
    let extension = path
        .extension()
        .and_then(|e| e.to_str())
        .unwrap_or("")
        .to_ascii_lowercase();
    match extension.as_str() {
        "csv" if entry.quarantine_expressions.is_some() => Err(format!(
            "{file}: quarantine_expressions is for dlt-meta files (.json, .yaml, .yml); \
             a control CSV's expressions always describe a valid row"
        )),
        "csv" => read_control_csv(&text, &file),
        "json" | "yaml" | "yml" => {
            let dlt = DltFile {
                file: &file,
                types: &entry.contributor_types,
                quarantine: entry.quarantine_expressions,
            };
            dlt.read(&text, &extension)
        }
        _ => Err(format!(
            "{file}: unknown rule file type (expected .csv, .json, .yaml or .yml)"
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
        .comment(Some(b'#'))
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

/// The seven blocks of a dlt-meta expectations file, each rule name -> SQL.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct DltExpectations {
    #[serde(default)]
    expect: BTreeMap<String, String>,
    #[serde(default)]
    expect_all: BTreeMap<String, String>,
    #[serde(default)]
    expect_or_drop: BTreeMap<String, String>,
    #[serde(default)]
    expect_all_or_drop: BTreeMap<String, String>,
    #[serde(default)]
    expect_or_quarantine: BTreeMap<String, String>,
    #[serde(default)]
    expect_or_fail: BTreeMap<String, String>,
    #[serde(default)]
    expect_all_or_fail: BTreeMap<String, String>,
}

/// The block whose expressions have two readings in the wild.
const QUARANTINE_BLOCK: &str = "expect_or_quarantine";

/// One block: its name (which is also its rules' severity) and its rules.
type Block = (&'static str, BTreeMap<String, String>);

impl DltExpectations {
    /// The blocks, named, in the order their rules are listed.
    fn into_blocks(self) -> [Block; 7] {
        [
            ("expect", self.expect),
            ("expect_all", self.expect_all),
            ("expect_or_drop", self.expect_or_drop),
            ("expect_all_or_drop", self.expect_all_or_drop),
            (QUARANTINE_BLOCK, self.expect_or_quarantine),
            ("expect_or_fail", self.expect_or_fail),
            ("expect_all_or_fail", self.expect_all_or_fail),
        ]
    }
}

/// A dlt-meta expectations file and what its `rule_files` entry says about it.
pub struct DltFile<'a> {
    /// The file, as errors and origins name it.
    pub file: &'a str,
    /// The contributor types its rules apply to.
    pub types: &'a [String],
    /// How its `expect_or_quarantine` expressions read; required when it has such a block.
    pub quarantine: Option<QuarantineExpressions>,
}

impl DltFile<'_> {
    /// Reads the file's `text` (`format` `json`, else YAML) as it is: the `expect_all*`
    /// blocks mean what their `expect*` twins mean, and every rule comes out in the
    /// valid-row form (a `rows_to_quarantine` expression negated, NULL-safely).
    pub fn read(&self, text: &str, format: &str) -> Result<Vec<RuleDraft>, String> {
        let parsed: DltExpectations = if format == "json" {
            serde_json::from_str(text).map_err(|e| format!("{}: {e}", self.file))?
        } else {
            serde_yaml_ng::from_str(text).map_err(|e| format!("{}: {e}", self.file))?
        };
        let blocks = parsed.into_blocks();
        self.check_names_once(&blocks)?;
        self.check_quarantine_reading(&blocks)?;
        Ok(blocks
            .into_iter()
            .flat_map(|(block, rules)| {
                rules
                    .into_iter()
                    .map(move |(name, written)| self.draft(block, name, written))
            })
            .collect())
    }

    /// A rule name may stand in one block only: which severity it has would be a guess.
    fn check_names_once(&self, blocks: &[Block]) -> Result<(), String> {
        let mut seen: BTreeMap<&str, &str> = BTreeMap::new();
        let mut problems = Vec::new();
        for (block, rules) in blocks {
            for name in rules.keys() {
                match seen.get(name.as_str()) {
                    Some(first) => problems.push(format!(
                        "{}: rule '{name}' is in two blocks, {first} and {block}: \
                         a rule name may stand in one block only",
                        self.file
                    )),
                    None => {
                        seen.insert(name, block);
                    }
                }
            }
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(problems.join("; "))
        }
    }

    /// An `expect_or_quarantine` block is read only as its entry declares.
    fn check_quarantine_reading(&self, blocks: &[Block]) -> Result<(), String> {
        let has_block = blocks
            .iter()
            .any(|(block, rules)| *block == QUARANTINE_BLOCK && !rules.is_empty());
        if has_block && self.quarantine.is_none() {
            return Err(format!(
                "{}: has an {QUARANTINE_BLOCK} block: its rule_files entry must set \
                 quarantine_expressions = \"valid_rows\" (each expression describes a valid row) \
                 or \"rows_to_quarantine\" (each selects the rows to quarantine, as dlt-meta reads them)",
                self.file
            ));
        }
        Ok(())
    }

    /// The draft of one rule of `block`, in the valid-row form.
    fn draft(&self, block: &str, name: String, written: String) -> RuleDraft {
        let reading = (block == QUARANTINE_BLOCK)
            .then_some(self.quarantine)
            .flatten();
        let (origin, expression, description) = match reading {
            None => (format!("{} [{block}.{name}]", self.file), written, None),
            Some(QuarantineExpressions::ValidRows) => (
                format!("{} [{block}.{name}, valid_rows]", self.file),
                written,
                None,
            ),
            Some(QuarantineExpressions::RowsToQuarantine) => (
                format!("{} [{block}.{name}, rows_to_quarantine]", self.file),
                format!("({written}) IS FALSE"),
                Some(format!("rows to quarantine: {written}")),
            ),
        };
        RuleDraft {
            origin,
            config: RuleConfig {
                name,
                expression,
                severity: block.to_string(),
                contributor_types: self.types.to_vec(),
                description,
                scope: "row".to_string(),
                filter: None,
                escalate_above: None,
                escalate_to: None,
                enabled: true,
            },
        }
    }
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

    fn read_dlt(
        text: &str,
        file: &str,
        quarantine: Option<QuarantineExpressions>,
    ) -> Result<Vec<RuleDraft>, String> {
        let types = vec!["*".to_string()];
        let format = if file.ends_with(".json") {
            "json"
        } else {
            "yaml"
        };
        DltFile {
            file,
            types: &types,
            quarantine,
        }
        .read(text, format)
    }

    /// (name, severity, expression) of each draft.
    fn shape(drafts: &[RuleDraft]) -> Vec<(String, String, String)> {
        drafts
            .iter()
            .map(|r| {
                (
                    r.config.name.clone(),
                    r.config.severity.clone(),
                    r.config.expression.clone(),
                )
            })
            .collect()
    }

    #[test]
    fn dlt_json_and_yaml_twins_give_the_same_rules() {
        let json = r#"{"expect": {"w": "a > 0"}, "expect_or_quarantine": {"q": "b IS NOT NULL"}}"#;
        let yaml = "expect:\n  w: a > 0\nexpect_or_quarantine:\n  q: b IS NOT NULL\n";
        let valid_rows = Some(QuarantineExpressions::ValidRows);
        let from_json = read_dlt(json, "e.json", valid_rows).unwrap();
        let from_yaml = read_dlt(yaml, "e.yaml", valid_rows).unwrap();
        assert_eq!(shape(&from_json), shape(&from_yaml));
        assert_eq!(
            shape(&from_json)[1],
            (
                "q".into(),
                "expect_or_quarantine".into(),
                "b IS NOT NULL".into()
            )
        );
        assert_eq!(
            from_json[1].origin,
            "e.json [expect_or_quarantine.q, valid_rows]"
        );
    }

    #[test]
    fn the_expect_all_blocks_keep_their_block_as_severity_in_file_order() {
        let yaml = "expect_all_or_fail:\n  f: a > 0\nexpect_all:\n  w: b > 0\n\
                    expect_all_or_drop:\n  d: c > 0\n";
        let drafts = read_dlt(yaml, "e.yaml", None).unwrap();
        let severities: Vec<(String, String)> = shape(&drafts)
            .into_iter()
            .map(|(name, severity, _)| (name, severity))
            .collect();
        assert_eq!(
            severities,
            [
                ("w".into(), "expect_all".into()),
                ("d".into(), "expect_all_or_drop".into()),
                ("f".into(), "expect_all_or_fail".into()),
            ]
        );
        assert_eq!(drafts[1].origin, "e.yaml [expect_all_or_drop.d]");
    }

    #[test]
    fn a_rule_name_in_two_blocks_names_both_blocks_and_the_file() {
        let json = r#"{"expect_or_drop": {"valid_id": "id IS NOT NULL"},
                       "expect_all_or_drop": {"valid_id": "id IS NOT NULL"}}"#;
        let err = read_dlt(json, "dqe.json", None).unwrap_err();
        assert!(
            err.contains("dqe.json")
                && err.contains("'valid_id'")
                && err.contains("expect_or_drop and expect_all_or_drop"),
            "{err}"
        );
    }

    #[test]
    fn a_quarantine_block_without_a_declared_reading_is_refused() {
        let json = r#"{"expect_or_quarantine": {"quarantine_rule": "id IS NULL"}}"#;
        let err = read_dlt(json, "dqe.json", None).unwrap_err();
        assert!(
            err.contains("dqe.json") && err.contains("quarantine_expressions"),
            "{err}"
        );
        assert!(read_dlt(r#"{"expect_or_quarantine": {}}"#, "dqe.json", None).is_ok());
    }

    #[test]
    fn rows_to_quarantine_runs_negated_and_says_so() {
        let json = r#"{"expect_or_quarantine": {"quarantine_rule": "a IS NULL OR b < 0"},
                       "expect": {"w": "c > 0"}}"#;
        let reading = Some(QuarantineExpressions::RowsToQuarantine);
        let drafts = read_dlt(json, "dqe.json", reading).unwrap();
        assert_eq!(drafts[1].config.expression, "(a IS NULL OR b < 0) IS FALSE");
        assert_eq!(
            drafts[1].origin,
            "dqe.json [expect_or_quarantine.quarantine_rule, rows_to_quarantine]"
        );
        assert_eq!(
            drafts[1].config.description.as_deref(),
            Some("rows to quarantine: a IS NULL OR b < 0")
        );
        assert_eq!(drafts[0].config.expression, "c > 0");
    }

    #[test]
    fn an_unknown_dlt_block_is_refused() {
        let err = read_dlt("{\"expect_or_explode\": {}}", "e.json", None).unwrap_err();
        assert!(err.contains("expect_or_explode"), "{err}");
    }
}
