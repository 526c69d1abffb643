//! The core promise under attack (issue 13), run on both backends: racing
//! drops of one contributor, table maintenance, tampered claim markers,
//! summaries after crashes, concurrent replays.

use std::collections::BTreeSet;

use arrow::array::{Array, Date32Array, StringArray};
use chrono::NaiveDate;
use silverline::demo::Workspace;
use silverline::demo::generate::Portfolio;
use silverline::error::ErrorClass;
use silverline::pipeline::summary::{RunStatus, SUMMARY_SCHEMA_VERSION};
use silverline::pipeline::{CrashPoint, RunOptions, TestHooks};

use super::{silver_batches, silver_count, snapshot_count};

fn month(y: i32, m: u32) -> NaiveDate {
    NaiveDate::from_ymd_opt(y, m, 1).unwrap()
}

/// Silver's rows and its distinct record keys (contributor, account, statement date).
pub async fn rows_and_keys(ws: &Workspace) -> (usize, usize) {
    let mut keys = BTreeSet::new();
    let mut rows = 0;
    for batch in silver_batches(ws).await {
        let text = |name: &str| {
            batch
                .column_by_name(name)
                .unwrap()
                .as_any()
                .downcast_ref::<StringArray>()
                .unwrap()
                .clone()
        };
        let (contributors, accounts) = (text("contributor_id"), text("account_id"));
        let dates = batch.column_by_name("statement_date").unwrap();
        let dates = dates.as_any().downcast_ref::<Date32Array>().unwrap();
        for i in 0..batch.num_rows() {
            keys.insert((
                contributors.value(i).to_string(),
                accounts.value(i).to_string(),
                dates.value(i),
            ));
        }
        rows += batch.num_rows();
    }
    (rows, keys.len())
}

/// The drop ids of `n` overlapping deliveries of one month: the same statements,
/// each later one with one amount changed (a resend, a corrected resend...).
pub async fn put_overlapping_drops(ws: &Workspace, contributor: &str, n: usize) -> Vec<String> {
    let rows = Portfolio::new(contributor, 300, false, 11).statements(month(2026, 11), false);
    let mut ids = Vec::new();
    for i in 0..n {
        let id = if i == 0 {
            "2026-11".to_string()
        } else {
            format!("2026-11-resend-{i}")
        };
        let mut drop = rows.clone();
        drop[0].balance += i as i64;
        ws.put_drop(contributor, &id, &drop).await.unwrap();
        ids.push(id);
    }
    ids
}

/// Different drops of one contributor whose rows share record keys, run at
/// once: whatever commits first wins, every later run finds its keys and sets
/// those rows aside; Silver holds each key once and every run balances.
pub async fn overlapping_drops_racing_commit_each_key_once(ws: &Workspace) {
    let ids = put_overlapping_drops(ws, "BANK_R", 4).await;
    let options = RunOptions::default();
    let runs = ids.iter().map(|id| ws.run_drop("BANK_R", id, &options));
    let summaries: Vec<_> = futures::future::join_all(runs)
        .await
        .into_iter()
        .map(|outcome| outcome.unwrap().summary)
        .collect();
    let (rows, keys) = rows_and_keys(ws).await;
    assert_eq!((rows, keys), (300, 300), "each record key once in Silver");
    let committed: u64 = summaries.iter().map(|s| s.counts.committed).sum();
    assert_eq!(committed, 300, "what the summaries say went to Silver");
    let judged_again = summaries.iter().filter(|s| s.judgements > 1).count();
    assert!(
        judged_again > 0,
        "the runs raced: a later committer was judged again"
    );
    for summary in &summaries {
        assert_eq!(summary.status, RunStatus::Committed, "{summary:?}");
        let c = &summary.counts;
        assert_eq!(
            c.received,
            c.committed + c.quarantined + c.dropped + c.pending,
            "{summary:?}"
        );
    }
}

