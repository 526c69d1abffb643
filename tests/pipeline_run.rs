//! One run's guarantees on the embedded default: Silver keeps exactly the
//! contract's schema, a backfill baselines each month on the one before it, a
//! rerun commits nothing, broken books commit nothing, and every malformed
//! record is quarantined with its file, line and raw text.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use chrono::NaiveDate;
use silverline::config::rules::Severity;
use silverline::demo::generate::{Portfolio, mis_map_limits, months, to_csv};
use silverline::pipeline::summary::RunStatus;
use silverline::pipeline::{RunOptions, TestHooks};
use silverline::{Error, ErrorClass};

fn month(y: i32, m: u32) -> NaiveDate {
    NaiveDate::from_ymd_opt(y, m, 1).unwrap()
}

/// A bank of `accounts` with one committed month of history (2025-12).
async fn bank_with_history(tw: &common::TestWorkspace, accounts: usize) -> Portfolio {
    let mut bank = Portfolio::new("BANK_T", accounts, false, 5);
    let rows = bank.statements(month(2025, 12), true);
    tw.ws.put_drop("BANK_T", "2025-12", &rows).await.unwrap();
    let outcome = tw
        .ws
        .run_drop("BANK_T", "2025-12", &RunOptions::default())
        .await
        .unwrap();
    assert_eq!(outcome.summary.counts.committed, accounts as u64);
    bank
}

#[tokio::test]
async fn silver_schema_is_exactly_the_contract() {
    let tw = common::workspace().await;
    bank_with_history(&tw, 20).await;
    let table = common::silver_table(&tw.ws).await;
    let iceberg_names: Vec<String> = table
        .metadata()
        .current_schema()
        .as_struct()
        .fields()
        .iter()
        .map(|f| f.name.clone())
        .collect();
    let contract: Vec<String> = tw
        .ws
        .plan
        .contract
        .column_names()
        .map(str::to_string)
        .collect();
    assert_eq!(iceberg_names, contract);
    let batches = common::silver_batches(&tw.ws).await;
    let scanned: Vec<String> = batches[0]
        .schema()
        .fields()
        .iter()
        .map(|f| f.name().clone())
        .collect();
    assert_eq!(scanned, contract);
    assert!(
        scanned
            .iter()
            .all(|n| !n.starts_with("prev_") && !n.starts_with('_'))
    );
}

#[tokio::test]
async fn a_backfill_baselines_each_month_on_the_one_before() {
    let tw = common::workspace().await;
    let mut bank = bank_with_history(&tw, 40).await;
    let [jan, feb, mar] = months(month(2026, 1), 3)[..] else {
        panic!()
    };
    let mut rows = bank.statements(jan, false);
    bank.change_limits_silently(5);
    rows.extend(bank.statements(feb, false));
    rows.extend(bank.statements(mar, false));
    tw.ws
        .put_drop("BANK_T", "backfill-2026-01-2026-03", &rows)
        .await
        .unwrap();
    let outcome = tw
        .ws
        .run_drop("BANK_T", "backfill-2026-01-2026-03", &RunOptions::default())
        .await
        .unwrap();
    let summary = outcome.summary;
    // January is compared with December in Silver, February with January and
    // March with February in the same drop: only February's five changed rows fail.
    assert_eq!(summary.counts.quarantined, 5);
    assert_eq!(summary.baseline.rows_without_baseline, 0);
    let quarantined = common::dq_records(&summary, "quarantine");
    assert_eq!(quarantined.len(), 5);
    for record in &quarantined {
        assert_eq!(record["statement_date"], "2026-02-28");
        assert_eq!(common::error_rules(record), vec!["limit_stable"]);
    }
    assert_eq!(common::silver_count(&tw.ws).await, 40 + 120 - 5);
}

#[tokio::test]
async fn a_rerun_of_a_committed_drop_adds_no_row_and_no_snapshot() {
    let tw = common::workspace().await;
    bank_with_history(&tw, 30).await;
    let rows_before = common::silver_count(&tw.ws).await;
    let snapshots_before = common::snapshot_count(&tw.ws).await;
    let outcome = tw
        .ws
        .run_drop("BANK_T", "2025-12", &RunOptions::default())
        .await
        .unwrap();
    assert_eq!(outcome.summary.status, RunStatus::AlreadyCommitted);
    assert_eq!(common::silver_count(&tw.ws).await, rows_before);
    assert_eq!(common::snapshot_count(&tw.ws).await, snapshots_before);
}

