//! Exceptions: after the commit, the run's rows set aside become events in
//! the exception store (and a replay's rows that reached Silver become
//! `resolved`), and the contributor's backlog goes into the summary.
//!
//! The events are appended with the run key, after Silver's commit: a run
//! that dies in between is completed by its rerun ([`restore_missing_events`]),
//! which rebuilds the same events from the run's dq_error files.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};

use super::Context;
use crate::core::drop::DropRef;
use crate::core::place::RunPlace;
use crate::core::set_aside::SetAside;
use crate::error::Result;
use crate::exceptions::backlog::{figures, states};
use crate::exceptions::close::Closing;
use crate::exceptions::figures::BacklogFigures;
use crate::exceptions::record::{ExceptionIds, RunRecord, load_carried, run_events};
use crate::exceptions::store::{append_events, has_run, load_or_create_exceptions, read_events};

/// A run whose rows are in Silver.
#[derive(Debug, Clone)]
pub struct CommittedRun {
    /// Its drop.
    pub drop: DropRef,
    /// Its run key.
    pub run_key: String,
    /// Its run id.
    pub run_id: String,
    /// Date of its dq_error folders.
    pub run_date: String,
    /// When it started (RFC 3339).
    pub started_at: String,
}

impl CommittedRun {
    /// Its id and date.
    pub fn place(&self) -> RunPlace {
        RunPlace {
            run_id: self.run_id.clone(),
            run_date: self.run_date.clone(),
        }
    }
}

/// Records the events of a run that just committed; returns the contributor's backlog.
pub(super) async fn record_events(
    context: &Context<'_>,
    run: &CommittedRun,
    set_aside_files: &BTreeMap<SetAside, String>,
    ids: &ExceptionIds,
) -> Result<BacklogFigures> {
    let now = Utc::now();
    let record = RunRecord {
        drop: &run.drop,
        run_id: &run.run_id,
        started_at: DateTime::parse_from_rfc3339(&run.started_at)
            .map(|t| t.with_timezone(&Utc))
            .unwrap_or(now),
        now,
    };
    let events = run_events(
        &context.dq_error,
        set_aside_files,
        ids,
        &context.plan.contract,
        &record,
    )
    .await?;
    if !events.is_empty() {
        append_events(
            &context.catalog,
            context.plan,
            &events,
            &run.run_key,
            &run.place(),
        )
        .await?;
    }
    tracing::info!(events = events.len(), "exceptions recorded");
    contributor_backlog(context, now).await
}

/// The rerun of a committed run: records its events if it died before it
/// could; the exceptions its drop carries close as `closing` says.
pub(super) async fn restore_missing_events(
    context: &Context<'_>,
    run: &CommittedRun,
    closing: Closing,
) -> Result<()> {
    let table = load_or_create_exceptions(context.catalog.as_ref(), context.plan).await?;
    if has_run(&table, &run.run_key)? {
        return Ok(());
    }
    let mut files = BTreeMap::new();
    for destination in SetAside::ALL {
        let path = run.place().dq_file(destination, &run.drop.contributor);
        if context.dq_error.get_opt(&path).await?.is_some() {
            files.insert(destination, path);
        }
    }
    let carried = load_carried(&context.bronze, &run.drop).await?;
    if files.is_empty() && carried.is_empty() {
        return Ok(());
    }
    let ids = ExceptionIds::new(&run.drop, carried).closing(closing);
    record_events(context, run, &files, &ids).await?;
    tracing::warn!(run_id = %run.run_id, "the committed run had not recorded its exceptions: recorded them");
    Ok(())
}

/// The contributor's exception backlog now.
pub(super) async fn contributor_backlog(
    context: &Context<'_>,
    now: DateTime<Utc>,
) -> Result<BacklogFigures> {
    let table = load_or_create_exceptions(context.catalog.as_ref(), context.plan).await?;
    let events = read_events(&table, Some(&context.drop.contributor)).await?;
    Ok(figures(
        &states(&events),
        now,
        context.plan.exceptions.stale_after_days,
    ))
}