/// A drop committed before the table's snapshots were expired is still
/// committed: its rerun does nothing, whoever expired them (`expire` does).
pub async fn a_rerun_after_snapshot_expiry_does_nothing<F, Fut>(ws: &Workspace, expire: F)
where
    F: FnOnce() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let mut bank = Portfolio::new("BANK_X", 25, false, 3);
    for (drop_id, m) in [("2026-01", 1), ("2026-02", 2)] {
        let rows = bank.statements(month(2026, m), false);
        ws.put_drop("BANK_X", drop_id, &rows).await.unwrap();
        let outcome = ws
            .run_drop("BANK_X", drop_id, &RunOptions::default())
            .await
            .unwrap();
        assert_eq!(outcome.summary.status, RunStatus::Committed);
    }
    assert_eq!(snapshot_count(ws).await, 2);
    expire().await;
    assert_eq!(snapshot_count(ws).await, 1, "the first snapshot expired");
    let rerun = ws
        .run_drop("BANK_X", "2026-01", &RunOptions::default())
        .await
        .unwrap();
    assert_eq!(rerun.summary.status, RunStatus::AlreadyCommitted);
    assert_eq!(silver_count(ws).await, 50, "nothing doubled");
    let outputs = ws.list_outputs("quarantine/").await.unwrap();
    assert!(outputs.is_empty(), "nothing set aside: {outputs:?}");
}

/// A claim marker that silverline did not write (a run id escaping the
/// warehouse, garbage) is refused naming it and the way out; nothing is
/// written anywhere; once it is deleted the drop runs.
pub async fn a_tampered_claim_marker_steers_no_path(ws: &Workspace) {
    let rows = Portfolio::new("BANK_M", 10, false, 4).statements(month(2026, 1), false);
    ws.put_drop("BANK_M", "2026-01", &rows).await.unwrap();
    let crash = RunOptions {
        hooks: TestHooks {
            crash_at: Some(CrashPoint::AfterWrite),
            ..TestHooks::default()
        },
        ..RunOptions::default()
    };
    assert!(ws.run_drop("BANK_M", "2026-01", &crash).await.is_err());
    let kept = ws.list_outputs("reference-keys/").await.unwrap();
    assert!(
        kept.is_empty(),
        "a failed run keeps no reference keys: {kept:?}"
    );
    let markers = ws.list_outputs("claims/BANK_M/").await.unwrap();
    assert_eq!(markers.len(), 1, "{markers:?}");
    let marker: serde_json::Value = serde_json::from_slice(
        &ws.read_output(&format!("{}/{}", ws.plan.storage.dq_error, markers[0]))
            .await
            .unwrap(),
    )
    .unwrap();
    let mut escaping = marker.clone();
    escaping["run_id"] = "../../../../tmp/x".into();
    let tampered = [
        serde_json::to_vec(&escaping).unwrap(),
        b"".to_vec(),
        b"{garbage".to_vec(),
    ];
    for body in tampered {
        ws.put_output(&markers[0], body.clone()).await.unwrap();
        let outputs_before = run_outputs(ws).await;
        let error = ws
            .run_drop("BANK_M", "2026-01", &RunOptions::default())
            .await
            .unwrap_err();
        let text = error.to_string();
        assert_eq!(error.class(), ErrorClass::Data, "{text}");
        assert!(text.contains("claim marker"), "{text}");
        assert!(text.contains(&markers[0]), "names the marker: {text}");
        assert!(text.contains("delete it"), "says the way out: {text}");
        assert!(!text.contains("../../"), "{text}");
        assert_eq!(run_outputs(ws).await, outputs_before, "nothing written");
        assert_eq!(silver_count(ws).await, 0);
    }
    ws.put_output(&markers[0], serde_json::to_vec(&marker).unwrap())
        .await
        .unwrap();
    let outcome = ws
        .run_drop("BANK_M", "2026-01", &RunOptions::default())
        .await
        .unwrap();
    assert_eq!(outcome.summary.status, RunStatus::Committed);
    assert_eq!(silver_count(ws).await, 10);
}

