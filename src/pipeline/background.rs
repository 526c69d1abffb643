//! Work a run starts ahead of the stage that needs it (loading reference
//! keys, measuring committed periods), on the runtime's other threads. If the
//! run stops before it is needed, the work is cancelled, not left running.
//! It logs in the run's span, and says at debug level how long it took.

use std::future::Future;

use tokio::task::JoinHandle;
use tracing::Instrument;

use crate::error::{Error, Result};

/// A piece of work running in the background.
pub struct Background<T> {
    task: JoinHandle<Result<T>>,
    what: &'static str,
}

impl<T: Send + 'static> Background<T> {
    /// Starts `work`; `what` names it in errors.
    pub fn spawn(
        what: &'static str,
        work: impl Future<Output = Result<T>> + Send + 'static,
    ) -> Self {
        let started = std::time::Instant::now();
        let timed = async move {
            let done = work.await;
            let ms = started.elapsed().as_millis() as u64;
            tracing::debug!(ms, ok = done.is_ok(), "{what}: done");
            done
        };
        Background {
            task: tokio::spawn(timed.in_current_span()),
            what,
        }
    }

    /// Waits for the work and returns what it gave.
    pub async fn join(mut self) -> Result<T> {
        (&mut self.task)
            .await
            .map_err(|e| Error::Internal(format!("{}: {e}", self.what)))?
    }
}

impl<T> Drop for Background<T> {
    fn drop(&mut self) {
        self.task.abort();
    }
}
