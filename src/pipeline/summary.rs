//! Summary: the JSON record of one run, written to
//! `<dq_error>/summaries/date=<run date>/contributor=<id>/run=<run id>.json`.
//! Logs narrate; the summary is the record an orchestrator and a person read.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::infra::storage::Location;
use crate::pipeline::evaluate::RuleOutcome;
use std::time::Instant;

use crate::config::Plan;
use crate::config::rules::{Rule, rules_fingerprint};
use crate::core::counts::Counts;
use crate::core::drop::DropRef;
use crate::infra::catalog::table_ident;
use crate::infra::evolve::SchemaEvolution;
use crate::pipeline::evaluate::aggregate::PeriodReport;
use crate::stage::Stage;

/// How the run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    /// Still running (never written as final).
    Running,
    /// Silver rows committed (possibly with rows set aside).
    Committed,
    /// This drop was committed before: nothing done.
    AlreadyCommitted,
    /// A concurrent run of the same drop committed it while this one ran: nothing added.
    CommittedConcurrently,
    /// Everything but the commit.
    DryRun,
    /// Judged, written and balanced, being committed: the summary a run stages
    /// beside its claim marker just before its commit. A rerun of a committed
    /// drop without a final summary completes it and marks it committed.
    Committing,
    /// Stopped; nothing committed.
    Failed,
}

/// How much of the drop found its history.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct BaselineCoverage {
    /// First day of history read.
    pub window_from: Option<String>,
    /// Last day of history read.
    pub window_to: Option<String>,
    /// Rows with a previous state.
    pub rows_with_baseline: u64,
    /// Rows without one (their trend checks are skipped).
    pub rows_without_baseline: u64,
    /// Trend checks skipped for want of history (no previous state, or no
    /// previous value of an optional column the rule reads), over all trend rules.
    pub trend_checks_skipped: u64,
}

/// The version of the summary's layout that [`Summary::schema_version`] carries:
/// bumped when a change would break a reader (a field removed, renamed or
/// retyped); a new optional field leaves it as it is. `docs/summary.schema.json`
/// (`silverline schema summary`) describes this version.
pub const SUMMARY_SCHEMA_VERSION: u32 = 1;

/// The run summary.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Summary {
    /// The version of the summary's layout, bumped when a change would break
    /// a reader; read as 0 where absent (a summary written before versions were).
    #[serde(default)]
    #[schemars(extend("const" = SUMMARY_SCHEMA_VERSION))]
    pub schema_version: u32,
    /// How the run ended.
    pub status: RunStatus,
    /// Stable run id.
    pub run_id: Option<String>,
    /// contributor/drop/fingerprint.
    pub run_key: Option<String>,
    /// Dataset name.
    pub dataset: String,
    /// Silver table.
    pub table: String,
    /// Contributor id.
    pub contributor: String,
    /// Contributor type whose rule set was used.
    pub contributor_type: String,
    /// Drop id.
    pub drop_id: String,
    /// Fingerprint of the resolved rule set.
    pub rules_fingerprint: String,
    /// When the run started (RFC 3339).
    pub started_at: String,
    /// When it ended.
    pub finished_at: Option<String>,
    /// Row counts.
    pub counts: Counts,
    /// Failures per severity, over all rules.
    pub failures_by_severity: BTreeMap<String, u64>,
    /// Per-rule counts, the parse rule first.
    pub rules: Vec<RuleOutcome>,
    /// Baseline coverage.
    pub baseline: BaselineCoverage,
    /// Milliseconds per stage.
    pub timings_ms: BTreeMap<String, u64>,
    /// The snapshot that committed the run.
    pub snapshot_id: Option<i64>,
    /// dq_error files, by kind.
    pub outputs: BTreeMap<String, String>,
    /// Per-period metrics and aggregate rule outcomes.
    pub aggregates: Vec<PeriodReport>,
    /// The entities the drop leaves out (with `[completeness]`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub missing_entities: Option<MissingEntities>,
    /// The contributor's exception backlog after this run (committed runs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backlog: Option<crate::exceptions::figures::BacklogFigures>,
    /// The contributor's alerts after this run (committed runs; see `[alerts]`).
    #[serde(default)]
    pub alerts: Vec<crate::exceptions::alerts::Alert>,
    /// How many times the drop was judged: more than once when rows of the
    /// contributor were committed by other runs while it was judged.
    #[serde(default)]
    pub judgements: u32,
    /// Files whose columns differ from the contract's: extra columns (not
    /// read) and missing nullable columns (read as null).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub schema_drift: Vec<SchemaDrift>,
    /// What the contract changed in Silver's schema as the run opened it:
    /// committed before the run's rows (a dry run: what a run would change).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema_evolution: Option<SchemaEvolution>,
    /// Why the run failed.
    pub error: Option<String>,
    /// Null values per contract column of the rows read (`None` before the
    /// read): the run's OpenLineage data-quality metrics; not written.
    #[serde(skip)]
    #[schemars(skip)]
    pub column_nulls: Option<ColumnNulls>,
}

