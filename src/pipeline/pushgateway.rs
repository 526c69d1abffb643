//! Prometheus Pushgateway (optional, `[metrics_push]`): when a run ends (a
//! dry run excepted), its figures are encoded by `prometheus-client` in the
//! Prometheus text format and POSTed to the group
//! `/metrics/job/<job>/dataset/<dataset>/contributor/<contributor>`.
//!
//! A POST replaces, in that group, only the metric names it carries: every
//! run carries every per-run metric (so the latest run of a contributor is
//! what the gateway shows), while `silverline_last_success_timestamp_seconds`
//! is carried only by a run that committed, so a failure leaves the time of
//! the last success standing. A push that fails is a warning in the log: the
//! run's outcome and exit code stay what they are.

use std::sync::atomic::AtomicU64;

use prometheus_client::encoding::{EncodeLabelSet, EncodeMetric, prometheus_text};
use prometheus_client::metrics::TypedMetric;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use url::Url;

use crate::config::Plan;
use crate::config::metrics_push::MetricsPush;
use crate::error::{EXIT_COMMITTED_CONCURRENTLY, Error};
use crate::exceptions::figures::BacklogFigures;
use crate::pipeline::summary::{RunStatus, Summary};

/// A whole number of things (rows, exceptions, an exit code).
type Count = Gauge<u64, AtomicU64>;
/// Seconds (durations, Unix times).
type Seconds = Gauge<f64, AtomicU64>;

/// The labels of a run's metric that has no other.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DropLabels {
    drop: String,
}

/// `silverline_run_rows`: where the drop's rows went.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RowLabels {
    drop: String,
    outcome: &'static str,
}

/// `silverline_run_rule_failures`: one rule.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RuleLabels {
    drop: String,
    rule: String,
    severity: &'static str,
}

/// `silverline_run_stage_seconds`: one stage.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StageLabels {
    drop: String,
    stage: String,
}

/// `silverline_run_status`: how the run ended.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StatusLabels {
    drop: String,
    status: String,
}

/// `silverline_backlog_exceptions`: the contributor's backlog, by state.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BacklogLabels {
    state: &'static str,
}

/// Pushes the figures of the run `summary` describes (`error`: why it
/// failed) if `[metrics_push]` names a Pushgateway; a failed push is logged.
pub async fn push(plan: &Plan, summary: &Summary, error: Option<&Error>) {
    let Some(target) = &plan.metrics_push else {
        return;
    };
    let pushed = match (
        encode(summary, error, unix_now()),
        group_url(target, summary),
    ) {
        (Ok(body), Some(url)) => send(target, url, body).await,
        (Err(e), _) => Err(format!("cannot encode the metrics: {e}")),
        (_, None) => Err("the URL cannot take a path".to_string()),
    };
    match pushed {
        Ok(()) => tracing::info!(pushgateway = %target.url, "pushed the run's metrics"),
        Err(problem) => tracing::warn!(
            pushgateway = %target.url,
            error = %problem,
            "could not push the run's metrics to the Pushgateway; the run's outcome stands"
        ),
    }
}

/// The metrics of the run `summary` describes, at Unix time `now`, in the
/// Prometheus text format (version 0.0.4).
pub fn encode(
    summary: &Summary,
    error: Option<&Error>,
    now: f64,
) -> Result<String, std::fmt::Error> {
    let mut registry = Registry::default();
    register_outcome(&mut registry, summary, error, now);
    register_rows(&mut registry, summary);
    register_rules(&mut registry, summary);
    register_stages(&mut registry, summary);
    if let Some(backlog) = &summary.backlog {
        register_backlog(&mut registry, backlog);
    }
    let mut text = String::new();
    prometheus_text::encode(&mut text, &registry)?;
    Ok(text)
}

/// A family of gauges `M` registered as `name`.
fn family<S, M>(registry: &mut Registry, name: &str, help: &str) -> Family<S, M>
where
    S: EncodeLabelSet + Clone + std::hash::Hash + Eq + std::fmt::Debug + Send + Sync + 'static,
    M: EncodeMetric + TypedMetric + Default + std::fmt::Debug + Send + Sync + 'static,
{
    let family = Family::<S, M>::default();
    registry.register(name, help, family.clone());
    family
}

