//! One run, stage by stage, as DESIGN.md draws it:
//!
//! ```text
//! claim -> read -> baseline -> evaluate -> route -> write -> balance -> commit -> summary
//! ```
//!
//! [`run`] calls one function per stage and records what each did in the
//! [`Summary`]; the stages pass named types (`Batch`, `Baselined`,
//! `BucketOutcomes`, `Verdicts`, `Routed`, `Written`, `Balanced`), and only a `Balanced` run can be committed.

pub mod background;
pub mod balance;
pub mod baseline;
pub mod claim;
pub mod commit;
mod context;
pub mod evaluate;
pub mod exceptions;
pub mod hooks;
mod judge;
pub mod lineage;
pub mod mask;
mod options;
pub mod pushgateway;
pub mod read;
mod recovery;
pub mod route;
pub mod summary;
pub mod write;

use std::sync::Arc;
use std::time::Instant;

use chrono::NaiveDate;

use tracing::Instrument;

use crate::config::Plan;
use crate::config::rules::Rule;
use crate::core::drop::DropRef;
use crate::error::Result;
use crate::infra::append::{JudgedOn, rows_of_unchanged_since};
use crate::infra::catalog::table_ident;
use crate::progress::Progress;
use crate::stage::Stage;
use background::Background;
use baseline::{CommittedMonth, MonthKeeper};
use claim::{Claim, Claimed, Prefetch};
use commit::Attempt;
use context::Context;
use evaluate::reference::KnownKeys;
pub use hooks::CrashPoint;
#[cfg(feature = "test-hooks")]
pub use hooks::TestHooks;
use judge::{Handover, References};
use lineage::{Ending, Lineage};
use options::rules_of;
pub use options::{RunOptions, RunOutcome};
use summary::{RunStatus, Summary, lap, now, time};

/// Runs one drop through every stage, then pushes its metrics when
/// `[metrics_push]` names a Pushgateway and its alerts when `[alerts.webhook]`
/// names a webhook (never for a dry run).
pub async fn run(plan: &Plan, drop: &DropRef, options: &RunOptions) -> Result<RunOutcome> {
    run_carrying(plan, drop, options, &mut Carry::default()).await
}

/// What a run leaves to the next run of the same process (a backfill's
/// months): the references' keys, with the files or table version they were
/// loaded from (a later run keeps those of a reference that has not
/// changed), the next drop's files, fetched while this one runs, and the
/// rows it committed, which the next run reads as its history instead of
/// reading them back from Silver (while Silver's rows of them are the same).
#[derive(Default)]
pub struct Carry {
    references: Vec<KnownKeys>,
    next: Option<DropRef>,
    prefetch: Option<Prefetch>,
    /// The Silver rows the last run committed, the next one's history.
    committed: Option<Arc<CommittedMonth>>,
    /// Whether the last run read its month before from such rows.
    read_kept: bool,
}

impl Carry {
    /// Names the drop the caller runs after the coming [`run_carrying`]
    /// (`None`: no other): its files are fetched and fingerprinted during
    /// that run, once its claim succeeded (the scratch folder then holds
    /// both drops).
    pub fn fetch_ahead(&mut self, next: Option<DropRef>) {
        self.next = next;
    }

    /// How many rows the last run committed that the next run reads as
    /// its history in place of Silver's (0: it reads Silver).
    pub fn committed_rows(&self) -> usize {
        self.committed.as_ref().map_or(0, |month| month.rows())
    }

    /// Whether the last run read the month before from the rows its run
    /// kept ([`Carry::committed_rows`]) rather than from Silver.
    pub fn read_kept_month(&self) -> bool {
        self.read_kept
    }
}

/// [`run`], handing on to the next run what it can use in `carry`.
pub async fn run_carrying(
    plan: &Plan,
    drop: &DropRef,
    options: &RunOptions,
    carry: &mut Carry,
) -> Result<RunOutcome> {
    let span = tracing::info_span!(
        "run",
        contributor = %drop.contributor,
        drop_id = %drop.drop_id,
        run_id = tracing::field::Empty
    );
    run_in_span(plan, drop, options, carry)
        .instrument(span)
        .await
}

