//! Accepting a legitimate change, with an audit trail: `silverline accept`
//! commits the rows a drop's runs set aside, as judged, once a person says
//! that what a rule caught is legitimate (the contributor sold a portfolio,
//! and the `volume` rule set the whole month aside).
//!
//! The drop's open exceptions are taken when every reason that set the row
//! aside is the accepted rule (`--rule`), or any rule without it; rows set
//! aside by an engine rule (`not_null` and the key invariants `unique_key`,
//! `resubmission`, `contributor`) or that did not parse are never taken, and
//! the outcome counts what was left open and why. The rows, with the values
//! their dq_error files hold, become an accept drop in bronze
//! (`<contributor>/accept-<hash>/accept.csv` and the manifest naming each
//! line's exception), run like any drop but judged by the engine's rules alone:
//! the rules' verdicts are accepted, the key invariants are checked again on
//! Silver as it is, so a key already committed is set aside as a
//! `resubmission`, never doubled. The rows that reach Silver close their
//! exceptions as `accepted`, with who and why, in the same balanced commit
//! path as a run, and the snapshot carries the acceptance
//! (`silverline.accepted.*`). The month is then in Silver: the next month's
//! aggregate rules compare with it (committed months are measured by their
//! exact files, so nothing measured before the acceptance is reused).
//!
//! Accepting twice commits once: the same rows make the same drop, whose run
//! key the ledger holds, and an accepted exception is closed.

use std::collections::{BTreeMap, BTreeSet};

use serde::Deserialize;

use crate::config::Plan;
use crate::config::engine::is_engine_rule;
use crate::config::rules::Severity;
use crate::core::drop::DropRef;
use crate::core::set_aside::SetAside;
use crate::error::{Error, Result};
use crate::exceptions::close::{Acceptance, Decision};
use crate::exceptions::store::{Opened, latest_events, open_exceptions};
use crate::exceptions::{ExceptionEvent, ExceptionStatus};
use crate::pipeline::read::PARSE_RULE;
use crate::pipeline::summary::RunStatus;
use crate::pipeline::{RunOptions, RunOutcome, run};
use crate::replay::{dq_file_rows, put_replay_drop};

pub use crate::core::drop::ACCEPT;

/// What to accept.
#[derive(Debug, Clone)]
pub struct AcceptRequest {
    /// The drop whose set-aside rows are accepted.
    pub drop: DropRef,
    /// The rule whose verdicts are accepted; None: every rule that may be.
    pub rule: Option<String>,
    /// Who accepts and why.
    pub decision: Decision,
    /// Only these exceptions of the drop (the workbench accepts one at a
    /// time); None: every open exception of the drop the rule covers.
    pub only: Option<BTreeSet<String>>,
}

/// Why an open exception of the drop was left open.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum LeftOpen {
    /// Set aside by this engine rule, or because it did not parse: never accepted.
    Invariant(String),
    /// Set aside by this rule, which the acceptance does not cover.
    OtherRule(String),
    /// An entity the drop did not declare: there is no row to accept.
    Missing,
}

impl std::fmt::Display for LeftOpen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LeftOpen::Invariant(rule) => write!(
                f,
                "set aside by {rule}, which guards Silver's keys and contract: never accepted"
            ),
            LeftOpen::OtherRule(rule) => {
                write!(
                    f,
                    "set aside by {rule}, which this acceptance does not cover"
                )
            }
            LeftOpen::Missing => write!(
                f,
                "missing from the drop: no row to accept (declare it in a later drop, or close it with `exceptions ignore`)"
            ),
        }
    }
}

/// What an acceptance did.
#[derive(Debug)]
pub struct AcceptOutcome {
    /// Open exceptions whose rows were put in the accept drop.
    pub accepted: usize,
    /// Open exceptions of the drop left open, by why.
    pub left: BTreeMap<LeftOpen, usize>,
    /// Exceptions of the drop already closed (resolved, accepted, ignored).
    pub closed: usize,
    /// The accept drop's run, when there was something to accept.
    pub run: Option<RunOutcome>,
}

