//! The end-to-end suite, written once against a [`Workspace`] and run on every
//! backend: the embedded default (`pipeline_run.rs`), the local S3 + Iceberg
//! REST stack (`stack_s3_rest.rs`) and LocalStack S3 (`stack_localstack.rs`),
//! each through the one list of tests of [`suite_tests!`](crate::suite_tests).

use chrono::NaiveDate;
use silverline::config::Plan;
use silverline::config::contract::{Column, ColumnType};
use silverline::config::rules::Severity;
use silverline::demo::Workspace;
use silverline::demo::generate::{Portfolio, Statement, mis_map_limits, months, to_csv};
use silverline::demo::scenarios::{NEWCOMER, ScenarioResult, run_all};
use silverline::infra::catalog::{connect, table_ident};
use silverline::infra::evolve::evolve;
use silverline::infra::storage::Stores;
use silverline::pipeline::summary::RunStatus;
use silverline::pipeline::{CrashPoint, RunOptions, RunOutcome, TestHooks};
use silverline::{Error, ErrorClass};

use silverline::exceptions::ExceptionStatus;
use silverline::exceptions::backlog::states;
use silverline::replay::{ReplayOptions, corrections_folder, replay};
use silverline::report::gather::{Gather, gather};

use super::{
    dq_records, error_rules, exception_events, silver_accounts, silver_batches, silver_count,
    silver_table, snapshot_count,
};

fn month(y: i32, m: u32) -> NaiveDate {
    NaiveDate::from_ymd_opt(y, m, 1).unwrap()
}

/// A bank of `accounts` with one committed month of history (2025-12).
pub async fn bank_with_history(ws: &Workspace, accounts: usize) -> Portfolio {
    let mut bank = Portfolio::new("BANK_T", accounts, false, 5);
    let rows = bank.statements(month(2025, 12), true);
    ws.put_drop("BANK_T", "2025-12", &rows).await.unwrap();
    let outcome = ws
        .run_drop("BANK_T", "2025-12", &RunOptions::default())
        .await
        .unwrap();
    assert_eq!(outcome.summary.counts.committed, accounts as u64);
    bank
}

/// Every scenario quarantines exactly what the generator damaged, by the
/// rule meant to catch it; the clean month and the newcomer quarantine nothing.
pub async fn scenarios_are_caught_exactly(ws: &Workspace) {
    let results = run_all(ws).await.unwrap();
    let mut total_committed = 0;
    for r in &results {
        let (counts, name) = (&r.summary.counts, r.scenario.name);
        assert_eq!(r.summary.status, RunStatus::Committed, "{name}");
        assert_eq!(counts.received, r.scenario.rows.len() as u64, "{name}");
        assert_eq!(
            counts.quarantined, r.scenario.expected_quarantined,
            "{name}"
        );
        assert_eq!(counts.pending, r.scenario.expected_pending, "{name}");
        let missing = r.summary.missing_entities.as_ref().map(|m| m.total);
        assert_eq!(missing, Some(r.scenario.expected_missing), "{name}");
        assert_eq!(
            counts.received,
            counts.committed + counts.quarantined + counts.dropped + counts.pending
        );
        if let Some(rule) = r.scenario.expected_rule {
            let set_aside = r.scenario.expected_quarantined + r.scenario.expected_pending;
            assert_eq!(r.failed(rule), set_aside, "{name}: {rule}");
            for kind in ["quarantine", "pending"] {
                for record in dq_records(ws, &r.summary, kind).await {
                    assert!(
                        error_rules(&record).contains(&rule.to_string()),
                        "{record:?}"
                    );
                }
            }
        }
        total_committed += counts.committed;
    }
    assert_eq!(silver_count(ws).await as u64, total_committed);
    clean_month_has_full_baseline(&results);
    newcomer_trend_checks_are_skipped(&results);
    backfill_aggregates_compare_each_month_with_the_previous(&results);
    pending_rows_are_kept_out_of_silver(ws, &results).await;
}

/// In the backfill, each month's metrics are compared with the month before
/// it in the same drop, and the first with the last committed month.
fn backfill_aggregates_compare_each_month_with_the_previous(results: &[ScenarioResult]) {
    let clean = results
        .iter()
        .find(|r| r.scenario.name == "clean month")
        .unwrap();
    let backfill = results
        .iter()
        .find(|r| r.scenario.name.starts_with("5 backfill"))
        .unwrap();
    let periods = &backfill.summary.aggregates;
    assert_eq!(periods.len(), 3);
    // The first month is compared with the committed one, for every metric
    // measured on committed months (unchanged_share reads prev_* and is not).
    for metric in ["accounts", "arrears_total"] {
        assert_eq!(
            periods[0].previous[metric], clean.summary.aggregates[0].metrics[metric],
            "{metric}"
        );
    }
    assert_eq!(periods[0].previous["unchanged_share"], None);
    assert_eq!(periods[1].previous, periods[0].metrics);
    assert_eq!(periods[2].previous, periods[1].metrics);
    for period in periods.iter().chain(&clean.summary.aggregates) {
        assert!(period.rules.values().all(|v| v == "pass"), "{period:?}");
    }
}

/// Rows whose holder is missing are pending, with the rule's code, and not in Silver.
async fn pending_rows_are_kept_out_of_silver(ws: &Workspace, results: &[ScenarioResult]) {
    let lag = results
        .iter()
        .find(|r| r.scenario.name == "reference lag")
        .unwrap();
    let pending = dq_records(ws, &lag.summary, "pending").await;
    assert_eq!(pending.len() as u64, lag.scenario.expected_pending);
    let silver_accounts = silver_accounts(ws).await;
    for record in &pending {
        assert!(
            lag.scenario.held_back.contains(&record["holder_id"]),
            "{record:?}"
        );
        assert_eq!(error_rules(record), vec!["holder_exists"]);
        assert!(
            !silver_accounts.contains(&record["account_id"]),
            "{record:?}"
        );
    }
}

