//! Where events go: a JSON file per event in a folder, or a POST per event
//! to an HTTP endpoint, tried a few times with backoff (a refused or
//! unreachable endpoint, a 5xx or 429 answer), with a bearer token read from
//! the environment when `[lineage] api_key_env` names one.

use std::time::Duration;

use crate::config::Plan;
use crate::config::lineage::{HttpLineage, LineageTarget};
use crate::infra::http::{Retries, post_json, with_retries};
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

impl HttpSink {
    /// POSTs `body` until it is delivered, refused, or the attempts run out.
    async fn post(&self, body: Vec<u8>) -> Result<(), String> {
        let token = self.token()?;
        let header = token.as_ref().map(|t| format!("Bearer {t}"));
        let header = header.as_deref().map(|value| ("Authorization", value));
        let retries = Retries {
            attempts: HTTP_ATTEMPTS,
            first_backoff: FIRST_BACKOFF,
        };
        let post = || post_json(&self.client, &self.target.url, header, body.clone());
        with_retries(retries, "OpenLineage endpoint", post)
            .await
            .map(|_| ())
            .map_err(|problem| self.failed(&problem))
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
                self.target.url.host_str().unwrap_or_default()
            )),
        }
    }

    /// The problem of an event not delivered (the endpoint by its host only).
    fn failed(&self, problem: &str) -> String {
        format!(
            "not delivered to {}: {problem}",
            self.target.url.host_str().unwrap_or_default()
        )
    }
}
