//! The `[alerts]` settings, validated: which alerts are raised (a rule's
//! failure rate creeping up, exceptions ageing, exceptions entering and none
//! leaving) and the webhook they are POSTed to.

use std::time::Duration;

use url::Url;

use crate::config::raw::{AlertsConfig, CreepConfig, WebhookConfig};

/// Runs before the latest that `sigma` compares with when `alerts.creep.window` is not set.
const DEFAULT_WINDOW: u32 = 6;
/// POSTs tried in all when `alerts.webhook.attempts` is not set.
const DEFAULT_ATTEMPTS: u32 = 3;
/// Seconds one POST may take when `alerts.webhook.timeout_seconds` is not set.
const DEFAULT_TIMEOUT_SECONDS: u64 = 5;
/// The header that carries the token when `alerts.webhook.token_header` is not set.
pub const AUTHORIZATION: &str = "Authorization";

/// Which alerts are raised and where they go.
#[derive(Debug, Clone, PartialEq)]
pub struct AlertSettings {
    /// Alert on open exceptions older than this many days
    /// (`exceptions.stale_after_days`); None: no age alert.
    pub stale_after_days: Option<u32>,
    /// Alert when exceptions entered in the last this many days and none left.
    pub no_exit_days: Option<u32>,
    /// When a rule's failure rate counts as creeping up.
    pub creep: Option<Creep>,
    /// Where alerts are POSTed.
    pub webhook: Option<Webhook>,
}

/// The creep tests; at least one is set.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Creep {
    /// Alert after this many rises in a row.
    pub rises_in_a_row: Option<u32>,
    /// Alert above the mean plus k standard deviations of the runs before.
    pub sigma: Option<Sigma>,
}

/// `sigma = k` over `window` runs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sigma {
    /// How many standard deviations above the mean.
    pub k: f64,
    /// How many runs before the latest make the mean and deviation.
    pub window: u32,
}

/// An HTTP endpoint alerts are POSTed to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Webhook {
    /// Where (it may carry a secret in its path: only its host is ever shown).
    pub url: Url,
    /// The token sent with each POST, read from the environment when sending.
    pub token: Option<WebhookToken>,
    /// How many times a POST is tried in all.
    pub attempts: u32,
    /// How long one POST may take.
    pub timeout: Duration,
}

/// Where the webhook's token comes from and which header carries it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebhookToken {
    /// The environment variable holding it.
    pub env: String,
    /// The header: `Authorization` carries `Bearer <token>`, another the token as it is.
    pub header: String,
}

impl AlertSettings {
    /// The settings `raw` asks for, with `stale_after_days` from
    /// `[exceptions]`; each bad setting is a problem naming it.
    pub fn check(
        raw: &AlertsConfig,
        stale_after_days: u32,
        problems: &mut Vec<String>,
    ) -> AlertSettings {
        if let Some(days) = raw.no_exit_days
            && !(1..=3650).contains(&days)
        {
            problems.push(format!(
                "alerts.no_exit_days: {days} is not between 1 and 3650"
            ));
        }
        AlertSettings {
            stale_after_days: raw.age.unwrap_or(true).then_some(stale_after_days),
            no_exit_days: raw.no_exit_days,
            creep: raw.creep.as_ref().and_then(|c| check_creep(c, problems)),
            webhook: raw
                .webhook
                .as_ref()
                .and_then(|w| check_webhook(w, problems)),
        }
    }

    /// Whether a creep test is configured (it needs the run summaries).
    pub fn watches_creep(&self) -> bool {
        self.creep.is_some()
    }
}

fn check_creep(raw: &CreepConfig, problems: &mut Vec<String>) -> Option<Creep> {
    let before = problems.len();
    if raw.rises_in_a_row.is_none() && raw.sigma.is_none() {
        problems.push("alerts.creep: set rises_in_a_row, sigma or both".to_string());
    }
    if let Some(rises) = raw.rises_in_a_row
        && !(2..=50).contains(&rises)
    {
        problems.push(format!(
            "alerts.creep.rises_in_a_row: {rises} is not between 2 and 50"
        ));
    }
    if let Some(k) = raw.sigma
        && !(k.is_finite() && k > 0.0 && k <= 10.0)
    {
        problems.push(format!(
            "alerts.creep.sigma: {k} is not above 0 and at most 10"
        ));
    }
    match (raw.window, raw.sigma) {
        (Some(_), None) => problems.push(
            "alerts.creep.window: only counts with alerts.creep.sigma, which is not set"
                .to_string(),
        ),
        (Some(window), Some(_)) if !(2..=100).contains(&window) => problems.push(format!(
            "alerts.creep.window: {window} is not between 2 and 100 runs"
        )),
        _ => {}
    }
    (problems.len() == before).then_some(Creep {
        rises_in_a_row: raw.rises_in_a_row,
        sigma: raw.sigma.map(|k| Sigma {
            k,
            window: raw.window.unwrap_or(DEFAULT_WINDOW),
        }),
    })
}

