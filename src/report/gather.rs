//! Gathers what `silverline backlog` and `silverline report` show from the
//! exception store and the run summaries, and nothing else, so both work on
//! any storage and catalog silverline runs on.

use std::collections::BTreeSet;

use chrono::{DateTime, Utc};
use futures::{StreamExt, TryStreamExt};

use super::model::{ReportData, RunPoint, Section};
use crate::config::Plan;
use crate::error::Result;
use crate::exceptions::ExceptionEvent;
use crate::exceptions::backlog::{figures, open_by_rule, states, weekly_flow};
use crate::exceptions::store::{load_or_create_exceptions, read_events};
use crate::infra::catalog::connect;
use crate::infra::storage::{Location, Stores};

/// How many weeks of entries and exits a section shows.
pub const FLOW_WEEKS: u32 = 26;

/// How many summaries are fetched at once.
const SUMMARY_READS: usize = 16;

/// The name of the section of all contributors.
pub const OVERALL: &str = "All contributors";

/// What to gather.
#[derive(Debug, Clone)]
pub struct Gather {
    /// The moment the figures are computed for.
    pub now: DateTime<Utc>,
    /// Also read every run summary (the report charts runs; `backlog` needs none).
    pub with_runs: bool,
    /// Only this contributor (the overall section is then theirs alone).
    pub contributor: Option<String>,
}

/// Reads the exception store (and the summaries) and computes every section.
pub async fn gather(plan: &Plan, what: Gather) -> Result<ReportData> {
    let only = what.contributor.as_deref();
    let keep = |contributor: &str| only.is_none_or(|c| c == contributor);
    gather_where(plan, &what, &keep).await
}

/// [`gather`], keeping only the contributors `keep` accepts (the workbench
/// shows a person the contributors they may see).
pub async fn gather_where(
    plan: &Plan,
    what: &Gather,
    keep: &(dyn Fn(&str) -> bool + Sync),
) -> Result<ReportData> {
    let stores = Stores::new(&plan.storage, plan.catalog.warehouse()).await?;
    let catalog = connect(&plan.catalog, &stores).await?;
    let table = load_or_create_exceptions(catalog.as_ref(), plan).await?;
    let mut events = read_events(&table, what.contributor.as_deref()).await?;
    events.retain(|e| keep(&e.contributor));
    let mut runs = if what.with_runs {
        let dq_error = stores.open(&plan.storage.dq_error, "storage.dq_error")?;
        read_runs(&dq_error).await?
    } else {
        Vec::new()
    };
    runs.retain(|r| keep(&r.contributor));
    Ok(build_report(plan, &events, runs, what.now))
}

/// The report of `events` and `runs` at `now`.
pub fn build_report(
    plan: &Plan,
    events: &[ExceptionEvent],
    runs: Vec<RunPoint>,
    now: DateTime<Utc>,
) -> ReportData {
    let stale = plan.exceptions.stale_after_days;
    let contributors: BTreeSet<&str> = events
        .iter()
        .map(|e| e.contributor.as_str())
        .chain(runs.iter().map(|r| r.contributor.as_str()))
        .collect();
    let sections = contributors
        .iter()
        .map(|contributor| {
            let mine: Vec<ExceptionEvent> = events
                .iter()
                .filter(|e| e.contributor == *contributor)
                .cloned()
                .collect();
            let their_runs = runs
                .iter()
                .filter(|r| r.contributor == *contributor)
                .cloned()
                .collect();
            section(contributor, &mine, their_runs, now, stale)
        })
        .collect();
    ReportData {
        dataset: plan.contract.name.clone(),
        generated_at: now.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        stale_after_days: stale,
        overall: section(OVERALL, events, runs, now, stale),
        contributors: sections,
    }
}

fn section(
    name: &str,
    events: &[ExceptionEvent],
    mut runs: Vec<RunPoint>,
    now: DateTime<Utc>,
    stale_after_days: u32,
) -> Section {
    let states = states(events);
    runs.sort_by(|a, b| a.at.cmp(&b.at));
    Section {
        name: name.to_string(),
        backlog: figures(&states, now, stale_after_days),
        open_by_rule: open_by_rule(&states, now),
        weekly_flow: weekly_flow(&states, now, FLOW_WEEKS),
        runs,
    }
}

/// Every run summary under `<dq_error>/summaries/`.
async fn read_runs(dq_error: &Location) -> Result<Vec<RunPoint>> {
    let listed = dq_error.list("summaries").await?;
    let paths: Vec<String> = listed
        .into_iter()
        .map(|o| o.relative)
        .filter(|p| p.ends_with(".json"))
        .collect();
    let runs: Vec<Option<RunPoint>> = futures::stream::iter(paths)
        .map(|path| async move {
            let bytes = dq_error.get(&path).await?;
            Ok::<_, crate::Error>(run_point(&bytes, &dq_error.url_of(&path)))
        })
        .buffer_unordered(SUMMARY_READS)
        .try_collect()
        .await?;
    Ok(runs.into_iter().flatten().collect())
}

/// A run from its summary; a file that is not a summary is skipped with a warning.
fn run_point(bytes: &[u8], url: &str) -> Option<RunPoint> {
    let summary: serde_json::Value = match serde_json::from_slice(bytes) {
        Ok(value) => value,
        Err(error) => {
            tracing::warn!(summary = %url, error = %error, "not a run summary: skipped");
            return None;
        }
    };
    let text = |name: &str| summary[name].as_str().unwrap_or_default().to_string();
    let at = summary["finished_at"]
        .as_str()
        .or_else(|| summary["started_at"].as_str())
        .unwrap_or_default()
        .to_string();
    Some(RunPoint {
        at,
        contributor: text("contributor"),
        drop_id: text("drop_id"),
        status: text("status"),
        counts: serde_json::from_value(summary["counts"].clone()).unwrap_or_default(),
        summary: url.to_string(),
    })
}
