//! What the HTML report shows, computed from the exception store and the run
//! summaries before any HTML is written: the renderer only lays it out.

use serde::Serialize;

use crate::core::counts::Counts;
use crate::exceptions::alerts::Alert;
use crate::exceptions::figures::{BacklogFigures, RuleBacklog, WeekFlow};

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
    /// The alerts open now, by contributor.
    pub alerts: Vec<Alert>,
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