/// A drop claimed by a version that fingerprinted drops with SHA-256 keeps
/// its run key: committed, its rerun does nothing; claimed and killed
/// after writing, its rerun resumes that run (one claim marker, the same
/// run id). A drop claimed now is keyed by its BLAKE3 fingerprint.
pub async fn a_drop_claimed_before_blake3_keeps_its_run_key(ws: &Workspace) {
    let as_before = |crash_at| RunOptions {
        hooks: TestHooks {
            sha256_fingerprint: true,
            crash_at,
            ..TestHooks::default()
        },
        ..RunOptions::default()
    };
    let fingerprint = |key: &Option<String>| {
        key.as_deref()
            .unwrap()
            .rsplit('/')
            .next()
            .unwrap()
            .to_string()
    };
    let mut bank = Portfolio::new("BANK_L", 12, false, 5);
    for (drop_id, m) in [("2026-01", 1), ("2026-02", 2), ("2026-03", 3)] {
        let rows = bank.statements(month(2026, m), false);
        ws.put_drop("BANK_L", drop_id, &rows).await.unwrap();
    }
    let run = |drop_id, options| async move { ws.run_drop("BANK_L", drop_id, &options).await };

    let before = run("2026-01", as_before(None)).await.unwrap();
    assert_eq!(before.summary.status, RunStatus::Committed);
    let legacy = fingerprint(&before.summary.run_key);
    assert!(
        legacy.len() == 32 && legacy.bytes().all(|b| b.is_ascii_hexdigit()),
        "{legacy}"
    );
    let rerun = run("2026-01", RunOptions::default()).await.unwrap();
    assert_eq!(rerun.summary.status, RunStatus::AlreadyCommitted);
    assert_eq!(rerun.summary.run_key, before.summary.run_key);
    assert_eq!(silver_count(ws).await, 12, "nothing doubled");

    let killed = as_before(Some(CrashPoint::AfterWrite));
    assert!(run("2026-02", killed).await.is_err());
    let markers = || async {
        let mut listed = ws.list_outputs("claims/BANK_L/2026-02/").await.unwrap();
        listed.retain(|p| !p.ends_with(".summary.json"));
        listed
    };
    let claimed = markers().await;
    assert_eq!(claimed.len(), 1, "{claimed:?}");
    let resumed = run("2026-02", RunOptions::default()).await.unwrap();
    assert_eq!(resumed.summary.status, RunStatus::Committed);
    let key = fingerprint(&resumed.summary.run_key);
    assert!(
        claimed[0].ends_with(&format!("/{key}.json")),
        "{claimed:?} {key}"
    );
    assert_eq!(markers().await, claimed, "no second claim");
    assert_eq!(silver_count(ws).await, 24);

    let now = run("2026-03", RunOptions::default()).await.unwrap();
    assert_eq!(now.summary.status, RunStatus::Committed);
    let key = fingerprint(&now.summary.run_key);
    assert!(key.starts_with("b3-") && key.len() == 35, "{key}");
    let rerun = run("2026-03", RunOptions::default()).await.unwrap();
    assert_eq!(rerun.summary.status, RunStatus::AlreadyCommitted);
    assert_eq!(silver_count(ws).await, 36);

    // A drop claimed before, delivered again with other content: a new
    // run, keyed by BLAKE3 (its rows are April's, new to Silver).
    let april = bank.statements(month(2026, 4), false);
    ws.put_drop("BANK_L", "2026-01", &april).await.unwrap();
    let redelivered = run("2026-01", RunOptions::default()).await.unwrap();
    assert_eq!(redelivered.summary.status, RunStatus::Committed);
    let key = fingerprint(&redelivered.summary.run_key);
    assert!(key.starts_with("b3-"), "{key}");
    assert_eq!(silver_count(ws).await, 48);
}