/// A gauge without labels registered as `name`, set to `value`.
fn single(registry: &mut Registry, name: &str, help: &str, value: f64) {
    let gauge = Seconds::default();
    gauge.set(value);
    registry.register(name, help, gauge);
}

/// Status, exit code, and the times of the last run and last success.
fn register_outcome(registry: &mut Registry, summary: &Summary, error: Option<&Error>, now: f64) {
    let drop = summary.drop_id.clone();
    let status = family::<StatusLabels, Count>(
        registry,
        "silverline_run_status",
        "1 for how the contributor's latest run ended (label status)",
    );
    let status_name = status_name(summary, error);
    let code = exit_code(summary, error);
    status
        .get_or_create(&StatusLabels {
            drop: drop.clone(),
            status: status_name,
        })
        .set(1u64);
    let exit = family::<DropLabels, Count>(
        registry,
        "silverline_run_exit_code",
        "The exit code of the contributor's latest run",
    );
    exit.get_or_create(&DropLabels { drop })
        .set(u64::from(code));
    single(
        registry,
        "silverline_last_run_timestamp_seconds",
        "When the contributor's latest run ended (Unix time)",
        now,
    );
    if error.is_none() && summary.status == RunStatus::Committed {
        single(
            registry,
            "silverline_last_success_timestamp_seconds",
            "When a run of the contributor last committed a drop (Unix time)",
            now,
        );
    }
}

/// The drop's rows by outcome: received, committed (warned among them),
/// quarantined, dropped, pending.
fn register_rows(registry: &mut Registry, summary: &Summary) {
    let rows = family::<RowLabels, Count>(
        registry,
        "silverline_run_rows",
        "Rows of the contributor's latest run, by outcome",
    );
    let counts = &summary.counts;
    for (outcome, value) in [
        ("received", counts.received),
        ("committed", counts.committed),
        ("warned", counts.warned),
        ("quarantined", counts.quarantined),
        ("dropped", counts.dropped),
        ("pending", counts.pending),
    ] {
        let labels = RowLabels {
            drop: summary.drop_id.clone(),
            outcome,
        };
        rows.get_or_create(&labels).set(value);
    }
}

/// Rows each rule failed (zero included: every rule the run evaluated).
fn register_rules(registry: &mut Registry, summary: &Summary) {
    let failures = family::<RuleLabels, Count>(
        registry,
        "silverline_run_rule_failures",
        "Rows of the contributor's latest run that failed each rule",
    );
    for outcome in &summary.rules {
        let labels = RuleLabels {
            drop: summary.drop_id.clone(),
            rule: outcome.rule.clone(),
            severity: outcome.severity.as_str(),
        };
        failures.get_or_create(&labels).set(outcome.failed);
    }
}

/// How long each stage took, and the whole run (`total`).
fn register_stages(registry: &mut Registry, summary: &Summary) {
    let stages = family::<StageLabels, Seconds>(
        registry,
        "silverline_run_stage_seconds",
        "How long each stage of the contributor's latest run took",
    );
    for (stage, ms) in &summary.timings_ms {
        let labels = StageLabels {
            drop: summary.drop_id.clone(),
            stage: stage.clone(),
        };
        stages.get_or_create(&labels).set(*ms as f64 / 1000.0);
    }
}

/// The contributor's open exceptions after the run, and the oldest one's age.
fn register_backlog(registry: &mut Registry, backlog: &BacklogFigures) {
    let open = family::<BacklogLabels, Count>(
        registry,
        "silverline_backlog_exceptions",
        "The contributor's open exceptions after its latest committed run, by state (open, pending, quarantined, missing, stale)",
    );
    for (state, value) in [
        ("open", backlog.open),
        ("pending", backlog.pending),
        ("quarantined", backlog.quarantined),
        ("missing", backlog.missing),
        ("stale", backlog.stale),
    ] {
        open.get_or_create(&BacklogLabels { state }).set(value);
    }
    // Always pushed (0 with nothing open): a push replaces only the names it
    // carries, so an age left out would keep the last one on the gateway.
    let oldest = Count::default();
    oldest.set(backlog.oldest_age_days.unwrap_or(0));
    registry.register(
        "silverline_backlog_oldest_age_days",
        "Age of the contributor's oldest open exception, in whole days (0: none open)",
        oldest,
    );
}

