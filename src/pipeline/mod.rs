//! One run, stage by stage, as DESIGN.md draws it:
//!
//! ```text
//! claim -> read -> baseline -> evaluate -> route -> write -> balance -> commit -> summary
//! ```
//!
//! [`run`] calls one function per stage and records what each did in the
//! [`Summary`]; the stages pass named types (`Batch`, `Baselined`, `Judged`,
//! `Routed`, `Written`, `Balanced`), and only a `Balanced` run can be committed.

pub mod background;
pub mod balance;
pub mod baseline;
pub mod claim;
pub mod commit;
pub mod evaluate;
pub mod exceptions;
pub mod lineage;
pub mod mask;
pub mod read;
pub mod route;
pub mod summary;
pub mod write;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use iceberg::Catalog;
use iceberg::table::Table;
use tracing::Instrument;

use crate::progress::Progress;
use background::Background;
use evaluate::reference::KnownKeys;

use crate::config::Plan;
use crate::config::rules::{Rule, Scope, Severity, rules_fingerprint};
use crate::core::drop::DropRef;
use crate::core::place::RunPlace;
use crate::core::set_aside::SetAside;
use crate::error::{Error, Result};
use crate::exceptions::record::{ExceptionIds, load_carried};
use crate::infra::append::{Committed, JudgedOn, discard_files};
use crate::infra::catalog::{connect, load_or_create_silver, table_ident};
use crate::infra::storage::{Location, Stores};
use claim::{Claim, Claimed};
use evaluate::RuleOutcome;
use route::RunStamp;
use summary::{RunStatus, Summary};

/// How to run.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    /// Do everything but the commit.
    pub dry_run: bool,
    /// Show a spinner naming the stage (the CLI sets it when stderr is a terminal).
    pub progress: bool,
    /// The drop replays exceptions: aggregate rules, which judge a whole
    /// period, are not run on its few rows (they judged the period already).
    pub replay: bool,
    /// Test hooks; leave at default outside tests.
    #[doc(hidden)]
    pub hooks: TestHooks,
}

/// Faults a test can inject to prove a safeguard works.
#[doc(hidden)]
#[derive(Debug, Clone, Default)]
pub struct TestHooks {
    /// Added to the Silver row count the balance check sees.
    pub miscount_silver_rows: i64,
    /// Where the run "dies" (stops at once, writing nothing more).
    pub crash_at: Option<CrashPoint>,
}

/// Points where a test can make a run die, to prove a rerun recovers.
#[doc(hidden)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CrashPoint {
    /// dq_error files and Silver data files written, nothing balanced or committed.
    AfterWrite,
    /// Balanced, not committed.
    BeforeCommit,
    /// Committed, summary not written.
    AfterCommit,
    /// While writing the summary (it is never written).
    DuringSummary,
}

impl TestHooks {
    fn crash_if(&self, point: CrashPoint) -> Result<()> {
        match self.crash_at {
            Some(at) if at == point => Err(Error::Injected(crash_name(point))),
            _ => Ok(()),
        }
    }
}

fn crash_name(point: CrashPoint) -> &'static str {
    match point {
        CrashPoint::AfterWrite => "after-write",
        CrashPoint::BeforeCommit => "before-commit",
        CrashPoint::AfterCommit => "after-commit",
        CrashPoint::DuringSummary => "during-summary",
    }
}

/// What a finished run reports.
#[derive(Debug, Clone)]
pub struct RunOutcome {
    /// The run summary.
    pub summary: Summary,
    /// Where the summary was written, if anywhere.
    pub summary_url: Option<String>,
}

/// The run's connections and table, opened once.
struct Context<'a> {
    plan: &'a Plan,
    drop: &'a DropRef,
    stores: Stores,
    bronze: Location,
    /// The dq_error root: claims, other runs' records, the exception files.
    dq_error: Location,
    /// Where this run writes its dq_error files: `dq_error`, or for a dry
    /// run a scratch store that vanishes with it (invariant 12).
    dq_out: Location,
    catalog: Arc<dyn Catalog>,
    silver: Table,
}

