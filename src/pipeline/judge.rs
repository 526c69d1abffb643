//! One judgement of a drop on Silver as it is: baseline, evaluate, route,
//! write and balance. A run judges again when its commit finds the
//! contributor's rows committed meanwhile.

use std::collections::BTreeMap;
use std::time::Instant;

use arrow::record_batch::RecordBatch;
use iceberg::table::Table;

use super::background::Background;
use super::claim::Claim;
use super::context::Context;
use super::evaluate::RuleOutcome;
use super::evaluate::reference::KnownKeys;
use super::route::RunStamp;
use super::summary::{MissingEntities, Summary, lap};
use super::write::MISSING_OUTPUT;
use super::{RunOptions, balance, baseline, evaluate, read, route, write};
use crate::config::contract::Contract;
use crate::config::rules::{Rule, Scope, Severity};
use crate::core::set_aside::SetAside;
use crate::error::{Error, Result};
use crate::exceptions::record::{ExceptionIds, load_carried};
use crate::exceptions::store::read_missing_record;
use crate::infra::catalog::exceptions_ident;
use crate::infra::datafile;
use crate::pipeline::hooks::{self, CrashPoint};
use crate::progress::Progress;
use crate::stage::Stage;

/// The references' keys: loading in the background until first needed.
pub(super) enum References {
    Loading(Background<Vec<KnownKeys>>),
    Loaded(Vec<KnownKeys>),
}

impl References {
    async fn get(&mut self) -> Result<&[KnownKeys]> {
        if let References::Loading(_) = self {
            let References::Loading(work) = std::mem::replace(self, References::Loaded(Vec::new()))
            else {
                return Err(Error::Internal("references changed state".to_string()));
            };
            *self = References::Loaded(work.join().await?);
        }
        match self {
            References::Loaded(keys) => Ok(keys),
            References::Loading(_) => Err(Error::Internal("references not loaded".to_string())),
        }
    }
}

/// What a judged, written and balanced run hands to the commit.
pub(super) struct Judgement {
    /// The balanced books and the Silver data files.
    pub(super) balanced: balance::Balanced,
    /// The dq_error files written, by kind.
    pub(super) set_aside_files: BTreeMap<SetAside, String>,
    /// The exception id of each row set aside.
    pub(super) exception_ids: ExceptionIds,
    /// The drop's entity keys and order column: what it declares.
    pub(super) declared: RecordBatch,
}

/// baseline -> evaluate -> route -> write -> balance, on `silver` as it is.
pub(super) async fn judge_and_write(
    context: &Context<'_>,
    (silver, references): (&Table, &mut References),
    batch: &read::Batch,
    rules: &[&Rule],
    claim: &Claim,
    (options, summary, progress): (&RunOptions, &mut Summary, &Progress),
) -> Result<Judgement> {
    let plan = context.plan;
    let contributor = &context.drop.contributor;
    let mut clock = Instant::now();
    progress.stage(Stage::Baseline);
    let recorded = match &plan.completeness {
        Some(_) => Some(
            read_missing_record(
                context.catalog.as_ref(),
                &exceptions_ident(plan),
                contributor,
            )
            .await?,
        ),
        None => None,
    };
    let committed_periods = evaluate::committed::start_committed_periods(
        plan,
        rules,
        contributor,
        &batch.rows,
        evaluate::committed::CommittedSources {
            silver,
            dq_error: &context.dq_error,
            keep: !options.dry_run,
            missing: recorded.as_ref().map(|r| r.by_period.clone()),
            memory: context.memory.clone(),
        },
    )?;
    // The record keys the drop declares, kept for the exception store once
    // the rows themselves are freed.
    let declared = declared_columns(&plan.contract, &batch.rows)?;
    // Read whenever `[completeness]` is set, so there for every run it judges.
    let expected =
        completeness_of(plan, options)
            .zip(recorded.as_ref())
            .map(|(completeness, recorded)| baseline::Expected {
                completeness,
                still_missing: &recorded.still_open,
            });
    let loaded = baseline::read_history(
        (&plan.contract, expected),
        (rules, &plan.metrics),
        (plan.lookback_months, &context.memory),
        contributor,
        batch.rows.clone(),
        silver,
    )
    .await?;
    // Measured while the history was read; awaited before the LAG, whose
    // peak memory a month measured meanwhile would add to.
    let committed_periods = match committed_periods {
        Some(work) => Some(work.join().await?),
        None => None,
    };
    let baselined = loaded.lag().await?;
    if let Some((from, to)) = baselined.window {
        summary.baseline.window_from = Some(from.to_string());
        summary.baseline.window_to = Some(to.to_string());
    }
    let missing = baselined.missing.clone();
    summary.missing_entities = missing.as_ref().map(MissingEntities::of);
    clock = lap(summary, Stage::Baseline, clock);
    let known_keys = references.get().await?;
    let judged =
        evaluate::evaluate_rules(baselined, rules, plan, (known_keys, committed_periods)).await?;
    summary.aggregates = judged.periods.clone();
    summary.baseline.rows_with_baseline = judged.with_baseline;
    summary.baseline.rows_without_baseline = judged.without_baseline;
    summary.set_rule_outcomes(with_parse_outcome(
        &judged.outcomes,
        batch.rejects.len() as u64,
        batch.received,
    ));
    clock = lap(summary, Stage::Evaluate, clock);
    stop_on_fail_rules(&judged.outcomes)?;

    let carried = load_carried(&context.bronze, context.drop).await?;
    let stamp = RunStamp {
        run_id: claim.run_id.clone(),
        timestamp: summary.started_at.clone(),
        exception_ids: ExceptionIds::new(context.drop, carried).closing(options.closing()),
    };
    let routed = route::route_rows(
        &plan.contract,
        &judged,
        &batch.rejects,
        &stamp,
        plan.mask_sensitive,
    )?;
    drop(judged); // routed holds what is kept
    summary.counts.warned = routed.warned;
    clock = lap(summary, Stage::Route, clock);
    progress.stage(Stage::Write);

    let place = claim.place();
    // A dry run's Silver data files are written (and counted) in a local
    // scratch folder, deleted when the judgement ends.
    let scratch = match options.dry_run {
        true => Some(dry_run_scratch(silver)?),
        false => None,
    };
    let sink = match &scratch {
        Some((_, relocated)) => relocated,
        None => silver,
    };
    let written = write::write_outputs(&routed, &context.dq_out, sink, &place, contributor).await?;
    let missing_file = write::write_missing(missing.as_ref(), context, &place, contributor).await?;
    summary.outputs.clear();
    if let (Some(path), false) = (missing_file, options.dry_run) {
        summary
            .outputs
            .insert(MISSING_OUTPUT.to_string(), context.dq_error.url_of(&path));
    }
    if !options.dry_run {
        for (destination, path) in &written.set_aside_files {
            summary.outputs.insert(
                destination.kind().to_string(),
                context.dq_error.url_of(path),
            );
        }
    }
    let set_aside_files = written.set_aside_files.clone();
    clock = lap(summary, Stage::Write, clock);
    hooks::crash_if(options, CrashPoint::AfterWrite)?;

    let mut counted = balance::count(written, &context.dq_out).await?;
    hooks::miscount(options, &mut counted);
    let balanced = counted.balance(batch.received)?;
    summary.counts.committed = balanced.silver();
    summary.counts.quarantined = balanced.set_aside(SetAside::Quarantine);
    summary.counts.dropped = balanced.set_aside(SetAside::Dropped);
    summary.counts.pending = balanced.set_aside(SetAside::Pending);
    tracing::info!(
        received = balanced.received(),
        committed = balanced.silver(),
        quarantined = summary.counts.quarantined,
        dropped = summary.counts.dropped,
        pending = summary.counts.pending,
        "balanced"
    );
    lap(summary, Stage::Balance, clock);
    Ok(Judgement {
        balanced,
        set_aside_files,
        exception_ids: stamp.exception_ids,
        declared,
    })
}

