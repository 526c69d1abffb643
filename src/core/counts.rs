//! A run's row counts: what its summary, snapshot and report show.

use serde::{Deserialize, Serialize};

/// Row counts.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
pub struct Counts {
    /// Records received (parsed or not).
    pub received: u64,
    /// Rows committed to Silver (or that would be, in a dry run).
    pub committed: u64,
    /// Silver rows on which a warning fired.
    pub warned: u64,
    /// Rows quarantined.
    pub quarantined: u64,
    /// Rows dropped (recorded under dq_error/dropped).
    pub dropped: u64,
    /// Rows set aside until a reference catches up (dq_error/pending).
    pub pending: u64,
}
