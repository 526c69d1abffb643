//! Completing what a run left undone: the rerun of a committed drop records
//! missing exception events and completes its summary; a drop that could not
//! be claimed still leaves a failed summary.

use super::claim::{self, AlreadyCommitted};
use super::commit::SnapshotRecord;
use super::context::Context;
use super::summary::{RunStatus, Summary, now};
use super::{committed_run, exceptions};
use crate::core::place::RunPlace;
use crate::error::{Error, Result};
use crate::infra::storage::Location;

/// A drop already committed: the summary says so, and unless this is a dry
/// run, what the committed run left undone is completed.
pub(super) async fn already_committed(
    context: &Context<'_>,
    summary: &mut Summary,
    committed: AlreadyCommitted,
    dry_run: bool,
) -> Result<()> {
    tracing::info!(run_key = %committed.run_key, snapshot_id = ?committed.snapshot_id, "drop already committed: nothing to do");
    summary.status = RunStatus::AlreadyCommitted;
    summary.run_key = Some(committed.run_key);
    summary.snapshot_id = committed.snapshot_id;
    summary.finished_at = Some(now());
    match (committed.run_place, dry_run) {
        (Some(place), false) => {
            summary.run_id = Some(place.run_id.clone());
            complete_committed_run(context, summary, &place).await
        }
        _ => Ok(()),
    }
}

/// The rerun of a committed run completes what it left undone: its exception
/// events, then its summary.
pub(super) async fn complete_committed_run(
    context: &Context<'_>,
    summary: &Summary,
    place: &RunPlace,
) -> Result<()> {
    let run = committed_run(summary, &place.run_id, &place.run_date);
    exceptions::restore_missing_events(context, &run).await?;
    restore_missing_summary(context, summary, place).await
}

/// A run that committed but died before writing its final summary (or
/// wrote a failed one because the commit's answer was lost): its summary is
/// the one it staged just before committing (every figure of the run), now
/// marked committed; a run from before staged summaries gets one rebuilt from
/// its snapshot's properties. Either way every committed run has its record.
pub(super) async fn restore_missing_summary(
    context: &Context<'_>,
    summary: &Summary,
    place: &RunPlace,
) -> Result<()> {
    let path = place.summary_path(&context.drop.contributor);
    let committed = serde_json::to_value(RunStatus::Committed).ok();
    if read_json(&context.dq_error, &path)
        .await?
        .is_some_and(|found| found.get("status") == committed.as_ref())
    {
        return Ok(());
    }
    let run_key = summary.run_key.clone().unwrap_or_default();
    let staged = read_json(&context.dq_error, &claim::staged_summary_path(&run_key)).await?;
    let mut restored = match staged {
        Some(staged) => staged,
        None => to_json(&rebuilt_from_snapshot(context, summary, place))?,
    };
    let backlog = exceptions::contributor_backlog(context, chrono::Utc::now()).await?;
    let completion = [
        ("status", to_json(&RunStatus::Committed)?),
        ("finished_at", to_json(&now())?),
        ("backlog", to_json(&backlog)?),
    ];
    if let Some(fields) = restored.as_object_mut() {
        fields.extend(completion.map(|(k, v)| (k.to_string(), v)));
        if let Some(id) = summary.snapshot_id {
            fields.insert("snapshot_id".to_string(), id.into());
        }
    }
    let body = serde_json::to_vec_pretty(&restored).map_err(|source| Error::Encode {
        what: "run summary",
        source,
    })?;
    context.dq_error.put(&path, body).await?;
    let url = context.dq_error.url_of(&path);
    tracing::warn!(summary = %url, "the committed run had no final summary: completed it");
    Ok(())
}

/// The JSON document at `path`, if there is one that parses.
pub(super) async fn read_json(
    location: &Location,
    path: &str,
) -> Result<Option<serde_json::Value>> {
    let found = location.get_opt(path).await?;
    Ok(found.and_then(|bytes| serde_json::from_slice(&bytes).ok()))
}

pub(super) fn to_json<T: serde::Serialize>(value: &T) -> Result<serde_json::Value> {
    serde_json::to_value(value).map_err(|source| Error::Encode {
        what: "run summary",
        source,
    })
}

/// A summary from the counts in the committing snapshot's properties (runs that
/// committed before summaries were written ahead of the commit).
fn rebuilt_from_snapshot(context: &Context<'_>, summary: &Summary, place: &RunPlace) -> Summary {
    let record = summary
        .snapshot_id
        .and_then(|id| context.silver.metadata().snapshot_by_id(id))
        .map(|s| SnapshotRecord::from_properties(&s.summary().additional_properties))
        .unwrap_or_default();
    let mut restored = summary.clone();
    restored.run_id = Some(place.run_id.clone());
    restored.counts.received = record.received;
    restored.counts.committed = record.committed;
    restored.counts.quarantined = record.quarantined;
    restored.counts.dropped = record.dropped;
    restored.counts.pending = record.pending;
    restored.error = Some("summary rebuilt from the snapshot after an interrupted run".to_string());
    if !record.rules_fingerprint.is_empty() {
        restored.rules_fingerprint = record.rules_fingerprint;
    }
    restored
}

/// A drop that could not even be claimed (missing, empty, unreadable) still
/// leaves a `failed` summary for the orchestrator and the people behind it.
pub(super) async fn record_failed_claim(dq_error: &Location, summary: &mut Summary, error: &Error) {
    summary.status = RunStatus::Failed;
    summary.error = Some(error.to_string());
    summary.finished_at = Some(now());
    let path = Summary::failed_claim_path(&summary.contributor, &summary.drop_id);
    match summary.write(dq_error, &path).await {
        Ok(url) => tracing::info!(summary = %url, "failed-run summary written"),
        Err(write_error) => {
            tracing::warn!(error = %write_error, "could not write the failed-run summary")
        }
    }
}
