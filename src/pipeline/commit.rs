//! Commit: one Iceberg commit for all of a run's Silver rows (DESIGN.md
//! invariant 4). It takes only a [`Balanced`] run. The snapshot's properties
//! carry the run key, the counts and any schema evolution the run committed
//! before ([`SnapshotRecord`]), and an acceptance's who, why and what
//! ([`Acceptance`]), so the table's history tells what each run did; the run
//! ledger entry written in the same commit is how a rerun knows it has
//! nothing to do (see [`crate::infra::append`]).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use iceberg::Catalog;

use super::claim::{Claim, staged_summary_path};
use super::context::Context;
use super::exceptions::{contributor_watch, record_events};
use super::hooks::{self, CrashPoint};
use super::judge::Judgement;
use super::read::DropRows;
use super::summary::{RunStatus, Summary, lap};
use super::{RunOptions, committed_run};
use crate::config::Plan;
use crate::core::place::RunPlace;
use crate::core::set_aside::SetAside;
use crate::error::{Error, Result};
use crate::exceptions::close::Acceptance;
use crate::infra::append::{Committed, JudgedOn, RunAppend, append_for_run};
use crate::infra::catalog::table_ident;
use crate::infra::evolve::SchemaEvolution;
use crate::infra::ledger::{RUN_ID_PROPERTY, RUN_KEY_PROPERTY};
use crate::pipeline::balance::Balanced;
use crate::stage::Stage;

/// Who is committing: the run's key, place and the rule set that judged it.
#[derive(Debug, Clone, Copy)]
pub struct RunIdentity<'a> {
    /// contributor/drop/fingerprint.
    pub run_key: &'a str,
    /// The run's id and date.
    pub place: &'a RunPlace,
    /// Fingerprint of the resolved rule set.
    pub rules_fingerprint: &'a str,
    /// What the run's baseline saw of Silver, checked again at each attempt.
    pub judged_on: JudgedOn,
    /// What the contract changed in Silver's schema as the run opened it.
    pub schema_evolution: Option<&'a SchemaEvolution>,
    /// The acceptance whose rows the run commits, if it is one.
    pub accepted: Option<&'a Acceptance>,
}

/// What a commit attempt leaves the run to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Attempt {
    /// Committed (by this run or a concurrent run of the same drop): done.
    Done,
    /// Rows of the contributor were committed since the run was judged: judge again.
    JudgeAgain,
}

/// Commits a judged run: stages its summary beside its claim marker, appends
/// its Silver rows with its ledger entry, then records its exception events
/// (the drop's rows, `declared`, resolve the missing entities they declare).
pub(super) async fn commit_run(
    context: &Context<'_>,
    (claim, declared): (&Claim, &DropRows),
    judged: Judgement,
    judged_on: JudgedOn,
    (options, summary): (&RunOptions, &mut Summary),
) -> Result<Attempt> {
    let clock = Instant::now();
    summary.status = RunStatus::Committing;
    let staged = staged_summary_path(&claim.run_key);
    summary.write(&context.dq_error, &staged).await?;
    let place = claim.place();
    let identity = RunIdentity {
        run_key: &claim.run_key,
        place: &place,
        rules_fingerprint: &summary.rules_fingerprint,
        judged_on,
        schema_evolution: context.evolution.as_ref(),
        accepted: options.accept.as_ref(),
    };
    let contributor = &context.drop.contributor;
    let committed = commit_silver(
        &context.catalog,
        context.plan,
        judged.balanced,
        identity,
        contributor,
    )
    .await?;
    let clock = lap(summary, Stage::Commit, clock);
    hooks::crash_if(options, CrashPoint::AfterCommit)?;
    match committed {
        Committed::Snapshot(id) => {
            summary.status = RunStatus::Committed;
            summary.snapshot_id = Some(id);
            let run = committed_run(summary, &claim.run_id, &claim.run_date);
            let ids = &judged.exception_ids;
            let outputs = (&judged.set_aside_files, Some(declared));
            let after_commit = |source| Error::AfterCommit {
                source: Box::new(source),
            };
            record_events(context, &run, outputs, ids)
                .await
                .map_err(after_commit)?;
            let (backlog, alerts) = contributor_watch(context, summary, chrono::Utc::now())
                .await
                .map_err(after_commit)?;
            summary.backlog = Some(backlog);
            summary.alerts = alerts;
            lap(summary, Stage::Exceptions, clock);
            Ok(Attempt::Done)
        }
        Committed::LostRace(id) => {
            tracing::warn!(snapshot_id = ?id, "a concurrent run of the same drop committed it first: nothing added");
            summary.status = RunStatus::CommittedConcurrently;
            summary.snapshot_id = id;
            Ok(Attempt::Done)
        }
        Committed::Stale => {
            tracing::warn!(
                "rows of this contributor were committed while the run was judged: judging it again on the table as it is now"
            );
            Ok(Attempt::JudgeAgain)
        }
    }
}

