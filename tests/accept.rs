//! Closing exceptions by hand, through the binary on the embedded default:
//! `silverline accept` commits a legitimate change the rules set aside (the
//! volume-drop trap: a contributor sold a quarter of its portfolio, the
//! `volume` rule set the month aside, and every later month with it) and
//! `silverline exceptions ignore` closes exceptions for good; both name who
//! and why in the exception store, and `backlog` counts them apart.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod harness;

use std::collections::{BTreeMap, BTreeSet};

use arrow::array::{Array, StringArray};
use arrow::compute::cast;
use arrow::datatypes::DataType;
use common::{exception_events, silver_batches, silver_count, silver_table, workspace};
use harness::{month, output, run_args, set_aside_values, silverline, summaries, walk};
use silverline::demo::Workspace;
use silverline::demo::generate::{Portfolio, Statement};
use silverline::exceptions::ExceptionStatus;
use silverline::exceptions::backlog::states;

const BY: &str = "j.doe";
const WHY: &str = "BANK_V sold its card portfolio to BANK_W";

fn config_of(ws: &Workspace) -> String {
    ws.dir
        .join("config/credit_statements.toml")
        .display()
        .to_string()
}

/// Puts `rows` as a drop and runs it through the binary; returns its summary.
async fn run(ws: &Workspace, drop_id: &str, rows: &[Statement]) -> serde_json::Value {
    let contributor = &rows[0].contributor;
    ws.put_drop(contributor, drop_id, rows).await.unwrap();
    silverline(&run_args(&config_of(ws), contributor, drop_id)).success();
    summaries(&ws.dir)
        .into_iter()
        .find(|s| s["drop_id"] == drop_id)
        .unwrap_or_else(|| panic!("no summary for {drop_id}"))
}

fn accept_args(ws: &Workspace, drop_id: &str, rule: Option<&str>) -> Vec<String> {
    accept_args_by(ws, drop_id, rule, BY)
}

fn accept_args_by(ws: &Workspace, drop_id: &str, rule: Option<&str>, by: &str) -> Vec<String> {
    let mut args = vec![
        "accept".to_string(),
        "--config".to_string(),
        config_of(ws),
        "--contributor".to_string(),
        "BANK_V".to_string(),
        "--drop".to_string(),
        drop_id.to_string(),
        "--reason".to_string(),
        WHY.to_string(),
        "--by".to_string(),
        by.to_string(),
    ];
    if let Some(rule) = rule {
        args.extend(["--rule".to_string(), rule.to_string()]);
    }
    args
}

/// Silver's rows per statement date.
async fn silver_rows_by_date(ws: &Workspace) -> BTreeMap<String, usize> {
    let mut rows = BTreeMap::new();
    for batch in silver_batches(ws).await {
        let dates = cast(
            batch.column_by_name("statement_date").unwrap(),
            &DataType::Utf8,
        )
        .unwrap();
        let dates = dates.as_any().downcast_ref::<StringArray>().unwrap();
        for date in dates.iter().flatten() {
            *rows.entry(date.to_string()).or_default() += 1;
        }
    }
    rows
}

/// The statements of the accounts not sold.
fn kept(rows: Vec<Statement>, sold: &BTreeSet<String>) -> Vec<Statement> {
    rows.into_iter()
        .filter(|r| !sold.contains(&r.account))
        .collect()
}

fn backlog_json(ws: &Workspace) -> serde_json::Value {
    let config = config_of(ws);
    let args = [
        "backlog",
        "--config",
        config.as_str(),
        "--contributor",
        "BANK_V",
    ];
    let assert = silverline(&[args.as_slice(), &["--json"]].concat()).success();
    serde_json::from_slice(&assert.get_output().stdout).unwrap()
}

