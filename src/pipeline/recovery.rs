//! Completing what a run left undone: the rerun of a committed drop records
//! missing exception events and completes its summary; a drop that could not
//! be claimed still leaves a failed summary.

use super::claim::{self, AlreadyCommitted};
use super::commit::SnapshotRecord;
use super::context::Context;
use super::summary::{RunStatus, SUMMARY_SCHEMA_VERSION, Summary, now};
use super::{RunOptions, committed_run, exceptions};
use crate::core::place::RunPlace;
use crate::error::{Error, Result};
use crate::exceptions::close::{Acceptance, Closing};
use crate::infra::storage::Location;

/// A drop already committed: the summary says so, and unless this is a dry
/// run, what the committed run left undone is completed.
pub(super) async fn already_committed(
    context: &Context<'_>,
    summary: &mut Summary,
    committed: AlreadyCommitted,
    options: &RunOptions,
) -> Result<()> {
    tracing::info!(run_key = %committed.run_key, snapshot_id = ?committed.snapshot_id, "drop already committed: nothing to do");
    summary.status = RunStatus::AlreadyCommitted;
    summary.run_key = Some(committed.run_key);
    summary.snapshot_id = committed.snapshot_id;
    summary.finished_at = Some(now());
    match (committed.run_place, options.dry_run) {
        (Some(place), false) => {
            summary.run_id = Some(place.run_id.clone());
            complete_committed_run(context, summary, &place, options).await
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
    options: &RunOptions,
) -> Result<()> {
    let run = committed_run(summary, &place.run_id, &place.run_date);
    let closing = closing_of(context, summary, options);
    exceptions::restore_missing_events(context, &run, closing).await?;
    restore_missing_summary(context, summary, place).await
}

/// How the committed run's carried exceptions close: as accepted by whom its
/// snapshot names when it committed an acceptance (the rerun's own `--by`
/// may differ), else as the rerun's options say.
fn closing_of(context: &Context<'_>, summary: &Summary, options: &RunOptions) -> Closing {
    let snapshot = summary
        .snapshot_id
        .and_then(|id| context.silver.metadata().snapshot_by_id(id));
    match snapshot.and_then(|s| Acceptance::decision_in(&s.summary().additional_properties)) {
        Some(decision) => Closing::Accepted(decision),
        None => options.closing(),
    }
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
    let found = read_summary(&context.dq_error, &path).await?;
    if found.is_some_and(|s| s.status == RunStatus::Committed) {
        return Ok(());
    }
    let run_key = summary.run_key.clone().unwrap_or_default();
    let staged = read_summary(&context.dq_error, &claim::staged_summary_path(&run_key)).await?;
    let from_snapshot = snapshot_record(context, summary);
    let mut restored = match staged {
        Some(staged) if agrees(&staged, from_snapshot.as_ref()) => staged,
        _ => rebuilt_from_snapshot(summary, place, from_snapshot.unwrap_or_default()),
    };
    // Written by this version's types: this version's layout, whatever staged it.
    restored.schema_version = SUMMARY_SCHEMA_VERSION;
    restored.status = RunStatus::Committed;
    restored.finished_at = Some(now());
    restored.snapshot_id = summary.snapshot_id.or(restored.snapshot_id);
    let (backlog, alerts) =
        exceptions::contributor_watch(context, &restored, chrono::Utc::now()).await?;
    restored.backlog = Some(backlog);
    restored.alerts = alerts;
    let url = restored.write(&context.dq_error, &path).await?;
    tracing::warn!(summary = %url, "the committed run had no final summary: completed it");
    Ok(())
}

/// The summary at `path`, if there is one that reads as a summary.
async fn read_summary(location: &Location, path: &str) -> Result<Option<Summary>> {
    let found = location.get_opt(path).await?;
    Ok(found.and_then(|bytes| serde_json::from_slice(&bytes).ok()))
}

/// What the committing snapshot says, while the table still has it.
fn snapshot_record(context: &Context<'_>, summary: &Summary) -> Option<SnapshotRecord> {
    let snapshot = context
        .silver
        .metadata()
        .snapshot_by_id(summary.snapshot_id?)?;
    Some(SnapshotRecord::from_properties(
        &snapshot.summary().additional_properties,
    ))
}

/// Whether a staged summary is the committed run's: a run of the same drop
/// judged on another state of Silver may have staged different figures.
fn agrees(staged: &Summary, committed: Option<&SnapshotRecord>) -> bool {
    let Some(record) = committed else {
        return true;
    };
    let c = &staged.counts;
    (c.received, c.committed, c.quarantined, c.dropped, c.pending)
        == (
            record.received,
            record.committed,
            record.quarantined,
            record.dropped,
            record.pending,
        )
}

/// A summary from the counts in the committing snapshot's properties (runs that
/// committed before summaries were written ahead of the commit).
fn rebuilt_from_snapshot(summary: &Summary, place: &RunPlace, record: SnapshotRecord) -> Summary {
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
