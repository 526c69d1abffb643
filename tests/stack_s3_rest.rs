//! The shared suite of `common/suite.rs` (`suite_tests!`, as `stack::*`) on
//! the local stack (S3 + Iceberg REST catalog, real servers started by
//! `localstack/up.sh`), plus what only a real stack
//! can show: another engine reading our table, concurrent contributors
//! committing to one table, commit-retry exhaustion, and clear errors for
//! wrong credentials, an unreachable endpoint and a missing bucket, and
//! storage faults injected by a proxy in front of S3.
//!
//! These tests are `#[ignore]`d so that a plain `cargo test` needs no
//! services; `bash localstack/test.sh` starts the stack and runs them with
//! `--include-ignored`. Without the stack they fail and say how to start it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod harness;

use std::collections::BTreeSet;

use chrono::NaiveDate;
use common::fault_proxy::{FOREVER, FaultProxy};
use common::{
    silver_count, silver_table, snapshot_count, snapshots_if_created, stack_workspace,
    stack_workspace_with, suite,
};
use silverline::demo::generate::Portfolio;
use silverline::exceptions::ExceptionStatus;
use silverline::infra::ledger::RUN_KEY_PROPERTY;
use silverline::pipeline::RunOptions;
use silverline::pipeline::summary::RunStatus;

fn month(y: i32, m: u32) -> NaiveDate {
    NaiveDate::from_ymd_opt(y, m, 1).unwrap()
}

suite_tests!(
    stack,
    stack_workspace,
    #[ignore = "needs the local stack: bash localstack/test.sh"]
);

/// pyiceberg reads, through the REST catalog, a table whose schema a run
/// evolved: the new column null in the older rows, the widened one as long.
#[tokio::test]
#[ignore = "needs the local stack: bash localstack/test.sh"]
async fn stack_pyiceberg_reads_an_evolved_table() {
    let mut tw = stack_workspace().await;
    suite::a_new_column_and_a_wider_type_evolve_silver(&mut tw.ws).await;
    let script = r#"
rows = table.scan().to_arrow()
print(json.dumps({
    "fields": [f.name for f in table.schema().fields],
    "rows": rows.num_rows,
    "ungraded": rows.column("risk_grade").null_count,
    "arrears": str(rows.schema.field("month_in_arrears").type),
}))
"#;
    let seen = common::pyiceberg::run(&tw.ws, script, &[]);
    let contract: Vec<&str> = tw.ws.plan.contract.column_names().collect();
    assert_eq!(seen["fields"], serde_json::json!(contract));
    assert_eq!(seen["rows"], 20);
    assert_eq!(seen["ungraded"], 20);
    assert_eq!(seen["arrears"], "int64");
}

/// pyiceberg opens our table through the REST catalog and sees the contract,
/// the row count and the values we wrote; it reads the exception store too.
#[tokio::test]
#[ignore = "needs the local stack: bash localstack/test.sh"]
async fn stack_pyiceberg_reads_what_we_wrote() {
    let tw = stack_workspace().await;
    let ws = &tw.ws;
    let mut bank = suite::bank_with_history(ws, 30).await;
    let mut rows = bank.statements(month(2026, 1), false);
    rows[28].balance = -100;
    rows[29].balance = -100;
    ws.put_drop("BANK_T", "2026-01", &rows).await.unwrap();
    ws.run_drop("BANK_T", "2026-01", &RunOptions::default())
        .await
        .unwrap();
    let script = r#"
data = table.scan(row_filter="account_id == 'BANK_T-000007' and statement_date == '2026-01-31'").to_arrow()
exceptions = catalog.load_table((sys.argv[1], sys.argv[3]))
print(json.dumps({
    "quarantined": exceptions.scan(row_filter="status == 'quarantined'").to_arrow().num_rows,
    "count": table.scan().to_arrow().num_rows,
    "fields": [f.name for f in table.schema().fields],
    "sample": [str(v) for v in data.column("credit_limit").to_pylist()],
}))
"#;
    let seen = common::pyiceberg::run(ws, script, &[&ws.plan.exceptions.name]);
    assert_eq!(seen["count"], 58);
    assert_eq!(seen["quarantined"], 2);
    let contract: Vec<&str> = ws.plan.contract.column_names().collect();
    assert_eq!(seen["fields"], serde_json::json!(contract));
    let expected = rows
        .iter()
        .find(|r| r.account == "BANK_T-000007")
        .unwrap()
        .credit_limit();
    assert_eq!(
        seen["sample"],
        serde_json::json!([format!("{}.{:02}", expected / 100, expected % 100)])
    );
}

