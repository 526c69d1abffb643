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
//! Modules in pipeline order: [`config`] (contract and rules), [`pipeline`]
//! (one module per stage), [`infra`] (object storage and catalog), plus the
//! [`cli`], [`backfill`], [`demo`] and [`telemetry`] around them.

#![deny(missing_docs)]

pub mod backfill;
pub mod bench;
pub mod cli;
pub mod config;
pub mod core;
pub mod demo;
pub mod error;
pub mod exceptions;
pub mod infra;
pub mod maintain;
pub mod pipeline;
pub mod progress;
pub mod replay;
pub mod report;
pub mod telemetry;
pub mod transient;

pub use error::{Error, ErrorClass, Result};
