//! Closing exceptions by hand, with an audit trail: a person accepts what a
//! rule caught as legitimate (`silverline accept`: the rows are committed as
//! judged and their exceptions close as `accepted`), or closes exceptions for
//! good (`silverline exceptions ignore`: `ignored`). Every such event names
//! who did it and why ([`Decision`]); an acceptance is also recorded in the
//! properties of the Silver snapshot that commits its rows ([`Acceptance`]).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use chrono::{DateTime, Utc};

use super::store::{Opened, append_events, latest_events, open_exceptions};
use super::{ExceptionEvent, ExceptionStatus};
use crate::config::Plan;
use crate::core::digest::nul_terminated_hex;
use crate::core::place::RunPlace;
use crate::error::{Error, Result, printable};
use crate::infra::catalog::connect;
use crate::infra::storage::Stores;

/// The longest `--by` or `--reason` kept, in characters.
const MAX_TEXT: usize = 500;

/// Who closes exceptions by hand, and why: both are required.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    by: String,
    reason: String,
}

impl Decision {
    /// Checks `--by` and `--reason`: each 1 to 500 characters once trimmed,
    /// with no control character.
    pub fn new(by: &str, reason: &str) -> Result<Decision> {
        Ok(Decision {
            by: checked_text("--by", by)?,
            reason: checked_text("--reason", reason)?,
        })
    }

    /// Who decided.
    pub fn by(&self) -> &str {
        &self.by
    }

    /// Why, in their words.
    pub fn reason(&self) -> &str {
        &self.reason
    }
}

fn checked_text(arg: &str, text: &str) -> Result<String> {
    let text = text.trim();
    let problem = if text.is_empty() {
        Some("it is empty: say who decided and why, it is the audit trail")
    } else if text.chars().count() > MAX_TEXT {
        Some("it is longer than 500 characters")
    } else if text.chars().any(char::is_control) {
        Some("it holds a control character (a line break, say)")
    } else {
        None
    };
    match problem {
        None => Ok(text.to_string()),
        Some(reason) => Err(Error::Usage {
            arg: arg.to_string(),
            reason: reason.to_string(),
        }),
    }
}

/// How the exceptions a drop carries close when their rows reach Silver.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Closing {
    /// Replayed and passed the rules: `resolved`.
    #[default]
    Resolved,
    /// Committed as judged, because a person accepted them: `accepted`.
    Accepted(Decision),
}

impl Closing {
    /// The status of the closing event.
    pub fn status(&self) -> ExceptionStatus {
        match self {
            Closing::Resolved => ExceptionStatus::Resolved,
            Closing::Accepted(_) => ExceptionStatus::Accepted,
        }
    }

    /// Who decided and why, when a person did.
    pub fn decision(&self) -> Option<&Decision> {
        match self {
            Closing::Resolved => None,
            Closing::Accepted(decision) => Some(decision),
        }
    }
}

/// Snapshot property prefix of an acceptance; `drop`, `runs`, `rule`, `by`
/// and `reason` follow it.
pub const ACCEPTED_PREFIX: &str = "silverline.accepted.";

/// What `silverline accept` commits: the rows one drop's runs set aside, for
/// one rule or for every rule, accepted as judged by a person.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Acceptance {
    /// Who accepted and why.
    pub decision: Decision,
    /// The drop whose rows are accepted.
    pub drop_id: String,
    /// The rule whose verdicts are accepted; None: every rule that may be.
    pub rule: Option<String>,
    /// The runs that set the accepted rows aside (their run ids, sorted).
    pub runs: Vec<String>,
}

impl Acceptance {
    /// The acceptance as properties of the snapshot that commits its rows.
    pub fn to_properties(&self) -> HashMap<String, String> {
        [
            ("drop", self.drop_id.clone()),
            ("runs", self.runs.join(",")),
            ("rule", self.rule.clone().unwrap_or_else(|| "*".to_string())),
            ("by", self.decision.by.clone()),
            ("reason", self.decision.reason.clone()),
        ]
        .into_iter()
        .map(|(name, value)| (format!("{ACCEPTED_PREFIX}{name}"), value))
        .collect()
    }