/// Several contributors commit to one table at once: every run commits, every
/// row is there exactly once, each snapshot carries its own run key.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs the local stack: bash localstack/test.sh"]
async fn stack_concurrent_contributors_all_commit_exactly_once() {
    let tw = stack_workspace().await;
    let ws = &tw.ws;
    // The fleet: eight contributors (banks and instalment lenders) at once.
    let contributors: Vec<String> = (1..=8)
        .map(|i| {
            if i % 3 == 0 {
                format!("BNPL_P{i}")
            } else {
                format!("BANK_P{i}")
            }
        })
        .collect();
    for (i, contributor) in contributors.iter().enumerate() {
        let lender = contributor.starts_with("BNPL");
        let rows =
            Portfolio::new(contributor, 25 + i, lender, i as u64).statements(month(2026, 1), false);
        ws.put_drop(contributor, "2026-01", &rows).await.unwrap();
    }
    let options = RunOptions::default();
    let runs = contributors
        .iter()
        .map(|c| ws.run_drop(c, "2026-01", &options));
    let outcomes = futures::future::join_all(runs).await;
    let mut run_keys = BTreeSet::new();
    for outcome in outcomes {
        let summary = outcome.unwrap().summary;
        assert_eq!(summary.status, RunStatus::Committed);
        run_keys.insert(summary.run_key.unwrap());
    }
    assert_eq!(silver_count(ws).await, (25..33).sum::<usize>());
    let table = silver_table(ws).await;
    let committed_keys: BTreeSet<String> = table
        .metadata()
        .snapshots()
        .filter_map(|s| {
            s.summary()
                .additional_properties
                .get(RUN_KEY_PROPERTY)
                .cloned()
        })
        .collect();
    assert_eq!(committed_keys, run_keys);
    let batches = common::silver_batches(ws).await;
    let mut keys = BTreeSet::new();
    for batch in &batches {
        let accounts = batch.column_by_name("account_id").unwrap();
        let accounts = accounts
            .as_any()
            .downcast_ref::<arrow::array::StringArray>()
            .unwrap();
        for account in accounts.iter() {
            assert!(keys.insert(account.unwrap().to_string()), "duplicate row");
        }
    }
}

/// With one commit attempt allowed, concurrent contributors make some commits
/// meet a conflict: such a run is an infrastructure error (exit 3) with none
/// of its rows in Silver, and its rerun commits.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs the local stack: bash localstack/test.sh"]
async fn stack_commit_conflicts_past_the_retries_exit_3_and_the_rerun_commits() {
    let tw = stack_workspace_with(&[("commit.attempts", "1")]).await;
    let ws = &tw.ws;
    suite::bank_with_history(ws, 3).await;
    let options = RunOptions::default();
    for round in 0..5 {
        let contributors: Vec<String> = (0..6).map(|i| format!("BANK_R{round}{i}")).collect();
        for contributor in &contributors {
            let rows =
                Portfolio::new(contributor, 4, false, round).statements(month(2026, 1), false);
            ws.put_drop(contributor, "2026-01", &rows).await.unwrap();
        }
        let runs = contributors
            .iter()
            .map(|c| ws.run_drop(c, "2026-01", &options));
        let outcomes = futures::future::join_all(runs).await;
        let losers: Vec<(&String, silverline::Error)> = contributors
            .iter()
            .zip(outcomes)
            .filter_map(|(c, outcome)| outcome.err().map(|e| (c, e)))
            .collect();
        let Some((loser, err)) = losers.into_iter().next() else {
            continue;
        };
        assert_eq!(err.class().exit_code(), 3, "{err}");
        assert!(err.to_string().contains("attempt 1 of 1"), "{err}");
        let before = silver_count(ws).await;
        let rerun = ws.run_drop(loser, "2026-01", &options).await;
        let rerun = rerun.unwrap_or_else(|e| panic!("rerun of {loser} failed: {e}"));
        assert_eq!(rerun.summary.status, RunStatus::Committed);
        assert_eq!(silver_count(ws).await, before + 4);
        return;
    }
    panic!("five rounds of six concurrent single-attempt commits met no conflict");
}