/// Runs one drop through every stage.
pub async fn run(plan: &Plan, drop: &DropRef, options: &RunOptions) -> Result<RunOutcome> {
    let span = tracing::info_span!(
        "run",
        contributor = %drop.contributor,
        drop_id = %drop.drop_id,
        run_id = tracing::field::Empty
    );
    run_stages(plan, drop, options).instrument(span).await
}

/// [`run`], inside the run's span (every log line carries contributor, drop and run id).
async fn run_stages(plan: &Plan, drop: &DropRef, options: &RunOptions) -> Result<RunOutcome> {
    let started = Instant::now();
    let (contributor_type, mut rules) = plan.rules_for(&drop.contributor)?;
    if options.replay {
        rules.retain(|r| r.scope != Scope::Aggregate);
    }
    let mut summary = new_summary(plan, drop, contributor_type, &rules);
    let context = open_context(plan, drop, options.dry_run).await?;
    // The references' keys do not depend on the drop: they load while the
    // drop is fetched, fingerprinted and read.
    let references = Background::spawn(
        "loading the references",
        evaluate::reference::load_known_keys(
            evaluate::references_read_by(plan, &rules),
            evaluate::reference::ReferenceSources {
                stores: context.stores.clone(),
                catalog: context.catalog.clone(),
            },
        ),
    );
    let claimed = claim::claim_run(
        &context.bronze,
        &context.dq_error,
        drop,
        &context.silver,
        options.dry_run,
    )
    .await;
    let claimed = match claimed {
        Ok(claimed) => claimed,
        Err(error) => {
            record_failed_claim(&context.dq_out, &mut summary, &error).await;
            return Err(error);
        }
    };
    time(&mut summary, "claim", started);
    let claim = match claimed {
        Claimed::Fresh(claim) => claim,
        Claimed::AlreadyCommitted {
            run_key,
            snapshot_id,
            run_place,
        } => {
            tracing::info!(%run_key, ?snapshot_id, "drop already committed: nothing to do");
            summary.status = RunStatus::AlreadyCommitted;
            summary.run_key = Some(run_key);
            summary.snapshot_id = snapshot_id;
            summary.finished_at = Some(now());
            if let (Some(place), false) = (run_place, options.dry_run) {
                summary.run_id = Some(place.run_id.clone());
                complete_committed_run(&context, &summary, &place).await?;
            }
            return Ok(RunOutcome {
                summary,
                summary_url: None,
            });
        }
    };
    summary.run_id = Some(claim.run_id.clone());
    summary.run_key = Some(claim.run_key.clone());
    let summary_path = Summary::path(&claim.run_date, &drop.contributor, &claim.run_id);
    tracing::Span::current().record("run_id", claim.run_id.as_str());
    if !options.dry_run {
        lineage::emit(plan, &context.stores, &summary).await;
    }
    let result = process(&context, (claim, references), &rules, options, &mut summary).await;
    summary.finished_at = Some(now());
    time(&mut summary, "total", started);
    if let Err(error) = &result {
        summary.status = RunStatus::Failed;
        summary.error = Some(error.to_string());
    }
    if summary.status == RunStatus::CommittedConcurrently {
        // The winner's summary is the record of this drop; leave it as it is.
        return Ok(RunOutcome {
            summary,
            summary_url: None,
        });
    }
    if let Err(Error::Injected(point)) = &result {
        // A crash writes nothing more: no failed summary either.
        return Err(Error::Injected(point));
    }
    if options.dry_run {
        // A dry run's summary is its outcome; it never lands where a real run's record lives.
        result?;
        return Ok(RunOutcome {
            summary,
            summary_url: None,
        });
    }
    options.hooks.crash_if(CrashPoint::DuringSummary)?;
    lineage::emit(plan, &context.stores, &summary).await;
    let written = summary.write(&context.dq_error, &summary_path).await;
    result?;
    Ok(RunOutcome {
        summary,
        summary_url: Some(written?),
    })
}