/// What runs wrote under dq_error, but the summaries of drops that could not be claimed.
async fn run_outputs(ws: &Workspace) -> Vec<String> {
    let mut outputs = ws.list_outputs("").await.unwrap();
    outputs.retain(|o| !(o.starts_with("summaries/") && o.contains("-failed-")));
    outputs
}

/// A run that died right after its commit leaves, once rerun, the summary it
/// would have written: the same counts, warnings, rules, aggregates and a backlog.
pub async fn a_summary_completed_after_a_crash_carries_every_figure(ws: &Workspace) {
    let mut clean = Portfolio::new("BANK_S", 40, false, 8);
    let history = clean.statements(month(2025, 12), false);
    ws.put_drop("BANK_S", "2025-12", &history).await.unwrap();
    ws.run_drop("BANK_S", "2025-12", &RunOptions::default())
        .await
        .unwrap();
    let rows = clean.statements(month(2026, 1), false);
    ws.put_drop("BANK_S", "2026-01", &rows).await.unwrap();
    let dry = RunOptions {
        dry_run: true,
        ..RunOptions::default()
    };
    let expected = ws
        .run_drop("BANK_S", "2026-01", &dry)
        .await
        .unwrap()
        .summary;
    let crash = RunOptions {
        hooks: TestHooks {
            crash_at: Some(CrashPoint::AfterCommit),
            ..TestHooks::default()
        },
        ..RunOptions::default()
    };
    assert!(ws.run_drop("BANK_S", "2026-01", &crash).await.is_err());
    stage_as_an_older_version(ws).await;
    let rerun = ws
        .run_drop("BANK_S", "2026-01", &RunOptions::default())
        .await
        .unwrap();
    assert_eq!(rerun.summary.status, RunStatus::AlreadyCommitted);
    let run_id = rerun.summary.run_id.clone().unwrap();
    let path = ws
        .list_outputs("summaries/")
        .await
        .unwrap()
        .into_iter()
        .find(|p| p.contains(&run_id))
        .unwrap();
    let summary: serde_json::Value = serde_json::from_slice(
        &ws.read_output(&format!("{}/{}", ws.plan.storage.dq_error, path))
            .await
            .unwrap(),
    )
    .unwrap();
    assert_eq!(summary["status"], "committed");
    let counts = serde_json::to_value(&expected.counts).unwrap();
    assert_eq!(summary["counts"], counts);
    assert_eq!(
        summary["rules"],
        serde_json::to_value(&expected.rules).unwrap()
    );
    assert_eq!(
        summary["aggregates"],
        serde_json::to_value(&expected.aggregates).unwrap()
    );
    assert!(summary["backlog"].is_object(), "{summary}");
    assert!(summary["snapshot_id"].is_i64(), "{summary}");
    assert_eq!(summary["schema_version"], SUMMARY_SCHEMA_VERSION);
}

/// Takes `schema_version` out of the summary BANK_S/2026-01's run staged, as
/// a version before the field staged it.
async fn stage_as_an_older_version(ws: &Workspace) {
    let staged: Vec<String> = ws
        .list_outputs("claims/")
        .await
        .unwrap()
        .into_iter()
        .filter(|p| p.contains("BANK_S/2026-01/") && p.ends_with(".summary.json"))
        .collect();
    assert_eq!(staged.len(), 1, "{staged:?}");
    let url = format!("{}/{}", ws.plan.storage.dq_error, staged[0]);
    let mut summary: serde_json::Value =
        serde_json::from_slice(&ws.read_output(&url).await.unwrap()).unwrap();
    assert_eq!(summary["status"], "committing");
    summary.as_object_mut().unwrap().remove("schema_version");
    let bytes = serde_json::to_vec(&summary).unwrap();
    ws.put_output(&staged[0], bytes).await.unwrap();
}