/// Runs the binary against the stack with extra environment, returning (exit code, output).
fn run_binary(
    ws: &silverline::demo::Workspace,
    env: &[(&str, &str)],
    contributor: &str,
    drop_id: &str,
) -> (i32, String) {
    let mut command = common::stack_run_command(ws, contributor, drop_id);
    command.envs(env.iter().copied());
    common::finish(command)
}

async fn stack_with_a_drop() -> common::TestWorkspace {
    let tw = stack_workspace().await;
    let rows = Portfolio::new("BANK_E", 5, false, 1).statements(month(2026, 1), false);
    tw.ws.put_drop("BANK_E", "2026-01", &rows).await.unwrap();
    tw
}

#[tokio::test]
#[ignore = "needs the local stack: bash localstack/test.sh"]
async fn stack_the_binary_commits_on_s3_and_rest() {
    let tw = stack_with_a_drop().await;
    let (code, text) = run_binary(&tw.ws, &[], "BANK_E", "2026-01");
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("committed 5 rows"), "{text}");
    assert_eq!(silver_count(&tw.ws).await, 5);
}

#[tokio::test]
#[ignore = "needs the local stack: bash localstack/test.sh"]
async fn stack_wrong_credentials_name_the_setting_and_commit_nothing() {
    let tw = stack_with_a_drop().await;
    let (code, text) = run_binary(
        &tw.ws,
        &[("AWS_SECRET_ACCESS_KEY", "not-the-secret")],
        "BANK_E",
        "2026-01",
    );
    assert!(code == 2 || code == 3, "{code}: {text}");
    assert!(
        text.contains("storage.bronze") && text.contains("403"),
        "{text}"
    );
    assert!(
        !text.contains("not-the-secret"),
        "the secret leaked: {text}"
    );
    assert_eq!(silver_count(&tw.ws).await, 0);
}

#[tokio::test]
#[ignore = "needs the local stack: bash localstack/test.sh"]
async fn stack_an_unreachable_endpoint_exits_3_naming_the_setting() {
    let tw = stack_with_a_drop().await;
    let (code, text) = run_binary(
        &tw.ws,
        &[("SILVERLINE__STORAGE__ENDPOINT", "http://127.0.0.1:9")],
        "BANK_E",
        "2026-01",
    );
    assert_eq!(code, 3, "{text}");
    assert!(text.contains("127.0.0.1:9"), "{text}");
    assert_eq!(silver_count(&tw.ws).await, 0);
}

#[tokio::test]
#[ignore = "needs the local stack: bash localstack/test.sh"]
async fn stack_a_missing_bucket_names_the_setting() {
    let tw = stack_with_a_drop().await;
    let (code, text) = run_binary(
        &tw.ws,
        &[(
            "SILVERLINE__STORAGE__BRONZE",
            "s3://no-such-bucket-xyz/drops",
        )],
        "BANK_E",
        "2026-01",
    );
    assert!(code == 1 || code == 2 || code == 3, "{code}: {text}");
    assert!(
        text.contains("storage.bronze") && text.contains("no-such-bucket-xyz"),
        "{text}"
    );
    assert_eq!(silver_count(&tw.ws).await, 0);
}

/// The S3 endpoint of the local stack.
fn s3_endpoint() -> String {
    std::env::var("SILVERLINE_S3_ENDPOINT").unwrap()
}

