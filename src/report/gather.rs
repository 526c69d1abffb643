//! Gathers what `silverline backlog` and `silverline report` show from the
//! exception store and the run summaries, and nothing else, so both work on
//! any storage and catalog silverline runs on.

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Utc};

use super::model::{ReportData, RunPoint, Section};
use crate::config::Plan;
use crate::core::sql::QueryMemory;
use crate::error::Result;
use crate::exceptions::alerts::{RunFailures, StateWatch};
use crate::exceptions::backlog::BacklogTally;
use crate::exceptions::runs::{SummaryFile, read_summaries};
use crate::exceptions::store::{Opened, Read, for_each_state, open_exceptions};

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
    gather_where(plan, &what, &keep, &plan.query_memory()?).await
}

/// [`gather`], keeping only the contributors `keep` accepts (the workbench
/// shows a person the contributors they may see). The exception store is
/// read one exception at a time, within `memory`'s pool.
pub(crate) async fn gather_where(
    plan: &Plan,
    what: &Gather,
    keep: &(dyn Fn(&str) -> bool + Sync),
    memory: &QueryMemory,
) -> Result<ReportData> {
    let Opened {
        stores,
        exceptions: table,
        ..
    } = open_exceptions(plan).await?;
    let only = what.contributor.as_deref();
    let (now, stale) = (what.now, plan.exceptions.stale_after_days);
    let fresh = || {
        (
            BacklogTally::new(now, stale, FLOW_WEEKS),
            StateWatch::new(&plan.alerts, now),
        )
    };
    let mut overall = BacklogTally::new(now, stale, FLOW_WEEKS);
    let mut theirs: BTreeMap<String, (BacklogTally, StateWatch<'_>)> = BTreeMap::new();
    for_each_state(&table, (only.into(), Read::Heads), memory, |state| {
        let contributor = &state.latest.contributor;
        if !keep(contributor) {
            return;
        }
        overall.add(state);
        let (tally, watch) = match theirs.get_mut(contributor) {
            Some(folds) => folds,
            None => theirs.entry(contributor.clone()).or_insert_with(fresh),
        };
        tally.add(state);
        watch.add(state);
    })
    .await?;
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
    let runs: Vec<RunPoint> = match what.with_runs {
        true => summaries.iter().map(run_point).collect(),
        false => Vec::new(),
    };
    // A contributor with no exception has a section when it has runs, and
    // its creep alerts when it has failures.
    let all: BTreeSet<String> = theirs
        .keys()
        .cloned()
        .chain(runs.iter().map(|r| r.contributor.clone()))
        .chain(failures.iter().map(|f| f.contributor.clone()))
        .collect();
    let mut contributors = Vec::new();
    let mut alerts = Vec::new();
    for contributor in all {
        let folded = theirs.remove(&contributor);
        let has_exceptions = folded.is_some();
        let (tally, watch) = folded.unwrap_or_else(fresh);
        alerts.extend(watch.alerts(&contributor, &failures));
        let their_runs: Vec<RunPoint> = runs
            .iter()
            .filter(|r| r.contributor == contributor)
            .cloned()
            .collect();
        if has_exceptions || !their_runs.is_empty() {
            contributors.push(section(&contributor, tally, their_runs));
        }
    }
    Ok(ReportData {
        dataset: plan.contract.name.clone(),
        generated_at: now.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        stale_after_days: stale,
        overall: section(OVERALL, overall, runs),
        contributors,
        alerts,
    })
}

fn section(name: &str, tally: BacklogTally, mut runs: Vec<RunPoint>) -> Section {
    let (backlog, open_by_rule, weekly_flow) = tally.finish();
    runs.sort_by(|a, b| a.at.cmp(&b.at));
    Section {
        name: name.to_string(),
        backlog,
        open_by_rule,
        weekly_flow,
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
