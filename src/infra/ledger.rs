//! The ledger of committed runs: what proves a drop committed (DESIGN.md
//! invariant 11).
//!
//! Each commit sets a table property `silverline.committed.<run key>` in the
//! same Iceberg commit as its data files, holding the run's [`RunPlace`] (its
//! id and the date of its dq_error folders). Table properties survive snapshot
//! expiry and compaction, which remove the snapshots whose summaries carried
//! the run key; snapshots are still looked at for tables committed before the
//! ledger existed. Everything read back here becomes part of dq_error paths,
//! so it is validated like user input.

use iceberg::table::Table;

use crate::core::place::RunPlace;
use crate::error::{Error, Result};

/// Snapshot property holding the run key.
pub const RUN_KEY_PROPERTY: &str = "silverline.run-key";

/// Snapshot property holding the run id.
pub(crate) const RUN_ID_PROPERTY: &str = "silverline.run-id";

/// Prefix of the ledger's table properties; the run key follows it.
pub(crate) const LEDGER_PREFIX: &str = "silverline.committed.";

/// The ledger property of `run_key`.
pub(crate) fn ledger_key(run_key: &str) -> String {
    format!("{LEDGER_PREFIX}{run_key}")
}

/// The ledger property value of a place.
pub(crate) fn ledger_value(place: &RunPlace) -> Result<String> {
    serde_json::to_string(place).map_err(|source| Error::Encode {
        what: "ledger entry",
        source,
    })
}

/// Proof that a run key is in a table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CommittedRecord {
    /// The snapshot that committed it, while the table still has it.
    pub snapshot_id: Option<i64>,
    /// The run's place, from the ledger (None for runs committed before it).
    pub place: Option<RunPlace>,
}

/// Whether `run_key` is committed to `table`: by its ledger entry, or by a
/// snapshot carrying it (tables committed before the ledger).
pub(crate) fn find_committed(table: &Table, run_key: &str) -> Result<Option<CommittedRecord>> {
    let snapshot_id = snapshot_with_run_key(table, run_key);
    let place = match table.metadata().properties().get(&ledger_key(run_key)) {
        Some(value) => Some(parse_entry(table, run_key, value)?),
        None => None,
    };
    if snapshot_id.is_none() && place.is_none() {
        return Ok(None);
    }
    Ok(Some(CommittedRecord { snapshot_id, place }))
}

fn parse_entry(table: &Table, run_key: &str, value: &str) -> Result<RunPlace> {
    let source = format!(
        "table property {} of {}",
        ledger_key(run_key),
        table.identifier()
    );
    let place: RunPlace = serde_json::from_str(value).map_err(|e| Error::BadRecord {
        location: source.clone(),
        reason: format!("not a ledger entry ({})", e.classify_name()),
    })?;
    place.checked(run_key, &source)
}

/// Every run key `table` holds, in its ledger or its snapshots (a key may
/// come twice).
pub(crate) fn run_keys(table: &Table) -> impl Iterator<Item = &str> {
    let ledger = table
        .metadata()
        .properties()
        .keys()
        .filter_map(|key| key.strip_prefix(LEDGER_PREFIX));
    let snapshots = table.metadata().snapshots().filter_map(|s| {
        s.summary()
            .additional_properties
            .get(RUN_KEY_PROPERTY)
            .map(String::as_str)
    });
    ledger.chain(snapshots)
}

/// The snapshot of `table` whose summary carries `run_key`, if it is still there.
pub(crate) fn snapshot_with_run_key(table: &Table, run_key: &str) -> Option<i64> {
    table
        .metadata()
        .snapshots()
        .find(|s| {
            s.summary()
                .additional_properties
                .get(RUN_KEY_PROPERTY)
                .map(String::as_str)
                == Some(run_key)
        })
        .map(|s| s.snapshot_id())
}

/// The ledger entries missing for runs whose snapshots still carry their key
/// (run keys with their places), so that expiring those snapshots loses nothing.
pub(crate) fn unledgered_runs(table: &Table) -> Vec<(String, RunPlace)> {
    let properties = table.metadata().properties();
    let mut missing: Vec<(String, RunPlace)> = table
        .metadata()
        .snapshots()
        .filter_map(|s| {
            let extra = &s.summary().additional_properties;
            let run_key = extra.get(RUN_KEY_PROPERTY)?;
            if properties.contains_key(&ledger_key(run_key)) {
                return None;
            }
            let date = chrono::DateTime::from_timestamp_millis(s.timestamp_ms())?.date_naive();
            Some((run_key.clone(), RunPlace::for_run(run_key, date)))
        })
        .collect();
    missing.sort_by(|a, b| a.0.cmp(&b.0));
    missing.dedup_by(|a, b| a.0 == b.0);
    missing
}

trait ClassifyName {
    fn classify_name(&self) -> &'static str;
}

impl ClassifyName for serde_json::Error {
    fn classify_name(&self) -> &'static str {
        match self.classify() {
            serde_json::error::Category::Io => "I/O",
            serde_json::error::Category::Syntax => "not JSON",
            serde_json::error::Category::Data => "wrong fields",
            serde_json::error::Category::Eof => "cut short",
        }
    }
}