/// Months 1 and 2 of 200 accounts commit; month 3 arrives with 50 accounts
/// fewer (sold, none of them in arrears, closed in month 2's statements) and the shipped `volume` rule
/// (at least 80% of last month's accounts) sets it aside whole, and so does
/// month 4 run before the acceptance. `accept --rule volume` commits month 3
/// as judged, once, with who and why in the exception store and the snapshot;
/// month 4 then compares with month 3 and passes (its month 3, measured empty
/// before, is measured afresh). Accepting the early month 4 after the real
/// one committed adds nothing: every key is already in Silver.
#[tokio::test]
async fn a_volume_drop_accepted_becomes_the_baseline_of_the_next_month() {
    let tw = workspace().await;
    let ws = &tw.ws;
    let config = config_of(ws);
    let mut bank = Portfolio::new("BANK_V", 200, false, 21);
    let mut statements: Vec<Vec<Statement>> = (1..=3)
        .map(|m| bank.statements(month(2026, m), false))
        .collect();
    let march = statements.pop().unwrap();
    let sold: BTreeSet<String> = march
        .iter()
        .rev()
        .filter(|r| r.arrears == 0)
        .take(50)
        .map(|r| r.account.clone())
        .collect();
    // February's statements of the sold accounts close them: March does not
    // expect them (they are not missing entities).
    for row in statements[1]
        .iter_mut()
        .filter(|r| sold.contains(&r.account))
    {
        row.status = "CLOSED";
    }
    for (m, rows) in (1..=2).zip(&statements) {
        let summary = run(ws, &format!("2026-0{m}"), rows).await;
        assert_eq!(summary["counts"]["committed"], 200, "{summary}");
    }
    let march = run(ws, "2026-03", &kept(march, &sold)).await;
    assert_eq!(march["missing_entities"]["total"], 0, "{march}");
    assert_eq!(march["counts"]["quarantined"], 150, "{march}");
    assert_eq!(march["counts"]["committed"], 0, "{march}");
    let april_rows = kept(bank.statements(month(2026, 4), false), &sold);
    let early = run(ws, "2026-04-early", &april_rows).await;
    assert_eq!(early["counts"]["quarantined"], 150, "{early}");

    let accepted = silverline(&accept_args(ws, "2026-03", Some("volume"))).success();
    let text = output(&accepted);
    assert!(
        text.contains(
            "BANK_V/2026-03 (rule volume), accepted by j.doe: 150 exception(s) run as drop accept-"
        ),
        "{text}"
    );
    assert!(text.contains("150 committed to Silver"), "{text}");
    let by_date = silver_rows_by_date(ws).await;
    assert_eq!(by_date.get("2026-03-31"), Some(&150), "{by_date:?}");
    assert_eq!(silver_count(ws).await, 200 + 200 + 150);

    let table = silver_table(ws).await;
    let snapshot = table.metadata().current_snapshot().unwrap();
    let properties = &snapshot.summary().additional_properties;
    let property = |name: &str| properties[&format!("silverline.accepted.{name}")].clone();
    assert_eq!(property("by"), BY);
    assert_eq!(property("reason"), WHY);
    assert_eq!(property("rule"), "volume");
    assert_eq!(property("drop"), "2026-03");
    assert_eq!(property("runs"), march["run_id"].as_str().unwrap());

    let events = exception_events(ws).await;
    let accepted_events: Vec<_> = events
        .iter()
        .filter(|e| e.drop_id == "2026-03" && e.status == ExceptionStatus::Accepted)
        .collect();
    assert_eq!(accepted_events.len(), 150);
    for event in &accepted_events {
        assert_eq!(event.actor.as_deref(), Some(BY));
        assert_eq!(event.note.as_deref(), Some(WHY));
    }
    let open_of_march = states(&events)
        .iter()
        .filter(|s| s.latest.drop_id == "2026-03" && s.is_open())
        .count();
    assert_eq!(open_of_march, 0);

    let snapshots = table.metadata().snapshots().count();
    let again = silverline(&accept_args(ws, "2026-03", Some("volume"))).success();
    assert!(
        output(&again).contains("nothing to accept"),
        "{}",
        output(&again)
    );
    assert_eq!(silver_count(ws).await, 200 + 200 + 150);
    assert_eq!(
        silver_table(ws).await.metadata().snapshots().count(),
        snapshots
    );

    let backlog = backlog_json(ws);
    assert_eq!(backlog["overall"]["backlog"]["accepted"], 150, "{backlog}");
    assert_eq!(backlog["overall"]["backlog"]["open"], 150, "{backlog}");
    let args = ["backlog", "--config", config.as_str()];
    let text = output(&silverline(&args).success());
    assert!(
        text.contains("accepted") && text.contains(" 150 "),
        "{text}"
    );

    let kept_metrics = || walk(&ws.dir.join("data/dq_error/metrics/contributor=BANK_V")).len();
    let kept_before = kept_metrics();
    let april = run(ws, "2026-04", &april_rows).await;
    assert_eq!(
        kept_metrics(),
        kept_before + 2,
        "March measured afresh (its files changed), January and February read back, \
         April kept by its run (every row committed)"
    );
    assert_eq!(april["counts"]["committed"], 150, "{april}");
    assert_eq!(april["counts"]["quarantined"], 0, "{april}");
    assert_eq!(
        april["aggregates"][0]["previous"]["accounts"], 150.0,
        "{april}"
    );

    let resent = silverline(&accept_args(ws, "2026-04-early", None)).success();
    let text = output(&resent);
    assert!(
        text.contains("0 committed to Silver") && text.contains("150 set aside again"),
        "{text}"
    );
    assert_eq!(silver_count(ws).await, 200 + 200 + 150 + 150);
    let left = silverline(&accept_args(ws, "2026-04-early", None)).success();
    let text = output(&left);
    assert!(
        text.contains("150 exception(s) of BANK_V/2026-04-early set aside by resubmission"),
        "{text}"
    );
    assert!(text.contains("nothing to accept"), "{text}");
}

