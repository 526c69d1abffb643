//! One judgement of a drop on Silver as it is: baseline, evaluate, route,
//! write and balance. A run judges again when its commit finds the
//! contributor's rows committed meanwhile.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use arrow::record_batch::RecordBatch;
use iceberg::spec::DataFile;
use iceberg::table::Table;

use super::background::Background;
use super::baseline::{Bucket, CommittedMonth, Missing, MonthKeeper, ReadColumns, SpilledHistory};
use super::claim::Claim;
use super::context::{self, Context};
use super::evaluate::aggregate::{DropMetricRows, Rows};
use super::evaluate::committed::CommittedPeriods;
use super::evaluate::reference::KnownKeys;
use super::evaluate::{OutcomeCounts, RuleOutcome, Verdicts};
use super::route::RunStamp;
use super::summary::{MissingEntities, Summary};
use super::write::MISSING_OUTPUT;
use super::{RunOptions, balance, baseline, evaluate, read, route, write};
use crate::config::Plan;
use crate::config::engine::CONTRIBUTOR_RULE;
use crate::config::rules::{Rule, Scope, Severity};
use crate::core::keys::Buckets;
use crate::core::set_aside::SetAside;
use crate::core::spill::{Spill, SpillDir, SpilledTable};
use crate::error::{Error, Result};
use crate::exceptions::record::{ExceptionIds, load_carried};
use crate::exceptions::store::read_missing_record;
use crate::infra::append::discard_files;
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

    /// The keys, if they were loaded (still loading: none, the work cancelled).
    pub(super) fn into_loaded(self) -> Vec<KnownKeys> {
        match self {
            References::Loaded(keys) => keys,
            References::Loading(_) => Vec::new(),
        }
    }
}

/// What a backfill's months hand on to each other.
pub(super) struct Handover {
    /// The month the run before committed, read in place of Silver's rows
    /// of it while it holds (taken by the first judgement).
    pub(super) carried: Option<Arc<CommittedMonth>>,
    /// Whether this run keeps the Silver rows it writes for the next run.
    pub(super) keep: bool,
    /// Whether the run read the month before from `carried`.
    pub(super) read_kept: bool,
}

/// What a judged, written and balanced run hands to the commit.
pub(super) struct Judgement {
    /// The balanced books and the Silver data files.
    pub(super) balanced: balance::Balanced,
    /// The dq_error files written, by kind.
    pub(super) set_aside_files: BTreeMap<SetAside, String>,
    /// The exception id of each row set aside.
    pub(super) exception_ids: ExceptionIds,
    /// The Silver rows written, kept for the next run (see [`Handover`]).
    pub(super) kept: Option<MonthKeeper>,
    /// The drop's whole months, when Silver held no row of the contributor
    /// in them before (what the run commits is then all they hold).
    pub(super) fresh_months: Option<(chrono::NaiveDate, chrono::NaiveDate)>,
}

