//! What the HTML report shows, computed from the exception store and the run
//! summaries before any HTML is written: the renderer only lays it out.

use serde::Serialize;

use crate::pipeline::summary::Counts;

/// The age buckets of open exceptions, in days (upper bounds, inclusive); the
/// last bucket is everything older.
pub const AGE_BUCKETS: [(&str, Option<u32>); 4] = [
    ("0-7 days", Some(7)),
    ("8-30 days", Some(30)),
    ("31-90 days", Some(90)),
    ("over 90 days", None),
];

/// The whole report: one section for all contributors, then one per contributor.
#[derive(Debug, Clone, Serialize)]
pub struct ReportData {
    /// Dataset name, for the title.
    pub dataset: String,
    /// When the report was made (RFC 3339, UTC).
    pub generated_at: String,
    /// Exceptions older than this many days are stale.
    pub stale_after_days: u32,
    /// Every contributor together.
    pub overall: Section,
    /// One section per contributor, by contributor id.
    pub contributors: Vec<Section>,
}

/// The figures of one contributor (or of all of them).
#[derive(Debug, Clone, Serialize)]
pub struct Section {
    /// Contributor id, or "All contributors".
    pub name: String,
    /// Headline backlog figures.
    pub backlog: BacklogFigures,
    /// Open exceptions per rule, split by age bucket ([`AGE_BUCKETS`] order).
    pub open_by_rule: Vec<RuleBacklog>,
    /// Exceptions that entered and left per week, oldest week first.
    pub weekly_flow: Vec<WeekFlow>,
    /// Every run, oldest first (the renderer charts them all and lists the latest).
    pub runs: Vec<RunPoint>,
}

/// Headline figures of a backlog.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct BacklogFigures {
    /// Open exceptions (pending or quarantined).
    pub open: u64,
    /// Of which pending (waiting for reference data).
    pub pending: u64,
    /// Of which quarantined (waiting for a person).
    pub quarantined: u64,
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
}

/// Open exceptions of one rule.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RuleBacklog {
    /// Primary rule code.
    pub rule: String,
    /// Open exceptions per age bucket, in [`AGE_BUCKETS`] order.
    pub by_age: [u64; 4],
    /// Sum of `by_age`.
    pub total: u64,
}

/// Entries and exits of one week.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WeekFlow {
    /// Monday of the week (YYYY-MM-DD).
    pub week: String,
    /// Exceptions that entered.
    pub entered: u64,
    /// Exceptions that left.
    pub exited: u64,
}

/// One run, from its summary.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunPoint {
    /// When it finished (RFC 3339), or started when it never finished.
    pub at: String,
    /// Contributor id.
    pub contributor: String,
    /// Drop id.
    pub drop_id: String,
    /// Run status (committed, failed, ...).
    pub status: String,
    /// Its counts (received, committed, warned, quarantined, dropped, pending).
    pub counts: Counts,
    /// Path or URL of the run's summary file.
    pub summary: String,
}

impl RunPoint {
    /// Share of received records set aside (quarantined, dropped or pending).
    pub fn rejection_rate(&self) -> f64 {
        ratio(
            self.counts.quarantined + self.counts.dropped + self.counts.pending,
            self.counts.received,
        )
    }

    /// Share of received records that passed with a warning.
    pub fn warning_rate(&self) -> f64 {
        ratio(self.counts.warned, self.counts.received)
    }
}

fn ratio(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 / whole as f64
    }
}
