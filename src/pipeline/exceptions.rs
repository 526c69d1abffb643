//! Exceptions: after the commit, the run's rows set aside become events in
//! the exception store (and a replay's rows that reached Silver become
//! `resolved`), and the contributor's backlog and alerts go into the summary
//! (the alerts to `[alerts.webhook]` too).
//!
//! The events are appended with the run key, after Silver's commit: a run
//! that dies in between is completed by its rerun ([`restore_missing_events`]),
//! which rebuilds the same events from the run's dq_error files.

use std::collections::{BTreeMap, HashMap};

use arrow::array::{Array, StringArray};
use arrow::datatypes::DataType;
use arrow::record_batch::RecordBatch;

use chrono::{DateTime, Utc};

use super::Context;
use super::summary::{RunStatus, Summary};
use crate::config::Plan;
use crate::config::contract::Contract;
use crate::core::drop::{DropRef, is_made_of_exceptions};
use crate::core::place::RunPlace;
use crate::core::set_aside::SetAside;
use crate::error::{Error, Result};
use crate::exceptions::alerts::webhook::{Origin, Payload, notify};
use crate::exceptions::alerts::{Alert, RunFailures, StateWatch};
use crate::exceptions::backlog::count_state;
use crate::exceptions::close::Closing;
use crate::exceptions::figures::BacklogFigures;
use crate::exceptions::record::{
    ExceptionIds, RunRecord, declared_event, load_carried, missing_record_key,
    write_missing_events, write_run_events,
};
use crate::exceptions::runs::read_summaries;
use crate::exceptions::store::{
    EventWriter, Read, for_each_state, has_run, latest_events, load_or_create_exceptions,
    missing_entities_of,
};
use crate::exceptions::{ExceptionEvent, ExceptionStatus};
use crate::pipeline::read::DropRows;
use crate::stage::Stage;

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

/// Records the events of a run that just committed.
///
/// With `[completeness]`, the entities the drop left out become `missing`
/// exceptions, and the open ones the drop's rows (`declared`) declare are
/// resolved.
pub(super) async fn record_events(
    context: &Context<'_>,
    run: &CommittedRun,
    (set_aside_files, declared): (&BTreeMap<SetAside, String>, Option<&DropRows>),
    ids: &ExceptionIds,
) -> Result<()> {
    let now = Utc::now();
    let record = RunRecord {
        drop: &run.drop,
        run_id: &run.run_id,
        started_at: DateTime::parse_from_rfc3339(&run.started_at)
            .map(|t| t.with_timezone(&Utc))
            .unwrap_or(now),
        now,
    };
    let scratch = context.plan.resources.scratch_dir.as_deref();
    let mut writer = EventWriter::new(&context.catalog, context.plan, &run.run_id);
    let contract = &context.plan.contract;
    write_run_events(
        &context.dq_error,
        set_aside_files,
        (ids, contract, &record),
        (&mut writer, scratch),
    )
    .await?;
    if context.plan.completeness.is_some() {
        let path = run.place().missing_file(&run.drop.contributor);
        let into = (&mut writer, scratch);
        write_missing_events(&context.dq_error, &path, (contract, &record), into).await?;
        if let Some(declared) = declared {
            writer
                .write(&resolve_declared(context, declared, &record).await?)
                .await?;
        }
    }
    let events = writer.events();
    writer.append(&run.run_key, &run.place()).await?;
    tracing::info!(events, "exceptions recorded");
    Ok(())
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
        if context.dq_error.exists(&path).await? {
            files.insert(destination, path);
        }
    }
    let carried = load_carried(&context.bronze, &run.drop).await?;
    if files.is_empty() && carried.is_empty() {
        return Ok(());
    }
    let ids = ExceptionIds::new(&run.drop, carried).closing(closing);
    // The drop's rows are not read again: missing exceptions it declared
    // stay open until a later declaration.
    record_events(context, run, (&files, None), &ids).await?;
    tracing::warn!(run_id = %run.run_id, "the committed run had not recorded its exceptions: recorded them");
    Ok(())
}