/// Commits the rows `request.drop`'s runs set aside, as judged, for
/// `request.rule` (or every rule), running the accept drop with `options`.
pub async fn accept(
    plan: &Plan,
    request: &AcceptRequest,
    options: &RunOptions,
) -> Result<AcceptOutcome> {
    check_rule(plan, request)?;
    let Opened {
        stores,
        catalog: _,
        exceptions: table,
    } = open_exceptions(plan).await?;
    let dq_error = stores.open(&plan.storage.dq_error, "storage.dq_error")?;
    let bronze = stores.open(&plan.storage.bronze, "storage.bronze")?;
    let contributor = Some(request.drop.contributor.as_str());
    let memory = plan.query_memory()?;
    let of_drop = latest_events(&table, contributor.into(), &memory, |state| {
        asked_for(state.latest, request)
    })
    .await?;
    let (taken, mut outcome) = select(&of_drop, request);
    if taken.is_empty() {
        return Ok(outcome);
    }
    if plan.mask_sensitive {
        return Err(Error::Usage {
            arg: "quarantine.mask_sensitive".to_string(),
            reason: "the rows set aside are kept with their sensitive columns masked, so they cannot be committed as judged: put them, unmasked, under the corrections folder and replay them with --include-quarantined".to_string(),
        });
    }
    let kinds = [SetAside::Quarantine, SetAside::Pending];
    let rows = dq_file_rows(&dq_error, &taken, &kinds).await?;
    let contributor = request.drop.contributor.as_str();
    let drop = put_replay_drop(plan, &bronze, (contributor, ACCEPT), &rows).await?;
    let run_options = RunOptions {
        accept: Some(acceptance(request, &taken)),
        ..options.clone()
    };
    tracing::info!(drop_id = %drop.drop_id, rows = rows.len(), "accepting");
    outcome.accepted = rows.len();
    outcome.run = Some(run(plan, &drop, &run_options).await?);
    Ok(outcome)
}

/// Whether `latest`, an exception's latest event, is of the drop `request`
/// accepts (and among its ids, when it names some).
fn asked_for(latest: &ExceptionEvent, request: &AcceptRequest) -> bool {
    latest.drop_id == request.drop.drop_id
        && request
            .only
            .as_ref()
            .is_none_or(|ids| ids.contains(&latest.exception_id))
}

/// The open exceptions to accept among `of_drop` (the latest event of each
/// exception [`asked_for`]), and an outcome counting the others: those left
/// open, by why, and those already closed.
fn select<'a>(
    of_drop: &'a [ExceptionEvent],
    request: &AcceptRequest,
) -> (Vec<&'a ExceptionEvent>, AcceptOutcome) {
    let mut outcome = AcceptOutcome {
        accepted: 0,
        left: BTreeMap::new(),
        closed: 0,
        run: None,
    };
    let mut taken = Vec::new();
    for exception in of_drop {
        if !exception.status.is_open() {
            outcome.closed += 1;
            continue;
        }
        if exception.status == ExceptionStatus::Missing {
            *outcome.left.entry(LeftOpen::Missing).or_default() += 1;
            continue;
        }
        match left_open(exception, request.rule.as_deref()) {
            None => taken.push(exception),
            Some(why) => *outcome.left.entry(why).or_default() += 1,
        }
    }
    (taken, outcome)
}

/// What the accept drop's snapshot records: who, why, what, and the runs
/// that set the `taken` rows aside.
fn acceptance(request: &AcceptRequest, taken: &[&ExceptionEvent]) -> Acceptance {
    let runs: BTreeSet<&str> = taken.iter().map(|e| e.run_id.as_str()).collect();
    Acceptance {
        decision: request.decision.clone(),
        drop_id: request.drop.drop_id.clone(),
        rule: request.rule.clone(),
        runs: runs.into_iter().map(str::to_string).collect(),
    }
}

/// `--rule` must name a rule of the contributor's rule set that is not the engine's.
fn check_rule(plan: &Plan, request: &AcceptRequest) -> Result<()> {
    let Some(rule) = &request.rule else {
        return Ok(());
    };
    let contributor = &request.drop.contributor;
    let refuse = |reason: String| {
        Err(Error::Usage {
            arg: "--rule".to_string(),
            reason,
        })
    };
    if is_engine_rule(rule) || rule == PARSE_RULE {
        return refuse(format!(
            "'{rule}' guards Silver's keys and contract: the rows it sets aside cannot be accepted"
        ));
    }
    let (_, rules) = plan.rules_for(contributor)?;
    if !rules.iter().any(|r| r.name == *rule) {
        return refuse(format!(
            "{contributor}'s rule set has no rule '{rule}' (silverline rules --contributor {contributor} lists its rules)"
        ));
    }
    Ok(())
}

/// One reason a row was set aside, as its dq_error file and event record it.
#[derive(Debug, Deserialize)]
struct Reason {
    rule: String,
    severity: String,
}