    /// Who accepted and why, as the properties of the snapshot that committed
    /// an acceptance record it; None for any other snapshot.
    pub fn decision_in(properties: &HashMap<String, String>) -> Option<Decision> {
        let get = |name: &str| properties.get(&format!("{ACCEPTED_PREFIX}{name}"));
        Decision::new(get("by")?, get("reason")?).ok()
    }
}

/// The event that closes `latest`'s exception by hand, recorded by `run_id` at `now`.
pub fn closed_by_hand(
    latest: &ExceptionEvent,
    (status, decision): (ExceptionStatus, &Decision),
    run_id: &str,
    now: DateTime<Utc>,
) -> ExceptionEvent {
    ExceptionEvent {
        run_id: run_id.to_string(),
        status,
        event_at: now,
        actor: Some(decision.by.clone()),
        note: Some(decision.reason.clone()),
        ..latest.clone()
    }
}

/// What `silverline exceptions ignore` did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IgnoreOutcome {
    /// The exceptions it closed as ignored.
    pub ignored: Vec<String>,
    /// The exceptions already closed, with their status: left as they were.
    pub already_closed: Vec<(String, ExceptionStatus)>,
}

impl IgnoreOutcome {
    /// What `exceptions ignore` did, for a person, one line each.
    pub fn describe(&self, decision: &Decision) -> Vec<String> {
        let mut lines: Vec<String> = self
            .already_closed
            .iter()
            .map(|(id, status)| {
                format!(
                    "exception {id} is already {}: left as it is",
                    status.as_str()
                )
            })
            .collect();
        lines.push(match self.ignored.as_slice() {
            [] => "nothing ignored: every exception named is already closed".to_string(),
            ids => format!(
                "ignored {} exception(s) by {}: {}",
                ids.len(),
                decision.by,
                ids.join(" ")
            ),
        });
        lines
    }
}

/// Closes the open exceptions among `ids` as ignored, in one append to the
/// exception store; an id already closed is left as it is. An id the store
/// does not know is a usage error naming it, and nothing is recorded.
pub async fn ignore(plan: &Plan, ids: &[String], decision: &Decision) -> Result<IgnoreOutcome> {
    let Opened {
        catalog,
        exceptions: table,
        ..
    } = open_exceptions(plan).await?;
    let wanted: BTreeSet<&str> = ids.iter().map(String::as_str).collect();
    let found = latest_events(&table, None.into(), &plan.query_memory()?, |state| {
        wanted.contains(state.latest.exception_id.as_str())
    })
    .await?;
    let latest: BTreeMap<&str, &ExceptionEvent> =
        found.iter().map(|e| (e.exception_id.as_str(), e)).collect();
    let unknown: Vec<String> = wanted
        .iter()
        .filter(|id| !latest.contains_key(*id))
        .map(|id| printable(id))
        .collect();
    if !unknown.is_empty() {
        return Err(Error::Usage {
            arg: "--id".to_string(),
            reason: format!(
                "no exception has id {}: nothing ignored (an id is the _exception_id column of a dq_error file)",
                unknown.join(", ")
            ),
        });
    }
    let (open, closed): (Vec<&ExceptionEvent>, Vec<&ExceptionEvent>) = wanted
        .iter()
        .filter_map(|id| latest.get(id).copied())
        .partition(|e| e.status.is_open());
    let outcome = IgnoreOutcome {
        ignored: open.iter().map(|e| e.exception_id.clone()).collect(),
        already_closed: closed
            .iter()
            .map(|e| (e.exception_id.clone(), e.status))
            .collect(),
    };
    if open.is_empty() {
        return Ok(outcome);
    }
    let run_key = ignore_run_key(&outcome.ignored, decision);
    let by_hand = (ExceptionStatus::Ignored, decision);
    append_by_hand(&catalog, plan, &open, by_hand, &run_key).await?;
    tracing::info!(ignored = open.len(), "exceptions ignored");
    Ok(outcome)
}

