//! Chaos on the local stack (S3 + Iceberg REST): runs of a large drop killed
//! with SIGKILL at random moments, each followed by a rerun. Afterwards Silver
//! holds every good row exactly once (counted by pyiceberg), the exception
//! store each exception once, and every summary balances.
//!
//! SILVERLINE_CHAOS_RUNS (default 50) and SILVERLINE_CHAOS_ROWS (default
//! 200000) size it. `#[ignore]`d like every stack test; `bash
//! localstack/test.sh` runs it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::process::{Command, Stdio};
use std::time::Instant;

use chrono::NaiveDate;
use common::{exception_events, stack_workspace};
use rand::{Rng, SeedableRng};
use silverline::demo::Workspace;
use silverline::demo::generate::{HEADER, Portfolio};

/// A size from the environment, or its default.
fn setting(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The binary's `run` of one drop of the chaos contributor.
fn run_command(ws: &Workspace, drop_id: &str) -> Command {
    let mut command = common::stack_run_command(ws, CONTRIBUTOR, drop_id);
    command.stdout(Stdio::null()).stderr(Stdio::piped());
    command
}

const CONTRIBUTOR: &str = "CHAOS";

/// Puts month `i` (from 2022-01) of the portfolio as a drop: its good
/// statements and two broken records; returns the drop id.
async fn put_month(ws: &Workspace, bank: &mut Portfolio, i: usize) -> String {
    let month = NaiveDate::from_ymd_opt(2022 + (i / 12) as i32, 1 + (i % 12) as u32, 1).unwrap();
    let drop_id = month.format("%Y-%m").to_string();
    let statements = bank.statements(month, false);
    if i == 0 {
        // The holders are registered once: every month has the same accounts.
        ws.put_drop(CONTRIBUTOR, &drop_id, &statements)
            .await
            .unwrap();
    } else {
        let csv = silverline::demo::generate::to_csv(&statements);
        ws.put_file(CONTRIBUTOR, &drop_id, "statements.csv", csv.into_bytes())
            .await
            .unwrap();
    }
    let broken = format!("{}\n{CONTRIBUTOR},X1\n{CONTRIBUTOR},X2\n", HEADER.join(","));
    ws.put_file(CONTRIBUTOR, &drop_id, "broken.csv", broken.into_bytes())
        .await
        .unwrap();
    drop_id
}

/// Runs `command` to the end; panics with its stderr unless it exits 0.
fn succeed(mut command: Command, what: &str) {
    let output = command.output().unwrap();
    assert!(
        output.status.success(),
        "{what}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the local stack: bash localstack/test.sh"]
async fn stack_runs_killed_at_random_then_rerun_lose_and_double_nothing() {
    let (runs, rows) = (
        setting("SILVERLINE_CHAOS_RUNS", 50),
        setting("SILVERLINE_CHAOS_ROWS", 200_000),
    );
    let tw = stack_workspace().await;
    let ws = &tw.ws;
    let mut rng = rand::rngs::StdRng::seed_from_u64(13);
    let mut bank = Portfolio::new(CONTRIBUTOR, rows, false, 17);
    // How long one whole run takes here: kills land anywhere in it, commit included.
    let first = put_month(ws, &mut bank, 0).await;
    let started = Instant::now();
    succeed(run_command(ws, &first), &first);
    let whole = started.elapsed();
    let mut drops = vec![first];
    for i in 1..runs {
        let drop_id = put_month(ws, &mut bank, i).await;
        let mut child = run_command(ws, &drop_id).spawn().unwrap();
        let at = whole.mul_f64(rng.gen_range(0.05..1.1));
        tokio::time::sleep(at).await;
        child.kill().unwrap(); // SIGKILL: no handler runs
        child.wait().unwrap();
        succeed(
            run_command(ws, &drop_id),
            &format!("{drop_id} killed after {at:?}"),
        );
        drops.push(drop_id);
    }
    let summaries: Vec<String> = ws.list_outputs("summaries/").await.unwrap();
    assert_eq!(summaries.len(), runs, "one summary a drop: {summaries:?}");
    for path in &summaries {
        let summary: serde_json::Value = serde_json::from_slice(
            &ws.read_output(&format!("{}/{}", ws.plan.storage.dq_error, path))
                .await
                .unwrap(),
        )
        .unwrap();
        let count = |name: &str| summary["counts"][name].as_u64().unwrap();
        assert_eq!(summary["status"], "committed", "{path}");
        assert_eq!(count("received"), rows as u64 + 2, "{path}");
        assert_eq!(count("committed"), rows as u64, "{path}");
        assert_eq!(count("quarantined"), 2, "{path}");
    }
    let events = exception_events(ws).await;
    assert_eq!(events.len(), 2 * runs, "each exception recorded once");
    let ids: std::collections::BTreeSet<&str> =
        events.iter().map(|e| e.exception_id.as_str()).collect();
    assert_eq!(ids.len(), 2 * runs);
    let good = (rows * runs) as u64;
    let seen = common::pyiceberg::rows_and_keys(ws);
    assert_eq!(seen, (good, good), "every good row exactly once");
}
