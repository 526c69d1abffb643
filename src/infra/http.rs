//! JSON POSTs that are delivered or say why (OpenLineage events, alert
//! webhooks): a POST that gets no answer, 429 or a 5xx is tried again after
//! a wait that doubles each time; any other answer but a success is final.
//! A problem never names the URL (a webhook's URL is often its secret).

use std::future::Future;
use std::time::Duration;

use reqwest::header::{CONTENT_TYPE, HeaderName, HeaderValue};

use crate::error::error_chain;

/// What one POST came to.
pub(crate) enum Posted {
    /// A success status.
    Delivered,
    /// Worth trying again (no answer, 429, a server error).
    Retry(String),
    /// Refused as sent: the same POST would be refused again.
    Refused(String),
}

/// How many POSTs in all, and the first wait between two.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Retries {
    /// POSTs in all (at least one is made).
    pub attempts: u32,
    /// The wait after the first failure; it doubles after each.
    pub first_backoff: Duration,
}

/// POSTs `body` as JSON to `url` with `header` (a token, say), once.
pub(crate) async fn post_json(
    client: &reqwest::Client,
    url: &url::Url,
    header: Option<(&str, &str)>,
    body: Vec<u8>,
) -> Posted {
    let mut request = client
        .post(url.clone())
        .header(CONTENT_TYPE, "application/json")
        .body(body);
    if let Some((name, value)) = header {
        let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(name.as_bytes()),
            HeaderValue::from_str(value),
        ) else {
            return Posted::Refused(format!("header {name} cannot carry the token"));
        };
        request = request.header(name, value);
    }
    match request.send().await {
        Ok(response) => of_status(response.status()),
        Err(e) if e.is_builder() => Posted::Refused(error_chain(&e.without_url())),
        Err(e) => Posted::Retry(error_chain(&e.without_url())),
    }
}

fn of_status(status: reqwest::StatusCode) -> Posted {
    if status.is_success() {
        Posted::Delivered
    } else if status.is_server_error() || status == reqwest::StatusCode::TOO_MANY_REQUESTS {
        Posted::Retry(format!("the endpoint answered {status}"))
    } else {
        Posted::Refused(format!("the endpoint answered {status}"))
    }
}

/// Calls `post` until it is delivered, refused, or `retries` run out; the
/// attempt that delivered, or the last problem with the attempts made.
/// `what` names the POSTs in the log line of each retry.
pub(crate) async fn with_retries<F, Fut>(
    retries: Retries,
    what: &str,
    mut post: F,
) -> Result<u32, String>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Posted>,
{
    let mut backoff = retries.first_backoff;
    let mut attempt = 1;
    loop {
        match post().await {
            Posted::Delivered => return Ok(attempt),
            Posted::Refused(problem) => return Err(problem),
            Posted::Retry(problem) if attempt >= retries.attempts => {
                return Err(format!("{problem} (after {attempt} attempts)"));
            }
            Posted::Retry(problem) => {
                tracing::warn!(attempt, error = %problem, "{what}: the POST failed, trying again");
                tokio::time::sleep(backoff).await;
                backoff *= 2;
                attempt += 1;
            }
        }
    }
}
