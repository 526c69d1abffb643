//! The reliability checks only the local stack (S3 + the Iceberg REST
//! catalog) can make, with pyiceberg as the independent reader that counts
//! rows and distinct record keys, and as another engine expiring snapshots;
//! the functions of `common/reliability.rs` that take only a workspace run
//! here through `suite_tests!` in `stack_s3_rest.rs`.
//!
//! `#[ignore]`d like every stack test; `bash localstack/test.sh` runs them.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::reliability;
use common::stack_workspace;
use silverline::demo::Workspace;

fn pyiceberg(ws: &Workspace, script: &str) -> serde_json::Value {
    common::pyiceberg::run(ws, script, &[])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs the local stack: bash localstack/test.sh"]
async fn stack_overlapping_drops_racing_commit_each_key_once() {
    let tw = stack_workspace().await;
    reliability::overlapping_drops_racing_commit_each_key_once(&tw.ws).await;
    assert_eq!(common::pyiceberg::rows_and_keys(&tw.ws), (300, 300));
}

#[tokio::test]
#[ignore = "needs the local stack: bash localstack/test.sh"]
async fn stack_a_rerun_after_pyiceberg_expires_snapshots_does_nothing() {
    let tw = stack_workspace().await;
    let ws = &tw.ws;
    reliability::a_rerun_after_snapshot_expiry_does_nothing(ws, || async {
        let seen = pyiceberg(
            ws,
            r#"
oldest = min(table.snapshots(), key=lambda s: s.timestamp_ms)
table.maintenance.expire_snapshots().by_id(oldest.snapshot_id).commit()
print(json.dumps({"left": len(catalog.load_table((sys.argv[1], sys.argv[2])).snapshots())}))
"#,
        );
        assert_eq!(seen["left"], 1);
    })
    .await;
}

#[tokio::test]
#[ignore = "needs the local stack: bash localstack/test.sh"]
async fn stack_a_rerun_after_silverline_maintain_does_nothing() {
    let tw = stack_workspace().await;
    let ws = &tw.ws;
    reliability::a_rerun_after_snapshot_expiry_does_nothing(ws, || async {
        let retention = silverline::maintain::Retention {
            older_than_days: 0,
            retain_last: 1,
        };
        let done = silverline::maintain::maintain(&ws.plan, retention)
            .await
            .unwrap();
        assert_eq!(done[0].expired, 1, "{done:?}");
    })
    .await;
}

/// S3 keys may hold `#`, `%`, `?`, spaces and non-ASCII: such drop files are
/// listed and read like any other.
#[tokio::test]
#[ignore = "needs the local stack: bash localstack/test.sh"]
async fn stack_drop_files_with_reserved_characters_in_their_names_are_read() {
    let tw = stack_workspace().await;
    let ws = &tw.ws;
    let month = chrono::NaiveDate::from_ymd_opt(2026, 1, 1).unwrap();
    let rows =
        silverline::demo::generate::Portfolio::new("BANK_N", 6, false, 2).statements(month, false);
    ws.put_drop("BANK_N", "2026-01", &rows[..3]).await.unwrap();
    ws.register_holders("more", rows[3..].iter().map(|r| r.holder.as_str()))
        .await
        .unwrap();
    let csv = silverline::demo::generate::to_csv(&rows[3..]);
    ws.put_file("BANK_N", "2026-01", "more #2 50% ?é.csv", csv.into_bytes())
        .await
        .unwrap();
    let outcome = ws
        .run_drop(
            "BANK_N",
            "2026-01",
            &silverline::pipeline::RunOptions::default(),
        )
        .await
        .unwrap();
    assert_eq!(outcome.summary.counts.received, 6);
    assert_eq!(outcome.summary.counts.committed, 6);
}