/// [`run`], inside the run's span (every log line carries contributor, drop
/// and run id): its OpenLineage START, the run, its COMPLETE or FAIL (a
/// refusal before the run has a summary included), then its metrics pushed
/// (a dry run does neither lineage nor metrics).
async fn run_in_span(
    plan: &Plan,
    drop: &DropRef,
    options: &RunOptions,
    carry: &mut Carry,
) -> Result<RunOutcome> {
    let started = Instant::now();
    let lineage = if options.dry_run {
        None
    } else {
        Lineage::start(plan, drop).await
    };
    let (contributor_type, rules) = match rules_of(plan, drop, options) {
        Ok(found) => found,
        Err(error) => {
            if let Some(lineage) = &lineage {
                lineage.finish(Ending::Failed(None, &error)).await;
            }
            return Err(error);
        }
    };
    let mut summary = Summary::new(plan, drop, contributor_type, &rules);
    let result = open_and_run(
        plan,
        (drop, carry),
        options,
        &rules,
        (&mut summary, started),
    )
    .await;
    if let Some(lineage) = &lineage {
        let ending = match &result {
            Ok(_) => Ending::Done(&summary, &rules),
            Err(error) => Ending::Failed(Some((&summary, &rules)), error),
        };
        lineage.finish(ending).await;
    }
    if !options.dry_run {
        pushgateway::push(plan, &summary, result.as_ref().err()).await;
        exceptions::send_alerts(plan, &summary).await;
    }
    result.map(|summary_url| RunOutcome {
        summary,
        summary_url,
    })
}

/// Open, claim, process, then write the summary; returns where it was written.
async fn open_and_run(
    plan: &Plan,
    (drop, carry): (&DropRef, &mut Carry),
    options: &RunOptions,
    rules: &[&Rule],
    (summary, started): (&mut Summary, Instant),
) -> Result<Option<String>> {
    let context = context::open(plan, drop, options.dry_run).await?;
    summary.schema_evolution = context.evolution.clone();
    // The references' keys do not depend on the drop: they load while the
    // drop is fetched, fingerprinted and read.
    let kept_keys = evaluate::kept_keys::KeptKeys::new(context.dq_error.clone(), !options.dry_run);
    let references = Background::spawn(
        "loading the references",
        evaluate::reference::load_known_keys(
            evaluate::references_read_by(plan, rules),
            evaluate::reference::ReferenceSources {
                stores: context.stores.clone(),
                catalog: context.catalog.clone(),
                kept: Some(kept_keys.clone()),
            },
            std::mem::take(&mut carry.references),
        ),
    );
    let claimed = claim::claim_run(&context, options, carry.prefetch.take()).await;
    let another_run_follows = carry.next.is_some();
    if claimed.is_ok() {
        carry.prefetch = carry
            .next
            .take()
            .map(|next| Prefetch::start(&context, next));
    }
    let mut handover = Handover {
        carried: carry.committed.take(),
        keep: another_run_follows,
        read_kept: false,
    };
    let claim = match claimed {
        Ok(Claimed::Fresh(claim)) => claim,
        Ok(Claimed::AlreadyCommitted(committed)) => {
            // A skipped drop of a backfill hands the references' keys on (a
            // failed load hands nothing: the next run loads them); a run
            // alone does not wait for them.
            if another_run_follows {
                carry.references = references.join().await.unwrap_or_default();
            }
            recovery::already_committed(&context, summary, committed, options).await?;
            return Ok(None);
        }
        Err(error) => {
            recovery::record_failed_claim(&context.dq_out, summary, &error).await;
            return Err(error);
        }
    };
    time(summary, Stage::Claim, started);
    claim.record(summary);
    let summary_path = claim.summary_path();
    let mut references = References::Loading(references);
    let judged = (claim, &mut references, &mut handover);
    let result = process(&context, judged, rules, options, summary).await;
    let mut loaded = references.into_loaded();
    carry.committed = handover.carried;
    carry.read_kept = handover.read_kept;
    summary.finished_at = Some(now());
    time(summary, Stage::Total, started);
    let finished = finish(&context, summary, &summary_path, result, options).await;
    // Once the run's record is written: a later run may read them back.
    if finished.is_ok() {
        evaluate::reference::keep_loaded(&mut loaded, &kept_keys, &plan.contract).await;
    }
    carry.references = loaded;
    finished
}

/// The run's record: a failed run's error in its summary; a concurrent
/// winner's, a crash's and a dry run's summary never written. Returns where
/// it was written.
async fn finish(
    context: &Context<'_>,
    summary: &mut Summary,
    path: &str,
    result: Result<()>,
    options: &RunOptions,
) -> Result<Option<String>> {
    if let Err(error) = &result {
        summary.status = RunStatus::Failed;
        summary.error = Some(error.to_string());
    }
    let unwritten = summary.status == RunStatus::CommittedConcurrently || options.dry_run;
    if unwritten || hooks::is_crash(&result) {
        result?;
        return Ok(None);
    }
    hooks::crash_if(options, CrashPoint::DuringSummary)?;
    let written = summary.write(&context.dq_error, path).await;
    result?;
    written.map(Some)
}