/// baseline -> evaluate -> route -> write -> balance, on `silver` as it is.
///
/// A drop larger than half of `[resources] memory_limit` holds at once is
/// judged in buckets of entities (by key hash): each bucket is baselined
/// and its row rules evaluated, its outcomes kept in the scratch folder.
/// Its rows are judged, routed and written at once, as if no period failed
/// an aggregate rule and no rule escalated: once the periods are measured
/// and the rules' counts escalated over every bucket, that holds, or what
/// was written is discarded and each bucket's kept outcomes are judged
/// again. The books balance and the run commits once, as for one bucket.
pub(super) async fn judge_and_write(
    context: &Context<'_>,
    (silver, references, handover): (&Table, &mut References, &mut Handover),
    batch: &read::Batch,
    rules: &[&Rule],
    claim: &Claim,
    (options, summary, progress): (&RunOptions, &mut Summary, &Progress),
) -> Result<Judgement> {
    let plan = context.plan;
    let mut laps = Laps::start(summary);
    progress.stage(Stage::Baseline);
    let buckets = batch.rows.buckets();
    let spill = SpillDir::new(buckets.count() > 1, plan.resources.spilling())?;
    let contributor = &context.drop.contributor;
    let kept_month = handover
        .carried
        .take()
        .filter(|month| month.holds_on(silver, contributor));
    handover.read_kept = kept_month.is_some();
    if handover.read_kept {
        tracing::debug!("history of the month before kept from its run");
    }
    let carried = load_carried(&context.bronze, context.drop).await?;
    let stamp = RunStamp {
        run_id: claim.run_id.clone(),
        timestamp: summary.started_at.clone(),
        exception_ids: ExceptionIds::new(context.drop, carried).closing(options.closing()),
    };
    let place = claim.place();
    // A dry run's Silver data files are written (and counted) in a local
    // scratch folder, deleted when the judgement ends.
    let scratch = match options.dry_run {
        true => Some(dry_run_scratch(plan, silver)?),
        false => None,
    };
    let sink = match &scratch {
        Some((_, relocated)) => relocated,
        None => silver,
    };
    // A drop judged in buckets is too large to keep in memory.
    let keep = handover.keep && buckets.count() == 1;
    let on = (context, silver, batch);
    let kept_fresh = fresh_months(on, (rules, options), keep).await?;
    let keeper = || {
        kept_fresh.map(|months| {
            let read = ReadColumns {
                contract: &plan.contract,
                rules,
                metrics: &plan.metrics,
                completeness: plan.completeness.as_ref(),
            };
            MonthKeeper::new(months, read, contributor)
        })
    };
    let open = || {
        let router = (plan.mask_sensitive, &plan.resources);
        let router = route::Router::new(&plan.contract, &stamp, router);
        router.map(|router| Sinks {
            router,
            writers: datafile::SilverWriters::open(sink, &place.run_id),
            kept: keeper(),
        })
    };
    let mut sinks = open()?;
    let mut provisional = Verdicts::provisional(rules);
    let firsts = first_pass(
        context,
        (silver, references, kept_month),
        (batch, rules, options),
        (buckets, &spill),
        (&mut sinks, &mut provisional),
        (summary, &mut laps),
    )
    .await;
    // Closed before the periods are measured, so that the rows the
    // writers hold are written by then.
    let taken = sinks.finish().await?;
    let settled = match firsts {
        Ok(firsts) => settle(context, firsts, (batch, rules), summary).await,
        Err(error) => Err(error),
    };
    let (outcomes, mut verdicts, missing) = match settled {
        Ok(settled) => settled,
        Err(error) => {
            taken.discard(sink).await;
            return Err(error);
        }
    };
    laps.lap(summary, Stage::Evaluate);
    progress.stage(Stage::Write);
    let (taken, judged) = match verdicts.as_provisional() {
        true => {
            drop(outcomes);
            (taken, provisional)
        }
        false => {
            tracing::info!("a period failed or a rule escalated: judging every bucket again");
            taken.discard(sink).await;
            let again = (batch, &mut verdicts);
            let taken = judge_again(open()?, outcomes, again, (summary, &mut laps)).await?;
            (taken, verdicts)
        }
    };
    let Taken {
        data_files,
        router,
        kept,
    } = taken;
    laps.lap(summary, Stage::Write);
    summary.baseline.rows_with_baseline = judged.with_baseline;
    summary.baseline.rows_without_baseline = judged.without_baseline;
    let routed = router.finish(batch.rows.rejects()?)?;
    summary.counts.warned = routed.warned;
    laps.lap(summary, Stage::Route);

    let set_aside_files =
        write::write_set_aside(routed, &context.dq_out, (&place, contributor)).await?;
    let missing_file = write::write_missing(missing.as_ref(), context, &place, contributor).await?;
    summary.outputs.clear();
    if let (Some(path), false) = (missing_file, options.dry_run) {
        summary
            .outputs
            .insert(MISSING_OUTPUT.to_string(), context.dq_error.url_of(&path));
    }
    if !options.dry_run {
        for (destination, path) in &set_aside_files {
            summary.outputs.insert(
                destination.kind().to_string(),
                context.dq_error.url_of(path),
            );
        }
    }
    let written = write::Written {
        data_files,
        set_aside_files: set_aside_files.clone(),
    };
    laps.lap(summary, Stage::Write);
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
    laps.lap(summary, Stage::Balance);
    // What a committed run keeps its periods' metrics for (see `hand_on`).
    let fresh = match kept_fresh {
        Some(months) => Some(months),
        None if !keep => {
            let measured = !summary.aggregates.is_empty();
            fresh_months(on, (rules, options), measured).await?
        }
        None => None,
    };
    Ok(Judgement {
        balanced,
        set_aside_files,
        exception_ids: stamp.exception_ids,
        kept,
        fresh_months: fresh,
    })
}

