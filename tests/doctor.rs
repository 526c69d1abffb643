//! `silverline doctor` on the embedded default (local files + SQL catalog),
//! through the binary: every check passes on a sound setup, the S3-only
//! checks say they do not apply, and each broken location fails its own
//! line and the exit code. The S3 lanes are in `stack_s3_rest.rs` and
//! `stack_localstack.rs`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod harness;

use common::doctor::line;
use harness::{month, output, project, put_drop, run_args, silverline, walk};
use silverline::demo::generate::Portfolio;

#[test]
fn doctor_passes_on_the_embedded_default_before_and_after_the_first_run() {
    let (tmp, config) = project(|t| t);
    let rows = Portfolio::new("BANK_D", 5, false, 3).statements(month(2026, 1), false);
    put_drop(tmp.path(), "BANK_D", "2026-01", &rows);
    let config = config.to_str().unwrap();
    let doctor = ["doctor", "--config", config];

    let before = output(&silverline(&doctor).code(0));
    assert!(line(&before, "bronze").starts_with("ok "), "{before}");
    assert!(line(&before, "dq_error").starts_with("ok "), "{before}");
    assert!(
        line(&before, "catalog").contains("the first run creates it"),
        "{before}"
    );
    assert!(
        line(&before, "silver.credit_statements").contains("not created yet"),
        "{before}"
    );
    assert!(
        line(&before, "credentials").starts_with("skip") && before.contains("not applicable"),
        "{before}"
    );
    assert!(before.contains("0 failed"), "{before}");
    // A preflight creates no catalog and leaves no probe behind.
    assert!(!tmp.path().join("data/catalog.db").exists());
    let left: Vec<_> = walk(&tmp.path().join("data/dq_error"));
    assert!(left.is_empty(), "{left:?}");

    silverline(&run_args(config, "BANK_D", "2026-01")).success();
    let after = output(&silverline(&doctor).code(0));
    assert!(
        line(&after, "silver.credit_statements").contains("has the contract's schema"),
        "{after}"
    );
    assert!(line(&after, "catalog").starts_with("ok "), "{after}");
    let probes: Vec<_> = walk(&tmp.path().join("data/dq_error"))
        .into_iter()
        .filter(|p| p.to_string_lossy().contains("doctor"))
        .collect();
    assert!(probes.is_empty(), "{probes:?}");
}

#[test]
fn doctor_fails_each_broken_location_on_its_own_line_and_exits_1() {
    // dq_error and the catalog's database under a regular file; no bronze folder.
    let (tmp, config) = project(|t| {
        t.replace(
            "dq_error = \"../data/dq_error\"",
            "dq_error = \"../blocker/dq_error\"",
        )
        .replace(
            "sqlite://../data/catalog.db",
            "sqlite://../blocker/catalog.db",
        )
    });
    std::fs::write(tmp.path().join("blocker"), b"not a folder").unwrap();
    let text = output(&silverline(&["doctor", "--config", config.to_str().unwrap()]).code(1));
    assert!(
        line(&text, "bronze").starts_with("FAIL") && text.contains("is not a folder"),
        "{text}"
    );
    assert!(
        line(&text, "dq_error").starts_with("FAIL") && line(&text, "dq_error").contains("blocker"),
        "{text}"
    );
    assert!(
        line(&text, "catalog").starts_with("FAIL")
            && line(&text, "catalog").contains("catalog.uri"),
        "{text}"
    );
    assert!(
        line(&text, "silver.credit_statements").starts_with("skip"),
        "{text}"
    );
    assert!(text.contains("3 failed"), "{text}");
}

#[test]
fn doctor_on_a_contract_silver_cannot_evolve_to_fails_the_table_check() {
    let (tmp, config) = project(|t| t);
    let rows = Portfolio::new("BANK_D", 5, false, 3).statements(month(2026, 1), false);
    put_drop(tmp.path(), "BANK_D", "2026-01", &rows);
    let config_path = config.to_str().unwrap();
    silverline(&run_args(config_path, "BANK_D", "2026-01")).success();
    // A narrower decimal: no evolution Iceberg allows.
    let text = std::fs::read_to_string(&config).unwrap().replace(
        r#""credit_limit",        type = "decimal(18,2)""#,
        r#""credit_limit",        type = "decimal(16,2)""#,
    );
    std::fs::write(&config, text).unwrap();
    let out = output(&silverline(&["doctor", "--config", config_path]).code(1));
    let table = line(&out, "silver.credit_statements");
    assert!(
        table.starts_with("FAIL") && table.contains("credit_limit"),
        "{out}"
    );
}

#[test]
fn doctor_on_a_broken_config_exits_2() {
    let (_tmp, config) = project(|t| t.replace("[storage]", "[storage]\nno_such_setting = 1"));
    let text = output(&silverline(&["doctor", "--config", config.to_str().unwrap()]).code(2));
    assert!(text.contains("no_such_setting"), "{text}");
}
