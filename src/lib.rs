//! silverline: bronze-to-Silver ingestion for an Apache Iceberg lakehouse that
//! refuses to let well-formed but wrong data through.
//!
//! ```text
//!  bronze drop ──► claim ──► read ──► baseline ──► evaluate ──► route ─┬─► write Silver files ─┐
//!  (CSV/Parquet)   run key   typed    Silver       row + trend        │                       ├─► balance ──► commit ──► summary
//!                  rerun=0   rows +   history,     rules, verdict     └─► write dq_error CSV ─┘   counts      one         JSON
//!                            parse    LAG -> prev_*  on every row          (quarantine, dropped)   read back   snapshot
//!                            rejects
//! ```
//!
//! Layers, lowest first; a module uses only its own layer and those below
//! (`tests/layers.rs` holds the same list and fails on a wrong import):
//!
//! ```text
//!  cli                                         the command line
//!  bench                                       the benchmark
//!  serve                                       the workbench: exceptions on a web page, acted on
//!  replay  accept  backfill  maintain  demo    what people run around the pipeline
//!  doctor                                      (and the preflight before the first run)
//!  pipeline                                    one module per stage of a run
//!  report                                      backlog text and the HTML report
//!  exceptions                                  the exception store and its backlog
//!  infra                                       object storage, catalog, schema evolution, Iceberg append, run ledger
//!  config                                      contract, rules, the validated plan
//!  core  transient  telemetry  progress        shared words, the SQL toolbox, logs
//!  error  stage                                one error type and its exit codes; stage names
//! ```

#![deny(missing_docs)]

pub mod accept;
pub mod backfill;
pub mod bench;
pub mod cli;
pub mod config;
pub mod core;
pub mod demo;
pub mod doctor;
pub mod error;
pub mod exceptions;
pub mod infra;
pub mod maintain;
pub mod pipeline;
pub mod progress;
pub mod replay;
pub mod report;
pub mod serve;
pub mod stage;
pub mod telemetry;
pub mod transient;

pub use error::{Error, ErrorClass, Result};
