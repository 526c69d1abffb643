//! Faults a test injects to prove a safeguard works: where a run dies, and a
//! miscounted balance. They exist only with the `test-hooks` feature, which
//! the project's own tests turn on; a release build has none of them, and the
//! calls below do nothing.

use super::RunOptions;
use super::balance::Counted;
#[cfg(feature = "test-hooks")]
use crate::error::Error;
use crate::error::Result;

/// Faults a test can inject to prove a safeguard works.
#[cfg(feature = "test-hooks")]
#[derive(Debug, Clone, Default)]
pub struct TestHooks {
    /// Added to the Silver row count the balance check sees.
    pub miscount_silver_rows: i64,
    /// Where the run "dies" (stops at once, writing nothing more).
    pub crash_at: Option<CrashPoint>,
    /// Claims the drop under its SHA-256 fingerprint, as versions before
    /// BLAKE3 did.
    pub sha256_fingerprint: bool,
}

/// Points where a test can make a run die, to prove a rerun recovers.
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

/// Dies (returns the injected fault) if a test chose `point`.
#[cfg(feature = "test-hooks")]
pub(crate) fn crash_if(options: &RunOptions, point: CrashPoint) -> Result<()> {
    match options.hooks.crash_at {
        Some(at) if at == point => Err(Error::Injected(crash_name(point))),
        _ => Ok(()),
    }
}

/// Without the `test-hooks` feature no run dies on purpose.
#[cfg(not(feature = "test-hooks"))]
pub(crate) fn crash_if(_options: &RunOptions, _point: CrashPoint) -> Result<()> {
    Ok(())
}

/// Whether `result` is a crash a test injected (a crash writes nothing more).
#[cfg(feature = "test-hooks")]
pub(crate) fn is_crash<T>(result: &Result<T>) -> bool {
    matches!(result, Err(Error::Injected(_)))
}

/// Without the `test-hooks` feature nothing is an injected crash.
#[cfg(not(feature = "test-hooks"))]
pub(crate) fn is_crash<T>(_result: &Result<T>) -> bool {
    false
}

/// Whether a test claims the drop as versions before BLAKE3 did.
#[cfg(feature = "test-hooks")]
pub(crate) fn claims_as_sha256(options: &RunOptions) -> bool {
    options.hooks.sha256_fingerprint
}

/// Without the `test-hooks` feature a drop is claimed as this version does.
#[cfg(not(feature = "test-hooks"))]
pub(crate) fn claims_as_sha256(_options: &RunOptions) -> bool {
    false
}

/// Miscounts the Silver rows the balance sees, if a test asked to.
#[cfg(feature = "test-hooks")]
pub(crate) fn miscount(options: &RunOptions, counted: &mut Counted) {
    counted.silver = counted
        .silver
        .saturating_add_signed(options.hooks.miscount_silver_rows);
}

/// Without the `test-hooks` feature the balance sees what was written.
#[cfg(not(feature = "test-hooks"))]
pub(crate) fn miscount(_options: &RunOptions, _counted: &mut Counted) {}

#[cfg(feature = "test-hooks")]
fn crash_name(point: CrashPoint) -> &'static str {
    match point {
        CrashPoint::AfterWrite => "after-write",
        CrashPoint::BeforeCommit => "before-commit",
        CrashPoint::AfterCommit => "after-commit",
        CrashPoint::DuringSummary => "during-summary",
    }
}