/// How many of the rows read hold no value, per contract column: counts
/// only, never a value.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ColumnNulls {
    /// Rows read (parsed).
    pub rows: u64,
    /// Nulls per column, by column name.
    pub nulls: BTreeMap<String, u64>,
}

impl Summary {
    /// A run's summary as it starts: nothing counted yet.
    pub fn new(plan: &Plan, drop: &DropRef, contributor_type: &str, rules: &[&Rule]) -> Summary {
        Summary {
            schema_version: SUMMARY_SCHEMA_VERSION,
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
            missing_entities: None,
            backlog: None,
            alerts: Vec::new(),
            judgements: 0,
            schema_drift: Vec::new(),
            schema_evolution: None,
            error: None,
            column_nulls: None,
        }
    }

    /// Where the summary of a drop that could not be claimed (no run id yet) is written.
    pub fn failed_claim_path(contributor: &str, drop_id: &str) -> String {
        let now = chrono::Utc::now();
        format!(
            "summaries/date={}/contributor={contributor}/drop={drop_id}-failed-{}.json",
            now.format("%Y-%m-%d"),
            now.format("%H%M%S%3f")
        )
    }

    /// Records the per-rule outcomes and derives the per-severity failure counts.
    pub fn set_rule_outcomes(&mut self, outcomes: Vec<RuleOutcome>) {
        self.failures_by_severity.clear();
        for outcome in &outcomes {
            *self
                .failures_by_severity
                .entry(outcome.severity.as_str().to_string())
                .or_default() += outcome.failed;
        }
        self.baseline.trend_checks_skipped = outcomes.iter().map(|o| o.skipped_no_baseline).sum();
        self.rules = outcomes;
    }

    /// Writes the summary as pretty JSON; returns its URL.
    pub async fn write(&self, dq_error: &Location, path: &str) -> Result<String> {
        let body = serde_json::to_vec_pretty(self).map_err(|source| Error::Encode {
            what: "run summary",
            source,
        })?;
        dq_error.put(path, body).await?;
        Ok(dq_error.url_of(path))
    }
}

/// The JSON Schema of the summaries this version writes, as pretty JSON (the
/// committed `docs/summary.schema.json`): every object closed to fields it
/// does not name, so a summary that drifts from its types fails validation.
pub fn summary_schema() -> Result<String> {
    let settings = schemars::generate::SchemaSettings::draft2020_12()
        .for_serialize()
        .with_transform(schemars::transform::RecursiveTransform(close_objects));
    let schema = settings.into_generator().into_root_schema_for::<Summary>();
    serde_json::to_string_pretty(&schema)
        .map(|text| text + "\n")
        .map_err(|source| Error::Encode {
            what: "summary schema",
            source,
        })
}

/// Closes an object schema with named properties to any other property.
fn close_objects(schema: &mut schemars::Schema) {
    if schema.get("properties").is_some() && schema.get("additionalProperties").is_none() {
        schema.insert("additionalProperties".into(), false.into());
    }
}

/// Now, as summaries write times (RFC 3339, milliseconds, UTC).
pub fn now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

impl Summary {
    /// The stages' times in the order they ran: `read=512ms baseline=372ms ...`.
    pub fn timings_line(&self) -> String {
        Stage::TIMED
            .iter()
            .filter_map(|stage| {
                let ms = self.timings_ms.get(stage.as_str())?;
                Some(format!("{}={ms}ms", stage.as_str()))
            })
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// Records how long `stage` took since `since`.
pub fn time(summary: &mut Summary, stage: Stage, since: Instant) {
    summary.timings_ms.insert(
        stage.as_str().to_string(),
        since.elapsed().as_millis() as u64,
    );
}

/// Records how long `stage` took since `since`; returns now, for the next stage.
pub fn lap(summary: &mut Summary, stage: Stage, since: Instant) -> Instant {
    time(summary, stage, since);
    Instant::now()
}

/// The entities expected in the drop's periods that it does not declare.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct MissingEntities {
    /// How many, per period of the drop (first day of the month).
    pub by_period: BTreeMap<String, u64>,
    /// How many in all.
    pub total: u64,
    /// They were never received: the balance (received = committed + set
    /// aside) does not count them.
    pub in_balance: bool,
}

impl MissingEntities {
    /// The summary's record of `missing`.
    pub fn of(missing: &crate::pipeline::baseline::Missing) -> MissingEntities {
        MissingEntities {
            by_period: missing
                .by_period
                .iter()
                .map(|(period, count)| (period.to_string(), *count))
                .collect(),
            total: missing.by_period.values().sum(),
            in_balance: false,
        }
    }
}

/// How one file's columns differ from the contract's (summary `schema_drift`).
#[derive(
    Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize, schemars::JsonSchema,
)]
pub struct SchemaDrift {
    /// File, relative to the drop.
    pub file: String,
    /// Columns of the file the contract lacks: not read.
    #[serde(default)]
    pub extra_columns: Vec<String>,
    /// Nullable contract columns the file lacks: read as null.
    #[serde(default)]
    pub missing_columns: Vec<String>,
}