/// Other runs of the contributor kept committing during every judgement: a retry later is safe.
pub(super) fn still_stale(plan: &Plan, judgements: u32) -> Error {
    let target = table_ident(&plan.table).to_string();
    Error::catalog("commit", &target)(iceberg::Error::new(
        iceberg::ErrorKind::CatalogCommitConflicts,
        format!(
            "rows of this contributor were committed by other runs during each of {judgements} judgements of this drop; nothing committed"
        ),
    ))
}

/// Appends the balanced run's data files to Silver in one snapshot, retrying
/// conflicts up to `plan.commit_attempts` times.
pub async fn commit_silver(
    catalog: &Arc<dyn Catalog>,
    plan: &Plan,
    balanced: Balanced,
    run: RunIdentity<'_>,
    contributor: &str,
) -> Result<Committed> {
    let mut properties = SnapshotRecord::of(&balanced, run).to_properties();
    properties.extend(
        run.accepted
            .map(Acceptance::to_properties)
            .unwrap_or_default(),
    );
    let append = RunAppend {
        run_key: run.run_key,
        place: run.place,
        properties,
        attempts: plan.commit_attempts,
        judged_on: Some((run.judged_on, contributor)),
    };
    append_for_run(
        catalog,
        &table_ident(&plan.table),
        balanced.into_data_files(),
        &append,
    )
    .await
}

/// What a Silver snapshot's properties say about the run that made it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SnapshotRecord {
    /// The run key.
    pub run_key: String,
    /// The run id.
    pub run_id: String,
    /// Fingerprint of the rule set that judged the run.
    pub rules_fingerprint: String,
    /// Records received.
    pub received: u64,
    /// Rows committed to Silver.
    pub committed: u64,
    /// Rows quarantined.
    pub quarantined: u64,
    /// Rows dropped.
    pub dropped: u64,
    /// Rows pending.
    pub pending: u64,
    /// The schema evolution the run committed before its rows, as text
    /// (`schema 0 -> 1: add column ...`).
    pub schema_evolution: Option<String>,
}

const RULES_PROPERTY: &str = "silverline.rules-fingerprint";

/// The snapshot property of [`SnapshotRecord::schema_evolution`].
pub const SCHEMA_EVOLUTION_PROPERTY: &str = "silverline.schema-evolution";

impl SnapshotRecord {
    /// The record of a balanced run.
    fn of(balanced: &Balanced, run: RunIdentity<'_>) -> SnapshotRecord {
        SnapshotRecord {
            run_key: run.run_key.to_string(),
            run_id: run.place.run_id.clone(),
            rules_fingerprint: run.rules_fingerprint.to_string(),
            received: balanced.received(),
            committed: balanced.silver(),
            quarantined: balanced.set_aside(SetAside::Quarantine),
            dropped: balanced.set_aside(SetAside::Dropped),
            pending: balanced.set_aside(SetAside::Pending),
            schema_evolution: run.schema_evolution.map(ToString::to_string),
        }
    }

    fn counts(&self) -> [(&'static str, u64); 5] {
        [
            ("received", self.received),
            ("committed", self.committed),
            ("quarantined", self.quarantined),
            ("dropped", self.dropped),
            ("pending", self.pending),
        ]
    }

    /// As snapshot properties.
    pub fn to_properties(&self) -> HashMap<String, String> {
        let mut properties: HashMap<String, String> = self
            .counts()
            .iter()
            .map(|(name, count)| (format!("silverline.{name}"), count.to_string()))
            .collect();
        properties.insert(RUN_KEY_PROPERTY.to_string(), self.run_key.clone());
        properties.insert(RUN_ID_PROPERTY.to_string(), self.run_id.clone());
        properties.insert(RULES_PROPERTY.to_string(), self.rules_fingerprint.clone());
        if let Some(evolution) = &self.schema_evolution {
            properties.insert(SCHEMA_EVOLUTION_PROPERTY.to_string(), evolution.clone());
        }
        properties
    }

    /// Read back from snapshot properties; a missing or unreadable count is 0.
    pub fn from_properties(properties: &HashMap<String, String>) -> SnapshotRecord {
        let text = |key: &str| properties.get(key).cloned().unwrap_or_default();
        let count = |name: &str| {
            properties
                .get(&format!("silverline.{name}"))
                .and_then(|v| v.parse().ok())
                .unwrap_or_default()
        };
        SnapshotRecord {
            run_key: text(RUN_KEY_PROPERTY),
            run_id: text(RUN_ID_PROPERTY),
            rules_fingerprint: text(RULES_PROPERTY),
            received: count("received"),
            committed: count("committed"),
            quarantined: count("quarantined"),
            dropped: count("dropped"),
            pending: count("pending"),
            schema_evolution: properties.get(SCHEMA_EVOLUTION_PROPERTY).cloned(),
        }
    }
}