fn clean_month_has_full_baseline(results: &[ScenarioResult]) {
    let clean = results
        .iter()
        .find(|r| r.scenario.name == "clean month")
        .unwrap();
    assert_eq!(clean.summary.counts.quarantined, 0);
    assert_eq!(
        clean.summary.counts.committed,
        clean.scenario.rows.len() as u64
    );
    assert_eq!(clean.summary.baseline.rows_without_baseline, 0);
    assert_eq!(clean.summary.baseline.trend_checks_skipped, 0);
}

fn newcomer_trend_checks_are_skipped(results: &[ScenarioResult]) {
    let newcomer = results
        .iter()
        .find(|r| r.scenario.contributor == NEWCOMER)
        .unwrap();
    let rows = newcomer.scenario.rows.len() as u64;
    let trend_rules = newcomer.summary.rules.iter().filter(|r| r.trend).count() as u64;
    assert!(trend_rules >= 2);
    assert_eq!(newcomer.summary.counts.quarantined, 0);
    assert_eq!(newcomer.summary.baseline.rows_without_baseline, rows);
    assert_eq!(
        newcomer.summary.baseline.trend_checks_skipped,
        rows * trend_rules
    );
    for rule in newcomer.summary.rules.iter().filter(|r| r.trend) {
        assert_eq!(
            (rule.failed, rule.skipped_no_baseline),
            (0, rows),
            "{}",
            rule.rule
        );
    }
}

/// Silver's schema, in the catalog and in the data, is exactly the contract.
pub async fn silver_schema_is_the_contract(ws: &Workspace) {
    bank_with_history(ws, 20).await;
    let table = silver_table(ws).await;
    let iceberg_names: Vec<String> = table
        .metadata()
        .current_schema()
        .as_struct()
        .fields()
        .iter()
        .map(|f| f.name.clone())
        .collect();
    let contract: Vec<String> = ws
        .plan
        .contract
        .column_names()
        .map(str::to_string)
        .collect();
    assert_eq!(iceberg_names, contract);
    let batches = silver_batches(ws).await;
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

/// January is compared with December in Silver, February with January and
/// March with February in the same drop: only February's changed rows fail.
pub async fn backfill_baselines_each_month_on_the_previous(ws: &Workspace) {
    let mut bank = bank_with_history(ws, 200).await;
    let [jan, feb, mar] = months(month(2026, 1), 3)[..] else {
        panic!()
    };
    let mut rows = bank.statements(jan, false);
    bank.change_limits_silently(5);
    rows.extend(bank.statements(feb, false));
    rows.extend(bank.statements(mar, false));
    ws.put_drop("BANK_T", "backfill-2026-01-2026-03", &rows)
        .await
        .unwrap();
    let outcome = ws
        .run_drop("BANK_T", "backfill-2026-01-2026-03", &RunOptions::default())
        .await
        .unwrap();
    let summary = outcome.summary;
    assert_eq!(summary.counts.quarantined, 5);
    assert_eq!(summary.baseline.rows_without_baseline, 0);
    let quarantined = dq_records(ws, &summary, "quarantine").await;
    assert_eq!(quarantined.len(), 5);
    for record in &quarantined {
        assert_eq!(record["statement_date"], "2026-02-28");
        assert_eq!(error_rules(record), vec!["limit_stable"]);
    }
    assert_eq!(silver_count(ws).await, 200 + 600 - 5);
}

/// The `accounts` metric of the period before the drop's first, as the run compared it.
fn previous_accounts(summary: &silverline::pipeline::summary::Summary) -> Option<f64> {
    summary
        .aggregates
        .first()
        .and_then(|p| p.previous.get("accounts").copied().flatten())
}

/// A committed month's metrics are measured once and kept; a later run reads
/// them back, and a month that gained rows is measured afresh.
pub async fn committed_month_metrics_are_kept_until_the_month_changes(ws: &Workspace) {
    let mut bank = bank_with_history(ws, 40).await;
    let dry = RunOptions {
        dry_run: true,
        ..RunOptions::default()
    };
    ws.put_drop("BANK_T", "2026-01", &bank.statements(month(2026, 1), false))
        .await
        .unwrap();
    let first = ws
        .run_drop("BANK_T", "2026-01", &dry)
        .await
        .unwrap()
        .summary;
    assert_eq!(previous_accounts(&first), Some(40.0));
    let kept = ws
        .list_outputs("metrics/contributor=BANK_T/")
        .await
        .unwrap();
    // December's run kept September to November (measured: empty) and
    // December (its drop's own metrics: every row committed, in a month
    // that held none); a dry run keeps nothing under dq_error (invariant
    // 12), and January's found December kept.
    assert_eq!(kept.len(), 4, "one per month: {kept:?}");

    let again = ws
        .run_drop("BANK_T", "2026-01", &dry)
        .await
        .unwrap()
        .summary;
    assert_eq!(again.aggregates, first.aggregates, "read back as measured");
    assert_eq!(
        ws.list_outputs("metrics/contributor=BANK_T/")
            .await
            .unwrap(),
        kept,
        "nothing measured again"
    );

    let mut late = Portfolio::new("BANK_T", 5, false, 9).statements(month(2025, 12), false);
    for (i, row) in late.iter_mut().enumerate() {
        row.account = format!("BANK_T-LATE-{i}");
    }
    ws.put_drop("BANK_T", "2025-12-late", &late).await.unwrap();
    let committed = ws
        .run_drop("BANK_T", "2025-12-late", &RunOptions::default())
        .await
        .unwrap()
        .summary;
    assert_eq!(committed.counts.committed, 5);
    let after = ws
        .run_drop("BANK_T", "2026-01", &dry)
        .await
        .unwrap()
        .summary;
    assert_eq!(
        previous_accounts(&after),
        Some(45.0),
        "December measured afresh"
    );
}

/// A rerun of a committed drop adds no row and no snapshot.
pub async fn rerun_adds_nothing(ws: &Workspace) {
    bank_with_history(ws, 30).await;
    let rows_before = silver_count(ws).await;
    let snapshots_before = snapshot_count(ws).await;
    let outcome = ws
        .run_drop("BANK_T", "2025-12", &RunOptions::default())
        .await
        .unwrap();
    assert_eq!(outcome.summary.status, RunStatus::AlreadyCommitted);
    assert_eq!(silver_count(ws).await, rows_before);
    assert_eq!(snapshot_count(ws).await, snapshots_before);
}

/// A broken count fails the run with nothing committed; honest books then commit.
pub async fn broken_balance_commits_nothing(ws: &Workspace) {
    let mut bank = bank_with_history(ws, 25).await;
    let rows = bank.statements(month(2026, 1), false);
    ws.put_drop("BANK_T", "2026-01", &rows).await.unwrap();
    let snapshots_before = snapshot_count(ws).await;
    let options = RunOptions {
        hooks: TestHooks {
            miscount_silver_rows: -1,
            ..TestHooks::default()
        },
        ..RunOptions::default()
    };
    let err = ws
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
    assert_eq!(snapshot_count(ws).await, snapshots_before);
    assert_eq!(silver_count(ws).await, 25);
    let outcome = ws
        .run_drop("BANK_T", "2026-01", &RunOptions::default())
        .await
        .unwrap();
    assert_eq!(outcome.summary.counts.committed, 25);
}

/// A `fail` rule that fires stops the run with nothing committed.
pub async fn fail_rule_commits_nothing(ws: &mut Workspace) {
    let mut bank = bank_with_history(ws, 10).await;
    for rule in ws
        .plan
        .rules
        .iter_mut()
        .filter(|r| r.name == "limit_stable")
    {
        rule.severity = Severity::Fail;
    }
    let mut rows = bank.statements(month(2026, 1), false);
    let damaged = mis_map_limits(&mut rows);
    ws.put_drop("BANK_T", "2026-01", &rows).await.unwrap();
    let err = ws
        .run_drop("BANK_T", "2026-01", &RunOptions::default())
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::FailRule { rule, rows } if rule == "limit_stable" && *rows == damaged as u64),
        "{err}"
    );
    assert_eq!(snapshot_count(ws).await, 1);
    assert_eq!(silver_count(ws).await, 10);
}