#[tokio::test]
async fn a_broken_balance_fails_the_run_and_commits_nothing() {
    let tw = common::workspace().await;
    let mut bank = bank_with_history(&tw, 25).await;
    let rows = bank.statements(month(2026, 1), false);
    tw.ws.put_drop("BANK_T", "2026-01", &rows).await.unwrap();
    let snapshots_before = common::snapshot_count(&tw.ws).await;
    let options = RunOptions {
        hooks: TestHooks {
            miscount_silver_rows: -1,
        },
        ..RunOptions::default()
    };
    let err = tw
        .ws
        .run_drop("BANK_T", "2026-01", &options)
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            Error::Unbalanced {
                received: 25,
                accounted: 24,
                gap: 1,
                ..
            }
        ),
        "{err}"
    );
    assert_eq!(err.class(), ErrorClass::Data);
    assert_eq!(common::snapshot_count(&tw.ws).await, snapshots_before);
    assert_eq!(common::silver_count(&tw.ws).await, 25);
    // The same drop with honest books then commits.
    let outcome = tw
        .ws
        .run_drop("BANK_T", "2026-01", &RunOptions::default())
        .await
        .unwrap();
    assert_eq!(outcome.summary.counts.committed, 25);
}

#[tokio::test]
async fn a_fail_rule_stops_the_run_with_nothing_committed() {
    let mut tw = common::workspace().await;
    let mut bank = bank_with_history(&tw, 10).await;
    for rule in tw
        .ws
        .plan
        .rules
        .iter_mut()
        .filter(|r| r.name == "limit_stable")
    {
        rule.severity = Severity::Fail;
    }
    let mut rows = bank.statements(month(2026, 1), false);
    let damaged = mis_map_limits(&mut rows);
    tw.ws.put_drop("BANK_T", "2026-01", &rows).await.unwrap();
    let err = tw
        .ws
        .run_drop("BANK_T", "2026-01", &RunOptions::default())
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::FailRule { rule, rows } if rule == "limit_stable" && *rows == damaged as u64),
        "{err}"
    );
    assert_eq!(common::snapshot_count(&tw.ws).await, 1);
    assert_eq!(common::silver_count(&tw.ws).await, 10);
}

#[tokio::test]
async fn a_dry_run_commits_nothing_but_reports_what_it_would_commit() {
    let tw = common::workspace().await;
    let mut bank = bank_with_history(&tw, 15).await;
    let rows = bank.statements(month(2026, 1), false);
    tw.ws.put_drop("BANK_T", "2026-01", &rows).await.unwrap();
    let dry = RunOptions {
        dry_run: true,
        ..RunOptions::default()
    };
    let outcome = tw.ws.run_drop("BANK_T", "2026-01", &dry).await.unwrap();
    assert_eq!(outcome.summary.status, RunStatus::DryRun);
    assert_eq!(outcome.summary.counts.committed, 15);
    assert_eq!(common::snapshot_count(&tw.ws).await, 1);
    let real = tw
        .ws
        .run_drop("BANK_T", "2026-01", &RunOptions::default())
        .await
        .unwrap();
    assert_eq!(real.summary.status, RunStatus::Committed);
    assert_eq!(common::silver_count(&tw.ws).await, 30);
}

#[tokio::test]
async fn malformed_records_are_quarantined_with_file_line_and_raw_text() {
    let tw = common::workspace().await;
    let mut bank = Portfolio::new("BANK_T", 3, false, 9);
    let good = to_csv(&bank.statements(month(2026, 1), false));
    let mut text = good.clone();
    text.push_str(
        "BANK_T,X1,2026-01-31,A,H1,123456789012,,,CARD,ACTIVE,abc,100.00,0.00,5.00,1.00,0.00,0\n",
    );
    text.push_str("BANK_T,X2,2026-01-31,A\n");
    text.push_str("BANK_T,X3,2026-13-31,A,H1,123456789012,,,CARD,ACTIVE,100.00,100.00,0.00,5.00,1.00,0.00,0\n");
    tw.ws
        .put_file("BANK_T", "2026-01", "part-1.csv", text.into_bytes())
        .await
        .unwrap();
    let outcome = tw
        .ws
        .run_drop("BANK_T", "2026-01", &RunOptions::default())
        .await
        .unwrap();
    let summary = outcome.summary;
    assert_eq!(summary.counts.received, 6);
    assert_eq!(summary.counts.committed, 3);
    assert_eq!(summary.counts.quarantined, 3);
    let records = common::dq_records(&summary, "quarantine");
    let got: Vec<(&str, &str, Vec<String>)> = records
        .iter()
        .map(|r| {
            (
                r["_source_file"].as_str(),
                r["_source_line"].as_str(),
                common::error_rules(r),
            )
        })
        .collect();
    let parse = vec!["parse".to_string()];
    assert_eq!(
        got,
        vec![
            ("part-1.csv", "5", parse.clone()),
            ("part-1.csv", "6", parse.clone()),
            ("part-1.csv", "7", parse)
        ]
    );
    assert_eq!(records[1]["_raw_record"], "BANK_T,X2,2026-01-31,A");
    assert!(
        records[0]["_dq_errors"].contains("credit_limit"),
        "{}",
        records[0]["_dq_errors"]
    );
}
