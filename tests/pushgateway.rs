//! Each run's metrics pushed to a real Prometheus Pushgateway (Debian's
//! `prometheus-pushgateway`, started by `localstack/test.sh`, its URL in
//! `SILVERLINE_PUSHGATEWAY`): runs through the binary, then what the gateway
//! serves on `/metrics` is scraped and read back. Without a gateway a push
//! fails with a warning and the run's exit code stands; a malformed URL is a
//! configuration error.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod harness;

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

use assert_cmd::Command;
use harness::{month, output, project, put_drop, run_args, silverline, summary_of};
use silverline::demo::generate::{Portfolio, double_limits};

/// The Pushgateway's URL: `$SILVERLINE_PUSHGATEWAY`.
fn gateway() -> String {
    std::env::var("SILVERLINE_PUSHGATEWAY").unwrap_or_else(|_| {
        panic!("SILVERLINE_PUSHGATEWAY is not set: bash localstack/test.sh starts a Pushgateway")
    })
}

/// Appends a `[metrics_push]` section to `config`.
fn push_to(config: &Path, url: &str, job: &str) {
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(config)
        .unwrap();
    writeln!(file, "\n[metrics_push]\nurl = \"{url}\"\njob = \"{job}\"").unwrap();
}

/// One sample the gateway serves.
#[derive(Debug)]
struct Sample {
    name: String,
    labels: BTreeMap<String, String>,
    value: f64,
}

/// Every sample the gateway serves whose `job` label is `job`.
fn scrape(gateway: &str, job: &str) -> Vec<Sample> {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let text = runtime.block_on(async {
        let response = reqwest::get(format!("{gateway}/metrics")).await.unwrap();
        assert!(response.status().is_success(), "{}", response.status());
        response.text().await.unwrap()
    });
    text.lines()
        .filter(|line| !line.starts_with('#') && !line.is_empty())
        .map(parse_sample)
        .filter(|sample| sample.labels.get("job").map(String::as_str) == Some(job))
        .collect()
}

/// `name{a="x",b="y"} value` (label values as the text format escapes them).
fn parse_sample(line: &str) -> Sample {
    let (series, value) = line.rsplit_once(' ').unwrap();
    let (name, mut rest) = series.split_once('{').unwrap_or((series, "}"));
    let mut labels = BTreeMap::new();
    while let Some((key, after)) = rest.split_once("=\"") {
        let mut value = String::new();
        let mut chars = after.char_indices();
        let end = loop {
            match chars.next().unwrap() {
                (_, '\\') => match chars.next().unwrap().1 {
                    'n' => value.push('\n'),
                    other => value.push(other),
                },
                (at, '"') => break at,
                (_, c) => value.push(c),
            }
        };
        labels.insert(key.trim_start_matches(',').to_string(), value);
        rest = &after[end + 1..];
    }
    Sample {
        name: name.to_string(),
        labels,
        value: value.parse().unwrap(),
    }
}

/// The value of the one sample named `name` whose labels include `labels`.
fn value(samples: &[Sample], name: &str, labels: &[(&str, &str)]) -> f64 {
    let found: Vec<&Sample> = samples
        .iter()
        .filter(|s| s.name == name)
        .filter(|s| {
            labels
                .iter()
                .all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(*v))
        })
        .collect();
    assert_eq!(found.len(), 1, "{name} {labels:?} in {samples:#?}");
    found[0].value
}

