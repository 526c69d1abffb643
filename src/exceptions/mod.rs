//! The exception store: every row set aside (quarantined, pending, dropped) is
//! an exception with a stable id, and what happens to it is a series of status
//! events appended to an Iceberg table beside Silver, so that any engine
//! (Spark, Trino, DuckDB, pyiceberg) can read the backlog. An exception's
//! current status is its latest event. The CSV files under dq_error stay the
//! human-facing copy, each row carrying its `_exception_id`.
//!
//! ```text
//!  run ──► dq_error CSVs ──► record: entry events ──► exceptions table ◄── backlog, report
//!  replay ──► replay drop (+ _exceptions.csv) ──► run ──► resolved / fresh-reason events
//!  accept ──► accept drop (+ _exceptions.csv) ──► run ──► accepted events (actor, note)
//!  exceptions ignore ──────────────────────────────────► ignored events (actor, note)
//! ```

pub mod alerts;
pub mod backlog;
pub mod close;
pub mod figures;
pub mod record;
pub mod runs;
pub mod store;

use chrono::{DateTime, Utc};
use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::core::set_aside::SetAside;

/// Where an exception stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ExceptionStatus {
    /// Waiting for reference data; replayed when it catches up.
    Pending,
    /// Waiting for a person to correct the source.
    Quarantined,
    /// Replayed and committed to Silver.
    Resolved,
    /// Set aside for good: rows of a `drop` rule, or closed by a person
    /// (`silverline exceptions ignore`).
    Ignored,
    /// Committed to Silver as judged, because a person accepted what the rule
    /// caught as legitimate (`silverline accept`).
    Accepted,
    /// An entity expected in a period (open in its latest state) that the
    /// contributor's drop did not declare (`[completeness]`); resolved when a
    /// later drop or a replay declares it for that period.
    Missing,
}

impl ExceptionStatus {
    /// The status as stored.
    pub fn as_str(self) -> &'static str {
        match self {
            ExceptionStatus::Pending => "pending",
            ExceptionStatus::Quarantined => "quarantined",
            ExceptionStatus::Resolved => "resolved",
            ExceptionStatus::Ignored => "ignored",
            ExceptionStatus::Accepted => "accepted",
            ExceptionStatus::Missing => "missing",
        }
    }

    /// Parses a stored status.
    pub fn parse(text: &str) -> Option<ExceptionStatus> {
        [
            ExceptionStatus::Pending,
            ExceptionStatus::Quarantined,
            ExceptionStatus::Resolved,
            ExceptionStatus::Ignored,
            ExceptionStatus::Accepted,
            ExceptionStatus::Missing,
        ]
        .into_iter()
        .find(|s| s.as_str() == text)
    }

    /// Whether someone still has to act on it.
    pub fn is_open(self) -> bool {
        matches!(
            self,
            ExceptionStatus::Pending | ExceptionStatus::Quarantined | ExceptionStatus::Missing
        )
    }

    /// The status of a row set aside to `destination`.
    pub fn of_set_aside(destination: SetAside) -> ExceptionStatus {
        match destination {
            SetAside::Quarantine => ExceptionStatus::Quarantined,
            SetAside::Pending => ExceptionStatus::Pending,
            SetAside::Dropped => ExceptionStatus::Ignored,
        }
    }
}

/// One status event of one exception: a row of the exception store.
#[derive(Debug, Clone, PartialEq)]
pub struct ExceptionEvent {
    /// Stable id of the exception (the row set aside).
    pub exception_id: String,
    /// Contributor id.
    pub contributor: String,
    /// The drop the row came in (the original drop, also on later events).
    pub drop_id: String,
    /// The run that recorded this event.
    pub run_id: String,
    /// Status after this event.
    pub status: ExceptionStatus,
    /// Primary rule code: the first of the worst severity that fired.
    pub rule: String,
    /// Every rule code that fired, comma-separated.
    pub rules: String,
    /// Severity the primary rule acted with (empty on a resolved event).
    pub severity: String,
    /// The reasons as JSON (rule, severity, message), as in the dq_error file.
    pub reasons: String,
    /// The record key (entity key and order column joined by `|`), when the row parsed.
    pub record_key: Option<String>,
    /// File of the drop the row was read from.
    pub source_file: Option<String>,
    /// Line (or row number) in that file.
    pub source_line: Option<i64>,
    /// The dq_error file holding the row, relative to the dq_error root.
    pub dq_file: Option<String>,
    /// When the exception first entered.
    pub entered_at: DateTime<Utc>,
    /// When this event happened.
    pub event_at: DateTime<Utc>,
    /// Who closed the exception by hand (`accept`, `exceptions ignore`).
    pub actor: Option<String>,
    /// Why they did, in their words.
    pub note: Option<String>,
}

/// The id of the exception of an entity missing from a period: the same
/// whichever run finds it, so that a later declaration resolves it.
/// `record_key` is the entity key and the period joined by `|`.
pub fn missing_exception_id(contributor: &str, record_key: &str) -> String {
    let parts = [contributor, "missing", record_key].map(str::as_bytes);
    crate::core::digest::nul_terminated_hex(parts)[..20].to_string()
}

/// The id of the exception for the row at `file:line` of a contributor's drop.
pub fn exception_id(contributor: &str, drop_id: &str, file: &str, line: u64) -> String {
    let mut hash = Sha256::new();
    for part in [contributor, drop_id, file] {
        hash.update(part.as_bytes());
        hash.update([0]);
    }
    hash.update(line.to_le_bytes());
    hex::encode(hash.finalize())[..20].to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_stable_and_differ_by_line() {
        let a = exception_id("BANK_A", "2026-01", "s.csv", 7);
        assert_eq!(a, exception_id("BANK_A", "2026-01", "s.csv", 7));
        assert_ne!(a, exception_id("BANK_A", "2026-01", "s.csv", 8));
        assert_ne!(a, exception_id("BANK_B", "2026-01", "s.csv", 7));
        assert_eq!(a.len(), 20);
    }

    #[test]
    fn statuses_round_trip_and_only_pending_quarantined_and_missing_are_open() {
        for status in [
            ExceptionStatus::Pending,
            ExceptionStatus::Quarantined,
            ExceptionStatus::Resolved,
            ExceptionStatus::Ignored,
            ExceptionStatus::Accepted,
            ExceptionStatus::Missing,
        ] {
            assert_eq!(ExceptionStatus::parse(status.as_str()), Some(status));
        }
        assert!(ExceptionStatus::Pending.is_open() && ExceptionStatus::Quarantined.is_open());
        assert!(ExceptionStatus::Missing.is_open());
        for closed in [
            ExceptionStatus::Resolved,
            ExceptionStatus::Ignored,
            ExceptionStatus::Accepted,
        ] {
            assert!(!closed.is_open(), "{closed:?}");
        }
    }
}