/// The run's status as its summary names it; `failed` when it failed.
fn status_name(summary: &Summary, error: Option<&Error>) -> String {
    let status = if error.is_some() {
        RunStatus::Failed
    } else {
        summary.status
    };
    serde_json::to_value(status)
        .ok()
        .and_then(|value| value.as_str().map(str::to_string))
        .unwrap_or_default()
}

/// The exit code the run ends with (README, exit codes).
fn exit_code(summary: &Summary, error: Option<&Error>) -> u8 {
    match error {
        Some(error) => error.class().exit_code(),
        None if summary.status == RunStatus::CommittedConcurrently => EXIT_COMMITTED_CONCURRENTLY,
        None => 0,
    }
}

/// The push URL of the run's group: job, dataset, contributor (`None` for a
/// base URL that cannot take a path, which the configuration check refuses).
fn group_url(target: &MetricsPush, summary: &Summary) -> Option<Url> {
    let mut url = target.url.clone();
    {
        let mut segments = url.path_segments_mut().ok()?;
        segments.pop_if_empty().push("metrics");
        for (name, value) in [
            ("job", target.job.as_str()),
            ("dataset", summary.dataset.as_str()),
            ("contributor", summary.contributor.as_str()),
        ] {
            let (name, value) = group_segments(name, value);
            segments.push(&name).push(&value);
        }
    }
    Some(url)
}

/// A grouping label as two path segments: as it is when it is letters,
/// digits, `_` and `-`; else in the Pushgateway's `<name>@base64` form
/// (base64url; `=` for an empty value).
fn group_segments(name: &str, value: &str) -> (String, String) {
    use base64::Engine;
    let plain = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '-');
    if !value.is_empty() && value.chars().all(plain) {
        return (name.to_string(), value.to_string());
    }
    let encoded = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(value);
    let encoded = if encoded.is_empty() {
        "=".to_string()
    } else {
        encoded
    };
    (format!("{name}@base64"), encoded)
}

/// POSTs `body` to `url` within the configured time; the problem, if any.
async fn send(target: &MetricsPush, url: Url, body: String) -> Result<(), String> {
    let client = reqwest::Client::builder()
        .timeout(target.timeout)
        .build()
        .map_err(|e| crate::error::chain(&e))?;
    let response = client
        .post(url)
        .header(reqwest::header::CONTENT_TYPE, prometheus_text::CONTENT_TYPE)
        .body(body)
        .send()
        .await
        .map_err(|e| crate::error::chain(&e))?;
    let status = response.status();
    if status.is_success() {
        return Ok(());
    }
    let answer = response.text().await.unwrap_or_default();
    Err(format!(
        "the Pushgateway answered {status}: {}",
        crate::error::printable(answer.trim())
    ))
}

