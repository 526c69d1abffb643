//! One error type for the whole job. Each variant names the thing at fault
//! (file, rule, setting, table) and [`Error::class`] maps it to the exit code
//! that DESIGN.md promises the orchestrator.
//!
//! A bad *row* is never an `Error`: it becomes a quarantine row with a reason.

use crate::stage::Stage;
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
    /// The drop is not in bronze yet (nothing under its folder): exit 5. A
    /// scheduler retries later; nothing was read or judged.
    NotArrived,
}

impl ErrorClass {
    /// The process exit code for this class.
    pub fn exit_code(self) -> u8 {
        match self {
            ErrorClass::Data => 1,
            ErrorClass::Config => 2,
            ErrorClass::Infra => 3,
            ErrorClass::NotArrived => 5,
        }
    }
}

/// Exit code of a run that found, at commit time, that a concurrent run of the
/// same drop had committed it: nothing was added (see README, exit codes).
pub const EXIT_COMMITTED_CONCURRENTLY: u8 = 4;

/// Exit code of `silverline backlog --check` while alerts are open (see
/// README, exit codes): a scheduler pages on it.
pub const EXIT_ALERTS_OPEN: u8 = 6;

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
    #[error("invalid configuration {path}:\n  - {}", bullets(problems))]
    ConfigInvalid {
        /// The file.
        path: PathBuf,
        /// Every problem found, each naming the setting or rule at fault.
        problems: Vec<String>,
    },
    /// A command-line argument is not acceptable.
    #[error("invalid argument {}: {}", printable(arg), printable(reason))]
    Usage {
        /// The argument.
        arg: String,
        /// Why it was refused.
        reason: String,
    },
    /// The drop itself cannot be processed (missing, empty, unreadable header...).
    #[error("bad drop {}: {}", printable(location), printable(reason))]
    BadDrop {
        /// The drop or file at fault.
        location: String,
        /// What is wrong with it.
        reason: String,
    },
    /// Nothing of the drop is in bronze yet: no object under its folder (and,
    /// on local files, no folder). A folder that exists but holds no data
    /// file is a [`Error::BadDrop`].
    #[error(
        "drop not arrived yet: nothing under {} ({setting}): the contributor's files are expected there; run again once they are (or use --wait-for-drop)",
        printable(location)
    )]
    DropNotArrived {
        /// Where the drop's files are expected (`<bronze>/<contributor>/<drop_id>`).
        location: String,
        /// The setting naming the bronze root.
        setting: String,
    },
    /// A record silverline keeps in storage (a claim marker, a ledger entry, a
    /// replay manifest) is not one it wrote: it is never used to build a path.
    #[error("invalid {}: {}", printable(location), printable(reason))]
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
    #[error("storage error during {op} at {}: {source}", printable(path))]
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
    /// A table property silverline reads holds a value it cannot use.
    #[error("table {table}: property {property} = {}: {reason}", printable(value))]
    TableProperty {
        /// The table.
        table: String,
        /// The property.
        property: &'static str,
        /// Its value.
        value: String,
        /// Why it cannot be used, and what can.
        reason: String,
    },
    /// A query the engine built failed to plan or execute. Engine messages
    /// quote row values, so only the kind of failure is shown (details are
    /// kept for planning failures, which happen before any row is read).
    #[error("evaluation error in {stage}: {}", engine_text(source))]
    Query {
        /// The pipeline stage.
        stage: Stage,
        /// The underlying error.
        source: Box<datafusion::error::DataFusionError>,
    },
    /// A rule (or metric) of the configuration could not be evaluated over
    /// the drop's rows: a data or rule problem, never a passing fault.
    #[error("{subject} could not be evaluated: {failure}: nothing committed")]
    Evaluation {
        /// The rule or metric at fault, e.g. `rule 'ratio'`.
        subject: String,
        /// What went wrong, without the engine's text.
        failure: EngineFailure,
    },
    /// An Arrow kernel failed while reshaping batches. Only the kind of
    /// failure is shown: Arrow messages quote values.
    #[error("arrow error in {stage}: {}", EngineFailure::of_arrow(source))]
    Arrow {
        /// The pipeline stage.
        stage: Stage,
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
    /// The run's rows are committed to Silver, but what follows the commit
    /// (recording its exceptions) failed: a rerun finds the drop committed
    /// and completes it.
    #[error("committed to Silver, but {source}: run the drop again to complete its record")]
    AfterCommit {
        /// What failed.
        source: Box<Error>,
    },
    /// A fault injected on purpose by a test (only with the `test-hooks` feature).
    #[cfg(feature = "test-hooks")]
    #[error("injected fault at {0}")]
    Injected(&'static str),
}

/// The kind of an engine (DataFusion, Arrow) failure, without the engine's
/// text: that text quotes the row values that broke a cast, a division or a
/// regular expression, and a row value may be personal data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EngineFailure {
    /// An integer or decimal division by zero.
    DivisionByZero,
    /// A value that does not cast to the type asked for.
    CastFailed,
    /// A regular expression that does not compile.
    InvalidRegex,
    /// A result out of its type's range.
    Overflow,
    /// The memory budget or another engine resource ran out.
    ResourcesExhausted,
    /// Storage or file I/O under the engine failed.
    Io,
    /// The query could not be planned (before any row was read).
    Planning,
    /// Any other failure while executing.
    Execution,
}