/// Why `exception` stays open when `rule` (None: every rule) is accepted;
/// None when it is accepted. Only reasons that set the row aside count (a
/// warning does not), and every one of them must be accepted.
fn left_open(exception: &ExceptionEvent, rule: Option<&str>) -> Option<LeftOpen> {
    let reasons: Vec<Reason> = match serde_json::from_str(&exception.reasons) {
        Ok(reasons) => reasons,
        Err(_) => return Some(LeftOpen::Invariant("unreadable reasons".to_string())),
    };
    let setting_aside: Vec<&str> = reasons
        .iter()
        .filter(|r| Severity::parse(&r.severity) != Some(Severity::Warn))
        .map(|r| r.rule.as_str())
        .collect();
    if setting_aside.is_empty() {
        return Some(LeftOpen::Invariant("no recorded reason".to_string()));
    }
    if let Some(invariant) = setting_aside
        .iter()
        .find(|r| is_engine_rule(r) || **r == PARSE_RULE)
    {
        return Some(LeftOpen::Invariant(invariant.to_string()));
    }
    // Without --rule every reason left is accepted.
    let rule = rule?;
    setting_aside
        .iter()
        .find(|r| **r != rule)
        .map(|other| LeftOpen::OtherRule(other.to_string()))
}

impl AcceptOutcome {
    /// What the acceptance did, for a person, one line each.
    pub fn describe(&self, request: &AcceptRequest) -> Vec<String> {
        let drop = request.drop.prefix();
        let rule = request
            .rule
            .as_deref()
            .map_or_else(|| "every rule".to_string(), |r| format!("rule {r}"));
        let mut lines: Vec<String> = self
            .left
            .iter()
            .map(|(why, count)| format!("left open: {count} exception(s) of {drop} {why}"))
            .collect();
        let Some(run) = &self.run else {
            lines.push(format!(
                "nothing to accept for {drop} ({rule}): no open exception of it may be accepted ({} already closed)",
                self.closed
            ));
            return lines;
        };
        let summary = &run.summary;
        let counts = &summary.counts;
        lines.push(match summary.status {
            RunStatus::AlreadyCommitted => format!(
                "accept drop {} of {drop} was already committed: its exceptions are recorded as accepted",
                summary.drop_id
            ),
            RunStatus::CommittedConcurrently => format!(
                "accept drop {} of {drop} was committed by a concurrent accept while this one ran: nothing added",
                summary.drop_id
            ),
            _ => format!(
                "{drop} ({rule}), accepted by {}: {} exception(s) run as drop {}; {} committed to Silver in snapshot {} and closed as accepted, {} set aside again by the engine's rules (still open)",
                request.decision.by(),
                self.accepted,
                summary.drop_id,
                counts.committed,
                summary.snapshot_id.unwrap_or_default(),
                counts.quarantined + counts.dropped + counts.pending
            ),
        });
        if let Some(url) = &run.summary_url {
            lines.push(format!("summary: {url}"));
        }
        lines
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exception(reasons: &str) -> ExceptionEvent {
        let at = chrono::DateTime::from_timestamp(1_800_000_000, 0).unwrap_or_default();
        ExceptionEvent {
            exception_id: "e1".to_string(),
            contributor: "BANK_A".to_string(),
            drop_id: "2026-03".to_string(),
            run_id: "0123456789abcdef".to_string(),
            status: crate::exceptions::ExceptionStatus::Quarantined,
            rule: String::new(),
            rules: String::new(),
            severity: "quarantine".to_string(),
            reasons: reasons.to_string(),
            record_key: None,
            source_file: None,
            source_line: None,
            dq_file: None,
            entered_at: at,
            event_at: at,
            actor: None,
            note: None,
        }
    }

    fn reasons(list: &[(&str, &str)]) -> String {
        let list: Vec<serde_json::Value> = list
            .iter()
            .map(|(rule, severity)| serde_json::json!({"rule": rule, "severity": severity, "message": "m"}))
            .collect();
        serde_json::Value::Array(list).to_string()
    }

    #[test]
    fn a_row_is_accepted_only_when_every_reason_that_set_it_aside_is() {
        let volume = reasons(&[("volume", "quarantine"), ("temp_limit_zero", "warn")]);
        let both = reasons(&[("volume", "quarantine"), ("limit_stable", "quarantine")]);
        let key = reasons(&[("volume", "quarantine"), ("resubmission", "quarantine")]);
        let parse = reasons(&[("parse", "quarantine")]);
        let missing = reasons(&[("not_null", "quarantine")]);
        let other = |rule: &str| Some(LeftOpen::OtherRule(rule.to_string()));
        let invariant = |rule: &str| Some(LeftOpen::Invariant(rule.to_string()));
        let cases = [
            (&volume, Some("volume"), None),
            (&volume, None, None),
            (&both, Some("volume"), other("limit_stable")),
            (&both, Some("limit_stable"), other("volume")),
            (&both, None, None),
            (&key, Some("volume"), invariant("resubmission")),
            (&key, None, invariant("resubmission")),
            (&parse, None, invariant("parse")),
            (&missing, None, invariant("not_null")),
        ];
        for (reasons, rule, expected) in cases {
            assert_eq!(
                left_open(&exception(reasons), rule),
                expected,
                "{reasons} {rule:?}"
            );
        }
        assert_eq!(
            left_open(&exception("not json"), None),
            invariant("unreadable reasons")
        );
    }
}
