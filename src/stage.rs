//! The stages of a run (and the few steps around it), one name for timings,
//! the progress spinner and errors.

/// A stage of a run, or a step around it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// Fetching, fingerprinting and claiming the drop.
    Claim,
    /// Reading the drop with the contract.
    Read,
    /// The account's own history, LAGged onto each row.
    Baseline,
    /// Row and trend rules.
    Evaluate,
    /// Metrics and aggregate rules.
    Aggregate,
    /// Reference tables' keys.
    Reference,
    /// Each row to its destination.
    Route,
    /// Masking sensitive columns in dq_error files.
    Mask,
    /// dq_error files and Silver data files.
    Write,
    /// The books.
    Balance,
    /// The Silver commit.
    Commit,
    /// The exception events.
    Exceptions,
    /// The whole run.
    Total,
    /// The benchmark's own setup.
    Bench,
}

impl Stage {
    /// The stages a run times, in the order they run.
    pub const TIMED: [Stage; 9] = [
        Stage::Claim,
        Stage::Read,
        Stage::Baseline,
        Stage::Evaluate,
        Stage::Route,
        Stage::Write,
        Stage::Balance,
        Stage::Commit,
        Stage::Exceptions,
    ];

    /// The stage's name, as timings and errors show it.
    pub fn as_str(self) -> &'static str {
        match self {
            Stage::Claim => "claim",
            Stage::Read => "read",
            Stage::Baseline => "baseline",
            Stage::Evaluate => "evaluate",
            Stage::Aggregate => "aggregate",
            Stage::Reference => "reference",
            Stage::Route => "route",
            Stage::Mask => "mask",
            Stage::Write => "write",
            Stage::Balance => "balance",
            Stage::Commit => "commit",
            Stage::Exceptions => "exceptions",
            Stage::Total => "total",
            Stage::Bench => "bench",
        }
    }

    /// What the progress spinner says while the run is in this stage.
    pub fn doing(self) -> &'static str {
        match self {
            Stage::Read => "reading",
            Stage::Baseline | Stage::Evaluate | Stage::Aggregate | Stage::Reference => {
                "baseline and rules"
            }
            Stage::Write => "writing",
            Stage::Commit => "committing",
            other => other.as_str(),
        }
    }
}

impl std::fmt::Display for Stage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
