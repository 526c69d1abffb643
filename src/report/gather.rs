//! Gathers what `silverline backlog` and `silverline report` show from the
//! exception store and the run summaries, and nothing else, so both work on
//! any storage and catalog silverline runs on.

use std::collections::BTreeSet;

use chrono::{DateTime, Utc};

use super::model::{ReportData, RunPoint, Section};
use crate::config::Plan;
use crate::error::Result;
use crate::exceptions::ExceptionEvent;
use crate::exceptions::alerts::{RunFailures, evaluate};
use crate::exceptions::backlog::{figures, open_by_rule, states, weekly_flow};
use crate::exceptions::runs::{SummaryFile, read_summaries};
use crate::exceptions::store::{Opened, open_exceptions, read_events};

/// How many weeks of entries and exits a section shows.
pub const FLOW_WEEKS: u32 = 26;

/// The name of the section of all contributors.
pub const OVERALL: &str = "All contributors";

/// What to gather.
#[derive(Debug, Clone)]
pub struct Gather {
    /// The moment the figures are computed for.
    pub now: DateTime<Utc>,
    /// Also list every run (the report charts them; `backlog` does not).
    /// The summaries are read either way when a creep alert is configured.
    pub with_runs: bool,
    /// Only this contributor (the overall section is then theirs alone).
    pub contributor: Option<String>,
}

/// Reads the exception store (and the summaries) and computes every section
/// and the alerts.
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
    let Opened {
        stores,
        exceptions: table,
        ..
    } = open_exceptions(plan).await?;
    let only = what.contributor.as_deref();
    let mut events = read_events(&table, only).await?;
    events.retain(|e| keep(&e.contributor));
    let mut summaries = if what.with_runs || plan.alerts.watches_creep() {
        let dq_error = stores.open(&plan.storage.dq_error, "storage.dq_error")?;
        read_summaries(&dq_error, only).await?
    } else {
        Vec::new()
    };
    summaries.retain(|s| keep(s.text("contributor")));
    let failures: Vec<RunFailures> = summaries
        .iter()
        .filter_map(RunFailures::of_summary)
        .collect();
    let runs = match what.with_runs {
        true => summaries.iter().map(run_point).collect(),
        false => Vec::new(),
    };
    let mut report = build_report(plan, &events, runs, what.now);
    report.alerts = evaluate(&plan.alerts, &events, &failures, what.now);
    Ok(report)
}

/// The report of `events` and `runs` at `now` (no alerts: [`gather`] adds them).
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
        alerts: Vec::new(),
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

/// A run from its summary.
fn run_point(file: &SummaryFile) -> RunPoint {
    RunPoint {
        at: file.at().to_string(),
        contributor: file.text("contributor").to_string(),
        drop_id: file.text("drop_id").to_string(),
        status: file.text("status").to_string(),
        counts: serde_json::from_value(file.summary["counts"].clone()).unwrap_or_default(),
        summary: file.url.clone(),
    }
}
