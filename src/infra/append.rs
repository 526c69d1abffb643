//! Appending a run's data files to an Iceberg table, once: the generic
//! append that Silver's commit and the exception store share.
//!
//! Idempotent under concurrency (DESIGN.md invariants 5 and 11): silverline
//! owns the retries. Tables it owns are created with Iceberg's own commit
//! retries off, and each attempt here reloads the table, checks the run
//! ledger for the run key, optionally validates that the table gained nothing
//! that makes the run's verdicts stale, and appends on exactly that state
//! together with the run's ledger entry; a concurrent commit makes the
//! attempt fail with a conflict instead of being silently re-applied on top
//! of it. So two runs of the same drop commit once: the loser finds the
//! winner's ledger entry.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use iceberg::spec::DataFile;
use iceberg::table::Table;
use iceberg::transaction::{ApplyTransactionAction, Transaction};
use iceberg::{Catalog, ErrorKind, TableIdent};

use crate::core::place::RunPlace;
use crate::error::{Error, Result};
use crate::infra::ledger::{
    RUN_KEY_PROPERTY, find_committed, ledger_key, ledger_value, snapshot_with_run_key,
};
use crate::infra::pinned::PinnedCatalog;

/// What the commit did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Committed {
    /// A new snapshot.
    Snapshot(i64),
    /// A concurrent run of the same drop committed first; nothing was added.
    /// The snapshot is named while the table still has it.
    LostRace(Option<i64>),
    /// Rows that may share record keys with this run's were committed since
    /// its baseline was read: nothing was added, the run must be judged again
    /// on the table as it is now.
    Stale,
}

/// The state of a table a run was judged on: any later snapshot that may add
/// rows of the run's contributor makes its verdicts stale (optimistic
/// concurrency with validation, as Iceberg writers validate conflicting files).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JudgedOn {
    /// The table's current snapshot when the baseline was read (None: empty).
    snapshot_id: Option<i64>,
}

impl JudgedOn {
    /// The state `table` is in now.
    pub(crate) fn of(table: &Table) -> JudgedOn {
        JudgedOn {
            snapshot_id: table.metadata().current_snapshot_id(),
        }
    }

    /// Whether `table` gained, since this state, a snapshot that may hold rows
    /// of `contributor`: one of its runs, or an append by another writer.
    /// Compactions (replace) and deletes add no record key. The current
    /// snapshot's ancestry is walked back to the judged one (sequence numbers
    /// do not exist in format v1); if that one cannot be met (expired), the
    /// verdicts are taken as stale.
    pub(crate) fn is_stale(&self, table: &Table, contributor: &str) -> bool {
        !only_since(table, self.snapshot_id, |snapshot| {
            !adds_rows_of(snapshot, contributor)
        })
    }
}

/// Whether `table`'s rows of `contributor` are still those of its snapshot
/// `since`: every snapshot after it is a compaction (replace) or another
/// contributor's run. Stricter than [`JudgedOn::is_stale`], which lets
/// deletes pass: rows kept in memory for `since` stop standing for the
/// table's after any delete. `false` when `since` cannot be met (expired).
pub(crate) fn rows_of_unchanged_since(table: &Table, since: i64, contributor: &str) -> bool {
    use iceberg::spec::Operation;
    only_since(table, Some(since), |snapshot| {
        let summary = snapshot.summary();
        match summary.operation {
            Operation::Replace => true,
            Operation::Append => run_contributor(snapshot).is_some_and(|c| c != contributor),
            Operation::Overwrite | Operation::Delete => false,
        }
    })
}

/// Whether every snapshot of `table` after `since` (`None`: its first)
/// passes `harmless`, walking the current snapshot's ancestry back (sequence
/// numbers do not exist in format v1); `false` when `since` cannot be met
/// (expired).
fn only_since(
    table: &Table,
    since: Option<i64>,
    harmless: impl Fn(&iceberg::spec::Snapshot) -> bool,
) -> bool {
    let metadata = table.metadata();
    let mut next = metadata.current_snapshot_id();
    while let Some(id) = next {
        if Some(id) == since {
            return true;
        }
        let Some(snapshot) = metadata.snapshot_by_id(id) else {
            return false;
        };
        if !harmless(snapshot) {
            return false;
        }
        next = snapshot.parent_snapshot_id();
    }
    since.is_none()
}

/// The contributor whose run committed `snapshot`, from its run key.
fn run_contributor(snapshot: &iceberg::spec::Snapshot) -> Option<&str> {
    let run_key = snapshot
        .summary()
        .additional_properties
        .get(RUN_KEY_PROPERTY)?;
    run_key.split('/').next()
}

fn adds_rows_of(snapshot: &iceberg::spec::Snapshot, contributor: &str) -> bool {
    use iceberg::spec::Operation;
    if matches!(
        snapshot.summary().operation,
        Operation::Replace | Operation::Delete
    ) {
        return false;
    }
    run_contributor(snapshot).is_none_or(|c| c == contributor)
}