/// `resolved` events for the contributor's open `missing` exceptions whose
/// entity and period a row of `declared` holds (read bucket by bucket, and
/// only when some are open).
async fn resolve_declared(
    context: &Context<'_>,
    declared: &DropRows,
    record: &RunRecord<'_>,
) -> Result<Vec<ExceptionEvent>> {
    let table = load_or_create_exceptions(context.catalog.as_ref(), context.plan).await?;
    let scope = missing_entities_of(&context.drop.contributor);
    let open_events = latest_events(&table, scope, &context.memory, |state| {
        state.latest.status == ExceptionStatus::Missing
    })
    .await?;
    let open: HashMap<&str, &ExceptionEvent> = open_events
        .iter()
        .filter_map(|event| Some((event.record_key.as_deref()?, event)))
        .collect();
    if open.is_empty() {
        return Ok(Vec::new());
    }
    let mut resolved = Vec::new();
    for bucket in 0..declared.buckets().count() {
        let keys = declared_keys(&context.plan.contract, &declared.declared(bucket)?)?;
        resolved.extend(
            keys.iter()
                .filter_map(|key| open.get(key.as_str()))
                .map(|missing| declared_event(missing, record)),
        );
    }
    resolved.sort_by(|a, b| a.exception_id.cmp(&b.exception_id));
    resolved.dedup_by(|a, b| a.exception_id == b.exception_id);
    Ok(resolved)
}

/// The missing-entity record key (entity key and period) of every row of `declared`.
fn declared_keys(contract: &Contract, declared: &RecordBatch) -> Result<Vec<String>> {
    let text = |name: &str| -> Result<StringArray> {
        let column = declared
            .column_by_name(name)
            .ok_or_else(|| Error::Internal(format!("exceptions: column {name} is missing")))?;
        let cast = arrow::compute::cast(column, &DataType::Utf8)
            .map_err(Error::arrow(Stage::Exceptions))?;
        cast.as_any()
            .downcast_ref::<StringArray>()
            .cloned()
            .ok_or_else(|| Error::Internal(format!("exceptions: {name} is not text")))
    };
    let keys = contract
        .entity_key
        .iter()
        .map(|c| text(c))
        .collect::<Result<Vec<_>>>()?;
    let order = text(&contract.order_column)?;
    Ok((0..declared.num_rows())
        .filter(|row| order.is_valid(*row))
        .map(|row| {
            // The period: the first day of the order date's month.
            let period = format!("{}-01", &order.value(row)[..7.min(order.value(row).len())]);
            missing_record_key(keys.iter().map(|k| k.value(row)), &period)
        })
        .collect())
}

/// The contributor's exception backlog and alerts now, after the run
/// `summary` records (its rule failures follow the earlier runs' in the
/// creep alert).
pub(super) async fn contributor_watch(
    context: &Context<'_>,
    summary: &Summary,
    now: DateTime<Utc>,
) -> Result<(BacklogFigures, Vec<Alert>)> {
    let plan = context.plan;
    let table = load_or_create_exceptions(context.catalog.as_ref(), plan).await?;
    let contributor = &context.drop.contributor;
    let stale_after_days = plan.exceptions.stale_after_days;
    let mut backlog = BacklogFigures::default();
    let mut watch = StateWatch::new(&plan.alerts, now);
    for_each_state(
        &table,
        (Some(contributor.as_str()).into(), Read::Heads),
        &context.memory,
        |state| {
            count_state(&mut backlog, state, now, stale_after_days);
            watch.add(state);
        },
    )
    .await?;
    let mut runs = Vec::new();
    if plan.alerts.watches_creep() {
        // Alerts advise: a run whose rows are committed does not fail for
        // want of the earlier summaries, it raises no creep alert this time.
        match read_summaries(&context.dq_error, Some(contributor)).await {
            Ok(summaries) => {
                runs.extend(summaries.iter().filter_map(RunFailures::of_summary));
                runs.extend(this_run(summary, now));
            }
            Err(error) => tracing::warn!(
                error = %error,
                "could not read the earlier run summaries: no creep alert from this run"
            ),
        }
    }
    Ok((backlog, watch.alerts(contributor, &runs)))
}

/// The run `summary` records, as the creep alert follows it (a delivery only).
fn this_run(summary: &Summary, now: DateTime<Utc>) -> Option<RunFailures> {
    if is_made_of_exceptions(&summary.drop_id) {
        return None;
    }
    Some(RunFailures {
        contributor: summary.contributor.clone(),
        run_id: summary.run_id.clone().unwrap_or_default(),
        drop_id: summary.drop_id.clone(),
        at: now.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        received: summary.counts.received,
        failed: summary
            .rules
            .iter()
            .map(|o| (o.rule.clone(), o.failed))
            .collect(),
    })
}

/// POSTs the alerts of a committed run to `[alerts.webhook]`, if any.
pub(super) async fn send_alerts(plan: &Plan, summary: &Summary) {
    let Some(webhook) = &plan.alerts.webhook else {
        return;
    };
    if summary.status == RunStatus::Committed {
        let payload = Payload::new(&plan.contract.name, Origin::Run, &summary.alerts);
        notify(webhook, &payload).await;
    }
}
