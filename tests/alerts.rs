//! Alerts through the binary, on crafted run histories (summaries under
//! dq_error, exception events in the store) with hand-computed expectations:
//! a creep of three rises that alerts in a run's summary and reaches a real
//! webhook on loopback after a 500, creeps that must not alert, a creep above
//! mean + k sigma, the age and exit-rate alerts, `backlog --check` (exit 6)
//! and `--notify`, the report's alert box, and bad `[alerts]` settings.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod harness;

use std::path::{Path, PathBuf};

use assert_cmd::Command;
use chrono::{DateTime, Duration, Utc};
use harness::{month, output, project, put_drop, put_summary, receiver, run_args, summary_of};
use silverline::demo::generate::Portfolio;
use silverline::exceptions::{ExceptionEvent, ExceptionStatus};

/// The token the webhook tests send, from this environment variable.
const TOKEN_ENV: &str = "SILVERLINE_ALERTS_TEST_TOKEN";

/// The shipped project with `alerts` (TOML) appended to its configuration.
fn project_with_alerts(alerts: &str) -> (tempfile::TempDir, PathBuf) {
    let (tmp, config) = project(|text| text);
    append_alerts(&config, alerts);
    (tmp, config)
}

/// Appends `alerts` (TOML) to the configuration at `config`.
fn append_alerts(config: &Path, alerts: &str) {
    let mut text = std::fs::read_to_string(config).unwrap();
    text.push_str(&format!("\n{alerts}\n"));
    std::fs::write(config, text).unwrap();
}

/// The binary with `args`, the webhook token in its environment.
fn silverline(args: &[&str]) -> assert_cmd::assert::Assert {
    Command::cargo_bin("silverline")
        .unwrap()
        .env(TOKEN_ENV, "s3cret")
        .args(["--log-format", "text"])
        .args(args)
        .assert()
}

/// `rule`'s failures per 100 rows in three earlier runs of `contributor`.
fn put_history(root: &Path, contributor: &str, rule: &str, per_100: [u64; 3]) {
    for (i, failed) in per_100.into_iter().enumerate() {
        let drop_id = format!("2020-0{}", i + 1);
        let day = format!("2020-0{}-05", i + 1);
        put_summary(root, contributor, (&drop_id, &day), 100, &[(rule, failed)]);
    }
}