/// One run's append: its key (also a snapshot property and a ledger entry),
/// the snapshot properties and how many conflicts are retried.
#[derive(Debug, Clone)]
pub(crate) struct RunAppend<'a> {
    /// The run key; a ledger entry or snapshot carrying it means the run is in the table.
    pub run_key: &'a str,
    /// The run's place, kept in the ledger entry.
    pub place: &'a RunPlace,
    /// Snapshot properties, the run key among them.
    pub properties: HashMap<String, String>,
    /// How many times a conflicting commit is tried in all.
    pub attempts: u32,
    /// The table state the run was judged on and its contributor: an append
    /// finding the contributor's rows committed since then adds nothing and
    /// says [`Committed::Stale`]. None: the rows do not depend on the table.
    pub judged_on: Option<(JudgedOn, &'a str)>,
}

/// Appends `data_files` to the table `ident` in one snapshot with the run's
/// ledger entry, unless the run key is already there; conflicts are retried on
/// a reloaded table, re-checking the run key (and whether the run's verdicts
/// still hold) each time.
pub(crate) async fn append_for_run(
    catalog: &Arc<dyn Catalog>,
    ident: &TableIdent,
    data_files: Vec<DataFile>,
    append: &RunAppend<'_>,
) -> Result<Committed> {
    let target = ident.to_string();
    let mut attempt = 1;
    loop {
        let table = catalog
            .load_table(ident)
            .await
            .map_err(Error::catalog("load-table", &target))?;
        if let Some(record) = find_committed(&table, append.run_key)? {
            discard_files(&table, &data_files).await;
            return Ok(Committed::LostRace(record.snapshot_id));
        }
        if let Some((judged_on, contributor)) = append.judged_on
            && judged_on.is_stale(&table, contributor)
        {
            discard_files(&table, &data_files).await;
            return Ok(Committed::Stale);
        }
        match append_once(catalog, &table, &data_files, append).await {
            Ok(committed) => {
                return snapshot_with_run_key(&committed, append.run_key)
                    .map(Committed::Snapshot)
                    .ok_or_else(|| {
                        // The commit's answer does not show it: a rerun finds out.
                        Error::catalog("commit", &target)(iceberg::Error::new(
                            ErrorKind::Unexpected,
                            format!(
                                "the table returned by the commit has no snapshot with run key {}",
                                append.run_key
                            ),
                        ))
                    });
            }
            Err(e)
                if e.kind() == ErrorKind::CatalogCommitConflicts && attempt < append.attempts =>
            {
                tracing::warn!(attempt, table = %target, "commit conflict: reloading and retrying");
                tokio::time::sleep(backoff(attempt)).await;
                attempt += 1;
            }
            Err(e) => {
                return Err(Error::catalog(
                    "commit",
                    format!("{target} (attempt {attempt} of {})", append.attempts),
                )(e));
            }
        }
    }
}

/// One fast-append, with the run's ledger entry, on exactly `table`'s state:
/// Iceberg's own retries are off on Silver, and its re-apply on a reloaded
/// table is refused by [`PinnedCatalog`].
async fn append_once(
    catalog: &Arc<dyn Catalog>,
    table: &Table,
    data_files: &[DataFile],
    append: &RunAppend<'_>,
) -> iceberg::Result<Table> {
    let entry = ledger_value(append.place)
        .map_err(|e| iceberg::Error::new(ErrorKind::DataInvalid, e.to_string()))?;
    let tx = Transaction::new(table);
    let ledger = tx
        .update_table_properties()
        .set(ledger_key(append.run_key), entry);
    let tx = ledger.apply(tx)?;
    let fast_append = tx
        .fast_append()
        .add_data_files(data_files.to_vec())
        .set_snapshot_properties(append.properties.clone());
    let pinned = PinnedCatalog::on(catalog.as_ref(), table);
    fast_append.apply(tx)?.commit(&pinned).await
}

/// 100 ms, 200 ms, 400 ms... up to 5 s, with jitter so that racing runs spread out.
fn backoff(attempt: u32) -> Duration {
    let base = 100u64.saturating_mul(1 << attempt.min(6)).min(5_000);
    let jitter = u64::from(uuid::Uuid::new_v4().as_bytes()[0]) * base / 512;
    Duration::from_millis(base / 2 + jitter)
}

/// Deletes data files that will never be committed (best effort: an orphan is harmless).
pub(crate) async fn discard_files(table: &Table, data_files: &[DataFile]) {
    for file in data_files {
        if let Err(error) = table.file_io().delete(file.file_path()).await {
            tracing::warn!(path = file.file_path(), error = %error, "could not delete an uncommitted data file");
        }
    }
}