/// A bank whose second month has three accounts with limits changed silently:
/// `limit_stable` quarantines them. Returns the workspace's three exception ids.
async fn three_quarantined(ws: &Workspace) -> Vec<String> {
    let mut bank = Portfolio::new("BANK_V", 200, false, 5);
    run(ws, "2026-01", &bank.statements(month(2026, 1), false)).await;
    bank.change_limits_silently(3);
    let february = run(ws, "2026-02", &bank.statements(month(2026, 2), false)).await;
    assert_eq!(february["counts"]["quarantined"], 3, "{february}");
    set_aside_values(&ws.dir, "quarantine", "_exception_id")
        .into_iter()
        .collect()
}

fn ignore_args(ws: &Workspace, ids: &[&str], by: &str) -> Vec<String> {
    let mut args = vec![
        "exceptions".to_string(),
        "ignore".to_string(),
        "--config".to_string(),
        config_of(ws),
        "--reason".to_string(),
        "accounts closed at the contributor".to_string(),
        "--by".to_string(),
        by.to_string(),
    ];
    for id in ids {
        args.extend(["--id".to_string(), id.to_string()]);
    }
    args
}

/// `exceptions ignore` closes open exceptions with who and why; an unknown id
/// is refused with exit 2 naming it and nothing recorded; an exception already
/// closed is left as it is and said so; `backlog` counts them as ignored.
#[tokio::test]
async fn exceptions_ignore_closes_with_who_and_why_and_refuses_unknown_ids() {
    let tw = workspace().await;
    let ws = &tw.ws;
    let ids = three_quarantined(ws).await;
    let ignored = |events: &[silverline::exceptions::ExceptionEvent]| {
        events
            .iter()
            .filter(|e| e.status == ExceptionStatus::Ignored)
            .count()
    };

    let refused = silverline(&ignore_args(ws, &[&ids[0], "no-such-id"], "ops")).code(2);
    assert!(
        output(&refused).contains("no-such-id"),
        "{}",
        output(&refused)
    );
    let refused = silverline(&ignore_args(ws, &[&ids[0]], " ")).code(2);
    assert!(output(&refused).contains("--by"), "{}", output(&refused));
    assert_eq!(ignored(&exception_events(ws).await), 0);

    let done = silverline(&ignore_args(ws, &[&ids[0], &ids[1]], "ops")).success();
    assert!(
        output(&done).contains("ignored 2 exception(s) by ops"),
        "{}",
        output(&done)
    );
    let events = exception_events(ws).await;
    let closed: Vec<_> = events
        .iter()
        .filter(|e| e.status == ExceptionStatus::Ignored)
        .collect();
    assert_eq!(closed.len(), 2);
    for event in &closed {
        assert_eq!(event.actor.as_deref(), Some("ops"));
        assert_eq!(
            event.note.as_deref(),
            Some("accounts closed at the contributor")
        );
        assert_eq!(event.rule, "limit_stable");
    }

    let again = silverline(&ignore_args(ws, &[&ids[1], &ids[2]], "ops")).success();
    let text = output(&again);
    assert!(
        text.contains(&format!("exception {} is already ignored", ids[1])),
        "{text}"
    );
    assert!(text.contains("ignored 1 exception(s)"), "{text}");
    assert_eq!(ignored(&exception_events(ws).await), 3);

    let backlog = backlog_json(ws);
    assert_eq!(backlog["overall"]["backlog"]["ignored"], 3, "{backlog}");
    assert_eq!(backlog["overall"]["backlog"]["open"], 0, "{backlog}");
    assert_eq!(backlog["overall"]["backlog"]["accepted"], 0, "{backlog}");
}