/// What the first pass over the buckets leaves: what the verdicts need,
/// and the outcomes, should the buckets be judged again.
struct FirstPass {
    /// Each bucket's row and reference rules' outcomes, by row position
    /// (none kept when the final verdicts cannot differ from the first:
    /// [`Verdicts::may_differ`]).
    outcomes: Vec<Spill>,
    /// Every bucket's outcomes, counted.
    counts: OutcomeCounts,
    /// Every bucket's metric rows, when aggregate rules are measured.
    metric_rows: Option<DropMetricRows>,
    /// The committed periods the drop's periods are compared with.
    committed: Option<CommittedPeriods>,
}

/// Where a drop's judged rows go, bucket after bucket.
struct Sinks<'a> {
    /// The rows set aside.
    router: route::Router<'a>,
    /// Silver's rows.
    writers: datafile::SilverWriters,
    /// Silver's rows kept for the next run (see [`Handover`]).
    kept: Option<MonthKeeper>,
}

impl<'a> Sinks<'a> {
    /// Judges one bucket's `rows` (in the drop's order, their outcomes
    /// beside them), routes them and writes its Silver rows.
    async fn take(
        &mut self,
        rows: Vec<RecordBatch>,
        verdicts: &mut Verdicts<'_>,
        (summary, laps): (&mut Summary, &mut Laps),
    ) -> Result<()> {
        let judged = verdicts.judge(&rows)?;
        drop(rows);
        laps.lap(summary, Stage::Evaluate);
        let rows = self.router.route(&judged)?;
        drop(judged);
        if let Some(kept) = self.kept.as_mut() {
            kept.keep(&rows)?;
        }
        laps.lap(summary, Stage::Route);
        self.writers.write(&rows).await?;
        laps.lap(summary, Stage::Write);
        Ok(())
    }

    /// Closes the writers once every bucket is taken.
    async fn finish(self) -> Result<Taken<'a>> {
        Ok(Taken {
            data_files: self.writers.finish().await?,
            router: self.router,
            kept: self.kept,
        })
    }
}

/// What the sinks took, once closed.
struct Taken<'a> {
    /// Silver's data files.
    data_files: Vec<DataFile>,
    /// The rows set aside.
    router: route::Router<'a>,
    /// Silver's rows kept for the next run.
    kept: Option<MonthKeeper>,
}

impl Taken<'_> {
    /// Lets go of everything taken: the rows set aside with their folder,
    /// and the Silver data files, deleted from `sink` (best effort, as an
    /// orphan is harmless).
    async fn discard(self, sink: &Table) {
        discard_files(sink, &self.data_files).await;
    }
}

/// Judges every bucket again from its kept `outcomes` with the final
/// `verdicts`, into new `sinks`.
async fn judge_again<'a>(
    mut sinks: Sinks<'a>,
    outcomes: Vec<Spill>,
    (batch, verdicts): (&read::Batch, &mut Verdicts<'_>),
    (summary, laps): (&mut Summary, &mut Laps),
) -> Result<Taken<'a>> {
    if outcomes.len() != batch.rows.buckets().count() {
        return Err(Error::Internal(
            "judge: buckets judged again without their outcomes".to_string(),
        ));
    }
    for (index, outcomes) in outcomes.into_iter().enumerate() {
        let rows = evaluate::in_drop_order(batch.rows.bucket(index)?, &outcomes.read()?)?;
        drop(outcomes);
        laps.lap(summary, Stage::Evaluate);
        sinks
            .take(rows, verdicts, (&mut *summary, &mut *laps))
            .await?;
    }
    sinks.finish().await
}

/// Measures the periods and escalates the rules over every bucket's
/// counts: the final verdicts, with the outcomes kept and the entities
/// the drop leaves out; a `fail` rule that fired stops the run here.
async fn settle<'r>(
    context: &Context<'_>,
    (firsts, missing): (FirstPass, Option<Missing>),
    (batch, rules): (&read::Batch, &'r [&'r Rule]),
    summary: &mut Summary,
) -> Result<(Vec<Spill>, Verdicts<'r>, Option<Missing>)> {
    let plan = context.plan;
    let FirstPass {
        outcomes,
        counts,
        metric_rows,
        committed,
    } = firsts;
    let aggregate_rules: Vec<&Rule> = rules
        .iter()
        .copied()
        .filter(|r| r.scope == Scope::Aggregate)
        .collect();
    let periods = evaluate::aggregate::evaluate_aggregates(
        metric_rows,
        (&plan.metrics, missing.as_ref()),
        &aggregate_rules,
        (plan.average_periods, committed),
        &context.memory,
    )
    .await?;
    let mut verdicts = Verdicts::new(rules, periods, counts);
    verdicts.escalate();
    summary.aggregates = verdicts.periods().to_vec();
    summary.set_rule_outcomes(with_parse_outcome(
        &verdicts.outcomes,
        batch.rows.rejected(),
        batch.received,
    ));
    stop_on_fail_rules(&verdicts.outcomes)?;
    Ok((outcomes, verdicts, missing))
}