/// read -> (baseline -> evaluate -> route -> write -> balance -> commit),
/// showing each stage.
async fn process(
    context: &Context<'_>,
    started: (Claim, &mut References, &mut Handover),
    rules: &[&Rule],
    options: &RunOptions,
    summary: &mut Summary,
) -> Result<()> {
    let progress = Progress::new(options.progress, &context.drop.prefix());
    let result = stages(context, started, rules, (options, summary, &progress)).await;
    progress.finish();
    result
}

/// The drop is read once, then judged on Silver as it is, and judged again
/// whenever the commit finds rows of the contributor committed since (by any
/// run): whatever commits first wins and a later run sees its keys. The
/// rows it committed are left in `handover` when it keeps them.
async fn stages(
    context: &Context<'_>,
    (mut claim, references, handover): (Claim, &mut References, &mut Handover),
    rules: &[&Rule],
    (options, summary, progress): (&RunOptions, &mut Summary, &Progress),
) -> Result<()> {
    let clock = Instant::now();
    progress.stage(Stage::Read);
    let batch = read::read_drop_in_buckets(
        &context.plan.contract,
        &std::mem::take(&mut claim.files),
        &context.plan.resources,
    )?;
    batch.record(summary);
    lap(summary, Stage::Read, clock);
    let mut silver = context.silver.clone();
    for judgement in 1.. {
        summary.judgements = judgement;
        let judged_on = JudgedOn::of(&silver);
        let on = (&silver, &mut *references, &mut *handover);
        let mut judged = judge::judge_and_write(
            context,
            on,
            &batch,
            rules,
            &claim,
            (options, summary, progress),
        )
        .await?;
        progress.stage(Stage::Commit);
        hooks::crash_if(options, CrashPoint::BeforeCommit)?;
        if options.dry_run {
            summary.status = RunStatus::DryRun;
            tracing::info!(would_commit = judged.balanced.silver(), table = %table_ident(&context.plan.table), "dry run: nothing committed");
            // Its data files went to a scratch folder, already deleted.
            return Ok(());
        }
        let kept = (judged.kept.take(), judged.fresh_months);
        let committed = commit::commit_run(
            context,
            (&claim, &batch.rows),
            judged,
            judged_on,
            (options, summary),
        );
        match committed.await? {
            Attempt::Done => {
                hand_on(context, summary, kept, handover).await;
                return Ok(());
            }
            Attempt::JudgeAgain if judgement < context.plan.commit_attempts => {
                silver = context::reload_silver(context).await?;
            }
            Attempt::JudgeAgain => return Err(commit::still_stale(context.plan, judgement)),
        }
    }
    Ok(())
}

/// What a run that committed leaves to later runs: its drop's period
/// metrics kept as those of the committed months, when they are exactly
/// those (every row committed, in months that held no row of the
/// contributor before), and its Silver rows, when it kept them, for the
/// next run of the process.
async fn hand_on(
    context: &Context<'_>,
    summary: &Summary,
    (kept, fresh_months): (Option<MonthKeeper>, Option<(NaiveDate, NaiveDate)>),
    handover: &mut Handover,
) {
    let (RunStatus::Committed, Some(snapshot_id)) = (summary.status, summary.snapshot_id) else {
        return;
    };
    let every_row = summary.counts.committed == summary.counts.received;
    if let (Some(months), true) = (fresh_months, every_row && !summary.aggregates.is_empty()) {
        let contributor = &context.drop.contributor;
        let periods = async {
            let silver = context::reload_silver(context).await?;
            // Rows of the contributor committed since (another run, a
            // delete): the drop's metrics are no longer those of the months.
            if !rows_of_unchanged_since(&silver, snapshot_id, contributor) {
                return Ok(());
            }
            let reports: Vec<_> = summary
                .aggregates
                .iter()
                .map(|report| (report.period.as_str(), &report.metrics))
                .collect();
            let on = (&silver, &context.dq_error);
            let drop = (contributor.as_str(), months, &reports[..]);
            evaluate::committed::keep_drop_periods(context.plan, drop, on, &context.memory).await
        };
        if let Err(error) = periods.await {
            tracing::warn!(error = %error, "the drop's period metrics not kept: a later run measures them");
        }
    }
    handover.carried = kept
        .and_then(|kept| kept.committed(snapshot_id))
        .map(Arc::new);
    if let Some(month) = &handover.carried {
        tracing::debug!(
            rows = month.rows(),
            "the rows committed are kept as the next run's history"
        );
    }
}

/// A committed run, as the exception stage needs it.
fn committed_run(summary: &Summary, run_id: &str, run_date: &str) -> exceptions::CommittedRun {
    exceptions::CommittedRun {
        drop: DropRef {
            contributor: summary.contributor.clone(),
            drop_id: summary.drop_id.clone(),
        },
        run_key: summary.run_key.clone().unwrap_or_default(),
        run_id: run_id.to_string(),
        run_date: run_date.to_string(),
        started_at: summary.started_at.clone(),
    }
}