#[tokio::test]
#[ignore = "needs the local stack: bash localstack/test.sh"]
async fn stack_storage_faults_are_retried_and_the_run_commits() {
    let tw = stack_with_a_drop().await;
    let proxy = FaultProxy::start(&s3_endpoint(), 3);
    let (code, text) = run_binary(
        &tw.ws,
        &[("SILVERLINE__STORAGE__ENDPOINT", &proxy.url())],
        "BANK_E",
        "2026-01",
    );
    assert_eq!(code, 0, "{text}");
    assert_eq!(proxy.injected(), 3, "every planned fault was met");
    assert_eq!(silver_count(&tw.ws).await, 5);
    assert_eq!(snapshot_count(&tw.ws).await, 1);
}

#[tokio::test]
#[ignore = "needs the local stack: bash localstack/test.sh"]
async fn stack_storage_faults_that_never_clear_exit_3_and_the_rerun_commits() {
    let tw = stack_with_a_drop().await;
    let proxy = FaultProxy::start(&s3_endpoint(), FOREVER);
    let env = [("SILVERLINE__STORAGE__ENDPOINT", proxy.url())];
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let (code, text) = run_binary(&tw.ws, &env, "BANK_E", "2026-01");
    assert_eq!(code, 3, "{text}");
    assert!(
        proxy.injected() > 4,
        "the client retried: {}",
        proxy.injected()
    );
    assert!(text.contains("storage.bronze"), "names the setting: {text}");
    assert_eq!(silver_count(&tw.ws).await, 0);
    assert_eq!(snapshot_count(&tw.ws).await, 0);

    proxy.set_faults(0);
    let (code, text) = run_binary(&tw.ws, &env, "BANK_E", "2026-01");
    assert_eq!(code, 0, "{text}");
    assert_eq!(silver_count(&tw.ws).await, 5);
    assert_eq!(snapshot_count(&tw.ws).await, 1);
}

#[tokio::test]
#[ignore = "needs the local stack: bash localstack/test.sh"]
async fn stack_catalog_faults_are_retried_and_when_they_never_clear_exit_3() {
    let tw = stack_with_a_drop().await;
    let proxy = FaultProxy::start(&std::env::var("SILVERLINE_REST_URI").unwrap(), FOREVER);
    let env = [("SILVERLINE__CATALOG__URI", proxy.url())];
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let (code, text) = run_binary(&tw.ws, &env, "BANK_E", "2026-01");
    assert_eq!(code, 3, "{text}");
    assert!(text.contains("catalog"), "names the catalog: {text}");
    assert_eq!(snapshots_if_created(&tw.ws).await, 0);

    proxy.set_faults(2);
    let before = proxy.injected();
    let (code, text) = run_binary(&tw.ws, &env, "BANK_E", "2026-01");
    assert_eq!(code, 0, "{text}");
    assert_eq!(proxy.injected() - before, 2, "every planned fault was met");
    assert_eq!(silver_count(&tw.ws).await, 5);
    assert_eq!(snapshot_count(&tw.ws).await, 1);
}

/// Alerts on S3 + REST, through the binary: four monthly drops whose
/// `domain` failures rise (1, 2, 3, 4 of 100 rows) are three rises in a row,
/// so `backlog --check` (run summaries read back from S3, the exception
/// store through the REST catalog) names the creep and exits 6.
#[tokio::test]
#[ignore = "needs the local stack: bash localstack/test.sh"]
async fn stack_a_creeping_rule_alerts_and_backlog_check_exits_6() {
    let tw = stack_workspace().await;
    let config = tw.ws.dir.join("config/credit_statements.toml");
    let mut text = std::fs::read_to_string(&config).unwrap();
    text.push_str("\n[alerts.creep]\nrises_in_a_row = 3\n");
    std::fs::write(&config, text).unwrap();
    let mut bank = Portfolio::new("BANK_C", 100, false, 21);
    for (m, failing) in [(1, 1), (2, 2), (3, 3), (4, 4)] {
        let mut rows = bank.statements(month(2026, m), false);
        for row in rows.iter_mut().take(failing) {
            row.operation = "Z";
        }
        let drop_id = format!("2026-0{m}");
        tw.ws.put_drop("BANK_C", &drop_id, &rows).await.unwrap();
        let (code, text) = run_binary(&tw.ws, &[], "BANK_C", &drop_id);
        assert_eq!(code, 0, "{text}");
    }
    let output = common::stack_command(&tw.ws, "backlog", &["--check"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&output.stdout).to_string()
        + &String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(6), "{text}");
    assert!(text.contains("creep") && text.contains("domain"), "{text}");
}