impl std::fmt::Display for EngineFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            EngineFailure::DivisionByZero => "division by zero",
            EngineFailure::CastFailed => "cast failed",
            EngineFailure::InvalidRegex => "invalid regular expression",
            EngineFailure::Overflow => "arithmetic overflow",
            EngineFailure::ResourcesExhausted => {
                "resources exhausted (raise [resources] memory_limit)"
            }
            EngineFailure::Io => "storage I/O failed",
            EngineFailure::Planning => "the query could not be planned",
            EngineFailure::Execution => "execution failed",
        })
    }
}

impl EngineFailure {
    /// The kind of a DataFusion error.
    pub fn of_query(error: &datafusion::error::DataFusionError) -> EngineFailure {
        use datafusion::error::DataFusionError as E;
        let root = error.find_root();
        // Typed kinds first: an I/O error's text (a path naming "cast") says nothing of its kind.
        match root {
            E::ArrowError(source, _) => Self::of_arrow(source),
            E::ObjectStore(_) | E::IoError(_) | E::ParquetError(_) => EngineFailure::Io,
            E::External(source) if is_io(source.as_ref()) => EngineFailure::Io,
            E::ResourcesExhausted(_) => EngineFailure::ResourcesExhausted,
            E::Plan(_)
            | E::SQL(..)
            | E::SchemaError(..)
            | E::NotImplemented(_)
            | E::Configuration(_) => {
                Self::from_text(&root.to_string()).unwrap_or(EngineFailure::Planning)
            }
            other => Self::from_text(&other.to_string()).unwrap_or(EngineFailure::Execution),
        }
    }

    /// The kind of an Arrow error.
    pub fn of_arrow(error: &arrow::error::ArrowError) -> EngineFailure {
        use arrow::error::ArrowError as A;
        match error {
            A::DivideByZero => EngineFailure::DivisionByZero,
            A::CastError(_) | A::ParseError(_) => EngineFailure::CastFailed,
            A::ArithmeticOverflow(_)
            | A::DictionaryKeyOverflowError
            | A::RunEndIndexOverflowError
            | A::OffsetOverflowError(_) => EngineFailure::Overflow,
            A::MemoryError(_) => EngineFailure::ResourcesExhausted,
            A::IoError(..) => EngineFailure::Io,
            A::ExternalError(source) if is_io(source.as_ref()) => EngineFailure::Io,
            other => Self::from_text(&other.to_string()).unwrap_or(EngineFailure::Execution),
        }
    }

    /// The kind an engine message names, when it names one (engines often
    /// wrap a kernel's failure in a plain execution error).
    fn from_text(text: &str) -> Option<EngineFailure> {
        let text = text.to_ascii_lowercase();
        let has = |words: &[&str]| words.iter().any(|w| text.contains(w));
        if has(&["regular expression", "regex"]) {
            Some(EngineFailure::InvalidRegex)
        } else if has(&["divide by zero", "division by zero"]) {
            Some(EngineFailure::DivisionByZero)
        } else if has(&["overflow"]) {
            Some(EngineFailure::Overflow)
        } else if has(&["cast"]) {
            Some(EngineFailure::CastFailed)
        } else {
            None
        }
    }

    /// Whether the rule itself is at fault, whatever the rows: it cannot be
    /// planned. (A regular expression that does not compile may be built
    /// from the row's values: that one is the data's.)
    pub fn is_rule_fault(self) -> bool {
        self == EngineFailure::Planning
    }