/// `--rule` must name a rule of the contributor that a person may accept:
/// an engine rule or an unknown one is refused with exit 2, nothing committed.
#[tokio::test]
async fn accepting_an_engine_rule_or_an_unknown_rule_is_refused() {
    let tw = workspace().await;
    let ws = &tw.ws;
    three_quarantined(ws).await;
    let before = silver_count(ws).await;
    for (rule, says) in [
        ("resubmission", "guards Silver's keys"),
        ("not_null", "guards Silver's keys"),
        ("parse", "guards Silver's keys"),
        ("no_such_rule", "has no rule 'no_such_rule'"),
    ] {
        let refused = silverline(&accept_args(ws, "2026-02", Some(rule))).code(2);
        assert!(
            output(&refused).contains(says),
            "{rule}: {}",
            output(&refused)
        );
    }
    assert_eq!(silver_count(ws).await, before);
    let accepted = silverline(&accept_args(ws, "2026-02", Some("limit_stable"))).success();
    assert!(
        output(&accepted).contains("3 committed to Silver"),
        "{}",
        output(&accepted)
    );
    assert_eq!(silver_count(ws).await, before + 3);
}

/// An exception store created before `actor` and `note` existed (emulated by
/// dropping them) gets them when silverline next loads it (here `backlog`):
/// the ignore's event keeps who and why, earlier events read them as empty.
#[tokio::test]
async fn an_exception_store_without_actor_and_note_gets_them_when_next_loaded() {
    use iceberg::transaction::{ApplyTransactionAction, Transaction};
    use silverline::exceptions::store::load_or_create_exceptions;
    use silverline::infra::catalog::connect;
    use silverline::infra::storage::Stores;

    let tw = workspace().await;
    let ws = &tw.ws;
    let ids = three_quarantined(ws).await;
    let stores = Stores::new(&ws.plan.storage, ws.plan.catalog.warehouse())
        .await
        .unwrap();
    let catalog = connect(&ws.plan.catalog, &stores).await.unwrap();
    let table = load_or_create_exceptions(catalog.as_ref(), &ws.plan)
        .await
        .unwrap();
    let tx = Transaction::new(&table);
    let older = tx
        .update_schema()
        .delete_column("actor")
        .delete_column("note");
    let table = older
        .apply(tx)
        .unwrap()
        .commit(catalog.as_ref())
        .await
        .unwrap();
    let schema = table.metadata().current_schema();
    assert!(schema.field_by_name("actor").is_none() && schema.field_by_name("note").is_none());
    assert_eq!(backlog_json(ws)["overall"]["backlog"]["quarantined"], 3);

    silverline(&ignore_args(ws, &[&ids[0]], "ops")).success();
    let events = exception_events(ws).await;
    let ignored: Vec<_> = events
        .iter()
        .filter(|e| e.status == ExceptionStatus::Ignored)
        .collect();
    assert_eq!(ignored.len(), 1);
    assert_eq!(ignored[0].actor.as_deref(), Some("ops"));
    let earlier: Vec<_> = events
        .iter()
        .filter(|e| e.status == ExceptionStatus::Quarantined)
        .collect();
    assert_eq!(earlier.len(), 3);
    assert!(
        earlier
            .iter()
            .all(|e| e.actor.is_none() && e.note.is_none())
    );
}

