//! Recording a run's exceptions: one event per row the run set aside (read
//! back from its dq_error files, which carry `_exception_id`), and a
//! `resolved` event per replayed exception that reached Silver (`accepted`,
//! with who and why, for the rows of an acceptance).
//!
//! A replay drop carries, beside its data file, a manifest
//! ([`REPLAY_MANIFEST`]) naming the exception behind each line; its rows keep
//! their ids, so an exception that fails again gets fresh reasons, not a twin.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::close::Closing;
use super::store::EventWriter;
use super::{ExceptionEvent, ExceptionStatus, exception_id, missing_exception_id};
use crate::config::contract::Contract;
use crate::config::rules::{MISSING_ENTITIES_METRIC, Severity};
use crate::core::drop::DropRef;
use crate::core::set_aside::SetAside;
use crate::error::{Error, Result};
use crate::infra::storage::Location;
use crate::transient::{DQ_ERRORS, EXCEPTION_ID, MISSING_PERIOD, SOURCE_FILE, SOURCE_LINE};

/// The file, in a replay drop's folder, that names the exception behind each
/// line of the replayed data file. Its name starts with `_`, so the run does
/// not read it as data.
pub const REPLAY_MANIFEST: &str = "_exceptions.csv";

/// An exception a replay drop carries: where it stands in the replay file and
/// what it was.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CarriedException {
    /// Data file of the replay drop.
    pub file: String,
    /// Line in that file.
    pub line: u64,
    /// The exception's id.
    pub exception_id: String,
    /// The drop the row first came in.
    pub drop_id: String,
    /// Its primary rule when it was set aside.
    pub rule: String,
    /// When it first entered.
    pub entered_at: DateTime<Utc>,
}

/// The exception id of each row of a drop: carried by a replay manifest, or
/// derived from contributor, drop, file and line; and how the carried
/// exceptions close when their rows reach Silver.
#[derive(Debug, Clone, Default)]
pub struct ExceptionIds {
    contributor: String,
    drop_id: String,
    carried: HashMap<(String, u64), CarriedException>,
    closing: Closing,
}

impl ExceptionIds {
    /// Ids for `drop`, with the exceptions its manifest carries.
    pub fn new(drop: &DropRef, carried: Vec<CarriedException>) -> ExceptionIds {
        ExceptionIds {
            contributor: drop.contributor.clone(),
            drop_id: drop.drop_id.clone(),
            carried: carried
                .into_iter()
                .map(|c| ((c.file.clone(), c.line), c))
                .collect(),
            closing: Closing::Resolved,
        }
    }

    /// The same ids; carried exceptions that reach Silver close as `closing` says.
    pub fn closing(self, closing: Closing) -> ExceptionIds {
        ExceptionIds { closing, ..self }
    }

    /// The exception id of the row at `file:line`.
    pub fn id_of(&self, file: &str, line: u64) -> String {
        match self.carried.get(&(file.to_string(), line)) {
            Some(carried) => carried.exception_id.clone(),
            None => exception_id(&self.contributor, &self.drop_id, file, line),
        }
    }

    fn carried_by_id(&self) -> BTreeMap<&str, &CarriedException> {
        self.carried
            .values()
            .map(|c| (c.exception_id.as_str(), c))
            .collect()
    }
}

/// Reads the replay manifest of `drop`, if it has one.
pub async fn load_carried(bronze: &Location, drop: &DropRef) -> Result<Vec<CarriedException>> {
    let path = format!("{}/{REPLAY_MANIFEST}", drop.prefix());
    let Some(bytes) = bronze.get_opt(&path).await? else {
        return Ok(Vec::new());
    };
    csv::Reader::from_reader(bytes.as_ref())
        .deserialize()
        .collect::<std::result::Result<Vec<CarriedException>, _>>()
        .map_err(|e| Error::BadDrop {
            location: bronze.url_of(&path),
            reason: format!("unreadable replay manifest: {e}"),
        })
}

/// Renders a replay manifest.
pub fn manifest_csv(carried: &[CarriedException]) -> Result<Vec<u8>> {
    let mut writer = csv::Writer::from_writer(Vec::new());
    for entry in carried {
        writer
            .serialize(entry)
            .map_err(|e| Error::Internal(format!("cannot write a replay manifest: {e}")))?;
    }
    writer
        .into_inner()
        .map_err(|e| Error::Internal(format!("cannot write a replay manifest: {e}")))
}

/// Who recorded the events and when.
#[derive(Debug, Clone)]
pub struct RunRecord<'a> {
    /// The drop.
    pub drop: &'a DropRef,
    /// The run id.
    pub run_id: &'a str,
    /// When the run started: the entry time of the exceptions it found.
    pub started_at: DateTime<Utc>,
    /// When the events are recorded.
    pub now: DateTime<Utc>,
}