/// A dry run reports what it would commit and commits nothing.
pub async fn dry_run_commits_nothing(ws: &Workspace) {
    let mut bank = bank_with_history(ws, 15).await;
    let rows = bank.statements(month(2026, 1), false);
    ws.put_drop("BANK_T", "2026-01", &rows).await.unwrap();
    let dry = RunOptions {
        dry_run: true,
        ..RunOptions::default()
    };
    let before = ws.list_outputs("").await.unwrap();
    let kept = ws.list_outputs("reference-keys/").await.unwrap();
    assert_eq!(
        kept.len(),
        2,
        "the history's run kept the holders' keys and named their version: {kept:?}"
    );
    let outcome = ws.run_drop("BANK_T", "2026-01", &dry).await.unwrap();
    assert_eq!(outcome.summary.status, RunStatus::DryRun);
    assert_eq!(outcome.summary.counts.committed, 15);
    assert_eq!(outcome.summary_url, None, "a dry run writes no summary");
    assert_eq!(snapshot_count(ws).await, 1);
    assert_eq!(
        ws.list_outputs("").await.unwrap(),
        before,
        "a dry run leaves no trace under dq_error: no claim, no file, no summary"
    );
    let real = ws
        .run_drop("BANK_T", "2026-01", &RunOptions::default())
        .await
        .unwrap();
    assert_eq!(real.summary.status, RunStatus::Committed);
    assert_eq!(silver_count(ws).await, 30);
}