/// An accept that dies right after its Silver commit, before its events, is
/// completed by the next accept of the same rows: nothing is committed twice,
/// and the exceptions close as accepted by whom the snapshot names, not by
/// whoever ran the second accept.
#[tokio::test]
async fn an_accept_that_died_after_its_commit_is_completed_as_committed() {
    use silverline::accept::{AcceptRequest, accept};
    use silverline::core::drop::DropRef;
    use silverline::exceptions::close::Decision;
    use silverline::pipeline::{CrashPoint, RunOptions, TestHooks};

    let tw = workspace().await;
    let ws = &tw.ws;
    three_quarantined(ws).await;
    let before = silver_count(ws).await;
    let request = AcceptRequest {
        drop: DropRef::new("BANK_V", "2026-02").unwrap(),
        rule: Some("limit_stable".to_string()),
        decision: Decision::new(BY, WHY).unwrap(),
        only: None,
    };
    let dying = RunOptions {
        hooks: TestHooks {
            crash_at: Some(CrashPoint::AfterCommit),
            ..TestHooks::default()
        },
        ..RunOptions::default()
    };
    assert!(accept(&ws.plan, &request, &dying).await.is_err());
    assert_eq!(silver_count(ws).await, before + 3);
    let accepted = |events: &[silverline::exceptions::ExceptionEvent]| {
        events
            .iter()
            .filter(|e| e.status == ExceptionStatus::Accepted)
            .map(|e| e.actor.clone().unwrap_or_default())
            .collect::<Vec<_>>()
    };
    assert!(accepted(&exception_events(ws).await).is_empty());

    let args = accept_args_by(ws, "2026-02", Some("limit_stable"), "someone.else");
    let completed = silverline(&args).success();
    assert!(
        output(&completed).contains("was already committed"),
        "{}",
        output(&completed)
    );
    assert_eq!(silver_count(ws).await, before + 3);
    assert_eq!(accepted(&exception_events(ws).await), vec![BY; 3]);
}

/// Two accepts of the same rows at once commit them once: one commits and
/// records the accepted events, the other adds nothing (it finds the winner's
/// run key at its claim or at its commit).
#[tokio::test]
async fn two_accepts_of_the_same_rows_at_once_commit_them_once() {
    use silverline::accept::{AcceptRequest, accept};
    use silverline::core::drop::DropRef;
    use silverline::exceptions::close::Decision;
    use silverline::pipeline::RunOptions;
    use silverline::pipeline::summary::RunStatus;

    let tw = workspace().await;
    let ws = &tw.ws;
    three_quarantined(ws).await;
    let before = silver_count(ws).await;
    let request = AcceptRequest {
        drop: DropRef::new("BANK_V", "2026-02").unwrap(),
        rule: None,
        decision: Decision::new(BY, WHY).unwrap(),
        only: None,
    };
    let options = RunOptions::default();
    let (a, b) = futures::join!(
        accept(&ws.plan, &request, &options),
        accept(&ws.plan, &request, &options)
    );
    let statuses: Vec<RunStatus> = [a.unwrap(), b.unwrap()]
        .iter()
        .map(|o| o.run.as_ref().unwrap().summary.status)
        .collect();
    assert_eq!(
        statuses
            .iter()
            .filter(|s| **s == RunStatus::Committed)
            .count(),
        1,
        "{statuses:?}"
    );
    assert!(
        statuses.iter().any(|s| matches!(
            s,
            RunStatus::CommittedConcurrently | RunStatus::AlreadyCommitted
        )),
        "{statuses:?}"
    );
    assert_eq!(silver_count(ws).await, before + 3);
    let accepted = exception_events(ws)
        .await
        .into_iter()
        .filter(|e| e.status == ExceptionStatus::Accepted)
        .count();
    assert_eq!(accepted, 3);
}

/// With `quarantine.mask_sensitive`, the rows set aside cannot be read back
/// as they were judged: accept refuses (exit 2) and commits nothing.
#[tokio::test]
async fn accept_refuses_masked_rows() {
    let tw = workspace().await;
    let ws = &tw.ws;
    three_quarantined(ws).await;
    let before = silver_count(ws).await;
    let refused = assert_cmd::Command::cargo_bin("silverline")
        .unwrap()
        .args(["--log-format", "text"])
        .args(accept_args(ws, "2026-02", Some("limit_stable")))
        .env("SILVERLINE__QUARANTINE__MASK_SENSITIVE", "true")
        .assert()
        .code(2);
    assert!(
        output(&refused).contains("quarantine.mask_sensitive"),
        "{}",
        output(&refused)
    );
    assert_eq!(silver_count(ws).await, before);
}