/// Three runs of BANK_A failed `mia_range` on 1, 2 and 3 of 100 rows; the
/// real run fails it on 2 of 10 (20%): a third rise in a row. The run's
/// summary carries the alert, and the webhook gets it on the second attempt
/// (the first answered 500), with the bearer token.
#[test]
fn a_creep_of_three_rises_alerts_in_the_summary_and_reaches_the_webhook_after_a_500() {
    let (url, hook) = receiver::start();
    hook.fail_first(1);
    let (tmp, config) = project_with_alerts(&format!(
        "[alerts]\n[alerts.creep]\nrises_in_a_row = 3\n\
         [alerts.webhook]\nurl = \"{url}/hooks/T0/secret-path\"\ntoken_env = \"{TOKEN_ENV}\"\n"
    ));
    let root = tmp.path();
    put_history(root, "BANK_A", "mia_range", [1, 2, 3]);
    let mut rows = Portfolio::new("BANK_A", 10, false, 7).statements(month(2026, 1), false);
    assert_eq!(rows.len(), 10);
    rows[0].months_in_arrears = 99;
    rows[1].months_in_arrears = 99;
    put_drop(root, "BANK_A", "2026-01", &rows);

    let run = silverline(
        &run_args(config.to_str().unwrap(), "BANK_A", "2026-01")
            .each_ref()
            .map(String::as_str),
    );
    let logs = output(&run.success());
    assert!(
        !logs.contains("secret-path"),
        "the webhook URL is a secret: {logs}"
    );

    let summary = summary_of(root, "2026-01");
    let alerts = summary["alerts"].as_array().unwrap();
    assert_eq!(alerts.len(), 1, "{alerts:?}");
    let alert = &alerts[0];
    assert_eq!(alert["kind"], "creep");
    assert_eq!(alert["contributor"], "BANK_A");
    assert_eq!(alert["rule"], "mia_range");
    assert_eq!(alert["figures"]["rises_in_a_row"], 3);
    let rates: Vec<f64> = alert["figures"]["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["rate"].as_f64().unwrap())
        .collect();
    assert_eq!(rates, [0.01, 0.02, 0.03, 0.2]);
    assert!(
        alert["message"]
            .as_str()
            .unwrap()
            .contains("1.00% -> 2.00% -> 3.00% -> 20.00%"),
        "{alert}"
    );

    let received = hook.received();
    assert_eq!(
        received.iter().map(|r| r.status).collect::<Vec<_>>(),
        [500, 200]
    );
    let delivered = &received[1];
    assert_eq!(delivered.method, "POST");
    assert_eq!(delivered.path, "/hooks/T0/secret-path");
    assert_eq!(delivered.header("authorization"), Some("Bearer s3cret"));
    let body = delivered.json();
    assert_eq!(body["origin"], "run");
    assert_eq!(body["dataset"], "credit_statements");
    assert_eq!(body["alerts"][0], *alert);
    let text = body["text"].as_str().unwrap();
    assert!(
        text.starts_with("silverline credit_statements: 1 alert(s)\n- [creep] BANK_A:"),
        "{text}"
    );
}

/// BANK_N: rates 1%, 30%, 10%, then 20% (one rise after a fall) and 20% is
/// within mean + 2 sigma of the three before (13.67% + 2 x 12.12% = 37.91%):
/// no alert. BANK_S: 1%, 2%, 1%, then 4%, above 1.33% + 2 x 0.47% = 2.28% (the deviation is sqrt(2)/300):
/// a sigma alert (and no rises alert: 1% -> 4% is one rise).
#[test]
fn a_creep_broken_by_a_fall_and_within_k_sigma_does_not_alert_one_above_does() {
    let (tmp, config) = project_with_alerts(
        "[alerts]\nage = false\n[alerts.creep]\nrises_in_a_row = 3\nsigma = 2.0\nwindow = 3\n",
    );
    let root = tmp.path();
    put_history(root, "BANK_N", "amounts", [1, 30, 10]);
    put_summary(
        root,
        "BANK_N",
        ("2020-04", "2020-04-05"),
        100,
        &[("amounts", 20)],
    );
    put_history(root, "BANK_S", "amounts", [1, 2, 1]);
    put_summary(
        root,
        "BANK_S",
        ("2020-04", "2020-04-05"),
        100,
        &[("amounts", 4)],
    );
    let config = config.to_str().unwrap();

    let quiet = silverline(&[
        "backlog",
        "--config",
        config,
        "--contributor",
        "BANK_N",
        "--check",
    ]);
    let text = output(&quiet.code(0));
    assert!(!text.contains("ALERTS"), "{text}");

    let check = silverline(&["backlog", "--config", config, "--check", "--json"]).code(6);
    let data: serde_json::Value = serde_json::from_slice(&check.get_output().stdout).unwrap();
    let alerts = data["alerts"].as_array().unwrap();
    assert_eq!(alerts.len(), 1, "{alerts:?}");
    assert_eq!(
        (&alerts[0]["contributor"], &alerts[0]["rule"]),
        (&"BANK_S".into(), &"amounts".into())
    );
    let figures = &alerts[0]["figures"];
    assert_eq!(figures["rises_in_a_row"], serde_json::Value::Null);
    let sigma = &figures["sigma"];
    let near = |v: &serde_json::Value, want: f64| (v.as_f64().unwrap() - want).abs() < 1e-9;
    assert!(near(&sigma["mean"], 0.04 / 3.0), "{sigma}");
    assert!(near(&sigma["std_dev"], 2.0f64.sqrt() / 300.0), "{sigma}");
    assert!(near(
        &sigma["threshold"],
        sigma["mean"].as_f64().unwrap() + 2.0 * sigma["std_dev"].as_f64().unwrap()
    ));
    assert_eq!(figures["runs"].as_array().unwrap().len(), 4);
}

/// An exception event of `contributor` entered `entered` days before `now`,
/// with status `status` set `days_ago` days before `now`.
fn event(
    (id, contributor): (&str, &str),
    status: ExceptionStatus,
    now: DateTime<Utc>,
    (entered, days_ago): (i64, i64),
) -> ExceptionEvent {
    ExceptionEvent {
        exception_id: id.to_string(),
        contributor: contributor.to_string(),
        drop_id: "2020-01".to_string(),
        run_id: "00000000000000aa".to_string(),
        status,
        rule: "amounts".to_string(),
        rules: "amounts".to_string(),
        severity: "critical".to_string(),
        reasons: "[]".to_string(),
        record_key: None,
        source_file: Some("statements.csv".to_string()),
        source_line: Some(2),
        dq_file: None,
        entered_at: now - Duration::days(entered),
        event_at: now - Duration::days(days_ago),
        actor: None,
        note: None,
    }
}

/// Appends `events` to the exception store of the project at `config`.
async fn put_events(config: &Path, events: &[ExceptionEvent]) {
    use silverline::core::place::RunPlace;
    use silverline::infra::catalog::connect;
    use silverline::infra::storage::Stores;
    let plan = silverline::config::load_plan(config).unwrap();
    let stores = Stores::new(&plan.storage, plan.catalog.warehouse())
        .await
        .unwrap();
    let catalog = connect(&plan.catalog, &stores).await.unwrap();
    let place = RunPlace {
        run_id: "00000000000000aa".to_string(),
        run_date: "2020-01-05".to_string(),
    };
    silverline::exceptions::store::append_events(&catalog, &plan, events, "crafted", &place)
        .await
        .unwrap();
}

/// BANK_A: a (40 days, open), b (35 days, open), c (10 days, open), d
/// (entered 20 days ago, resolved 15 days ago): 2 older than 30 days, the
/// oldest 40; in the last 14 days 1 entered (c) and none left, 3 open.
/// BANK_B: e (3 days, open), f (entered 20 days ago, resolved 2 days ago):
/// nothing stale, and one left in the last 14 days: no alert.
#[tokio::test]
async fn age_and_exit_rate_alerts_page_through_backlog_check_the_report_and_the_webhook() {
    use ExceptionStatus::{Quarantined, Resolved};
    let (url, hook) = receiver::start();
    let (tmp, config) = project(|text| text);
    let now = Utc::now();
    let events = [
        event(("a", "BANK_A"), Quarantined, now, (40, 40)),
        event(("b", "BANK_A"), Quarantined, now, (35, 35)),
        event(("c", "BANK_A"), Quarantined, now, (10, 10)),
        event(("d", "BANK_A"), Quarantined, now, (20, 20)),
        event(("d", "BANK_A"), Resolved, now, (20, 15)),
        event(("e", "BANK_B"), Quarantined, now, (3, 3)),
        event(("f", "BANK_B"), Quarantined, now, (20, 20)),
        event(("f", "BANK_B"), Resolved, now, (20, 2)),
    ];
    put_events(&config, &events).await;
    append_alerts(
        &config,
        &format!(
            "[alerts]\nno_exit_days = 14\n[alerts.webhook]\nurl = \"{url}/hook\"\n\
             token_env = \"{TOKEN_ENV}\"\ntoken_header = \"X-Alert-Secret\"\n"
        ),
    );
    let config = config.to_str().unwrap();

    let check = silverline(&["backlog", "--config", config, "--check"]).code(6);
    let text = output(&check);
    assert!(text.contains("ALERTS (2):"), "{text}");
    assert!(
        text.contains(
            "[age] BANK_A: 2 open exception(s) older than 30 days; the oldest is 40 days old"
        ),
        "{text}"
    );
    assert!(
        text.contains(
            "[exit_rate] BANK_A: 1 exception(s) entered in the last 14 days and none left; 3 open"
        ),
        "{text}"
    );
    assert!(!text.contains("] BANK_B"), "{text}");
    assert!(hook.received().is_empty(), "--check alone sends nothing");

    let json = silverline(&["backlog", "--config", config, "--check", "--json"]).code(6);
    let data: serde_json::Value = serde_json::from_slice(&json.get_output().stdout).unwrap();
    assert_eq!(
        data["alerts"][0]["figures"],
        serde_json::json!({"stale": 2, "oldest_age_days": 40, "stale_after_days": 30})
    );
    assert_eq!(
        data["alerts"][1]["figures"],
        serde_json::json!({"entered": 1, "exited": 0, "open": 3, "days": 14})
    );
    silverline(&[
        "backlog",
        "--config",
        config,
        "--contributor",
        "BANK_B",
        "--check",
    ])
    .code(0);

    silverline(&["backlog", "--config", config, "--check", "--notify"]).code(6);
    let delivered = hook.delivered();
    assert_eq!(delivered.len(), 1);
    assert_eq!(delivered[0].header("x-alert-secret"), Some("s3cret"));
    assert_eq!(delivered[0].header("authorization"), None);
    let body = delivered[0].json();
    assert_eq!(body["origin"], "check");
    assert_eq!(body["alerts"], data["alerts"]);

    // Three 500s: the default 3 attempts spent, a warning, the exit code unchanged.
    hook.fail_first(3);
    let failed = silverline(&["backlog", "--config", config, "--check", "--notify"]).code(6);
    assert!(output(&failed).contains("could not deliver the alerts to the webhook"));
    let statuses: Vec<u16> = hook.received().iter().map(|r| r.status).collect();
    assert_eq!(statuses, [200, 500, 500, 500]);

    let out = tmp.path().join("report");
    silverline(&["report", "--config", config, "--out", out.to_str().unwrap()]).success();
    let page = std::fs::read_to_string(out.join("index.html")).unwrap();
    assert!(
        page.contains("<aside class=\"alerts\" role=\"alert\" data-alerts=\"2\">"),
        "alert box"
    );
    assert!(page.contains("<li data-alert-kind=\"exit_rate\" data-contributor=\"BANK_A\">"));
}

/// Each bad `[alerts]` setting is named, and the configuration refused (exit 2).
#[test]
fn bad_alert_settings_are_named_and_refused() {
    let (_tmp, config) = project_with_alerts(
        "[alerts]\nno_exit_days = 0\n[alerts.creep]\nwindow = 4\n\
         [alerts.webhook]\nurl = \"ftp://hooks.example.com/secret-path\"\ntoken_env = \"SILVERLINE_ALERTS_UNSET\"\n",
    );
    let refused = silverline(&["check-config", "--config", config.to_str().unwrap()]).code(2);
    let text = output(&refused);
    for named in [
        "alerts.no_exit_days: 0",
        "alerts.creep: set rises_in_a_row, sigma or both",
        "alerts.creep.window: only counts with alerts.creep.sigma",
        "alerts.webhook.url: scheme 'ftp'",
    ] {
        assert!(text.contains(named), "{named}: {text}");
    }
    // The token variable is read when alerts are sent, not when the
    // configuration loads: unset, it refuses no command.
    assert!(!text.contains("SILVERLINE_ALERTS_UNSET"), "{text}");
    assert!(!text.contains("secret-path"), "{text}");
}