fn check_webhook(raw: &WebhookConfig, problems: &mut Vec<String>) -> Option<Webhook> {
    let before = problems.len();
    let url = check_url(&raw.url, problems);
    let token = raw.token_env.as_deref().map(|env| WebhookToken {
        env: env.to_string(),
        header: raw
            .token_header
            .clone()
            .unwrap_or_else(|| AUTHORIZATION.to_string()),
    });
    match &token {
        Some(token) => check_token(token, problems),
        None if raw.token_header.is_some() => problems.push(
            "alerts.webhook.token_header: names the header of alerts.webhook.token_env, which is not set"
                .to_string(),
        ),
        None => {}
    }
    let attempts = raw.attempts.unwrap_or(DEFAULT_ATTEMPTS);
    if !(1..=10).contains(&attempts) {
        problems.push(format!(
            "alerts.webhook.attempts: {attempts} is not between 1 and 10"
        ));
    }
    let seconds = raw.timeout_seconds.unwrap_or(DEFAULT_TIMEOUT_SECONDS);
    if !(1..=300).contains(&seconds) {
        problems.push(format!(
            "alerts.webhook.timeout_seconds: {seconds} is not between 1 and 300"
        ));
    }
    (problems.len() == before).then_some(Webhook {
        url: url?,
        token,
        attempts,
        timeout: Duration::from_secs(seconds),
    })
}

/// `text` as a webhook URL: http or https with a host. The URL is never
/// repeated (a chat service's webhook URL is itself a secret).
fn check_url(text: &str, problems: &mut Vec<String>) -> Option<Url> {
    let problem = match Url::parse(text.trim()) {
        Err(e) => format!("is not a URL ({e})"),
        Ok(url) if !matches!(url.scheme(), "http" | "https") => {
            format!("scheme '{}' is not http or https", url.scheme())
        }
        Ok(url) if url.host().is_none() => "names no host".to_string(),
        Ok(url) => return Some(url),
    };
    problems.push(format!(
        "alerts.webhook.url: {problem} (expected e.g. https://hooks.example.com/services/...)"
    ));
    None
}

fn check_token(token: &WebhookToken, problems: &mut Vec<String>) {
    let valid_name = !token.env.is_empty()
        && token
            .env
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_');
    if !valid_name {
        problems.push(format!(
            "alerts.webhook.token_env: '{}' is not an environment variable name",
            crate::error::printable(&token.env)
        ));
    }
    if reqwest::header::HeaderName::from_bytes(token.header.as_bytes()).is_err() {
        problems.push(format!(
            "alerts.webhook.token_header: '{}' is not an HTTP header name",
            crate::error::printable(&token.header)
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(raw: &AlertsConfig) -> (AlertSettings, Vec<String>) {
        let mut problems = Vec::new();
        (AlertSettings::check(raw, 30, &mut problems), problems)
    }

    #[test]
    fn an_absent_section_raises_only_the_age_alert() {
        let (settings, problems) = check(&AlertsConfig::default());
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(settings.stale_after_days, Some(30));
        assert_eq!(settings.no_exit_days, None);
        assert!(!settings.watches_creep() && settings.webhook.is_none());
    }

    #[test]
    fn creep_takes_either_test_and_window_defaults_to_6() {
        let raw = AlertsConfig {
            age: Some(false),
            creep: Some(CreepConfig {
                rises_in_a_row: Some(3),
                sigma: Some(2.0),
                window: None,
            }),
            ..AlertsConfig::default()
        };
        let (settings, problems) = check(&raw);
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(settings.stale_after_days, None);
        assert_eq!(
            settings.creep,
            Some(Creep {
                rises_in_a_row: Some(3),
                sigma: Some(Sigma { k: 2.0, window: 6 }),
            })
        );
    }

    #[test]
    fn each_bad_setting_is_named() {
        let raw = AlertsConfig {
            age: None,
            no_exit_days: Some(0),
            creep: Some(CreepConfig {
                rises_in_a_row: Some(1),
                sigma: Some(f64::NAN),
                window: Some(1),
            }),
            webhook: Some(WebhookConfig {
                url: "ftp://hooks.example.com/T000/secret-part".to_string(),
                token_env: Some("NOT A NAME".to_string()),
                token_header: Some("bad header".to_string()),
                attempts: Some(0),
                timeout_seconds: Some(0),
            }),
        };
        let (settings, problems) = check(&raw);
        let named: Vec<&str> = problems
            .iter()
            .map(|p| p.split(':').next().unwrap_or_default())
            .collect();
        assert_eq!(
            named,
            [
                "alerts.no_exit_days",
                "alerts.creep.rises_in_a_row",
                "alerts.creep.sigma",
                "alerts.creep.window",
                "alerts.webhook.url",
                "alerts.webhook.token_env",
                "alerts.webhook.token_header",
                "alerts.webhook.attempts",
                "alerts.webhook.timeout_seconds",
            ],
            "{problems:?}"
        );
        assert!(
            problems.iter().all(|p| !p.contains("secret-part")),
            "{problems:?}"
        );
        assert_eq!((settings.creep, settings.webhook), (None, None));
    }

    #[test]
    fn an_empty_creep_and_a_lone_window_are_refused_an_unset_token_variable_is_not() {
        let raw = AlertsConfig {
            creep: Some(CreepConfig {
                window: Some(4),
                ..CreepConfig::default()
            }),
            webhook: Some(WebhookConfig {
                url: "http://127.0.0.1:9/hook".to_string(),
                token_env: Some("SILVERLINE_TEST_SURELY_UNSET_TOKEN".to_string()),
                ..WebhookConfig::default()
            }),
            ..AlertsConfig::default()
        };
        let (_, problems) = check(&raw);
        // The token variable is read when alerts are sent, not here: unset,
        // the alerts are not sent (a warning), and nothing else is refused.
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(problems[0].starts_with("alerts.creep: set rises_in_a_row"));
        assert!(problems[1].starts_with("alerts.creep.window: only counts"));
    }
}
