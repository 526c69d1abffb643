//! The core promise under attack, on the embedded default (SQLite catalog and
//! local files), where this backend adds to the shared list: overlapping
//! drops racing over three rounds, idempotency that survives the
//! `silverline maintain` binary, a losing replay that says so. The functions
//! of `common/reliability.rs` that take only a workspace (one race, claim
//! markers that steer no path, summaries completed with every figure after a
//! crash) run on every backend through `suite_tests!` (`pipeline_run.rs`,
//! `stack_s3_rest.rs`, `stack_localstack.rs`); S3 + REST adds its own checks
//! in `stack_reliability.rs`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use assert_cmd::Command;
use common::reliability;
use common::{silver_count, suite, workspace};
use silverline::cli::{EXIT_COMMITTED_CONCURRENTLY, replay_exit_code};
use silverline::pipeline::summary::RunStatus;
use silverline::replay::{ReplayOptions, replay};

#[tokio::test]
async fn overlapping_drops_racing_commit_each_key_once() {
    for _ in 0..3 {
        let tw = workspace().await;
        reliability::overlapping_drops_racing_commit_each_key_once(&tw.ws).await;
    }
}

#[tokio::test]
async fn a_rerun_after_silverline_maintain_does_nothing() {
    let tw = workspace().await;
    let config = tw.ws.dir.join("config/credit_statements.toml");
    reliability::a_rerun_after_snapshot_expiry_does_nothing(&tw.ws, || async {
        let output = Command::cargo_bin("silverline")
            .unwrap()
            .args(["--log-format", "text", "maintain", "--config"])
            .arg(&config)
            .args(["--older-than-days", "0"])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&output.stdout);
        assert!(output.status.success(), "{text}");
        assert!(text.contains("expired 1 of 2 snapshots"), "{text}");
    })
    .await;
}

/// Two replays of the same open exceptions at once: one commits and resolves
/// them; the other adds nothing and exits 4 like `run`, never claiming success.
#[tokio::test]
async fn a_losing_replay_says_so_and_exits_4() {
    let tw = workspace().await;
    let ws = &tw.ws;
    let (rows, first) = suite::late_holders_run(ws).await;
    let late = suite::late_holders(&rows);
    let pending = first.summary.counts.pending;
    assert!(pending > 0);
    ws.register_holders("late", late.iter().copied())
        .await
        .unwrap();
    let options = ReplayOptions::default();
    let (a, b) = futures::join!(
        replay(&ws.plan, "LATE_R", &options),
        replay(&ws.plan, "LATE_R", &options)
    );
    let outcomes = [a.unwrap(), b.unwrap()];
    let statuses: Vec<RunStatus> = outcomes
        .iter()
        .map(|o| o.run.as_ref().unwrap().summary.status)
        .collect();
    let committed = statuses
        .iter()
        .filter(|s| **s == RunStatus::Committed)
        .count();
    assert_eq!(committed, 1, "{statuses:?}");
    for outcome in &outcomes {
        let status = outcome.run.as_ref().unwrap().summary.status;
        let expected = match status {
            RunStatus::CommittedConcurrently => EXIT_COMMITTED_CONCURRENTLY,
            _ => 0,
        };
        assert_eq!(replay_exit_code(outcome), expected, "{status:?}");
    }
    assert!(
        statuses.contains(&RunStatus::CommittedConcurrently),
        "the two replays raced: {statuses:?}"
    );
    assert_eq!(silver_count(ws).await, rows.len());
}