/// Writes the events of one run to `writer`, from the dq_error files it
/// wrote (`kind -> path`, each read as a stream from a copy in `scratch`,
/// a chunk of rows at a time) and the exceptions its drop carried.
pub async fn write_run_events(
    dq_error: &Location,
    files: &BTreeMap<SetAside, String>,
    (ids, contract, run): (&ExceptionIds, &Contract, &RunRecord<'_>),
    (writer, scratch): (&mut EventWriter<'_>, Option<&Path>),
) -> Result<()> {
    let carried = ids.carried_by_id();
    let mut set_aside_again = BTreeSet::new();
    for (destination, path) in files {
        let mut rows = DqRows::open(dq_error, path, scratch).await?;
        loop {
            let chunk = rows.next_chunk()?;
            if chunk.is_empty() {
                break;
            }
            let events: Vec<ExceptionEvent> = chunk
                .iter()
                .map(|record| {
                    let row = rows.row(record);
                    set_aside_event(&row, *destination, path, contract, &carried, run)
                })
                .collect();
            set_aside_again.extend(
                events
                    .iter()
                    .filter(|e| carried.contains_key(e.exception_id.as_str()))
                    .map(|e| e.exception_id.clone()),
            );
            writer.write(&events).await?;
        }
    }
    let closing: Vec<ExceptionEvent> = carried
        .iter()
        .filter(|(id, _)| !set_aside_again.contains(**id))
        .map(|(_, exception)| closing_event(exception, &ids.closing, run))
        .collect();
    writer.write(&closing).await
}

/// The rows of a dq_error CSV file, read a chunk at a time from a local
/// copy.
struct DqRows {
    reader: csv::Reader<std::io::BufReader<std::fs::File>>,
    /// Each column's position, by header.
    columns: HashMap<String, usize>,
    url: String,
}

/// One row of a dq_error file, its values found by header.
struct DqRow<'a> {
    columns: &'a HashMap<String, usize>,
    record: &'a csv::StringRecord,
}

impl DqRow<'_> {
    /// The value of the column `name`, if the file has it.
    fn get(&self, name: &str) -> Option<&str> {
        self.columns.get(name).and_then(|i| self.record.get(*i))
    }
}

/// The rows of a dq_error file turned into events at once.
const EVENT_CHUNK: usize = 16_384;

impl DqRows {
    /// The rows of `path`, copied to an unnamed file in `scratch`.
    async fn open(dq_error: &Location, path: &str, scratch: Option<&Path>) -> Result<DqRows> {
        let file = dq_error.copy_to_file(path, scratch).await?;
        let url = dq_error.url_of(path);
        let mut reader = csv::Reader::from_reader(std::io::BufReader::new(file));
        let columns = reader
            .headers()
            .map_err(|e| Error::Internal(format!("cannot read back {url}: {e}")))?
            .iter()
            .enumerate()
            .map(|(i, name)| (name.to_string(), i))
            .collect();
        Ok(DqRows {
            reader,
            columns,
            url,
        })
    }

    /// The next records, [`EVENT_CHUNK`] at most; none at the end.
    fn next_chunk(&mut self) -> Result<Vec<csv::StringRecord>> {
        self.reader
            .records()
            .take(EVENT_CHUNK)
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(|e| Error::Internal(format!("cannot read back {}: {e}", self.url)))
    }

    /// `record` (of [`DqRows::next_chunk`]), its values found by header.
    fn row<'a>(&'a self, record: &'a csv::StringRecord) -> DqRow<'a> {
        DqRow {
            columns: &self.columns,
            record,
        }
    }
}

/// One (rule, severity, message) of a row's `_dq_errors`.
#[derive(Debug, Deserialize)]
struct Reason {
    rule: String,
    severity: String,
}

fn set_aside_event(
    row: &DqRow<'_>,
    destination: SetAside,
    path: &str,
    contract: &Contract,
    carried: &BTreeMap<&str, &CarriedException>,
    run: &RunRecord<'_>,
) -> ExceptionEvent {
    let field = |name: &str| row.get(name).unwrap_or_default().to_string();
    let reasons_json = field(DQ_ERRORS);
    let reasons: Vec<Reason> = serde_json::from_str(&reasons_json).unwrap_or_default();
    let worst = reasons
        .iter()
        .filter_map(|r| Severity::parse(&r.severity))
        .max();
    let primary = reasons
        .iter()
        .find(|r| worst.is_some() && Severity::parse(&r.severity) == worst);
    let exception_id = field(EXCEPTION_ID);
    let earlier = carried.get(exception_id.as_str());
    ExceptionEvent {
        contributor: run.drop.contributor.clone(),
        drop_id: earlier.map_or_else(|| run.drop.drop_id.clone(), |c| c.drop_id.clone()),
        run_id: run.run_id.to_string(),
        status: ExceptionStatus::of_set_aside(destination),
        rule: primary.map(|r| r.rule.clone()).unwrap_or_default(),
        rules: reasons
            .iter()
            .map(|r| r.rule.as_str())
            .collect::<Vec<_>>()
            .join(","),
        severity: primary.map(|r| r.severity.clone()).unwrap_or_default(),
        reasons: reasons_json,
        record_key: record_key(row, contract),
        source_file: row
            .get(SOURCE_FILE)
            .filter(|v| !v.is_empty())
            .map(str::to_string),
        source_line: row.get(SOURCE_LINE).and_then(|v| v.parse().ok()),
        dq_file: Some(path.to_string()),
        entered_at: earlier.map_or(run.started_at, |c| c.entered_at),
        event_at: run.now,
        exception_id,
        actor: None,
        note: None,
    }
}