/// Which entities the drop's periods expect: none for a replay or an
/// acceptance, whose drops carry rows set aside, never a whole period (the
/// drop that brought the period was judged for it).
fn completeness_of<'a>(
    plan: &'a crate::config::Plan,
    options: &RunOptions,
) -> Option<&'a crate::config::rules::Completeness> {
    let partial = options.replay || options.accept.is_some();
    plan.completeness.as_ref().filter(|_| !partial)
}

/// The drop's entity key and order columns (shared, not copied).
fn declared_columns(contract: &Contract, rows: &RecordBatch) -> Result<RecordBatch> {
    let schema = rows.schema();
    let indices = contract
        .entity_key
        .iter()
        .chain(std::iter::once(&contract.order_column))
        .map(|c| {
            schema
                .index_of(c)
                .map_err(|_| Error::Internal(format!("judge: column {c} is missing")))
        })
        .collect::<Result<Vec<_>>>()?;
    rows.project(&indices).map_err(Error::arrow(Stage::Write))
}

/// The parse rule's counts, listed first among the rule outcomes.
pub(super) fn with_parse_outcome(
    outcomes: &[RuleOutcome],
    rejects: u64,
    received: u64,
) -> Vec<RuleOutcome> {
    let parse = RuleOutcome {
        rule: read::PARSE_RULE.to_string(),
        scope: Scope::Row,
        severity: Severity::Quarantine,
        trend: false,
        passed: received - rejects,
        failed: rejects,
        skipped_no_baseline: 0,
        not_applicable: 0,
        escalated: false,
    };
    std::iter::once(parse)
        .chain(outcomes.iter().cloned())
        .collect()
}

/// A `fail` rule that fired stops the run before anything is written.
pub(super) fn stop_on_fail_rules(outcomes: &[RuleOutcome]) -> Result<()> {
    match outcomes
        .iter()
        .find(|o| o.severity == Severity::Fail && o.failed > 0)
    {
        Some(o) => Err(Error::FailRule {
            rule: o.rule.clone(),
            rows: o.failed,
        }),
        None => Ok(()),
    }
}

/// A scratch folder for a dry run's Silver files, and Silver relocated there.
fn dry_run_scratch(silver: &Table) -> Result<(tempfile::TempDir, Table)> {
    let dir = tempfile::Builder::new()
        .prefix("silverline-dry-run-")
        .tempdir()
        .map_err(|source| Error::Io {
            path: std::env::temp_dir(),
            source,
        })?;
    let relocated = datafile::in_scratch(silver, dir.path())?;
    Ok((dir, relocated))
}
