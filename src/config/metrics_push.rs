//! The `[metrics_push]` settings, validated: where each run's metrics go
//! (a Prometheus Pushgateway), under which `job`, and how long a push may take.

use std::time::Duration;

use url::Url;

use crate::config::raw::MetricsPushConfig;

/// The `job` grouping label when `metrics_push.job` is not set.
pub const DEFAULT_JOB: &str = "silverline";

/// Seconds a push may take when `metrics_push.timeout_seconds` is not set.
const DEFAULT_TIMEOUT_SECONDS: u64 = 5;

/// The longest `metrics_push.timeout_seconds` allowed: a push never holds a
/// finished run for long.
const MAX_TIMEOUT_SECONDS: u64 = 300;

/// A Pushgateway that receives each run's metrics.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetricsPush {
    /// The Pushgateway's base URL (http or https, no query, no credentials).
    pub url: Url,
    /// The `job` grouping label.
    pub job: String,
    /// How long one push may take.
    pub timeout: Duration,
}

impl MetricsPush {
    /// The push `raw` asks for (`None` when no URL is set), or the problems
    /// of its settings, each naming the setting.
    pub fn check(raw: &MetricsPushConfig, problems: &mut Vec<String>) -> Option<MetricsPush> {
        let text = raw
            .url
            .as_deref()
            .map(str::trim)
            .filter(|t| !t.is_empty())?;
        let url = check_url(text, problems);
        let job = raw.job.clone().unwrap_or_else(|| DEFAULT_JOB.to_string());
        if job.trim().is_empty() {
            problems.push("metrics_push.job: must not be empty".to_string());
        }
        let seconds = raw.timeout_seconds.unwrap_or(DEFAULT_TIMEOUT_SECONDS);
        if !(1..=MAX_TIMEOUT_SECONDS).contains(&seconds) {
            problems.push(format!(
                "metrics_push.timeout_seconds: {seconds} is not between 1 and {MAX_TIMEOUT_SECONDS}"
            ));
        }
        Some(MetricsPush {
            url: url?,
            job,
            timeout: Duration::from_secs(seconds),
        })
    }
}

/// `text` as a Pushgateway base URL: http or https, a host, no query or
/// fragment, no credentials (they would show in logs; the problem does not
/// repeat such a URL).
fn check_url(text: &str, problems: &mut Vec<String>) -> Option<Url> {
    let shown = |problem: String| {
        format!(
            "metrics_push.url: '{}' {problem} (expected e.g. http://pushgateway:9091)",
            crate::error::printable(text)
        )
    };
    let problem = match Url::parse(text) {
        Err(e) => shown(format!("is not a URL ({e})")),
        Ok(url) if !url.username().is_empty() || url.password().is_some() => {
            "metrics_push.url: must carry no credentials".to_string()
        }
        Ok(url) if !matches!(url.scheme(), "http" | "https") => {
            shown(format!("scheme '{}' is not http or https", url.scheme()))
        }
        Ok(url) if url.host().is_none() => shown("names no host".to_string()),
        Ok(url) if url.query().is_some() || url.fragment().is_some() => {
            shown("must have no query or fragment".to_string())
        }
        Ok(url) => return Some(url),
    };
    problems.push(problem);
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(
        url: &str,
        job: Option<&str>,
        timeout: Option<u64>,
    ) -> (Option<MetricsPush>, Vec<String>) {
        let raw = MetricsPushConfig {
            url: Some(url.to_string()),
            job: job.map(str::to_string),
            timeout_seconds: timeout,
        };
        let mut problems = Vec::new();
        (MetricsPush::check(&raw, &mut problems), problems)
    }

    #[test]
    fn a_url_alone_pushes_as_job_silverline_within_5_seconds() {
        let (push, problems) = check("http://127.0.0.1:9091", None, None);
        assert!(problems.is_empty(), "{problems:?}");
        let push = push.unwrap();
        assert_eq!(push.url.as_str(), "http://127.0.0.1:9091/");
        assert_eq!(push.job, "silverline");
        assert_eq!(push.timeout, Duration::from_secs(5));
    }

    #[test]
    fn no_url_or_an_empty_one_pushes_nothing() {
        let mut problems = Vec::new();
        assert_eq!(
            MetricsPush::check(&MetricsPushConfig::default(), &mut problems),
            None
        );
        assert_eq!(check("  ", Some(""), Some(0)), (None, Vec::new()));
        assert!(problems.is_empty());
    }

    #[test]
    fn each_bad_setting_is_named() {
        for (url, expected) in [
            ("pushgateway:9091", "scheme 'pushgateway'"),
            ("127.0.0.1:9091", "is not a URL"),
            ("ftp://host:21", "scheme 'ftp'"),
            ("http://host:9091/?x=1", "no query"),
            ("http://user:secret@host:9091", "no credentials"),
        ] {
            let (push, problems) = check(url, None, None);
            assert_eq!(push, None, "{url}");
            assert_eq!(problems.len(), 1, "{problems:?}");
            assert!(
                problems[0].starts_with("metrics_push.url:") && problems[0].contains(expected),
                "{url}: {problems:?}"
            );
            assert!(!problems[0].contains("secret"), "{problems:?}");
        }
        let (_, problems) = check("http://host:9091", Some(" "), Some(0));
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(problems[0].starts_with("metrics_push.job:"), "{problems:?}");
        assert!(
            problems[1].starts_with("metrics_push.timeout_seconds: 0"),
            "{problems:?}"
        );
    }
}
