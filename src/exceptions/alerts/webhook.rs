//! Alerts POSTed to `[alerts.webhook]`: generic JSON (`dataset`, `origin`,
//! `alerts`) with a `text` field a chat service (Slack's incoming webhooks)
//! shows as it is. A POST that fails (no answer, 429 or 5xx) is tried again
//! after 0.5 s, 1 s, 2 s ..., up to `attempts` in all; a delivery that fails
//! for good is a warning in the log and changes no exit code.

use serde::Serialize;

use super::{Alert, alert_lines};
use crate::config::alerts::{AUTHORIZATION, Webhook, WebhookToken};
use crate::infra::http::{Retries, post_json, with_retries};

/// The first wait before a POST is tried again, in milliseconds; it doubles each time.
const FIRST_BACKOFF_MS: u64 = 500;

/// What raised the alerts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Origin {
    /// A committed run (its contributor's alerts).
    Run,
    /// `silverline backlog --check --notify`.
    Check,
}

/// The body of a POST.
#[derive(Debug, Serialize)]
pub struct Payload<'a> {
    /// One line per alert, for a chat service.
    pub text: String,
    /// Dataset name.
    pub dataset: &'a str,
    /// What raised them.
    pub origin: Origin,
    /// The alerts.
    pub alerts: &'a [Alert],
}

impl<'a> Payload<'a> {
    /// The body announcing `alerts` of `dataset`.
    pub fn new(dataset: &'a str, origin: Origin, alerts: &'a [Alert]) -> Payload<'a> {
        let mut lines = vec![format!("silverline {dataset}: {} alert(s)", alerts.len())];
        lines.extend(alert_lines(alerts).into_iter().map(|l| format!("- {l}")));
        Payload {
            text: lines.join("\n"),
            dataset,
            origin,
            alerts,
        }
    }
}

/// POSTs `alerts` (none: nothing sent) to `webhook`; says in the log whether
/// they were delivered. The URL is shown by its host only.
pub async fn notify(webhook: &Webhook, payload: &Payload<'_>) -> bool {
    if payload.alerts.is_empty() {
        return true;
    }
    let host = webhook.url.host_str().unwrap_or_default().to_string();
    match deliver(webhook, payload).await {
        Ok(attempt) => {
            tracing::info!(webhook = %host, alerts = payload.alerts.len(), attempt, "alerts delivered");
            true
        }
        Err(problem) => {
            tracing::warn!(webhook = %host, alerts = payload.alerts.len(), error = %problem, "could not deliver the alerts to the webhook");
            false
        }
    }
}

/// Tries the POST up to `attempts` times; the attempt that delivered, or the last problem.
async fn deliver(webhook: &Webhook, payload: &Payload<'_>) -> Result<u32, String> {
    let client = reqwest::Client::builder()
        .timeout(webhook.timeout)
        .build()
        .map_err(|e| e.to_string())?;
    let body = serde_json::to_vec(payload).map_err(|e| e.to_string())?;
    let header = match &webhook.token {
        Some(token) => Some((token.header.as_str(), token_value(token)?)),
        None => None,
    };
    let header = header.as_ref().map(|(name, value)| (*name, value.as_str()));
    let retries = Retries {
        attempts: webhook.attempts,
        first_backoff: std::time::Duration::from_millis(FIRST_BACKOFF_MS),
    };
    let post = || post_json(&client, &webhook.url, header, body.clone());
    with_retries(retries, "alerts webhook", post).await
}

/// The header value carrying `token`, read from the environment only now (a
/// command that sends nothing does not need it).
fn token_value(token: &WebhookToken) -> Result<String, String> {
    let value = std::env::var(&token.env).unwrap_or_default();
    if value.trim().is_empty() {
        return Err(format!(
            "environment variable {} (alerts.webhook.token_env) is not set",
            token.env
        ));
    }
    Ok(match token.header.eq_ignore_ascii_case(AUTHORIZATION) {
        true => format!("Bearer {}", value.trim()),
        false => value.trim().to_string(),
    })
}
