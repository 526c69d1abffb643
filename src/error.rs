//! One error type for the whole job. Each variant names the thing at fault
//! (file, rule, setting, table) and [`Error::class`] maps it to the exit code
//! that DESIGN.md promises the orchestrator.
//!
//! A bad *row* is never an `Error`: it becomes a quarantine row with a reason.

use std::path::PathBuf;

/// What kind of failure, as an orchestrator sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorClass {
    /// Nothing committed because of the data (a `fail` rule, a bad drop, broken books): exit 1.
    Data,
    /// Usage or configuration mistake, nothing read: exit 2.
    Config,
    /// Storage or catalog trouble; a retry is safe: exit 3.
    Infra,
}

impl ErrorClass {
    /// The process exit code for this class.
    pub fn exit_code(self) -> u8 {
        match self {
            ErrorClass::Data => 1,
            ErrorClass::Config => 2,
            ErrorClass::Infra => 3,
        }
    }
}

/// Everything that can stop a run.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The configuration file could not be read.
    #[error("cannot read config {path}: {source}")]
    ConfigRead {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The configuration has one or more problems; all of them are listed.
    #[error("invalid configuration {path}:\n  - {}", problems.join("\n  - "))]
    ConfigInvalid {
        /// The file.
        path: PathBuf,
        /// Every problem found, each naming the setting or rule at fault.
        problems: Vec<String>,
    },
    /// A command-line argument is not acceptable.
    #[error("invalid argument {arg}: {reason}")]
    Usage {
        /// The argument.
        arg: String,
        /// Why it was refused.
        reason: String,
    },
    /// The drop itself cannot be processed (missing, empty, unreadable header...).
    #[error("bad drop {location}: {reason}")]
    BadDrop {
        /// The drop or file at fault.
        location: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A record silverline keeps in storage (a claim marker, a ledger entry, a
    /// replay manifest) is not one it wrote: it is never used to build a path.
    #[error("invalid {location}: {reason}")]
    BadRecord {
        /// The record and where it lives.
        location: String,
        /// What is wrong with it, and the way out.
        reason: String,
    },
    /// A `fail` rule fired: the run stops with nothing committed.
    #[error("rule '{rule}' (severity fail) failed on {rows} row(s): nothing committed")]
    FailRule {
        /// The rule that fired.
        rule: String,
        /// How many rows violated it.
        rows: u64,
    },
    /// The books do not balance: nothing committed.
    #[error(
        "balance broken: received {received} but accounted {accounted} \
         (silver {silver} + quarantined {quarantined} + dropped {dropped} + pending {pending}); gap {gap}: nothing committed"
    )]
    Unbalanced {
        /// Records received.
        received: u64,
        /// Records found in the outputs.
        accounted: u64,
        /// Rows counted in the Silver data files.
        silver: u64,
        /// Rows counted in the quarantine files.
        quarantined: u64,
        /// Rows counted in the dropped files.
        dropped: u64,
        /// Rows counted in the pending files.
        pending: u64,
        /// received - accounted.
        gap: i64,
    },
    /// Object storage failed.
    #[error("storage error during {op} at {path}: {source}")]
    Storage {
        /// The operation (get, put, list...).
        op: &'static str,
        /// The object or prefix.
        path: String,
        /// The underlying error.
        source: Box<object_store::Error>,
    },
    /// The Iceberg catalog or table I/O failed.
    #[error("catalog error during {op} on {target}: {source}")]
    Catalog {
        /// The operation.
        op: &'static str,
        /// The table or namespace.
        target: String,
        /// The underlying error.
        source: Box<iceberg::Error>,
    },
    /// A query the engine built failed to plan or execute. Quoted values in
    /// the engine's message (row values, in a failed cast) are not repeated.
    #[error("evaluation error in {stage}: {}", without_quoted_values(&source.to_string()))]
    Query {
        /// The pipeline stage.
        stage: &'static str,
        /// The underlying error.
        source: Box<datafusion::error::DataFusionError>,
    },
    /// An Arrow kernel failed while reshaping batches. Quoted values in the
    /// message are not repeated.
    #[error("arrow error in {stage}: {}", without_quoted_values(&source.to_string()))]
    Arrow {
        /// The pipeline stage.
        stage: &'static str,
        /// The underlying error.
        source: arrow::error::ArrowError,
    },
    /// A local file could not be read or written.
    #[error("I/O error on {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A run summary or other JSON document could not be produced.
    #[error("cannot encode {what}: {source}")]
    Encode {
        /// The document.
        what: &'static str,
        /// Why.
        source: serde_json::Error,
    },
    /// A broken internal expectation: a bug to report, not a data problem.
    #[error("internal error: {0}")]
    Internal(String),
    /// A fault injected on purpose by a test.
    #[error("injected fault at {0}")]
    Injected(&'static str),
}

/// `text` with every single-quoted part replaced by `'***'`: engine messages
/// quote the row value that broke a cast, and a row value may be personal data
/// that must not reach logs or summaries.
pub fn without_quoted_values(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut parts = text.split('\'');
    if let Some(first) = parts.next() {
        out.push_str(first);
    }
    let mut inside = false;
    for part in parts {
        inside = !inside;
        out.push('\'');
        out.push_str(if inside { "***" } else { part });
    }
    if inside {
        // An unbalanced quote: what followed it was masked; close it.
        out.push('\'');
    }
    out
}

impl Error {
    /// The class of this error, which decides the exit code.
    pub fn class(&self) -> ErrorClass {
        match self {
            Error::ConfigRead { .. } | Error::ConfigInvalid { .. } | Error::Usage { .. } => {
                ErrorClass::Config
            }
            Error::BadDrop { .. }
            | Error::BadRecord { .. }
            | Error::FailRule { .. }
            | Error::Unbalanced { .. } => ErrorClass::Data,
            Error::Storage { source, .. } if is_refused(source) => ErrorClass::Config,
            Error::Storage { .. }
            | Error::Catalog { .. }
            | Error::Query { .. }
            | Error::Arrow { .. }
            | Error::Io { .. }
            | Error::Encode { .. }
            | Error::Internal(_)
            | Error::Injected(_) => ErrorClass::Infra,
        }
    }

    /// Whether a rerun may succeed without anyone changing anything (exit code 3).
    pub fn is_retryable(&self) -> bool {
        self.class() == ErrorClass::Infra
    }

    /// Wraps a DataFusion error with the stage it happened in.
    pub fn query(stage: &'static str) -> impl FnOnce(datafusion::error::DataFusionError) -> Error {
        move |source| Error::Query {
            stage,
            source: Box::new(source),
        }
    }

    /// Wraps an Arrow error with the stage it happened in.
    pub fn arrow(stage: &'static str) -> impl FnOnce(arrow::error::ArrowError) -> Error {
        move |source| Error::Arrow { stage, source }
    }

    /// Wraps an Iceberg error with the operation and target.
    pub fn catalog(
        op: &'static str,
        target: impl Into<String>,
    ) -> impl FnOnce(iceberg::Error) -> Error {
        let target = target.into();
        move |source| Error::Catalog {
            op,
            target,
            source: Box::new(source),
        }
    }

    /// Wraps an object store error with the operation and path.
    pub fn storage(
        op: &'static str,
        path: impl Into<String>,
    ) -> impl FnOnce(object_store::Error) -> Error {
        let path = path.into();
        move |source| Error::Storage {
            op,
            path,
            source: Box::new(source),
        }
    }
}

/// Storage said no to our identity: a credentials mistake, not a passing fault.
fn is_refused(source: &object_store::Error) -> bool {
    matches!(
        source,
        object_store::Error::PermissionDenied { .. } | object_store::Error::Unauthenticated { .. }
    )
}

/// Result with the crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoted_values_are_not_repeated() {
        assert_eq!(
            without_quoted_values("Cannot cast string '900101145678' to value of Int32 type"),
            "Cannot cast string '***' to value of Int32 type"
        );
        assert_eq!(without_quoted_values("a 'b' c 'd"), "a '***' c '***'");
        assert_eq!(without_quoted_values("no quotes"), "no quotes");
    }

    #[test]
    fn query_errors_do_not_show_row_values() {
        let source = datafusion::error::DataFusionError::Execution(
            "Cannot cast string 'A1234567' to value of Int32 type".to_string(),
        );
        let message = Error::query("evaluate")(source).to_string();
        assert!(!message.contains("A1234567"), "{message}");
        assert!(message.contains("evaluate"), "{message}");
    }
}
