//! The run summaries under `<dq_error>/summaries/`, read back: the report
//! charts them, and the creep alert follows each rule's failure rate in them.

use futures::{StreamExt, TryStreamExt};

use crate::error::Result;
use crate::infra::storage::Location;

/// How many summaries are fetched at once.
const SUMMARY_READS: usize = 16;

/// The folder of the run summaries under the dq_error root.
pub const SUMMARIES: &str = "summaries";

/// One summary file, parsed as JSON (read by field: a summary of any version reads).
#[derive(Debug, Clone)]
pub struct SummaryFile {
    /// Its path or URL.
    pub url: String,
    /// Its content.
    pub summary: serde_json::Value,
}

impl SummaryFile {
    /// The text of top-level field `name` ("" when absent).
    pub fn text(&self, name: &str) -> &str {
        self.summary[name].as_str().unwrap_or_default()
    }

    /// When the run finished, or started when it never finished (RFC 3339).
    pub fn at(&self) -> &str {
        self.summary["finished_at"]
            .as_str()
            .unwrap_or_else(|| self.text("started_at"))
    }
}

/// Every summary under `<dq_error>/summaries/` (only `contributor`'s when
/// given); a file that is not JSON is skipped with a warning.
pub async fn read_summaries(
    dq_error: &Location,
    contributor: Option<&str>,
) -> Result<Vec<SummaryFile>> {
    let folder = contributor.map(|c| format!("/contributor={c}/"));
    let paths: Vec<String> = dq_error
        .list(SUMMARIES)
        .await?
        .into_iter()
        .map(|o| o.relative)
        .filter(|p| p.ends_with(".json"))
        .filter(|p| folder.as_ref().is_none_or(|f| p.contains(f.as_str())))
        .collect();
    let files: Vec<Option<SummaryFile>> = futures::stream::iter(paths)
        .map(|path| async move {
            let bytes = dq_error.get(&path).await?;
            Ok::<_, crate::Error>(parse(&bytes, dq_error.url_of(&path)))
        })
        .buffer_unordered(SUMMARY_READS)
        .try_collect()
        .await?;
    Ok(files
        .into_iter()
        .flatten()
        .filter(|f| contributor.is_none_or(|c| f.text("contributor") == c))
        .collect())
}

fn parse(bytes: &[u8], url: String) -> Option<SummaryFile> {
    match serde_json::from_slice(bytes) {
        Ok(summary) => Some(SummaryFile { url, summary }),
        Err(error) => {
            tracing::warn!(summary = %url, error = %error, "not a run summary: skipped");
            None
        }
    }
}