#[test]
#[ignore = "needs a Pushgateway: bash localstack/test.sh starts one (SILVERLINE_PUSHGATEWAY)"]
fn a_run_pushes_its_counts_rule_failures_and_labels_to_the_pushgateway() {
    let gateway = gateway();
    // A job name with a space travels as `job@base64/...`.
    let job = format!("silverline test {}", std::process::id());
    let (tmp, config) = project(|t| t);
    push_to(&config, &gateway, &job);
    let mut bank = harness::put_january(tmp.path(), "BANK_C", 12);
    let mut february = bank.statements(month(2026, 2), false);
    let damaged = double_limits(&mut february, 4) as f64;
    put_drop(tmp.path(), "BANK_C", "2026-02", &february);
    let config = config.to_str().unwrap();

    let mut dry = run_args(config, "BANK_C", "2026-01").to_vec();
    dry.push("--dry-run".to_string());
    silverline(&dry).success();
    assert!(
        scrape(&gateway, &job).is_empty(),
        "a dry run pushes nothing"
    );

    silverline(&run_args(config, "BANK_C", "2026-01")).success();
    let text = output(&silverline(&run_args(config, "BANK_C", "2026-02")).success());
    assert!(!text.contains("could not push"), "{text}");
    let samples = scrape(&gateway, &job);
    let summary = summary_of(tmp.path(), "2026-02");
    let this_drop = [
        ("dataset", "credit_statements"),
        ("contributor", "BANK_C"),
        ("drop", "2026-02"),
    ];
    let rows = |outcome| {
        let mut labels = this_drop.to_vec();
        labels.push(("outcome", outcome));
        value(&samples, "silverline_run_rows", &labels)
    };
    assert_eq!(rows("received"), 12.0);
    assert_eq!(rows("quarantined"), damaged);
    assert_eq!(rows("committed"), 12.0 - damaged);
    assert_eq!(
        rows("warned"),
        summary["counts"]["warned"].as_f64().unwrap()
    );
    assert_eq!(rows("pending"), 0.0);
    let mut rule = this_drop.to_vec();
    rule.extend([("rule", "limit_stable"), ("severity", "quarantine")]);
    assert_eq!(
        value(&samples, "silverline_run_rule_failures", &rule),
        damaged
    );
    let mut total = this_drop.to_vec();
    total.push(("stage", "total"));
    assert!(value(&samples, "silverline_run_stage_seconds", &total) > 0.0);
    let mut committed = this_drop.to_vec();
    committed.push(("status", "committed"));
    assert_eq!(value(&samples, "silverline_run_status", &committed), 1.0);
    assert_eq!(value(&samples, "silverline_run_exit_code", &this_drop), 0.0);
    let open = [("contributor", "BANK_C"), ("state", "open")];
    assert_eq!(
        value(&samples, "silverline_backlog_exceptions", &open),
        damaged
    );
    let success = value(&samples, "silverline_last_success_timestamp_seconds", &[]);
    let now = chrono::Utc::now().timestamp() as f64;
    assert!(
        (now - 600.0..=now + 1.0).contains(&success),
        "{success} vs {now}"
    );

    // A run that fails replaces the run's figures; the last success stands.
    // (A drop not arrived yet: exit 5.)
    silverline(&run_args(config, "BANK_C", "2030-01")).code(5);
    let samples = scrape(&gateway, &job);
    let missing = [("contributor", "BANK_C"), ("drop", "2030-01")];
    assert_eq!(value(&samples, "silverline_run_exit_code", &missing), 5.0);
    let mut failed = missing.to_vec();
    failed.push(("status", "failed"));
    assert_eq!(value(&samples, "silverline_run_status", &failed), 1.0);
    assert_eq!(
        value(&samples, "silverline_last_success_timestamp_seconds", &[]),
        success
    );
    assert!(value(&samples, "silverline_last_run_timestamp_seconds", &[]) >= success);
}

#[test]
fn a_run_whose_pushgateway_is_down_exits_0_with_a_warning() {
    // A loopback port nobody listens on any more.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let (tmp, config) = project(|t| t);
    push_to(&config, &format!("http://127.0.0.1:{port}"), "silverline");
    let rows = Portfolio::new("BANK_C", 6, false, 3).statements(month(2026, 1), false);
    put_drop(tmp.path(), "BANK_C", "2026-01", &rows);
    let args = run_args(config.to_str().unwrap(), "BANK_C", "2026-01");
    let text = output(&silverline(&args).success());
    assert!(text.contains("committed 6 rows"), "{text}");
    assert!(
        text.contains("could not push the run's metrics to the Pushgateway"),
        "{text}"
    );
    assert_eq!(summary_of(tmp.path(), "2026-01")["status"], "committed");
}

#[test]
fn a_malformed_pushgateway_url_is_a_configuration_error() {
    let (_tmp, config) = project(|t| t);
    push_to(&config, "127.0.0.1:9091", "silverline");
    let text = output(&silverline(&["check-config", "--config", config.to_str().unwrap()]).code(2));
    assert!(
        text.contains("metrics_push.url: '127.0.0.1:9091' is not a URL"),
        "{text}"
    );

    // The environment overrides the file: credentials are refused, not echoed.
    let assert = Command::cargo_bin("silverline")
        .unwrap()
        .env(
            "SILVERLINE__METRICS_PUSH__URL",
            "http://ops:hunter2@127.0.0.1:9091",
        )
        .args(run_args(config.to_str().unwrap(), "BANK_C", "2026-01"))
        .assert()
        .code(2);
    let text = output(&assert);
    assert!(
        text.contains("metrics_push.url: must carry no credentials"),
        "{text}"
    );
    assert!(!text.contains("hunter2"), "{text}");
}
