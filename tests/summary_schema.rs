//! The published run summary schema: `docs/summary.schema.json` is what
//! `silverline schema summary` prints, and the summaries real runs write
//! validate against it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod harness;

use std::collections::BTreeSet;
use std::path::Path;

use harness::{
    add_column, month, output, project, put_drop, rewrite, run_args, silverline, summaries,
};
use silverline::demo::generate::mis_map_limits;
use silverline::pipeline::summary::{SUMMARY_SCHEMA_VERSION, Summary};

const SCHEMA_FILE: &str = "docs/summary.schema.json";

/// A change that takes a summary away from its schema.
type Drift = fn(&mut serde_json::Value);

/// The committed schema, compiled.
fn committed_validator() -> jsonschema::Validator {
    let text = std::fs::read_to_string(SCHEMA_FILE).unwrap();
    jsonschema::validator_for(&serde_json::from_str(&text).unwrap()).unwrap()
}

/// What `validator` finds wrong with `summary`, one line per error.
fn violations(validator: &jsonschema::Validator, summary: &serde_json::Value) -> Vec<String> {
    validator
        .iter_errors(summary)
        .map(|error| format!("{}: {error}", error.instance_path()))
        .collect()
}

#[test]
fn the_committed_schema_is_what_the_binary_prints() {
    let printed = silverline(&["schema", "summary"]).success();
    let printed = String::from_utf8(printed.get_output().stdout.clone()).unwrap();
    let committed = std::fs::read_to_string(SCHEMA_FILE).unwrap();
    assert!(
        printed == committed,
        "{SCHEMA_FILE} is not what the summary types say: regenerate it with \
         `cargo run -- schema summary > {SCHEMA_FILE}` (and bump SUMMARY_SCHEMA_VERSION \
         if the change breaks a reader)"
    );
    let schema: serde_json::Value = serde_json::from_str(&committed).unwrap();
    assert_eq!(
        schema["properties"]["schema_version"]["const"],
        SUMMARY_SCHEMA_VERSION
    );
}

/// A contract column the drops lack: the run evolves Silver and reads it as null.
fn add_nullable_column(config: &Path) {
    let last = r#"  { name = "month_in_arrears",    type = "int",           nullable = false },"#;
    let text = std::fs::read_to_string(config).unwrap();
    assert!(text.contains(last), "the shipped contract changed: {last}");
    let added = format!("{last}\n  {{ name = \"risk_grade\", type = \"string\" }},");
    std::fs::write(config, text.replace(last, &added)).unwrap();
}

#[test]
fn summaries_of_real_runs_validate_against_the_committed_schema_and_drift_does_not() {
    let (tmp, config) = project(|t| t);
    let (root, cfg) = (tmp.path(), config.to_str().unwrap());
    let mut bank = harness::put_january(root, "BANK_C", 12);
    silverline(&run_args(cfg, "BANK_C", "2026-01")).success();

    // February: limits mis-mapped (quarantined), an extra column in the file,
    // a contract column it lacks (schema drift and evolution).
    add_nullable_column(&config);
    let mut february = bank.statements(month(2026, 2), false);
    mis_map_limits(&mut february);
    put_drop(root, "BANK_C", "2026-02", &february);
    let file = root.join("data/bronze/BANK_C/2026-02/statements.csv");
    rewrite(&file, "statements.csv", b',', |records| {
        add_column(records, "branch_code", |i| format!("BR{i}"))
    });
    silverline(&run_args(cfg, "BANK_C", "2026-02")).success();
    let text = output(&silverline(&run_args(cfg, "BANK_C", "2030-01")).code(5));
    assert!(text.contains("BANK_C/2030-01"), "{text}");

    let validator = committed_validator();
    let written = summaries(root);
    for summary in &written {
        let wrong = violations(&validator, summary);
        assert!(wrong.is_empty(), "{wrong:#?}\nin {summary:#}");
        assert_eq!(summary["schema_version"], SUMMARY_SCHEMA_VERSION);
    }
    let statuses: BTreeSet<&str> = written
        .iter()
        .map(|s| s["status"].as_str().unwrap())
        .collect();
    for status in ["committed", "failed"] {
        assert!(
            statuses.contains(status),
            "no {status} summary: {statuses:?}"
        );
    }
    // The optional parts were there to be checked.
    let has = |field: &str| written.iter().any(|s| !s[field].is_null());
    for field in ["backlog", "schema_drift", "schema_evolution"] {
        assert!(has(field), "no summary with {field}");
    }
    assert!(
        written
            .iter()
            .any(|s| !s["aggregates"].as_array().unwrap().is_empty())
    );

    // A summary that drifts from the schema fails it.
    let committed = written.iter().find(|s| s["status"] == "committed").unwrap();
    read_back_with_and_without_a_version(committed);
    let drifts: [(&str, Drift); 4] = [
        ("an unknown field", |s| s["surprise"] = 1.into()),
        ("a count as text", |s| s["counts"]["received"] = "12".into()),
        ("a missing field", |s| {
            s.as_object_mut().unwrap().remove("contributor");
        }),
        ("an unknown status", |s| s["status"] = "half_done".into()),
    ];
    for (what, drift) in drifts {
        let mut drifted = committed.clone();
        drift(&mut drifted);
        assert!(
            !violations(&validator, &drifted).is_empty(),
            "{what} passed the schema"
        );
    }
}

/// `summary` reads back as a [`Summary`] (as recovery reads one); without its
/// `schema_version`, as a summary written before versions were, it reads as 0.
fn read_back_with_and_without_a_version(summary: &serde_json::Value) {
    let read: Summary = serde_json::from_value(summary.clone()).unwrap();
    assert_eq!(read.schema_version, SUMMARY_SCHEMA_VERSION);
    let mut old = summary.clone();
    old.as_object_mut().unwrap().remove("schema_version");
    let read: Summary = serde_json::from_value(old).unwrap();
    assert_eq!(read.schema_version, 0);
    assert_eq!(read.counts.received, 12);
}