/// Now, as Unix time in seconds.
fn unix_now() -> f64 {
    chrono::Utc::now().timestamp_millis() as f64 / 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::rules::{Scope, Severity};
    use crate::core::drop::DropRef;
    use crate::pipeline::evaluate::RuleOutcome;

    fn plan() -> Plan {
        crate::config::load_plan(std::path::Path::new("config/credit_statements.toml"))
            .expect("the shipped config")
    }

    /// A committed run of BANK_C's drop 2026-02: 10 rows, 2 quarantined by
    /// `limit_stable`, 1 warned; read took 512 ms; 3 exceptions open.
    fn committed() -> Summary {
        let drop = DropRef::new("BANK_C", "2026-02").expect("a drop");
        let mut summary = Summary::new(&plan(), &drop, "bank", &[]);
        summary.status = RunStatus::Committed;
        summary.counts.received = 10;
        summary.counts.committed = 8;
        summary.counts.warned = 1;
        summary.counts.quarantined = 2;
        summary.rules = vec![RuleOutcome {
            rule: "limit_stable".to_string(),
            scope: Scope::Row,
            severity: Severity::Quarantine,
            trend: true,
            passed: 8,
            failed: 2,
            skipped_no_baseline: 0,
            not_applicable: 0,
            escalated: false,
        }];
        summary.timings_ms.insert("read".to_string(), 512);
        summary.backlog = Some(BacklogFigures {
            open: 3,
            quarantined: 3,
            oldest_age_days: Some(12),
            ..BacklogFigures::default()
        });
        summary
    }

    fn lines(text: &str) -> Vec<&str> {
        text.lines().filter(|l| !l.starts_with('#')).collect()
    }

    #[test]
    fn a_committed_run_pushes_rows_rules_stages_status_and_its_success() {
        let text = encode(&committed(), None, 1_700_000_000.5).expect("encoded");
        let samples = lines(&text);
        for expected in [
            r#"silverline_run_rows{drop="2026-02",outcome="received"} 10"#,
            r#"silverline_run_rows{drop="2026-02",outcome="committed"} 8"#,
            r#"silverline_run_rows{drop="2026-02",outcome="warned"} 1"#,
            r#"silverline_run_rows{drop="2026-02",outcome="quarantined"} 2"#,
            r#"silverline_run_rows{drop="2026-02",outcome="dropped"} 0"#,
            r#"silverline_run_rows{drop="2026-02",outcome="pending"} 0"#,
            r#"silverline_run_rule_failures{drop="2026-02",rule="limit_stable",severity="quarantine"} 2"#,
            r#"silverline_run_stage_seconds{drop="2026-02",stage="read"} 0.512"#,
            r#"silverline_run_status{drop="2026-02",status="committed"} 1"#,
            r#"silverline_run_exit_code{drop="2026-02"} 0"#,
            "silverline_last_run_timestamp_seconds 1700000000.5",
            "silverline_last_success_timestamp_seconds 1700000000.5",
            r#"silverline_backlog_exceptions{state="open"} 3"#,
            r#"silverline_backlog_exceptions{state="stale"} 0"#,
            "silverline_backlog_oldest_age_days 12",
        ] {
            assert!(samples.contains(&expected), "{expected} not in\n{text}");
        }
        assert!(text.contains("# TYPE silverline_run_rows gauge"), "{text}");
    }

    #[test]
    fn a_failed_run_pushes_its_exit_code_and_no_success() {
        let mut summary = committed();
        summary.status = RunStatus::Failed;
        let error = Error::Usage {
            arg: "--drop".to_string(),
            reason: "test".to_string(),
        };
        let text = encode(&summary, Some(&error), 5.0).expect("encoded");
        let samples = lines(&text);
        assert!(
            samples.contains(&r#"silverline_run_status{drop="2026-02",status="failed"} 1"#),
            "{text}"
        );
        assert!(
            samples.contains(&r#"silverline_run_exit_code{drop="2026-02"} 2"#),
            "{text}"
        );
        assert!(!text.contains("silverline_last_success"), "{text}");
    }

    #[test]
    fn a_run_that_lost_the_race_pushes_exit_code_4_and_no_success() {
        let mut summary = committed();
        summary.status = RunStatus::CommittedConcurrently;
        summary.backlog = None;
        let text = encode(&summary, None, 5.0).expect("encoded");
        assert!(
            lines(&text).contains(&r#"silverline_run_exit_code{drop="2026-02"} 4"#),
            "{text}"
        );
        assert!(!text.contains("silverline_last_success"), "{text}");
        assert!(!text.contains("silverline_backlog"), "{text}");
    }

    #[test]
    fn the_group_is_job_dataset_and_contributor_odd_values_in_base64() {
        let summary = committed();
        let mut target = MetricsPush {
            url: Url::parse("http://127.0.0.1:9091").expect("url"),
            job: "silverline".to_string(),
            timeout: std::time::Duration::from_secs(1),
        };
        let url = group_url(&target, &summary).expect("a path");
        assert_eq!(
            url.as_str(),
            "http://127.0.0.1:9091/metrics/job/silverline/dataset/credit_statements/contributor/BANK_C"
        );
        target.url = Url::parse("https://gw.example:8443/push/").expect("url");
        target.job = "nightly/eu".to_string();
        let url = group_url(&target, &summary).expect("a path");
        assert_eq!(
            url.as_str(),
            "https://gw.example:8443/push/metrics/job@base64/bmlnaHRseS9ldQ/dataset/credit_statements/contributor/BANK_C"
        );
        assert_eq!(
            group_segments("dataset", ""),
            ("dataset@base64".to_string(), "=".to_string())
        );
        assert_eq!(
            group_segments("contributor", "BANK.C"),
            ("contributor@base64".to_string(), "QkFOSy5D".to_string())
        );
    }
}
