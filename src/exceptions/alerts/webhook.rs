//! Alerts POSTed to `[alerts.webhook]`: generic JSON (`dataset`, `origin`,
//! `alerts`) with a `text` field a chat service (Slack's incoming webhooks)
//! shows as it is. A POST that fails (no answer, 429 or 5xx) is tried again
//! after 0.5 s, 1 s, 2 s ..., up to `attempts` in all; a delivery that fails
//! for good is a warning in the log and changes no exit code.

use serde::Serialize;

use super::{Alert, alert_lines};
use crate::config::alerts::{AUTHORIZATION, Webhook};
use crate::error::error_chain;

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
    let mut backoff = std::time::Duration::from_millis(FIRST_BACKOFF_MS);
    for attempt in 1..=webhook.attempts {
        match post(&client, webhook, body.clone()).await {
            Ok(()) => return Ok(attempt),
            Err(Retry::Never(problem)) => return Err(problem),
            Err(Retry::Later(problem)) if attempt == webhook.attempts => {
                return Err(format!("{problem} (after {attempt} attempts)"));
            }
            Err(Retry::Later(problem)) => {
                tracing::warn!(attempt, error = %problem, "the webhook POST failed: trying again");
                tokio::time::sleep(backoff).await;
                backoff *= 2;
            }
        }
    }
    Err("no attempt was made".to_string())
}

/// Why a POST failed, and whether trying again may help.
enum Retry {
    /// No answer, 429 or a server error.
    Later(String),
    /// Refused as sent (another 4xx): the same POST would be refused again.
    Never(String),
}

async fn post(client: &reqwest::Client, webhook: &Webhook, body: Vec<u8>) -> Result<(), Retry> {
    let mut request = client
        .post(webhook.url.clone())
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .body(body);
    if let Some(token) = &webhook.token {
        // Read only now: a command that sends nothing does not need it.
        let value = std::env::var(&token.env).unwrap_or_default();
        if value.trim().is_empty() {
            return Err(Retry::Never(format!(
                "environment variable {} (alerts.webhook.token_env) is not set",
                token.env
            )));
        }
        let value = if token.header.eq_ignore_ascii_case(AUTHORIZATION) {
            format!("Bearer {}", value.trim())
        } else {
            value.trim().to_string()
        };
        request = request.header(token.header.as_str(), value);
    }
    // Without its URL: a chat's webhook URL is a secret. A request that
    // cannot be built (a token no header may carry) is never retried.
    let response = request.send().await.map_err(|e| {
        let builder = e.is_builder();
        let reason = error_chain(&e.without_url());
        match builder {
            true => Retry::Never(reason),
            false => Retry::Later(reason),
        }
    })?;
    let status = response.status();
    match status.as_u16() {
        200..=299 => Ok(()),
        429 | 500..=599 => Err(Retry::Later(format!("the webhook answered {status}"))),
        _ => Err(Retry::Never(format!("the webhook answered {status}"))),
    }
}