/// `silverline doctor` on S3 + REST: every check passes (bucket settings
/// off are warnings), then a bronze bucket that does not exist and a wrong
/// secret each fail their lines. (SeaweedFS creates a bucket on a first
/// write, so a missing dq_error bucket is the LocalStack lane's.)
#[tokio::test]
#[ignore = "needs the local stack: bash localstack/test.sh"]
async fn stack_doctor_passes_then_names_a_missing_bucket_and_wrong_credentials() {
    let tw = stack_with_a_drop().await;
    let text = common::doctor::passes(&tw.ws);
    assert!(
        common::doctor::line(&text, "catalog").contains("REST catalog"),
        "{text}"
    );
    common::doctor::fails_a_missing_bucket(&tw.ws, "SILVERLINE__STORAGE__BRONZE", "bronze");
    common::doctor::fails_wrong_credentials(&tw.ws);
}

/// On S3 a drop with no object under its folder has not arrived: exit 5,
/// naming where it is expected.
#[tokio::test]
#[ignore = "needs the local stack: bash localstack/test.sh"]
async fn stack_a_drop_not_arrived_exits_5_naming_where_it_is_expected() {
    let tw = stack_with_a_drop().await;
    let (code, text) = run_binary(&tw.ws, &[], "BANK_E", "2030-01");
    assert_eq!(code, 5, "{text}");
    let expected = format!(
        "{}/BANK_E/2030-01 (storage.bronze)",
        tw.ws.plan.storage.bronze
    );
    assert!(
        text.contains("drop not arrived yet") && text.contains(&expected),
        "{text}"
    );
}

/// The workbench on S3 + REST: `silverline serve` lists the exceptions of a
/// run (the store read through the REST catalog, rows from the dq_error
/// files on S3), shows one, and an ignore with its CSRF token and reason is
/// recorded as an `ignored` event in the store.
#[tokio::test]
#[ignore = "needs the local stack: bash localstack/test.sh"]
async fn stack_the_workbench_lists_shows_and_ignores_an_exception() {
    let tw = stack_workspace().await;
    let mut rows = Portfolio::new("BANK_W", 10, false, 3).statements(month(2026, 1), false);
    rows[0].operation = "Z";
    tw.ws.put_drop("BANK_W", "2026-01", &rows).await.unwrap();
    let (code, text) = run_binary(&tw.ws, &[], "BANK_W", "2026-01");
    assert_eq!(code, 0, "{text}");
    let events = common::exception_events(&tw.ws).await;
    let id = events
        .iter()
        .find(|e| e.contributor == "BANK_W")
        .map(|e| e.exception_id.clone())
        .expect("the quarantined row's exception");
    let port = harness::workbench::free_port();
    let listen = format!("127.0.0.1:{port}");
    let serve = common::stack_command(&tw.ws, "serve", &["--listen", &listen, "--insecure-local"]);
    let server = harness::workbench::Workbench::launch(serve, port);
    let client = reqwest::Client::new();
    let list = client.get(server.url("/exceptions")).send().await.unwrap();
    assert_eq!(list.status(), reqwest::StatusCode::OK);
    let list = list.text().await.unwrap();
    assert!(list.contains(&id), "{list}");
    let detail = harness::workbench::page_text(&server.url(&format!("/exceptions/{id}"))).await;
    assert!(detail.contains("domain"), "{detail}");
    let csrf = harness::workbench::csrf_of(&list);
    let ignored = client
        .post(server.url(&format!("/exceptions/{id}/ignore")))
        .form(&[("csrf", csrf.as_str()), ("reason", "test account")])
        .send()
        .await
        .unwrap();
    assert_eq!(ignored.status(), reqwest::StatusCode::OK);
    let events = common::exception_events(&tw.ws).await;
    assert!(
        events
            .iter()
            .any(|e| e.exception_id == id && e.status == ExceptionStatus::Ignored),
        "no ignored event"
    );
}