/// Appends, under `run_key`, an event per exception of `latest` giving it
/// `status`, with who and why, in one append.
async fn append_by_hand(
    catalog: &std::sync::Arc<dyn iceberg::Catalog>,
    plan: &Plan,
    latest: &[&ExceptionEvent],
    (status, decision): (ExceptionStatus, &Decision),
    run_key: &str,
) -> Result<()> {
    let now = Utc::now();
    let place = RunPlace::for_run(run_key, now.date_naive());
    let events: Vec<ExceptionEvent> = latest
        .iter()
        .map(|e| closed_by_hand(e, (status, decision), &place.run_id, now))
        .collect();
    append_events(catalog, plan, &events, run_key, &place).await?;
    Ok(())
}

/// Records that a person corrected the row of the open exception `latest`
/// (who, and why in their words): an event keeping its status, before the
/// corrected row is replayed. `correction` identifies the corrected values,
/// so the same correction recorded twice is recorded once.
pub async fn record_correction(
    plan: &Plan,
    latest: &ExceptionEvent,
    decision: &Decision,
    correction: &str,
) -> Result<()> {
    let stores = Stores::new(&plan.storage, plan.catalog.warehouse()).await?;
    let catalog = connect(&plan.catalog, &stores).await?;
    let parts = [
        latest.exception_id.as_str(),
        decision.by.as_str(),
        decision.reason.as_str(),
        correction,
    ];
    let run_key = format!(
        "correct/{}",
        &nul_terminated_hex(parts.map(str::as_bytes))[..32]
    );
    let by_hand = (latest.status, decision);
    append_by_hand(&catalog, plan, &[latest], by_hand, &run_key).await
}

/// The key of one `ignore` in the exception store's run ledger: the same
/// exceptions ignored by the same person for the same reason are recorded once.
fn ignore_run_key(ids: &[String], decision: &Decision) -> String {
    let parts = ids
        .iter()
        .map(String::as_str)
        .chain([decision.by.as_str(), decision.reason.as_str()]);
    format!(
        "ignore/{}",
        &nul_terminated_hex(parts.map(str::as_bytes))[..32]
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_decision_needs_who_and_why() {
        let decision = Decision::new("  j.doe ", " sold the card portfolio ").unwrap();
        assert_eq!(
            (decision.by(), decision.reason()),
            ("j.doe", "sold the card portfolio")
        );
        for (by, reason, arg) in [
            ("", "why", "--by"),
            ("who", "   ", "--reason"),
            ("who", "line\nbreak", "--reason"),
            ("w\u{1b}ho", "why", "--by"),
        ] {
            let error = Decision::new(by, reason).err().map(|e| e.to_string());
            assert!(error.is_some_and(|e| e.contains(arg)), "{by:?} {reason:?}");
        }
        assert!(Decision::new("who", &"x".repeat(501)).is_err());
    }

    #[test]
    fn an_acceptance_is_named_in_the_snapshot_properties() {
        let acceptance = Acceptance {
            decision: Decision::new("j.doe", "sold the card portfolio").unwrap(),
            drop_id: "2026-03".to_string(),
            rule: Some("volume".to_string()),
            runs: vec!["0123456789abcdef".to_string()],
        };
        let properties = acceptance.to_properties();
        let get = |name: &str| properties[&format!("silverline.accepted.{name}")].as_str();
        assert_eq!(get("drop"), "2026-03");
        assert_eq!(get("runs"), "0123456789abcdef");
        assert_eq!(get("rule"), "volume");
        assert_eq!(get("by"), "j.doe");
        assert_eq!(get("reason"), "sold the card portfolio");
        assert_eq!(
            Acceptance::decision_in(&properties),
            Some(acceptance.decision.clone())
        );
        assert_eq!(Acceptance::decision_in(&HashMap::new()), None);
        let every_rule = Acceptance {
            rule: None,
            ..acceptance
        };
        assert_eq!(every_rule.to_properties()["silverline.accepted.rule"], "*");
    }

    #[test]
    fn the_same_ignore_has_the_same_run_key() {
        let decision = Decision::new("ops", "sent twice").unwrap();
        let ids = ["a".to_string(), "b".to_string()];
        let key = ignore_run_key(&ids, &decision);
        assert_eq!(key, ignore_run_key(&ids, &decision));
        assert_ne!(key, ignore_run_key(&ids[..1], &decision));
        let other = Decision::new("ops", "sent three times").unwrap();
        assert_ne!(key, ignore_run_key(&ids, &other));
        assert!(key.starts_with("ignore/"));
    }
}