/// The event of a carried exception whose row reached Silver: resolved, or
/// accepted with who and why.
fn closing_event(
    exception: &CarriedException,
    closing: &Closing,
    run: &RunRecord<'_>,
) -> ExceptionEvent {
    let decision = closing.decision();
    ExceptionEvent {
        exception_id: exception.exception_id.clone(),
        contributor: run.drop.contributor.clone(),
        drop_id: exception.drop_id.clone(),
        run_id: run.run_id.to_string(),
        status: closing.status(),
        rule: exception.rule.clone(),
        rules: exception.rule.clone(),
        severity: String::new(),
        reasons: "[]".to_string(),
        record_key: None,
        source_file: Some(exception.file.clone()),
        source_line: i64::try_from(exception.line).ok(),
        dq_file: None,
        entered_at: exception.entered_at,
        event_at: run.now,
        actor: decision.map(|d| d.by().to_string()),
        note: decision.map(|d| d.reason().to_string()),
    }
}

/// The row's record key (entity key and order column joined by `|`), when all of it is there.
fn record_key(row: &DqRow<'_>, contract: &Contract) -> Option<String> {
    let parts: Option<Vec<&str>> = contract
        .record_key()
        .iter()
        .map(|c| row.get(c).filter(|v| !v.is_empty()))
        .collect();
    parts.map(|p| p.join("|"))
}

/// Writes to `writer` the `missing` events of the entities a run's drop
/// left out, from the run's missing list (`path`, relative to the dq_error
/// root, if there): one per entity and period, with the entity key and the
/// period as its record key.
pub async fn write_missing_events(
    dq_error: &Location,
    path: &str,
    (contract, run): (&Contract, &RunRecord<'_>),
    (writer, scratch): (&mut EventWriter<'_>, Option<&Path>),
) -> Result<()> {
    if !dq_error.exists(path).await? {
        return Ok(());
    }
    let mut rows = DqRows::open(dq_error, path, scratch).await?;
    loop {
        let chunk = rows.next_chunk()?;
        if chunk.is_empty() {
            return Ok(());
        }
        let events: Vec<ExceptionEvent> = chunk
            .iter()
            .filter_map(|record| missing_event(&rows.row(record), path, contract, run))
            .collect();
        writer.write(&events).await?;
    }
}

fn missing_event(
    row: &DqRow<'_>,
    path: &str,
    contract: &Contract,
    run: &RunRecord<'_>,
) -> Option<ExceptionEvent> {
    let period = row.get(MISSING_PERIOD)?;
    let last_state = row.get(&contract.order_column)?;
    let key = missing_record_key(
        contract.entity_key.iter().map(|c| row.get(c).unwrap_or("")),
        period,
    );
    let message = format!(
        "open in its latest state ({last_state}) and not declared for the period of {period}"
    );
    let reasons = serde_json::json!([{
        "rule": MISSING_ENTITIES_METRIC,
        "severity": ExceptionStatus::Missing.as_str(),
        "message": message,
    }]);
    Some(ExceptionEvent {
        exception_id: missing_exception_id(&run.drop.contributor, &key),
        contributor: run.drop.contributor.clone(),
        drop_id: run.drop.drop_id.clone(),
        run_id: run.run_id.to_string(),
        status: ExceptionStatus::Missing,
        rule: MISSING_ENTITIES_METRIC.to_string(),
        rules: MISSING_ENTITIES_METRIC.to_string(),
        severity: String::new(),
        reasons: reasons.to_string(),
        record_key: Some(key),
        source_file: None,
        source_line: None,
        dq_file: Some(path.to_string()),
        entered_at: run.started_at,
        event_at: run.now,
        actor: None,
        note: None,
    })
}

/// The record key of a missing entity: its key parts and the period
/// (`YYYY-MM-01`) joined by `|`.
pub fn missing_record_key<'a>(key: impl Iterator<Item = &'a str>, period: &'a str) -> String {
    key.chain(std::iter::once(period))
        .collect::<Vec<_>>()
        .join("|")
}

/// The `resolved` event of a missing entity a run's drop declared.
pub fn declared_event(missing: &ExceptionEvent, run: &RunRecord<'_>) -> ExceptionEvent {
    ExceptionEvent {
        run_id: run.run_id.to_string(),
        status: ExceptionStatus::Resolved,
        severity: String::new(),
        reasons: "[]".to_string(),
        dq_file: None,
        event_at: run.now,
        actor: None,
        note: None,
        ..missing.clone()
    }
}