    /// The class of a run stopped by this failure: only I/O is worth a retry.
    pub fn class(self) -> ErrorClass {
        match self {
            EngineFailure::Io => ErrorClass::Infra,
            EngineFailure::DivisionByZero
            | EngineFailure::CastFailed
            | EngineFailure::InvalidRegex
            | EngineFailure::Overflow
            | EngineFailure::ResourcesExhausted
            | EngineFailure::Planning
            | EngineFailure::Execution => ErrorClass::Data,
        }
    }
}

/// `error` and every error behind it, joined by `: ` (what a client
/// library's top-level error leaves out: the refused connection, the
/// timeout).
pub fn error_chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut link = error.source();
    while let Some(cause) = link {
        text.push_str(&format!(": {cause}"));
        link = cause.source();
    }
    text
}

/// Whether `error` (or what caused it) is an I/O or object store failure.
fn is_io(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut link = Some(error);
    while let Some(e) = link {
        if e.is::<std::io::Error>() || e.is::<object_store::Error>() {
            return true;
        }
        link = e.source();
    }
    false
}

/// What a query error shows: its kind, and the engine's text only for a
/// planning failure (it names columns and types of the configuration, never a
/// row value).
fn engine_text(source: &datafusion::error::DataFusionError) -> String {
    match EngineFailure::of_query(source) {
        EngineFailure::Planning => format!("{}: {}", EngineFailure::Planning, source.find_root()),
        kind => kind.to_string(),
    }
}

/// `text` safe to echo into a log line or an error message: control
/// characters (escape sequences, newlines) are shown escaped, like `\u{1b}`
/// and `\n`, so that a user-supplied id cannot forge or repaint log lines.
pub fn printable(text: &str) -> String {
    escape_controls(text, |_| false)
}

/// [`printable`], keeping line ends: for a multi-line message shown to a
/// person (each line still cannot carry an escape sequence).
pub fn printable_lines(text: &str) -> String {
    escape_controls(text, |c| c == '\n')
}

/// One problem a line, each [`printable`].
fn bullets(problems: &[String]) -> String {
    let lines: Vec<String> = problems.iter().map(|p| printable(p)).collect();
    lines.join("\n  - ")
}

