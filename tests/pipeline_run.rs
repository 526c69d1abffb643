//! One run's guarantees on the embedded default (local files + SQLite
//! catalog): the shared suite of `common/suite.rs`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{suite, workspace};

#[tokio::test]
async fn every_scenario_is_caught_exactly() {
    suite::scenarios_are_caught_exactly(&workspace().await.ws).await;
}

#[tokio::test]
async fn silver_schema_is_exactly_the_contract() {
    suite::silver_schema_is_the_contract(&workspace().await.ws).await;
}

#[tokio::test]
async fn a_backfill_baselines_each_month_on_the_one_before() {
    suite::backfill_baselines_each_month_on_the_previous(&workspace().await.ws).await;
}

#[tokio::test]
async fn committed_month_metrics_are_kept_until_the_month_changes() {
    suite::committed_month_metrics_are_kept_until_the_month_changes(&workspace().await.ws).await;
}

#[tokio::test]
async fn a_rerun_of_a_committed_drop_adds_no_row_and_no_snapshot() {
    suite::rerun_adds_nothing(&workspace().await.ws).await;
}

#[tokio::test]
async fn a_broken_balance_fails_the_run_and_commits_nothing() {
    suite::broken_balance_commits_nothing(&workspace().await.ws).await;
}

#[tokio::test]
async fn a_fail_rule_stops_the_run_with_nothing_committed() {
    suite::fail_rule_commits_nothing(&mut workspace().await.ws).await;
}

#[tokio::test]
async fn a_dry_run_commits_nothing_but_reports_what_it_would_commit() {
    suite::dry_run_commits_nothing(&workspace().await.ws).await;
}

#[tokio::test]
async fn malformed_records_are_quarantined_with_file_line_and_raw_text() {
    suite::malformed_records_are_quarantined(&workspace().await.ws).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_same_drop_run_twice_at_once_commits_once() {
    suite::same_drop_twice_at_once_commits_once(&workspace().await.ws).await;
}

#[tokio::test]
async fn resubmissions_and_foreign_rows_are_set_aside() {
    suite::resubmissions_and_foreign_rows_are_set_aside(&workspace().await.ws).await;
}

#[tokio::test]
async fn a_crash_anywhere_then_a_rerun_gives_the_same_result() {
    suite::crash_anywhere_then_rerun_gives_the_same_result(&workspace().await.ws).await;
}

#[tokio::test]
async fn reference_lag_is_replayed_into_silver_once() {
    suite::reference_lag_is_replayed_into_silver_once(&workspace().await.ws).await;
}

#[tokio::test]
async fn corrected_quarantine_rows_are_replayed() {
    suite::corrected_quarantine_rows_are_replayed(&workspace().await.ws).await;
}

/// iceberg-rust re-applies a transaction on a reloaded table; a commit pinned
/// to the state silverline checked for its run key is refused instead, so a
/// run can never append on top of a concurrent run's snapshot.
#[tokio::test]
async fn a_commit_pinned_to_the_checked_state_is_refused_once_the_table_moved() {
    use iceberg::ErrorKind;
    use iceberg::transaction::{ApplyTransactionAction, Transaction};
    use silverline::core::drop::DropFile;
    use silverline::demo::generate::to_csv;
    use silverline::infra::catalog::{connect, load_silver};
    use silverline::infra::datafile::write_silver_files;
    use silverline::infra::pinned::PinnedCatalog;
    use silverline::infra::storage::Stores;
    use silverline::pipeline::RunOptions;
    use silverline::pipeline::read::read_drop;

    let tw = workspace().await;
    let ws = &tw.ws;
    let mut bank = suite::bank_with_history(ws, 10).await;
    let stores = Stores::new(&ws.plan.storage, ws.plan.catalog.warehouse())
        .await
        .unwrap();
    let catalog = connect(&ws.plan.catalog, &stores).await.unwrap();
    let checked = load_silver(catalog.as_ref(), &ws.plan).await.unwrap();

    let january = bank.statements(chrono::NaiveDate::from_ymd_opt(2026, 1, 1).unwrap(), false);
    ws.put_drop("BANK_T", "2026-01", &january).await.unwrap();
    ws.run_drop("BANK_T", "2026-01", &RunOptions::default())
        .await
        .unwrap();

    let february = bank.statements(chrono::NaiveDate::from_ymd_opt(2026, 2, 1).unwrap(), false);
    let file = DropFile {
        name: "february.csv".to_string(),
        bytes: bytes::Bytes::from(to_csv(&february)),
    };
    let read = read_drop(&ws.plan.contract, &[file]).unwrap();
    let columns: Vec<usize> = (0..ws.plan.contract.columns.len()).collect();
    let rows = read.rows.project(&columns).unwrap();
    let files = write_silver_files(&checked, &[rows], "pinned")
        .await
        .unwrap();
    let append = |table| {
        let tx = Transaction::new(table);
        let action = tx.fast_append().add_data_files(files.clone());
        action.apply(tx).unwrap()
    };

    let pinned = PinnedCatalog::on(catalog.as_ref(), &checked);
    let refused = append(&checked).commit(&pinned).await.unwrap_err();
    assert_eq!(
        refused.kind(),
        ErrorKind::CatalogCommitConflicts,
        "{refused}"
    );
    let before = common::snapshot_count(ws).await;

    let rebased = append(&checked).commit(catalog.as_ref()).await;
    assert!(
        rebased.is_ok(),
        "without the pin, iceberg re-bases the append"
    );
    assert_eq!(common::snapshot_count(ws).await, before + 1);
}
