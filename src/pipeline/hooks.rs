//! Faults a test injects to prove a safeguard works: where a run dies, and a
//! miscounted balance. Outside tests they are all off.

use crate::error::{Error, Result};

/// Faults a test can inject to prove a safeguard works.
#[doc(hidden)]
#[derive(Debug, Clone, Default)]
pub struct TestHooks {
    /// Added to the Silver row count the balance check sees.
    pub miscount_silver_rows: i64,
    /// Where the run "dies" (stops at once, writing nothing more).
    pub crash_at: Option<CrashPoint>,
}

/// Points where a test can make a run die, to prove a rerun recovers.
#[doc(hidden)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CrashPoint {
    /// dq_error files and Silver data files written, nothing balanced or committed.
    AfterWrite,
    /// Balanced, not committed.
    BeforeCommit,
    /// Committed, summary not written.
    AfterCommit,
    /// While writing the summary (it is never written).
    DuringSummary,
}

impl TestHooks {
    /// Dies (returns the injected fault) if the run is at the chosen point.
    pub fn crash_if(&self, point: CrashPoint) -> Result<()> {
        match self.crash_at {
            Some(at) if at == point => Err(Error::Injected(crash_name(point))),
            _ => Ok(()),
        }
    }
}

fn crash_name(point: CrashPoint) -> &'static str {
    match point {
        CrashPoint::AfterWrite => "after-write",
        CrashPoint::BeforeCommit => "before-commit",
        CrashPoint::AfterCommit => "after-commit",
        CrashPoint::DuringSummary => "during-summary",
    }
}
