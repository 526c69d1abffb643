//! The figures of an exception backlog: headline counts, open exceptions by
//! rule and by age, entries and exits per week. The backlog computes them;
//! summaries and the report show them.

use serde::{Deserialize, Serialize};

/// The age buckets of open exceptions, in days (upper bounds, inclusive); the
/// last bucket is everything older.
pub const AGE_BUCKETS: [(&str, Option<u32>); 4] = [
    ("0-7 days", Some(7)),
    ("8-30 days", Some(30)),
    ("31-90 days", Some(90)),
    ("over 90 days", None),
];

/// Headline figures of a backlog.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct BacklogFigures {
    /// Open exceptions (pending, quarantined or missing).
    pub open: u64,
    /// Of which pending (waiting for reference data).
    pub pending: u64,
    /// Of which quarantined (waiting for a person).
    pub quarantined: u64,
    /// Of which missing: entities a drop left out (waiting for the
    /// contributor to declare them).
    #[serde(default)]
    pub missing: u64,
    /// Open exceptions older than the stale age.
    pub stale: u64,
    /// Age of the oldest open exception, in whole days (None: nothing open).
    pub oldest_age_days: Option<u64>,
    /// Exceptions that entered in the last 7 days.
    pub entered_7d: u64,
    /// Exceptions that left (resolved or ignored) in the last 7 days.
    pub exited_7d: u64,
    /// Exceptions that entered in the last 30 days.
    pub entered_30d: u64,
    /// Exceptions that left in the last 30 days.
    pub exited_30d: u64,
    /// Closed exceptions whose rows a person accepted (`silverline accept`):
    /// committed to Silver as judged.
    #[serde(default)]
    pub accepted: u64,
    /// Exceptions a person closed as ignored (`silverline exceptions ignore`);
    /// rows of a `drop` rule, ignored from the start, are not counted.
    #[serde(default)]
    pub ignored: u64,
}

/// Open exceptions of one rule.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RuleBacklog {
    /// Primary rule code.
    pub rule: String,
    /// Open exceptions per age bucket, in [`AGE_BUCKETS`] order.
    pub by_age: [u64; 4],
    /// Sum of `by_age`.
    pub total: u64,
}

/// Entries and exits of one week.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WeekFlow {
    /// Monday of the week (YYYY-MM-DD).
    pub week: String,
    /// Exceptions that entered.
    pub entered: u64,
    /// Exceptions that left.
    pub exited: u64,
}
