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