async fn open_context<'a>(plan: &'a Plan, drop: &'a DropRef, dry_run: bool) -> Result<Context<'a>> {
    let stores = Stores::new(&plan.storage, plan.catalog.warehouse()).await?;
    let bronze = stores.open(&plan.storage.bronze, "storage.bronze")?;
    let dq_error = stores.open(&plan.storage.dq_error, "storage.dq_error")?;
    let dq_out = if dry_run {
        stores.open("memory:///", "dry run scratch")?
    } else {
        dq_error.clone()
    };
    let catalog = connect(&plan.catalog, &stores).await?;
    let silver = load_or_create_silver(catalog.as_ref(), plan).await?;
    Ok(Context {
        plan,
        drop,
        stores,
        bronze,
        dq_error,
        dq_out,
        catalog,
        silver,
    })
}

/// read -> baseline -> evaluate -> route -> write -> balance -> commit.
async fn process(
    context: &Context<'_>,
    started: (Claim, Background<Vec<KnownKeys>>),
    rules: &[&Rule],
    options: &RunOptions,
    summary: &mut Summary,
) -> Result<()> {
    let progress = Progress::new(options.progress, &context.drop.prefix());
    let result = process_stages(context, started, rules, options, summary, &progress).await;
    progress.finish();
    result
}

