//! Where events go: a JSON file per event in a folder, or a POST per event
//! to an HTTP endpoint, tried a few times with backoff (a refused or
//! unreachable endpoint, a 5xx or 429 answer), with a bearer token read from
//! the environment when `[lineage] api_key_env` names one.

use std::time::Duration;

use crate::config::Plan;
use crate::config::lineage::{HttpLineage, LineageTarget};
use crate::infra::storage::{Location, Stores};

/// How many times one event is POSTed before it is given up.
const HTTP_ATTEMPTS: u32 = 3;

/// The wait before the second attempt; doubled before each later one.
const FIRST_BACKOFF: Duration = Duration::from_millis(200);

/// How long one POST may take.
const HTTP_TIMEOUT: Duration = Duration::from_secs(5);

/// An open lineage target.
pub(super) enum Sink {
    /// A folder: one file per event.
    Folder(Location),
    /// An endpoint: one POST per event.
    Http(HttpSink),
}

/// An endpoint and the client that posts to it.
pub(super) struct HttpSink {
    target: HttpLineage,
    client: reqwest::Client,
}

impl Sink {
    /// Opens `target`; the problem, if it cannot be.
    pub(super) async fn open(plan: &Plan, target: &LineageTarget) -> Result<Sink, String> {
        match target {
            LineageTarget::Folder(url) => {
                // The folder is passed as the store that may need S3 credentials.
                let stores = Stores::new(&plan.storage, url)
                    .await
                    .map_err(|e| e.to_string())?;
                let folder = stores
                    .open(url, "lineage.location")
                    .map_err(|e| e.to_string())?;
                Ok(Sink::Folder(folder))
            }
            LineageTarget::Http(target) => {
                let client = reqwest::Client::builder()
                    .timeout(HTTP_TIMEOUT)
                    .build()
                    .map_err(|e| crate::error::error_chain(&e))?;
                Ok(Sink::Http(HttpSink {
                    target: target.clone(),
                    client,
                }))
            }
        }
    }

    /// Delivers one event (`file`: its name in a folder); the problem, if
    /// it could not be delivered.
    pub(super) async fn send(&self, file: &str, body: Vec<u8>) -> Result<(), String> {
        match self {
            Sink::Folder(folder) => folder.put(file, body).await.map_err(|e| e.to_string()),
            Sink::Http(http) => http.post(body).await,
        }
    }
}

/// What one POST came to.
enum Posted {
    Delivered,
    /// Worth trying again (unreachable, 5xx, 429).
    Retry(String),
    /// Refused for good (another 4xx).
    Refused(String),
}

impl HttpSink {
    /// POSTs `body` until it is delivered, refused, or the attempts run out.
    async fn post(&self, body: Vec<u8>) -> Result<(), String> {
        let token = self.token()?;
        let mut backoff = FIRST_BACKOFF;
        let mut attempt = 1;
        loop {
            match self.post_once(&body, token.as_deref()).await {
                Posted::Delivered => return Ok(()),
                Posted::Refused(problem) => return Err(self.failed(&problem, attempt)),
                Posted::Retry(problem) if attempt >= HTTP_ATTEMPTS => {
                    return Err(self.failed(&problem, attempt));
                }
                Posted::Retry(problem) => {
                    tracing::debug!(attempt, problem = %problem, "OpenLineage endpoint: trying again");
                    tokio::time::sleep(backoff).await;
                    backoff *= 2;
                    attempt += 1;
                }
            }
        }
    }

    /// One POST.
    async fn post_once(&self, body: &[u8], token: Option<&str>) -> Posted {
        let mut request = self
            .client
            .post(self.target.url.clone())
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body.to_vec());
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        let status = match request.send().await {
            Ok(response) => response.status(),
            Err(e) => return Posted::Retry(crate::error::error_chain(&e)),
        };
        if status.is_success() {
            Posted::Delivered
        } else if status.is_server_error() || status == reqwest::StatusCode::TOO_MANY_REQUESTS {
            Posted::Retry(format!("the endpoint answered {status}"))
        } else {
            Posted::Refused(format!("the endpoint answered {status}"))
        }
    }

    /// The bearer token, when `api_key_env` names one; an error when the
    /// variable it names is not set (never the token itself).
    fn token(&self) -> Result<Option<String>, String> {
        let Some(name) = &self.target.api_key_env else {
            return Ok(None);
        };
        match std::env::var(name) {
            Ok(token) if !token.is_empty() => Ok(Some(token)),
            _ => Err(format!(
                "lineage.api_key_env names {name}, which is not set: nothing sent to {}",
                self.target.url
            )),
        }
    }

    /// The problem of an event not delivered.
    fn failed(&self, problem: &str, attempts: u32) -> String {
        format!(
            "not delivered to {} after {attempts} attempt(s): {problem}",
            self.target.url
        )
    }
}