fn escape_controls(text: &str, keep: fn(char) -> bool) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_control() && !keep(c) {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

impl Error {
    /// The class of this error, which decides the exit code: 3 only where a
    /// rerun may succeed without anyone changing anything.
    pub fn class(&self) -> ErrorClass {
        match self {
            Error::ConfigRead { .. }
            | Error::ConfigInvalid { .. }
            | Error::Usage { .. }
            | Error::TableProperty { .. } => ErrorClass::Config,
            Error::Evaluation { failure, .. } if failure.is_rule_fault() => ErrorClass::Config,
            Error::DropNotArrived { .. } => ErrorClass::NotArrived,
            Error::BadDrop { .. }
            | Error::BadRecord { .. }
            | Error::FailRule { .. }
            | Error::Unbalanced { .. }
            | Error::Evaluation { .. }
            | Error::Encode { .. }
            | Error::Internal(_) => ErrorClass::Data,
            Error::Storage { source, .. } if is_refused(source) => ErrorClass::Config,
            Error::Query { source, .. } => EngineFailure::of_query(source).class(),
            Error::Arrow { source, .. } => EngineFailure::of_arrow(source).class(),
            Error::Catalog { source, .. } if is_not_retryable(source) => ErrorClass::Data,
            Error::Storage { .. }
            | Error::Catalog { .. }
            | Error::Io { .. }
            | Error::AfterCommit { .. } => ErrorClass::Infra,
            #[cfg(feature = "test-hooks")]
            Error::Injected(_) => ErrorClass::Infra,
        }
    }

    /// Wraps a DataFusion error with the stage it happened in.
    pub fn query(stage: Stage) -> impl FnOnce(datafusion::error::DataFusionError) -> Error {
        move |source| Error::Query {
            stage,
            source: Box::new(source),
        }
    }

    /// Wraps an Arrow error with the stage it happened in.
    pub fn arrow(stage: Stage) -> impl FnOnce(arrow::error::ArrowError) -> Error {
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

/// An Iceberg failure about what was written (invalid data, an unsupported
/// feature), which a retry meets again.
fn is_not_retryable(source: &iceberg::Error) -> bool {
    matches!(
        source.kind(),
        iceberg::ErrorKind::DataInvalid | iceberg::ErrorKind::FeatureUnsupported
    )
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

    use arrow::error::ArrowError;
    use datafusion::error::DataFusionError;

    fn io_error() -> std::io::Error {
        std::io::Error::other("disk gone")
    }

    /// One error of every variant (several where the source decides the
    /// class), each with the class the exit-code table promises for it. The
    /// match has no wildcard: a new variant does not compile until it is
    /// added here with its class.
    fn one_of_each() -> Vec<(Error, ErrorClass)> {
        let engine = |e: DataFusionError| Error::query(Stage::Evaluate)(e);
        let samples = vec![
            Error::ConfigRead {
                path: "c.toml".into(),
                source: io_error(),
            },
            Error::ConfigInvalid {
                path: "c.toml".into(),
                problems: vec!["x".into()],
            },
            Error::Usage {
                arg: "--out".into(),
                reason: "a file".into(),
            },
            Error::BadDrop {
                location: "a.csv".into(),
                reason: "bad".into(),
            },
            Error::DropNotArrived {
                location: "file:///bronze/BANK_A/2026-11".into(),
                setting: "storage.bronze".into(),
            },
            Error::BadRecord {
                location: "claim marker m.json".into(),
                reason: "not ours".into(),
            },
            Error::FailRule {
                rule: "r".into(),
                rows: 1,
            },
            Error::Unbalanced {
                received: 2,
                accounted: 1,
                silver: 1,
                quarantined: 0,
                dropped: 0,
                pending: 0,
                gap: 1,
            },
            Error::storage("get", "x")(object_store::Error::NotFound {
                path: "x".into(),
                source: Box::new(io_error()),
            }),
            Error::storage("get", "x")(object_store::Error::PermissionDenied {
                path: "x".into(),
                source: Box::new(io_error()),
            }),
            Error::catalog("load", "t")(iceberg::Error::new(
                iceberg::ErrorKind::Unexpected,
                "catalog down",
            )),
            Error::catalog("write", "t")(iceberg::Error::new(
                iceberg::ErrorKind::DataInvalid,
                "a value the writer cannot take",
            )),
            Error::AfterCommit {
                source: Box::new(Error::Internal("events".into())),
            },
            Error::TableProperty {
                table: "t".into(),
                property: "write.parquet.compression-codec",
                value: "lzo".into(),
                reason: "not a codec".into(),
            },
            engine(DataFusionError::ArrowError(
                Box::new(ArrowError::DivideByZero),
                None,
            )),
            engine(DataFusionError::Execution(
                "Cannot cast string 'A1234567' to value of Int32 type".into(),
            )),
            engine(DataFusionError::Execution(
                "Regular expression did not compile: Syntax(A1234567()".into(),
            )),
            engine(DataFusionError::Plan("unknown column".into())),
            engine(DataFusionError::ResourcesExhausted("memory".into())),
            engine(DataFusionError::IoError(io_error())),
            engine(DataFusionError::ObjectStore(Box::new(
                object_store::Error::Generic {
                    store: "s3",
                    source: Box::new(io_error()),
                },
            ))),
            engine(DataFusionError::External(Box::new(io_error()))),
            Error::Evaluation {
                subject: "rule 'r'".into(),
                failure: EngineFailure::DivisionByZero,
            },
            Error::Evaluation {
                subject: "metric 'm'".into(),
                failure: EngineFailure::Planning,
            },
            Error::arrow(Stage::Read)(ArrowError::CastError("'A1234567'".into())),
            Error::arrow(Stage::Read)(ArrowError::IoError("read".into(), io_error())),
            Error::Io {
                path: "out".into(),
                source: io_error(),
            },
            Error::Encode {
                what: "summary",
                source: serde_json::from_str::<u8>("x").unwrap_err(),
            },
            Error::Internal("bug".into()),
            #[cfg(feature = "test-hooks")]
            Error::Injected("commit"),
        ];
        samples
            .into_iter()
            .map(|error| {
                let expected = match &error {
                    Error::ConfigRead { .. }
                    | Error::ConfigInvalid { .. }
                    | Error::Usage { .. }
                    | Error::TableProperty { .. } => ErrorClass::Config,
                    Error::Evaluation {
                        failure: EngineFailure::Planning,
                        ..
                    } => ErrorClass::Config,
                    Error::DropNotArrived { .. } => ErrorClass::NotArrived,
                    Error::BadDrop { .. }
                    | Error::BadRecord { .. }
                    | Error::FailRule { .. }
                    | Error::Unbalanced { .. }
                    | Error::Evaluation { .. }
                    | Error::Encode { .. }
                    | Error::Internal(_) => ErrorClass::Data,
                    Error::Storage { source, .. } => match **source {
                        object_store::Error::PermissionDenied { .. } => ErrorClass::Config,
                        _ => ErrorClass::Infra,
                    },
                    Error::Query { source, .. } => match &**source {
                        DataFusionError::IoError(_)
                        | DataFusionError::ObjectStore(_)
                        | DataFusionError::External(_) => ErrorClass::Infra,
                        _ => ErrorClass::Data,
                    },
                    Error::Arrow { source, .. } => match source {
                        ArrowError::IoError(..) => ErrorClass::Infra,
                        _ => ErrorClass::Data,
                    },
                    Error::Catalog { source, .. } => match source.kind() {
                        iceberg::ErrorKind::DataInvalid => ErrorClass::Data,
                        _ => ErrorClass::Infra,
                    },
                    Error::Io { .. } | Error::AfterCommit { .. } => ErrorClass::Infra,
                    #[cfg(feature = "test-hooks")]
                    Error::Injected(_) => ErrorClass::Infra,
                };
                (error, expected)
            })
            .collect()
    }

    #[test]
    fn every_variant_has_the_class_the_exit_code_table_promises() {
        for (error, expected) in one_of_each() {
            assert_eq!(error.class(), expected, "{error:?}");
            assert_eq!(
                error.class().exit_code() == 3,
                expected == ErrorClass::Infra,
                "{error}"
            );
            assert_eq!(
                error.class().exit_code() == 5,
                expected == ErrorClass::NotArrived,
                "{error}"
            );
        }
    }

    #[test]
    fn exit_codes_are_distinct_and_leave_4_to_the_lost_race() {
        let classes = [
            ErrorClass::Data,
            ErrorClass::Config,
            ErrorClass::Infra,
            ErrorClass::NotArrived,
        ];
        let codes: Vec<u8> = classes.iter().map(|c| c.exit_code()).collect();
        assert_eq!(codes, [1, 2, 3, 5]);
        assert!(!codes.contains(&EXIT_COMMITTED_CONCURRENTLY));
    }

    #[test]
    fn an_io_error_whose_text_names_a_cast_is_still_io() {
        let io = std::io::Error::other("s3://broadcast-lake/stackoverflow/x: connection reset");
        let error = Error::query(Stage::Evaluate)(DataFusionError::IoError(io));
        assert_eq!(error.class(), ErrorClass::Infra, "{error}");
    }

    #[test]
    fn errors_of_user_rules_are_never_retryable() {
        let failing = [
            DataFusionError::ArrowError(Box::new(ArrowError::DivideByZero), None),
            DataFusionError::Execution("Cannot cast string 'x' to Int32".into()),
            DataFusionError::ArrowError(
                Box::new(ArrowError::ComputeError(
                    "Regular expression did not compile: x".into(),
                )),
                None,
            ),
            DataFusionError::Context(
                "while evaluating".into(),
                Box::new(DataFusionError::ArrowError(
                    Box::new(ArrowError::DivideByZero),
                    None,
                )),
            ),
        ];
        for source in failing {
            let error = Error::query(Stage::Evaluate)(source);
            assert_eq!(error.class(), ErrorClass::Data, "{error}");
        }
    }

    #[test]
    fn engine_errors_show_their_kind_and_no_value() {
        for (source, kind) in [
            (
                DataFusionError::Execution(
                    "Cannot cast string 'A1234567' to value of Int32 type".into(),
                ),
                "cast failed",
            ),
            (
                DataFusionError::Execution(
                    "Regular expression did not compile: Syntax(\nA1234567(\n)".into(),
                ),
                "invalid regular expression",
            ),
            (
                DataFusionError::ArrowError(Box::new(ArrowError::DivideByZero), None),
                "division by zero",
            ),
        ] {
            let message = Error::query(Stage::Evaluate)(source).to_string();
            assert!(!message.contains("A1234567"), "{message}");
            assert!(
                message.contains("evaluate") && message.contains(kind),
                "{message}"
            );
        }
        let arrow =
            Error::arrow(Stage::Read)(ArrowError::CastError("cannot cast 'A1234567'".into()));
        assert!(!arrow.to_string().contains("A1234567"), "{arrow}");
    }

    #[test]
    fn printable_escapes_control_characters() {
        assert_eq!(printable("A\u{1b}[31mB"), "A\\u{1b}[31mB");
        assert_eq!(printable("a\nb\r"), "a\\nb\\r");
        assert_eq!(printable("BANK_Ä-1"), "BANK_Ä-1");
        assert_eq!(printable_lines("a\n\u{1b}b"), "a\n\\u{1b}b");
    }
}