/// The references' keys: loading in the background until first needed.
enum References {
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
struct Judgement {
    balanced: balance::Balanced,
    set_aside_files: BTreeMap<SetAside, String>,
    exception_ids: ExceptionIds,
}

/// The stages of [`process`], showing each on `progress`. The drop is read
/// once; it is judged on Silver as it is, and judged again whenever the commit
/// finds that rows of the contributor were committed since (by any run), so
/// that whatever commits first wins and a later run sees its keys.
async fn process_stages(
    context: &Context<'_>,
    (mut claim, references): (Claim, Background<Vec<KnownKeys>>),
    rules: &[&Rule],
    options: &RunOptions,
    summary: &mut Summary,
    progress: &Progress,
) -> Result<()> {
    let plan = context.plan;
    let clock = Instant::now();
    progress.stage("reading");
    let files = std::mem::take(&mut claim.files);
    let batch = read::read_drop(&plan.contract, &files)?;
    drop(files); // the drop's bytes are not needed once read
    summary.counts.received = batch.received;
    tracing::info!(
        received = batch.received,
        parse_rejects = batch.rejects.len(),
        "read"
    );
    lap(summary, "read", clock);
    let mut references = References::Loading(references);
    let mut silver = context.silver.clone();
    let mut judgements = 1;
    loop {
        let judged_on = JudgedOn::of(&silver);
        let judgement = judge_and_write(
            context,
            (&silver, &mut references),
            &batch,
            rules,
            &claim,
            (options, summary, progress),
        )
        .await?;
        let clock = Instant::now();
        progress.stage("committing");
        options.hooks.crash_if(CrashPoint::BeforeCommit)?;
        if options.dry_run {
            summary.status = RunStatus::DryRun;
            tracing::info!(would_commit = judgement.balanced.silver(), table = %table_ident(&plan.table), "dry run: nothing committed");
            discard_files(&silver, &judgement.balanced.into_data_files()).await;
            return Ok(());
        }
        summary.status = RunStatus::Committing;
        summary
            .write(
                &context.dq_error,
                &claim::staged_summary_path(&claim.run_key),
            )
            .await?;
        let place = claim.place();
        let identity = commit::RunIdentity {
            run_key: &claim.run_key,
            place: &place,
            rules_fingerprint: &summary.rules_fingerprint,
            judged_on,
        };
        let committed = commit::commit_silver(
            &context.catalog,
            plan,
            judgement.balanced,
            identity,
            &context.drop.contributor,
        )
        .await?;
        let clock = lap(summary, "commit", clock);
        options.hooks.crash_if(CrashPoint::AfterCommit)?;
        match committed {
            Committed::Snapshot(id) => {
                summary.status = RunStatus::Committed;
                summary.snapshot_id = Some(id);
                let run = committed_run(summary, &claim.run_id, &claim.run_date);
                let recorded = exceptions::record_events(
                    context,
                    &run,
                    &judgement.set_aside_files,
                    &judgement.exception_ids,
                )
                .await?;
                summary.backlog = Some(recorded);
                lap(summary, "exceptions", clock);
                return Ok(());
            }
            Committed::LostRace(id) => {
                tracing::warn!(
                    snapshot_id = ?id,
                    "a concurrent run of the same drop committed it first: nothing added"
                );
                summary.status = RunStatus::CommittedConcurrently;
                summary.snapshot_id = id;
                return Ok(());
            }
            Committed::Stale if judgements < plan.commit_attempts => {
                tracing::warn!(
                    judgement = judgements,
                    "rows of this contributor were committed while the run was judged: judging it again on the table as it is now"
                );
                judgements += 1;
                silver = reload_silver(context).await?;
            }
            Committed::Stale => return Err(still_stale(plan, judgements)),
        }
    }
}

/// baseline -> evaluate -> route -> write -> balance, on `silver` as it is.
async fn judge_and_write(
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
    progress.stage("baseline and rules");
    let committed_periods = evaluate::committed::start_committed_periods(
        plan,
        rules,
        contributor,
        &batch.rows,
        evaluate::committed::CommittedSources {
            silver,
            dq_error: &context.dq_out,
        },
    )?;
    let baselined = baseline::load_baseline(
        &plan.contract,
        rules,
        plan.lookback_months,
        contributor,
        batch.rows.clone(),
        silver,
    )
    .await?;
    if let Some((from, to)) = baselined.window {
        summary.baseline.window_from = Some(from.to_string());
        summary.baseline.window_to = Some(to.to_string());
    }
    clock = lap(summary, "baseline", clock);
    let known_keys = references.get().await?;
    let committed_periods = match committed_periods {
        Some(work) => Some(work.join().await?),
        None => None,
    };
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
    clock = lap(summary, "evaluate", clock);
    stop_on_fail_rules(&judged.outcomes)?;

    let carried = load_carried(&context.bronze, context.drop).await?;
    let stamp = RunStamp {
        run_id: claim.run_id.clone(),
        timestamp: summary.started_at.clone(),
        exception_ids: ExceptionIds::new(context.drop, carried),
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
    clock = lap(summary, "route", clock);
    progress.stage("writing");

    let written = write::write_outputs(
        &routed,
        &context.dq_out,
        silver,
        &claim.run_date,
        contributor,
        &claim.run_id,
    )
    .await?;
    summary.outputs.clear();
    if !options.dry_run {
        for (destination, path) in &written.set_aside_files {
            summary.outputs.insert(
                destination.kind().to_string(),
                context.dq_error.url_of(path),
            );
        }
    }
    let set_aside_files = written.set_aside_files.clone();
    clock = lap(summary, "write", clock);
    options.hooks.crash_if(CrashPoint::AfterWrite)?;

    let balanced = balance::check_balance(
        batch.received,
        written,
        &context.dq_out,
        options.hooks.miscount_silver_rows,
    )
    .await?;
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
    lap(summary, "balance", clock);
    Ok(Judgement {
        balanced,
        set_aside_files,
        exception_ids: stamp.exception_ids,
    })
}

async fn reload_silver(context: &Context<'_>) -> Result<Table> {
    let ident = table_ident(&context.plan.table);
    context
        .catalog
        .load_table(&ident)
        .await
        .map_err(Error::catalog("load-table", ident.to_string()))
}

/// Other runs of the contributor kept committing for every judgement: a retry later is safe.
fn still_stale(plan: &Plan, judgements: u32) -> Error {
    let target = table_ident(&plan.table).to_string();
    Error::catalog("commit", &target)(iceberg::Error::new(
        iceberg::ErrorKind::CatalogCommitConflicts,
        format!(
            "rows of this contributor were committed by other runs during each of {judgements} judgements of this drop; nothing committed"
        ),
    ))
}

/// The rerun of a committed run completes what it left undone: its exception
/// events, then its summary.
async fn complete_committed_run(
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
async fn restore_missing_summary(
    context: &Context<'_>,
    summary: &Summary,
    place: &RunPlace,
) -> Result<()> {
    let path = Summary::path(&place.run_date, &context.drop.contributor, &place.run_id);
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
async fn read_json(location: &Location, path: &str) -> Result<Option<serde_json::Value>> {
    let found = location.get_opt(path).await?;
    Ok(found.and_then(|bytes| serde_json::from_slice(&bytes).ok()))
}

fn to_json<T: serde::Serialize>(value: &T) -> Result<serde_json::Value> {
    serde_json::to_value(value).map_err(|source| Error::Encode {
        what: "run summary",
        source,
    })
}

/// A summary from the counts in the committing snapshot's properties (runs that
/// committed before summaries were written ahead of the commit).
fn rebuilt_from_snapshot(context: &Context<'_>, summary: &Summary, place: &RunPlace) -> Summary {
    let properties = summary
        .snapshot_id
        .and_then(|id| context.silver.metadata().snapshot_by_id(id))
        .map(|s| s.summary().additional_properties.clone())
        .unwrap_or_default();
    let count = |name: &str| {
        properties
            .get(&format!("silverline.{name}"))
            .and_then(|v| v.parse().ok())
            .unwrap_or_default()
    };
    let mut restored = summary.clone();
    restored.run_id = Some(place.run_id.clone());
    restored.counts.received = count("received");
    restored.counts.committed = count("committed");
    restored.counts.quarantined = count("quarantined");
    restored.counts.dropped = count("dropped");
    restored.counts.pending = count("pending");
    restored.error = Some("summary rebuilt from the snapshot after an interrupted run".to_string());
    if let Some(fingerprint) = properties.get("silverline.rules-fingerprint") {
        restored.rules_fingerprint = fingerprint.clone();
    }
    restored
}

/// A drop that could not even be claimed (missing, empty, unreadable) still
/// leaves a `failed` summary for the orchestrator and the people behind it.
async fn record_failed_claim(dq_error: &Location, summary: &mut Summary, error: &Error) {
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

/// The parse rule's counts, listed first among the rule outcomes.
fn with_parse_outcome(outcomes: &[RuleOutcome], rejects: u64, received: u64) -> Vec<RuleOutcome> {
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
fn stop_on_fail_rules(outcomes: &[RuleOutcome]) -> Result<()> {
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

fn new_summary(plan: &Plan, drop: &DropRef, contributor_type: &str, rules: &[&Rule]) -> Summary {
    Summary {
        status: RunStatus::Running,
        run_id: None,
        run_key: None,
        dataset: plan.contract.name.clone(),
        table: table_ident(&plan.table).to_string(),
        contributor: drop.contributor.clone(),
        contributor_type: contributor_type.to_string(),
        drop_id: drop.drop_id.clone(),
        rules_fingerprint: rules_fingerprint(rules),
        started_at: now(),
        finished_at: None,
        counts: Default::default(),
        failures_by_severity: BTreeMap::new(),
        rules: Vec::new(),
        baseline: Default::default(),
        timings_ms: BTreeMap::new(),
        snapshot_id: None,
        outputs: BTreeMap::new(),
        aggregates: Vec::new(),
        backlog: None,
        error: None,
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

fn now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

fn time(summary: &mut Summary, stage: &str, since: Instant) {
    summary
        .timings_ms
        .insert(stage.to_string(), since.elapsed().as_millis() as u64);
}

fn lap(summary: &mut Summary, stage: &str, since: Instant) -> Instant {
    time(summary, stage, since);
    Instant::now()
}
