//! The engine's own key rules (`unique_key`, `resubmission`, `contributor`),
//! through the binary, on a config whose rules declare none of them: they set
//! rows aside, are named in the summary and in `silverline rules`, their
//! severity can be changed and they cannot be turned off.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod harness;

use harness::{
    committed_accounts, month, output, project, put_drop, rule_outcome, run_args,
    set_aside_accounts, silverline, summary_of,
};
use silverline::demo::generate::Portfolio;

const SHIPPED_RULE_FILES: &str = r#"rule_files = [{ path = "rules/credit_rules.csv" }]"#;

/// The shipped config with one user rule of its own and no rule file: no
/// line of it names a key rule.
fn no_key_rules(text: String) -> String {
    text.replace(
        SHIPPED_RULE_FILES,
        r#"[[rules]]
name = "mia_range"
expression = "month_in_arrears BETWEEN 0 AND 36"
severity = "quarantine""#,
    )
}

/// `no_key_rules` plus an `[engine_rules]` table holding `settings`.
fn with_engine_rules(settings: &'static str) -> impl Fn(String) -> String {
    move |text| {
        if text.contains(SHIPPED_RULE_FILES) {
            format!("{}\n[engine_rules]\n{settings}\n", no_key_rules(text))
        } else {
            text
        }
    }
}

fn failed(summary: &serde_json::Value, rule: &str) -> u64 {
    rule_outcome(summary, rule)["failed"].as_u64().unwrap()
}

#[test]
fn the_shipped_rule_files_declare_no_key_rule() {
    for entry in std::fs::read_dir("config/rules").unwrap() {
        let text = std::fs::read_to_string(entry.unwrap().path()).unwrap();
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            let name = line.trim().split([',', ':', '"']).find(|p| !p.is_empty());
            let name = name.unwrap_or_default().trim();
            assert!(
                !["unique_key", "resubmission", "contributor"].contains(&name),
                "{line}"
            );
            for column in ["_key_occurrences", "_key_committed", "_drop_contributor"] {
                assert!(!line.contains(column), "{column} in {line}");
            }
        }
    }
}

#[test]
fn duplicate_keys_foreign_rows_and_resubmissions_are_set_aside_by_the_engine() {
    let (tmp, config) = project(no_key_rules);
    let config = config.to_str().unwrap();
    let text = std::fs::read_to_string(config).unwrap();
    let settings: Vec<&str> = text.lines().filter(|l| !l.starts_with('#')).collect();
    assert!(
        !settings
            .iter()
            .any(|l| l.contains("rule_files") || l.contains("engine_rules")),
        "{text}"
    );

    let mut bank = Portfolio::new("BANK_E", 10, false, 7);
    let january = bank.statements(month(2026, 1), false);
    put_drop(tmp.path(), "BANK_E", "2026-01", &january);
    silverline(&run_args(config, "BANK_E", "2026-01")).success();
    assert_eq!(committed_accounts(tmp.path()).len(), 10);

    let mut february = bank.statements(month(2026, 2), false);
    let duplicate = february[1].clone();
    february.push(duplicate.clone());
    february[0].contributor = "BANK_OTHER".to_string();
    let foreign = february[0].account.clone();
    february.extend(january.iter().skip(5).take(3).cloned());
    put_drop(tmp.path(), "BANK_E", "2026-02", &february);
    silverline(&run_args(config, "BANK_E", "2026-02")).success();

    let summary = summary_of(tmp.path(), "2026-02");
    assert_eq!(failed(&summary, "unique_key"), 2, "{summary}");
    assert_eq!(failed(&summary, "contributor"), 1, "{summary}");
    assert_eq!(failed(&summary, "resubmission"), 3, "{summary}");
    assert_eq!(summary["counts"]["quarantined"], 6, "{summary}");
    assert_eq!(summary["counts"]["committed"], 8, "{summary}");
    let quarantined = set_aside_accounts(tmp.path(), "quarantine");
    assert!(quarantined.contains(&duplicate.account), "{quarantined:?}");
    assert!(quarantined.contains(&foreign), "{quarantined:?}");
}

#[test]
fn silverline_rules_lists_the_engine_rules() {
    let (_tmp, config) = project(no_key_rules);
    let assert = silverline(&[
        "rules",
        "--config",
        config.to_str().unwrap(),
        "--contributor",
        "BANK_E",
    ])
    .success();
    let text = output(&assert);
    for line in [
        "unique_key [row / quarantine] from the engine",
        "passes when _key_occurrences = 1",
        "resubmission [row / quarantine] from the engine",
        "passes when _key_committed = 0",
        "contributor [row / quarantine] from the engine",
        "passes when \"contributor_id\" = _drop_contributor",
        "mia_range [row / quarantine]",
    ] {
        assert!(text.contains(line), "{line} in {text}");
    }
}

#[test]
fn an_engine_rule_severity_can_be_changed() {
    let (tmp, config) = project(with_engine_rules(r#"unique_key = "drop""#));
    let config = config.to_str().unwrap();
    let rules =
        output(&silverline(&["rules", "--config", config, "--contributor", "BANK_E"]).success());
    assert!(rules.contains("unique_key [row / drop]"), "{rules}");
    assert!(rules.contains("resubmission [row / quarantine]"), "{rules}");

    let mut rows = Portfolio::new("BANK_E", 10, false, 8).statements(month(2026, 1), false);
    rows.push(rows[3].clone());
    put_drop(tmp.path(), "BANK_E", "2026-01", &rows);
    silverline(&run_args(config, "BANK_E", "2026-01")).success();
    let summary = summary_of(tmp.path(), "2026-01");
    assert_eq!(failed(&summary, "unique_key"), 2, "{summary}");
    assert_eq!(summary["counts"]["dropped"], 2, "{summary}");
    assert_eq!(summary["counts"]["quarantined"], 0, "{summary}");
    assert!(set_aside_accounts(tmp.path(), "dropped").contains(&rows[3].account));
    assert!(!committed_accounts(tmp.path()).contains(&rows[3].account));
}

#[test]
fn an_engine_rule_cannot_be_turned_off() {
    for (setting, shown) in [
        ("unique_key = false", "engine_rules.unique_key = false"),
        (
            r#"resubmission = "off""#,
            "engine_rules.resubmission = 'off'",
        ),
        (
            r#"contributor = "pending""#,
            "engine_rules.contributor = 'pending'",
        ),
    ] {
        let (tmp, config) = project(with_engine_rules(setting));
        let config = config.to_str().unwrap();
        let text = output(&silverline(&["check-config", "--config", config]).code(2));
        assert!(text.contains(shown), "{setting}: {text}");
        if !setting.contains("pending") {
            assert!(text.contains("cannot be turned off"), "{setting}: {text}");
        }
        let rows = Portfolio::new("BANK_E", 5, false, 9).statements(month(2026, 1), false);
        put_drop(tmp.path(), "BANK_E", "2026-01", &rows);
        let text = output(&silverline(&run_args(config, "BANK_E", "2026-01")).code(2));
        assert!(text.contains(shown), "{setting}: {text}");
    }
}

#[test]
fn a_user_rule_named_like_an_engine_rule_is_refused() {
    let (_tmp, config) = project(|t| {
        no_key_rules(t).replace(
            "[dataset]",
            r#"[[rules]]
name = "unique_key"
expression = "_key_occurrences <= 2"
severity = "warn"

[dataset]"#,
        )
    });
    let text = output(&silverline(&["check-config", "--config", config.to_str().unwrap()]).code(2));
    assert!(
        text.contains("rule 'unique_key'") && text.contains("engine rule"),
        "{text}"
    );
}