/// The drop's whole months, when `wanted` and Silver held no row of the
/// contributor in them before (what the run commits is then all they
/// hold); none for a dry run or when rows labelled with another
/// contributor may be committed.
async fn fresh_months(
    (context, silver, batch): (&Context<'_>, &Table, &read::Batch),
    (rules, options): (&[&Rule], &RunOptions),
    wanted: bool,
) -> Result<Option<(chrono::NaiveDate, chrono::NaiveDate)>> {
    match wanted && !options.dry_run && contributor_rows_only(rules) {
        true => {
            let (contract, contributor) = (&context.plan.contract, &context.drop.contributor);
            baseline::fresh_months(silver, contract, contributor, batch.rows.days()).await
        }
        false => Ok(None),
    }
}

/// Baselines each bucket and evaluates its row and reference rules,
/// keeping its outcomes and metric rows, and hands its rows to `sinks` as
/// `provisional` judges them (none once a `fail` rule fired); returns what
/// it kept with the entities the drop leaves out (with `[completeness]`).
async fn first_pass(
    context: &Context<'_>,
    (silver, references, carried): (&Table, &mut References, Option<Arc<CommittedMonth>>),
    (batch, rules, options): (&read::Batch, &[&Rule], &RunOptions),
    (buckets, spill): (&Buckets, &SpillDir),
    (sinks, provisional): (&mut Sinks<'_>, &mut Verdicts<'_>),
    (summary, laps): (&mut Summary, &mut Laps),
) -> Result<(FirstPass, Option<Missing>)> {
    let plan = context.plan;
    let contributor = &context.drop.contributor;
    let recorded = match &plan.completeness {
        Some(_) => Some(
            read_missing_record(
                context.catalog.as_ref(),
                &exceptions_ident(plan),
                contributor,
                &context.memory,
            )
            .await?,
        ),
        None => None,
    };
    let shape = baseline::DropShape::of(
        &plan.contract,
        batch.rows.days(),
        plan.lookback_months,
        completeness_of(plan, options).is_some() && recorded.is_some(),
    )?;
    let start_committed = || {
        evaluate::committed::start_committed_periods(
            plan,
            rules,
            contributor,
            shape.comparison_window(plan.lookback_months),
            evaluate::committed::CommittedSources {
                silver,
                dq_error: &context.dq_error,
                keep: !options.dry_run,
                missing: recorded.as_ref().map(|r| r.by_period.clone()),
                memory: context.memory.clone(),
                carried: carried.clone(),
            },
        )
    };
    // A drop judged whole measures them while its history is read; one in
    // buckets once its first bucket's history is read: that read spreads
    // Silver's months over the buckets, and the measurement's scans beside
    // it would add to its peak.
    let bucketed = buckets.count() > 1;
    let mut committed_work = match bucketed {
        true => None,
        false => start_committed()?,
    };
    let mut measure = committed_work.is_some();
    // Read whenever `[completeness]` is set, so there for every run it judges.
    let expected = || {
        completeness_of(plan, options)
            .zip(recorded.as_ref())
            .map(|(completeness, recorded)| baseline::Expected {
                completeness,
                still_missing: &recorded.still_open,
            })
    };
    let history = SpilledHistory::new(buckets, spill);
    let (outcomes_folder, metric_folder) = (spill.folder("outcomes")?, spill.folder("metrics")?);
    let mut firsts = FirstPass {
        outcomes: Vec::with_capacity(buckets.count()),
        counts: OutcomeCounts::new(rules),
        metric_rows: None,
        committed: None,
    };
    let (mut metric_spills, mut metric_schema) = (Vec::new(), None);
    let mut entity_counts: Option<Rows> = None;
    let mut missing = Vec::new();
    for index in 0..buckets.count() {
        let bucket = Bucket {
            buckets,
            index,
            history: (buckets.count() > 1).then_some(&history),
        };
        let drop_rows = batch.rows.bucket(index)?;
        let loaded = baseline::read_history(
            (&plan.contract, expected()),
            (rules, &plan.metrics),
            (plan.lookback_months, &context.memory),
            (&shape, &bucket),
            contributor,
            drop_rows.clone(),
            (silver, carried.as_deref()),
        )
        .await?;
        if bucketed && index == 0 {
            committed_work = start_committed()?;
            measure = committed_work.is_some();
        }
        // Measured while the history was read and the buckets before the
        // last were judged; awaited before the last bucket's LAG (a drop
        // judged whole has one), whose peak memory a month measured
        // meanwhile would add to.
        if index + 1 == buckets.count()
            && let Some(work) = committed_work.take()
        {
            firsts.committed = Some(work.join().await?);
        }
        let mut baselined = loaded.lag().await?;
        if let Some((from, to)) = baselined.window {
            summary.baseline.window_from = Some(from.to_string());
            summary.baseline.window_to = Some(to.to_string());
        }
        missing.extend(baselined.missing.take());
        laps.lap(summary, Stage::Baseline);
        // Loaded beside the read and the first history read.
        let known_keys = references.get().await?;
        let outcomes =
            evaluate::bucket_outcomes(baselined, rules, plan, (known_keys, measure)).await?;
        let name = format!("bucket-{index}");
        if let Some(metrics) = outcomes.metrics {
            let (schema, rows) = metrics.rows;
            metric_schema = Some(schema);
            metric_spills.push(spill.keep((metric_folder.as_deref(), &name), rows)?);
            if let Some((schema, counts)) = metrics.entity_counts {
                entity_counts
                    .get_or_insert_with(|| (schema, Vec::new()))
                    .1
                    .extend(counts);
            }
        }
        firsts.counts.count(&outcomes.rows)?;
        // Nothing more is written once a `fail` rule fired: the run stops.
        let rows = match firsts.counts.stops() {
            false => Some(evaluate::in_drop_order(drop_rows, &outcomes.rows)?),
            true => None,
        };
        // Kept for a second judgement only where one may be needed.
        if provisional.may_differ() {
            let kept = spill.keep((outcomes_folder.as_deref(), &name), outcomes.rows)?;
            firsts.outcomes.push(kept);
        }
        laps.lap(summary, Stage::Evaluate);
        if let Some(rows) = rows {
            sinks
                .take(rows, provisional, (&mut *summary, &mut *laps))
                .await?;
        }
    }
    firsts.metric_rows = metric_schema.map(|schema| DropMetricRows {
        rows: SpilledTable {
            schema,
            spills: metric_spills,
            folder: metric_folder,
        },
        entity_counts,
    });
    let missing = Missing::merge(missing)?;
    summary.missing_entities = missing.as_ref().map(MissingEntities::of);
    Ok((firsts, missing))
}

/// How long each stage took, summed over the buckets, as the summary
/// shows it (a judgement again starts from nought).
struct Laps {
    clock: Instant,
}

impl Laps {
    const STAGES: [Stage; 5] = [
        Stage::Baseline,
        Stage::Evaluate,
        Stage::Route,
        Stage::Write,
        Stage::Balance,
    ];

    fn start(summary: &mut Summary) -> Laps {
        for stage in Self::STAGES {
            summary.timings_ms.remove(stage.as_str());
        }
        Laps {
            clock: Instant::now(),
        }
    }

    /// Adds the time since the last lap to `stage`.
    fn lap(&mut self, summary: &mut Summary, stage: Stage) {
        *summary
            .timings_ms
            .entry(stage.as_str().to_string())
            .or_default() += self.clock.elapsed().as_millis() as u64;
        self.clock = Instant::now();
    }
}

/// Whether every row committed is of the drop's contributor: not when the
/// engine's `contributor` rule only warns (`[engine_rules]`).
fn contributor_rows_only(rules: &[&Rule]) -> bool {
    rules
        .iter()
        .filter(|r| r.name == CONTRIBUTOR_RULE)
        .all(|r| r.severity != Severity::Warn)
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

/// A `fail` rule that fired stops the run before anything is committed.
pub(super) fn stop_on_fail_rules(outcomes: &[RuleOutcome]) -> Result<()> {
    match outcomes.iter().find(|o| o.stops_the_run()) {
        Some(o) => Err(Error::FailRule {
            rule: o.rule.clone(),
            rows: o.failed,
        }),
        None => Ok(()),
    }
}

/// A scratch folder for a dry run's Silver files, and Silver relocated there.
fn dry_run_scratch(plan: &Plan, silver: &Table) -> Result<(tempfile::TempDir, Table)> {
    let dir = context::dry_run_folder(plan, "silver")?;
    let relocated = datafile::in_scratch(silver, dir.path())?;
    Ok((dir, relocated))
}