/// Malformed records are quarantined by `parse` with file, line and raw text.
pub async fn malformed_records_are_quarantined(ws: &Workspace) {
    let mut bank = Portfolio::new("BANK_T", 3, false, 9);
    let good = bank.statements(month(2026, 1), false);
    ws.register_holders(
        "malformed",
        good.iter().map(|r| r.holder.as_str()).chain(["H1"]),
    )
    .await
    .unwrap();
    let mut text = to_csv(&good);
    text.push_str(
        "BANK_T,X1,2026-01-31,A,H1,123456789012,,,CARD,ACTIVE,abc,100.00,0.00,5.00,1.00,0.00,0\n",
    );
    text.push_str("BANK_T,X2,2026-01-31,A\n");
    text.push_str("BANK_T,X3,2026-13-31,A,H1,123456789012,,,CARD,ACTIVE,100.00,100.00,0.00,5.00,1.00,0.00,0\n");
    ws.put_file("BANK_T", "2026-01", "part-1.csv", text.into_bytes())
        .await
        .unwrap();
    let summary = ws
        .run_drop("BANK_T", "2026-01", &RunOptions::default())
        .await
        .unwrap()
        .summary;
    assert_eq!(summary.counts.received, 6);
    assert_eq!(summary.counts.committed, 3);
    assert_eq!(summary.counts.quarantined, 3);
    let records = dq_records(ws, &summary, "quarantine").await;
    let got: Vec<(&str, &str, Vec<String>)> = records
        .iter()
        .map(|r| {
            (
                r["_source_file"].as_str(),
                r["_source_line"].as_str(),
                error_rules(r),
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

/// The same drop started several times at once commits exactly once: one run
/// commits, the others find its snapshot and add nothing.
pub async fn same_drop_twice_at_once_commits_once(ws: &Workspace) {
    let mut bank = bank_with_history(ws, 200).await;
    let rows = bank.statements(month(2026, 1), false);
    ws.put_drop("BANK_T", "2026-01", &rows).await.unwrap();
    let snapshots_before = snapshot_count(ws).await;
    let options = RunOptions::default();
    let runs = (0..4).map(|_| ws.run_drop("BANK_T", "2026-01", &options));
    let statuses: Vec<RunStatus> = futures::future::join_all(runs)
        .await
        .into_iter()
        .map(|outcome| outcome.unwrap().summary.status)
        .collect();
    assert_eq!(
        snapshot_count(ws).await,
        snapshots_before + 1,
        "{statuses:?}"
    );
    assert_eq!(silver_count(ws).await, 400);
    let committed = statuses
        .iter()
        .filter(|s| **s == RunStatus::Committed)
        .count();
    assert_eq!(committed, 1, "{statuses:?}");
    assert!(
        statuses.iter().all(|s| matches!(
            s,
            RunStatus::Committed | RunStatus::CommittedConcurrently | RunStatus::AlreadyCommitted
        )),
        "{statuses:?}"
    );
}

/// A statement already committed by an earlier drop is set aside as a
/// resubmission, never doubled; a row of another contributor is quarantined.
pub async fn resubmissions_and_foreign_rows_are_set_aside(ws: &Workspace) {
    let mut bank = bank_with_history(ws, 12).await;
    let december = Portfolio::new("BANK_T", 12, false, 5).statements(month(2025, 12), true);
    let mut january = bank.statements(month(2026, 1), false);
    january.extend(december.iter().take(3).cloned());
    // A row of another contributor beside the bank's own (replacing one of
    // them would leave that account out of January: a missing entity).
    let mut foreign = january[0].clone();
    foreign.contributor = "BANK_OTHER".to_string();
    january.push(foreign);
    ws.put_drop("BANK_T", "2026-01-with-resends", &january)
        .await
        .unwrap();
    let summary = ws
        .run_drop("BANK_T", "2026-01-with-resends", &RunOptions::default())
        .await
        .unwrap()
        .summary;
    let failed = |rule: &str| {
        summary
            .rules
            .iter()
            .find(|r| r.rule == rule)
            .unwrap()
            .failed
    };
    assert_eq!(failed("resubmission"), 3);
    assert_eq!(failed("contributor"), 1);
    assert_eq!(summary.counts.quarantined, 4);
    assert_eq!(summary.missing_entities.as_ref().map(|m| m.total), Some(0));
    assert_eq!(silver_count(ws).await, 12 + 12);
}

/// An open account a month leaves out is a `missing` exception, keyed by
/// account and month, until a later drop declares it for that month; left
/// out again the next month, it is missing there too, and that month's
/// `prev_missing_entities` is the count recorded for the month before.
pub async fn missing_accounts_are_exceptions_until_declared(ws: &Workspace) {
    let mut bank = bank_with_history(ws, 200).await;
    let january = bank.statements(month(2026, 1), false);
    ws.put_drop("BANK_T", "2026-01", &january[1..])
        .await
        .unwrap();
    let summary = ws
        .run_drop("BANK_T", "2026-01", &RunOptions::default())
        .await
        .unwrap()
        .summary;
    assert_eq!(summary.missing_entities.map(|m| m.total), Some(1));
    let key = format!("BANK_T|{}|2026-01-01", january[0].account);
    let open_missing = |events: &[silverline::exceptions::ExceptionEvent]| -> Vec<String> {
        states(events)
            .iter()
            .filter(|s| s.latest.status == ExceptionStatus::Missing)
            .filter_map(|s| s.latest.record_key.clone())
            .collect()
    };
    assert_eq!(open_missing(&exception_events(ws).await), vec![key.clone()]);
    // Left out again in February: missing there too (its latest state is
    // December's), and February's previous missing count is January's.
    let february = bank.statements(month(2026, 2), false);
    let left_out = february[0].account.clone();
    assert_eq!(left_out, january[0].account);
    ws.put_drop("BANK_T", "2026-02", &february[1..])
        .await
        .unwrap();
    let summary = ws
        .run_drop("BANK_T", "2026-02", &RunOptions::default())
        .await
        .unwrap()
        .summary;
    assert_eq!(summary.missing_entities.map(|m| m.total), Some(1));
    let previous = &summary.aggregates[0].previous;
    assert_eq!(previous.get("missing_entities"), Some(&Some(1.0)));
    let february_key = format!("BANK_T|{left_out}|2026-02-01");
    let mut both = vec![key.clone(), february_key.clone()];
    both.sort();
    let mut open = open_missing(&exception_events(ws).await);
    open.sort();
    assert_eq!(open, both);
    ws.put_drop("BANK_T", "2026-01-late", &january[..1])
        .await
        .unwrap();
    ws.run_drop("BANK_T", "2026-01-late", &RunOptions::default())
        .await
        .unwrap();
    let events = exception_events(ws).await;
    assert_eq!(open_missing(&events), vec![february_key]);
    assert!(
        events.iter().any(|e| e.status == ExceptionStatus::Resolved
            && e.record_key.as_deref() == Some(key.as_str()))
    );
}

/// Rows of `contributor` in Silver.
async fn silver_rows_of(ws: &Workspace, contributor: &str) -> usize {
    let mut rows = 0;
    for batch in silver_batches(ws).await {
        let column = batch.column_by_name("contributor_id").unwrap();
        let column = column
            .as_any()
            .downcast_ref::<arrow::array::StringArray>()
            .unwrap();
        rows += column.iter().filter(|c| *c == Some(contributor)).count();
    }
    rows
}

/// A run that dies after writing its files, before its commit, right after
/// its commit, or while writing its summary is rerun: Silver holds every good
/// row exactly once, the quarantine rows are not doubled, and one balanced
/// summary tells the story.
pub async fn crash_anywhere_then_rerun_gives_the_same_result(ws: &Workspace) {
    let points = [
        CrashPoint::AfterWrite,
        CrashPoint::BeforeCommit,
        CrashPoint::AfterCommit,
        CrashPoint::DuringSummary,
    ];
    for (i, point) in points.into_iter().enumerate() {
        let contributor = format!("BANK_K{i}");
        let rows =
            Portfolio::new(&contributor, 150, false, i as u64).statements(month(2026, 1), false);
        ws.put_drop(&contributor, "2026-01", &rows).await.unwrap();
        let header = silverline::demo::generate::HEADER.join(",");
        let broken = format!("{header}\n{contributor},X1\n{contributor},X2\n");
        ws.put_file(&contributor, "2026-01", "broken.csv", broken.into_bytes())
            .await
            .unwrap();
        let crash = RunOptions {
            hooks: TestHooks {
                crash_at: Some(point),
                ..TestHooks::default()
            },
            ..RunOptions::default()
        };
        let err = ws.run_drop(&contributor, "2026-01", &crash).await;
        assert!(
            matches!(err, Err(Error::BadDrop { .. }) | Err(Error::Injected(_))),
            "{point:?}: {err:?}"
        );
        let rerun = ws
            .run_drop(&contributor, "2026-01", &RunOptions::default())
            .await
            .unwrap()
            .summary;
        assert!(
            matches!(
                rerun.status,
                RunStatus::Committed | RunStatus::AlreadyCommitted
            ),
            "{point:?}"
        );
        assert_eq!(silver_rows_of(ws, &contributor).await, 150, "{point:?}");
        let outputs = ws.list_outputs("").await.unwrap();
        let mine = |kind: &str| -> Vec<&String> {
            outputs
                .iter()
                .filter(|o| {
                    o.starts_with(kind) && o.contains(&format!("contributor={contributor}/"))
                })
                .collect()
        };
        let quarantine = mine("quarantine/");
        assert_eq!(quarantine.len(), 1, "{point:?}: {quarantine:?}");
        let records = csv::Reader::from_reader(
            ws.read_output(&format!("{}/{}", ws.plan.storage.dq_error, quarantine[0]))
                .await
                .unwrap()
                .as_slice(),
        )
        .records()
        .count();
        assert_eq!(records, 2, "{point:?}");
        let summaries = mine("summaries/");
        assert_eq!(summaries.len(), 1, "{point:?}: {summaries:?}");
        let summary: serde_json::Value = serde_json::from_slice(
            &ws.read_output(&format!("{}/{}", ws.plan.storage.dq_error, summaries[0]))
                .await
                .unwrap(),
        )
        .unwrap();
        assert_eq!(summary["status"], "committed", "{point:?}");
        assert_eq!(summary["counts"]["received"], 152, "{point:?}");
        assert_eq!(summary["counts"]["committed"], 150, "{point:?}");
        assert_eq!(summary["counts"]["quarantined"], 2, "{point:?}");
        let events = exception_events(ws)
            .await
            .into_iter()
            .filter(|e| e.contributor == contributor)
            .count();
        assert_eq!(events, 2, "{point:?}: each exception recorded once");
    }
}

/// Current status of every exception of `contributor`: id -> status.
async fn statuses_of(
    ws: &Workspace,
    contributor: &str,
) -> std::collections::BTreeMap<String, ExceptionStatus> {
    let events = exception_events(ws).await;
    states(&events)
        .into_iter()
        .filter(|s| s.latest.contributor == contributor)
        .map(|s| (s.latest.exception_id.clone(), s.latest.status))
        .collect()
}

/// The holders of the first four rows: they arrive late in the reference.
pub fn late_holders(rows: &[Statement]) -> Vec<&str> {
    rows.iter().take(4).map(|r| r.holder.as_str()).collect()
}

/// LATE_R's March drop, run while the reference lacks the late holders: its
/// rows and the run's outcome (their rows pending).
pub async fn late_holders_run(ws: &Workspace) -> (Vec<Statement>, RunOutcome) {
    let rows = Portfolio::new("LATE_R", 30, false, 21).statements(month(2026, 3), false);
    ws.put_drop_holding_back("LATE_R", "2026-03", &rows, &late_holders(&rows))
        .await
        .unwrap();
    let first = ws
        .run_drop("LATE_R", "2026-03", &RunOptions::default())
        .await
        .unwrap();
    (rows, first)
}

/// Reference lag end to end: rows whose holder is missing are pending; a
/// replay before the reference catches up changes no status and makes no
/// twin; once the holders arrive a replay commits them to Silver exactly once
/// and resolves their exceptions; a second replay does nothing.
pub async fn reference_lag_is_replayed_into_silver_once(ws: &Workspace) {
    let (rows, first) = late_holders_run(ws).await;
    let late = late_holders(&rows);
    let pending = rows
        .iter()
        .filter(|r| late.contains(&r.holder.as_str()))
        .count() as u64;
    assert_eq!(first.summary.counts.pending, pending);
    assert_eq!(first.summary.backlog.as_ref().unwrap().pending, pending);
    let opened = statuses_of(ws, "LATE_R").await;
    assert_eq!(opened.len() as u64, pending);
    assert!(opened.values().all(|s| *s == ExceptionStatus::Pending));

    let early = replay(&ws.plan, "LATE_R", &ReplayOptions::default())
        .await
        .unwrap();
    assert_eq!(early.replayed as u64, pending);
    let early = early.run.unwrap().summary;
    assert_eq!((early.counts.committed, early.counts.pending), (0, pending));
    assert_eq!(
        statuses_of(ws, "LATE_R").await,
        opened,
        "same ids, still pending"
    );

    ws.register_holders("late", late.iter().copied())
        .await
        .unwrap();
    let caught_up = replay(&ws.plan, "LATE_R", &ReplayOptions::default())
        .await
        .unwrap();
    let summary = caught_up.run.unwrap().summary;
    assert_eq!(summary.counts.received, pending);
    assert_eq!(summary.counts.committed, pending);
    assert_eq!(summary.backlog.as_ref().unwrap().open, 0);
    assert_eq!(silver_rows_of(ws, "LATE_R").await, rows.len());
    let resolved = statuses_of(ws, "LATE_R").await;
    assert_eq!(
        resolved.keys().collect::<Vec<_>>(),
        opened.keys().collect::<Vec<_>>()
    );
    assert!(resolved.values().all(|s| *s == ExceptionStatus::Resolved));
    let resolved_events = exception_events(ws)
        .await
        .iter()
        .filter(|e| e.status == ExceptionStatus::Resolved)
        .count() as u64;
    assert_eq!(resolved_events, pending, "nothing resolved twice");

    let what = Gather {
        now: chrono::Utc::now(),
        with_runs: true,
        contributor: Some("LATE_R".to_string()),
    };
    let report = gather(&ws.plan, what).await.unwrap();
    assert_eq!(report.overall.backlog.open, 0);
    assert_eq!(report.overall.backlog.entered_7d, pending);
    assert_eq!(report.overall.backlog.exited_7d, pending);
    let drops: Vec<&str> = report
        .overall
        .runs
        .iter()
        .map(|r| r.drop_id.as_str())
        .collect();
    assert_eq!(drops.len(), 3, "the run and two replays: {drops:?}");
    assert!(drops.contains(&"2026-03"), "{drops:?}");

    let snapshots = snapshot_count(ws).await;
    let again = replay(&ws.plan, "LATE_R", &ReplayOptions::default())
        .await
        .unwrap();
    assert_eq!(again.replayed, 0);
    assert!(again.run.is_none());
    assert_eq!(snapshot_count(ws).await, snapshots);
    assert_eq!(silver_rows_of(ws, "LATE_R").await, rows.len());
}

/// A quarantined row corrected by a person (the quarantine file's row, fixed,
/// under the corrections folder) is replayed with --include-quarantined: it
/// reaches Silver and its exception is resolved; the rows not corrected stay
/// quarantined; replaying the same correction again resolves nothing twice.
pub async fn corrected_quarantine_rows_are_replayed(ws: &Workspace) {
    let mut rows = Portfolio::new("FIX_Q", 12, false, 8).statements(month(2026, 4), false);
    rows[0].balance = -500;
    rows[1].balance = -700;
    ws.put_drop("FIX_Q", "2026-04", &rows).await.unwrap();
    let first = ws
        .run_drop("FIX_Q", "2026-04", &RunOptions::default())
        .await
        .unwrap();
    assert_eq!(first.summary.counts.quarantined, 2);
    let url = &first.summary.outputs["quarantine"];
    let text = String::from_utf8(ws.read_output(url).await.unwrap()).unwrap();
    let mut lines = text.lines();
    let header = lines.next().unwrap();
    let fixed_row = lines
        .find(|l| l.contains(&rows[0].account))
        .unwrap()
        .replace("-5.00", "5.00");
    let folder = corrections_folder("FIX_Q");
    let relative = format!("{folder}/fix-1.csv");
    let corrected = format!("{header}\n{fixed_row}\n");
    ws.put_output(&relative, corrected.into_bytes())
        .await
        .unwrap();

    let options = ReplayOptions {
        include_quarantined: true,
        ..ReplayOptions::default()
    };
    let outcome = replay(&ws.plan, "FIX_Q", &options).await.unwrap();
    assert_eq!(outcome.replayed, 1);
    assert_eq!(outcome.run.unwrap().summary.counts.committed, 1);
    assert_eq!(silver_rows_of(ws, "FIX_Q").await, 11);
    let statuses = statuses_of(ws, "FIX_Q").await;
    let mut counts = std::collections::BTreeMap::new();
    for status in statuses.values() {
        *counts.entry(*status).or_insert(0) += 1;
    }
    assert_eq!(counts[&ExceptionStatus::Resolved], 1);
    assert_eq!(counts[&ExceptionStatus::Quarantined], 1);

    let again = replay(&ws.plan, "FIX_Q", &options).await.unwrap();
    assert_eq!(again.replayed, 0);
    assert_eq!(again.skipped.len(), 1, "{:?}", again.skipped);
    assert_eq!(silver_rows_of(ws, "FIX_Q").await, 11);
    // The other row corrected in two files: the first file's correction is
    // replayed, the second is reported, not replayed a second time.
    let second_row = text
        .lines()
        .find(|l| l.contains(&rows[1].account))
        .unwrap()
        .replace("-7.00", "7.00");
    for name in ["fix-2.csv", "fix-3.csv"] {
        let corrected = format!("{header}\n{second_row}\n");
        ws.put_output(&format!("{folder}/{name}"), corrected.into_bytes())
            .await
            .unwrap();
    }
    let both = replay(&ws.plan, "FIX_Q", &options).await.unwrap();
    assert_eq!(both.replayed, 1);
    assert!(
        both.skipped
            .iter()
            .any(|s| s.contains("fix-3.csv") && s.contains("earlier file")),
        "{:?}",
        both.skipped
    );
    assert_eq!(silver_rows_of(ws, "FIX_Q").await, 12);
}

/// The one list of shared tests: every function of this suite that takes
/// only a workspace, and those of [`super::reliability`] that do, as one
/// `#[tokio::test]` each, in a module named `$module`. Every backend file
/// invokes it once with the function of `common` that makes its workspace and
/// the attributes its tests carry (the stacks' `#[ignore = ...]`), so no
/// backend can run fewer; `the_list_names_every_shared_function` fails when a
/// new suite function is left out of the list.
///
/// ```ignore
/// suite_tests!(stack, stack_workspace, #[ignore = "needs the local stack: bash localstack/test.sh"]);
/// ```
#[macro_export]
macro_rules! suite_tests {
    ($module:ident, $make:ident $(, #[$attr:meta])* $(,)?) => {
        /// The shared suite (`common::suite::suite_tests!`) on this backend.
        mod $module {
            use $crate::common::{$make, reliability, suite};

            #[tokio::test]
            $(#[$attr])*
            async fn every_scenario_is_caught_exactly() {
                suite::scenarios_are_caught_exactly(&$make().await.ws).await;
            }

            #[tokio::test]
            $(#[$attr])*
            async fn silver_schema_is_exactly_the_contract() {
                suite::silver_schema_is_the_contract(&$make().await.ws).await;
            }

            #[tokio::test]
            $(#[$attr])*
            async fn a_backfill_baselines_each_month_on_the_one_before() {
                suite::backfill_baselines_each_month_on_the_previous(&$make().await.ws).await;
            }

            #[tokio::test]
            $(#[$attr])*
            async fn committed_month_metrics_are_kept_until_the_month_changes() {
                suite::committed_month_metrics_are_kept_until_the_month_changes(&$make().await.ws)
                    .await;
            }

            #[tokio::test]
            $(#[$attr])*
            async fn a_rerun_of_a_committed_drop_adds_no_row_and_no_snapshot() {
                suite::rerun_adds_nothing(&$make().await.ws).await;
            }

            #[tokio::test]
            $(#[$attr])*
            async fn a_broken_balance_fails_the_run_and_commits_nothing() {
                suite::broken_balance_commits_nothing(&$make().await.ws).await;
            }

            #[tokio::test]
            $(#[$attr])*
            async fn a_fail_rule_stops_the_run_with_nothing_committed() {
                suite::fail_rule_commits_nothing(&mut $make().await.ws).await;
            }

            #[tokio::test]
            $(#[$attr])*
            async fn a_dry_run_commits_nothing_but_reports_what_it_would_commit() {
                suite::dry_run_commits_nothing(&$make().await.ws).await;
            }

            #[tokio::test]
            $(#[$attr])*
            async fn malformed_records_are_quarantined_with_file_line_and_raw_text() {
                suite::malformed_records_are_quarantined(&$make().await.ws).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            $(#[$attr])*
            async fn the_same_drop_run_twice_at_once_commits_once() {
                suite::same_drop_twice_at_once_commits_once(&$make().await.ws).await;
            }

            #[tokio::test]
            $(#[$attr])*
            async fn resubmissions_and_foreign_rows_are_set_aside() {
                suite::resubmissions_and_foreign_rows_are_set_aside(&$make().await.ws).await;
            }

            #[tokio::test]
            $(#[$attr])*
            async fn missing_accounts_are_exceptions_until_declared() {
                suite::missing_accounts_are_exceptions_until_declared(&$make().await.ws).await;
            }

            #[tokio::test]
            $(#[$attr])*
            async fn a_crash_anywhere_then_a_rerun_gives_the_same_result() {
                suite::crash_anywhere_then_rerun_gives_the_same_result(&$make().await.ws).await;
            }

            #[tokio::test]
            $(#[$attr])*
            async fn reference_lag_is_replayed_into_silver_once() {
                suite::reference_lag_is_replayed_into_silver_once(&$make().await.ws).await;
            }

            #[tokio::test]
            $(#[$attr])*
            async fn corrected_quarantine_rows_are_replayed() {
                suite::corrected_quarantine_rows_are_replayed(&$make().await.ws).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            $(#[$attr])*
            async fn overlapping_drops_racing_commit_each_key_once() {
                reliability::overlapping_drops_racing_commit_each_key_once(&$make().await.ws).await;
            }

            #[tokio::test]
            $(#[$attr])*
            async fn a_tampered_claim_marker_steers_no_path() {
                reliability::a_tampered_claim_marker_steers_no_path(&$make().await.ws).await;
            }

            #[tokio::test]
            $(#[$attr])*
            async fn a_drop_claimed_before_blake3_keeps_its_run_key() {
                reliability::a_drop_claimed_before_blake3_keeps_its_run_key(&$make().await.ws)
                    .await;
            }

            #[tokio::test]
            $(#[$attr])*
            async fn a_summary_completed_after_a_crash_carries_every_figure() {
                reliability::a_summary_completed_after_a_crash_carries_every_figure(
                    &$make().await.ws,
                )
                .await;
            }

            #[tokio::test]
            $(#[$attr])*
            async fn a_new_column_and_a_wider_type_evolve_silver() {
                suite::a_new_column_and_a_wider_type_evolve_silver(&mut $make().await.ws).await;
            }

            #[tokio::test]
            $(#[$attr])*
            async fn two_evolutions_at_once_commit_one_schema_update() {
                suite::two_evolutions_at_once_commit_one_schema_update(&mut $make().await.ws)
                    .await;
            }

            /// Needs no backend: every `pub async fn` of `suite.rs` and
            /// `reliability.rs` that takes only a workspace is in the list above.
            #[test]
            fn the_list_names_every_shared_function() {
                $crate::common::suite::assert_the_list_is_complete();
            }
        }
    };
}

/// Contract v2 of the suite: `month_in_arrears` widened to long, and a
/// nullable `risk_grade` added.
fn evolve_contract(plan: &mut Plan) {
    for column in plan.contract.columns.iter_mut() {
        if column.name == "month_in_arrears" {
            column.column_type = ColumnType::Long;
        }
    }
    plan.contract.columns.push(Column {
        name: "risk_grade".to_string(),
        column_type: ColumnType::String,
        nullable: true,
        sensitive: false,
    });
}

/// A contract that widens a type and adds a nullable column evolves Silver
/// on the next run (its own commit, in the summary); the rows written
/// before read the new column as null and the widened one as long.
pub async fn a_new_column_and_a_wider_type_evolve_silver(ws: &mut Workspace) {
    let mut bank = bank_with_history(ws, 10).await;
    evolve_contract(&mut ws.plan);
    let rows = bank.statements(month(2026, 1), false);
    ws.put_drop("BANK_T", "2026-01", &rows).await.unwrap();
    let outcome = ws
        .run_drop("BANK_T", "2026-01", &RunOptions::default())
        .await
        .unwrap();
    assert_eq!(outcome.summary.counts.committed, 10);
    let evolution = outcome.summary.schema_evolution.unwrap();
    let changes: Vec<String> = evolution.changes.iter().map(ToString::to_string).collect();
    assert_eq!(
        changes,
        [
            "widen column month_in_arrears from int to long",
            "add column risk_grade (string, optional)"
        ]
    );
    // Loaded and checked against the evolved contract, names and types.
    let table = silver_table(ws).await;
    assert_eq!(
        Some(table.metadata().current_schema_id()),
        evolution.to_schema_id
    );
    let batches = silver_batches(ws).await;
    let count: usize = batches.iter().map(|b| b.num_rows()).sum();
    let nulls: usize = batches
        .iter()
        .map(|b| b.column_by_name("risk_grade").unwrap().null_count())
        .sum();
    assert_eq!((count, nulls), (20, 20));
    for batch in &batches {
        let arrears = batch.column_by_name("month_in_arrears").unwrap();
        assert_eq!(arrears.data_type(), &arrow::datatypes::DataType::Int64);
    }
}

/// Two runs evolving Silver at once: one schema update commits, the other
/// meets it, reloads the table and finds nothing left to do.
pub async fn two_evolutions_at_once_commit_one_schema_update(ws: &mut Workspace) {
    bank_with_history(ws, 5).await;
    evolve_contract(&mut ws.plan);
    let stores = Stores::new(&ws.plan.storage, ws.plan.catalog.warehouse())
        .await
        .unwrap();
    let catalog = connect(&ws.plan.catalog, &stores).await.unwrap();
    let table = catalog
        .load_table(&table_ident(&ws.plan.table))
        .await
        .unwrap();
    let (first, second) = tokio::join!(
        evolve(catalog.as_ref(), &ws.plan, table.clone()),
        evolve(catalog.as_ref(), &ws.plan, table)
    );
    let evolved: Vec<_> = [first.unwrap(), second.unwrap()]
        .into_iter()
        .filter_map(|e| e.evolution)
        .collect();
    assert_eq!(evolved.len(), 1, "{evolved:?}");
    let silver = silver_table(ws).await;
    assert_eq!(silver.metadata().schemas_iter().count(), 2);
}

/// The check behind `the_list_names_every_shared_function`: each `pub async
/// fn name(ws: &Workspace)` (or `&mut Workspace`) returning nothing (a test,
/// not a helper) of `suite.rs` and `reliability.rs` is called as
/// `module::name(` in this file (the list).
pub fn assert_the_list_is_complete() {
    let list = include_str!("suite.rs");
    for (module, source) in [
        ("suite", include_str!("suite.rs")),
        ("reliability", include_str!("reliability.rs")),
    ] {
        for signature in source.split("\npub async fn ").skip(1) {
            let Some((name, rest)) = signature.split_once('(') else {
                continue;
            };
            let Some((params, after)) = rest.split_once(')') else {
                continue;
            };
            let params: Vec<&str> = params
                .trim()
                .trim_end_matches(',')
                .split_whitespace()
                .collect();
            let a_test = after.trim_start().starts_with('{');
            if !a_test
                || (params != ["ws:", "&Workspace"] && params != ["ws:", "&mut", "Workspace"])
            {
                continue;
            }
            assert!(
                list.contains(&format!("{module}::{name}(")),
                "{module}::{name} takes only a workspace but is not in suite_tests!: add it"
            );
        }
    }
}
