//! Replay: a contributor's open exceptions, run again through the same
//! baseline and rules as a normal run.
//!
//! Pending rows (reference data caught up) are taken from the dq_error file
//! their latest event names; with `--include-quarantined`, quarantined rows
//! are taken from corrected files a person dropped under
//! `<dq_error>/corrections/contributor=<id>/` (any `.csv` in the dq_error
//! shape: the contract's columns and `_exception_id`). The rows become a replay
//! drop in bronze (`<contributor>/replay-<hash>/replay.csv` plus a manifest
//! naming each line's exception), which runs like any drop: rows that now pass
//! are committed to Silver in one transaction and their exceptions resolved;
//! the rest stay where they were, with fresh reasons and the same ids.
//!
//! Only open exceptions are replayed, so nothing is resolved twice. The drop
//! id hashes the rows and the run that last judged each one: replaying again
//! after a crash resumes the same run, and a replay with nothing open does
//! nothing. `silverline accept` builds its drop the same way
//! ([`put_replay_drop`]), from the rows of the dq_error files.

use std::collections::{BTreeMap, HashMap};

use sha2::{Digest, Sha256};

use crate::config::Plan;
use crate::core::drop::DropRef;
use crate::core::set_aside::SetAside;
use crate::error::{Error, Result};
use crate::exceptions::record::{CarriedException, REPLAY_MANIFEST, manifest_csv};
use crate::exceptions::store::{Opened, latest_events, open_exceptions};
use crate::exceptions::{ExceptionEvent, ExceptionStatus};
use crate::infra::storage::Location;
use crate::pipeline::summary::RunStatus;
use crate::pipeline::{RunOptions, RunOutcome, run};
use crate::transient::EXCEPTION_ID;

pub use crate::core::drop::REPLAY;

/// What to replay.
#[derive(Debug, Clone, Default)]
pub struct ReplayOptions {
    /// Also replay quarantined exceptions that have a corrected row.
    pub include_quarantined: bool,
    /// How to run the replay drop.
    pub run: RunOptions,
}

/// What a replay did.
#[derive(Debug)]
pub struct ReplayOutcome {
    /// Exceptions run again.
    pub replayed: usize,
    /// Corrected rows not replayed, with why (not open, unknown id).
    pub skipped: Vec<String>,
    /// The replay drop's run, when there was something to replay.
    pub run: Option<RunOutcome>,
}

impl ReplayOutcome {
    /// What the replay did, for a person, one line each.
    pub fn describe(&self, contributor: &str) -> Vec<String> {
        let mut lines: Vec<String> = self
            .skipped
            .iter()
            .map(|s| format!("skipped {s}"))
            .collect();
        let Some(run) = &self.run else {
            lines.push(format!(
                "nothing to replay for {contributor}: no open exception has its row at hand"
            ));
            return lines;
        };
        let drop_id = &run.summary.drop_id;
        let counts = &run.summary.counts;
        lines.push(match run.summary.status {
            RunStatus::AlreadyCommitted => format!(
                "replay drop {drop_id} of {contributor} was already committed: nothing changed"
            ),
            RunStatus::CommittedConcurrently => format!(
                "replay drop {drop_id} of {contributor} was committed by a concurrent replay while this one ran: nothing added, nothing resolved by this one"
            ),
            _ => format!(
                "replayed {} exception(s) of {contributor} as drop {drop_id}: {} resolved (committed to Silver), {} still pending, {} still quarantined, {} dropped",
                self.replayed, counts.committed, counts.pending, counts.quarantined, counts.dropped
            ),
        });
        if let Some(url) = run.summary_url.as_ref().filter(|_| {
            !matches!(
                run.summary.status,
                RunStatus::AlreadyCommitted | RunStatus::CommittedConcurrently
            )
        }) {
            lines.push(format!("summary: {url}"));
        }
        lines
    }
}

/// A row to replay: the exception it is and its values by column.
pub(crate) struct ReplayRow<'a> {
    /// The exception's latest event.
    pub(crate) exception: &'a ExceptionEvent,
    /// The row's values by column, as in its dq_error file.
    pub(crate) values: HashMap<String, String>,
}

/// The folder of a contributor's corrected rows, under the dq_error root.
pub fn corrections_folder(contributor: &str) -> String {
    format!("corrections/contributor={contributor}")
}

/// Replays `contributor`'s open exceptions.
pub async fn replay(
    plan: &Plan,
    contributor: &str,
    options: &ReplayOptions,
) -> Result<ReplayOutcome> {
    DropRef::new(contributor, "replay")?;
    let Opened {
        stores,
        catalog: _,
        exceptions: table,
    } = open_exceptions(plan).await?;
    let dq_error = stores.open(&plan.storage.dq_error, "storage.dq_error")?;
    let bronze = stores.open(&plan.storage.bronze, "storage.bronze")?;
    let memory = plan.query_memory()?;
    let still_open = latest_events(&table, Some(contributor).into(), &memory, |state| {
        state.is_open()
    })
    .await?;
    let open: BTreeMap<&str, &ExceptionEvent> = still_open
        .iter()
        .map(|e| (e.exception_id.as_str(), e))
        .collect();
    let mut rows = pending_rows(plan, &dq_error, &open).await?;
    let mut skipped = Vec::new();
    if options.include_quarantined {
        let (corrected, not_open) = corrected_rows(&dq_error, contributor, &open).await?;
        rows.extend(corrected);
        skipped = not_open;
    }
    if rows.is_empty() {
        return Ok(ReplayOutcome {
            replayed: 0,
            skipped,
            run: None,
        });
    }
    let drop = put_replay_drop(plan, &bronze, (contributor, REPLAY), &rows).await?;
    tracing::info!(drop_id = %drop.drop_id, rows = rows.len(), "replaying");
    let mut run_options = options.run.clone();
    run_options.replay = true;
    let outcome = run(plan, &drop, &run_options).await?;
    Ok(ReplayOutcome {
        replayed: rows.len(),
        skipped,
        run: Some(outcome),
    })
}

/// A dq_error file named by an exception event, read back from the exception
/// store: it must be a plain relative path of a file of one of `kinds`, or it
/// steers no read.
fn check_dq_file(file: &str, exception: Option<&str>, kinds: &[SetAside]) -> Result<()> {
    let plain = file
        .split('/')
        .all(|part| !part.is_empty() && part != "." && part != ".." && !part.contains('\\'))
        && !file.chars().any(char::is_control);
    let of_kind = kinds
        .iter()
        .any(|kind| file.starts_with(&format!("{}/", kind.kind())));
    if plain && of_kind {
        return Ok(());
    }
    let kinds: Vec<&str> = kinds.iter().map(|kind| kind.kind()).collect();
    Err(Error::BadRecord {
        location: format!(
            "exception {} in the exception store",
            exception.unwrap_or_default()
        ),
        reason: format!(
            "it names dq_error file '{file}', which is not a {} file of a run: it was not written by silverline",
            kinds.join(" or ")
        ),
    })
}

/// The open pending exceptions' rows, from the dq_error files their latest events name.
async fn pending_rows<'a>(
    plan: &Plan,
    dq_error: &Location,
    open: &BTreeMap<&str, &'a ExceptionEvent>,
) -> Result<Vec<ReplayRow<'a>>> {
    let pending: Vec<&'a ExceptionEvent> = open
        .values()
        .copied()
        .filter(|e| e.status == ExceptionStatus::Pending && e.dq_file.is_some())
        .collect();
    if !pending.is_empty() && plan.mask_sensitive {
        return Err(Error::Usage {
            arg: "quarantine.mask_sensitive".to_string(),
            reason: "pending rows are replayed from their dq_error files, which mask sensitive columns: put the rows, unmasked, under the corrections folder and replay with --include-quarantined".to_string(),
        });
    }
    dq_file_rows(dq_error, &pending, &[SetAside::Pending]).await
}

/// The rows of `exceptions` from the dq_error files (of one of `kinds`) their
/// latest events name; an exception whose event names no file is left out.
pub(crate) async fn dq_file_rows<'a>(
    dq_error: &Location,
    exceptions: &[&'a ExceptionEvent],
    kinds: &[SetAside],
) -> Result<Vec<ReplayRow<'a>>> {
    let mut by_file: BTreeMap<&str, Vec<&'a ExceptionEvent>> = BTreeMap::new();
    for event in exceptions.iter().copied() {
        if let Some(file) = &event.dq_file {
            by_file.entry(file).or_default().push(event);
        }
    }
    let mut rows = Vec::new();
    for (file, exceptions) in by_file {
        let first = exceptions.first().map(|e| e.exception_id.as_str());
        check_dq_file(file, first, kinds)?;
        let mut values = read_rows(dq_error, file).await?;
        for exception in exceptions {
            match values.remove(&exception.exception_id) {
                Some(values) => rows.push(ReplayRow { exception, values }),
                None => {
                    return Err(Error::Internal(format!(
                        "exception {} is not in {}",
                        exception.exception_id,
                        dq_error.url_of(file)
                    )));
                }
            }
        }
    }
    Ok(rows)
}

/// Corrected rows of open quarantined exceptions, and what was skipped.
async fn corrected_rows<'a>(
    dq_error: &Location,
    contributor: &str,
    open: &BTreeMap<&str, &'a ExceptionEvent>,
) -> Result<(Vec<ReplayRow<'a>>, Vec<String>)> {
    let mut rows: Vec<ReplayRow<'a>> = Vec::new();
    let mut skipped = Vec::new();
    let mut taken = std::collections::HashSet::new();
    let mut files: Vec<String> = dq_error
        .list(&corrections_folder(contributor))
        .await?
        .into_iter()
        .map(|o| o.relative)
        .filter(|path| path.to_ascii_lowercase().ends_with(".csv"))
        .collect();
    files.sort();
    for file in files {
        let url = dq_error.url_of(&file);
        for (id, values) in read_rows(dq_error, &file).await? {
            match open.get(id.as_str()) {
                Some(exception) if exception.status == ExceptionStatus::Quarantined => {
                    if taken.insert(id.clone()) {
                        rows.push(ReplayRow { exception, values });
                    } else {
                        skipped.push(format!(
                            "{url}: exception {id} is corrected in an earlier file (by name), which is used"
                        ));
                    }
                }
                _ => skipped.push(format!(
                    "{url}: exception {id} is not quarantined (resolved, pending or unknown)"
                )),
            }
        }
    }
    Ok((rows, skipped))
}

/// The rows of a dq_error-shaped CSV file by `_exception_id`.
async fn read_rows(
    dq_error: &Location,
    file: &str,
) -> Result<HashMap<String, HashMap<String, String>>> {
    let bytes = dq_error.get(file).await?;
    let url = dq_error.url_of(file);
    let mut rows = HashMap::new();
    for (index, row) in csv::Reader::from_reader(bytes.as_ref())
        .deserialize::<HashMap<String, String>>()
        .enumerate()
    {
        let row = row.map_err(|e| Error::BadDrop {
            location: format!("{url}:{}", index + 2),
            reason: e.to_string(),
        })?;
        let id = row
            .get(EXCEPTION_ID)
            .filter(|id| !id.is_empty())
            .cloned()
            .ok_or_else(|| Error::BadDrop {
                location: format!("{url}:{}", index + 2),
                reason: format!("the row has no {EXCEPTION_ID}"),
            })?;
        if rows.insert(id.clone(), row).is_some() {
            return Err(Error::BadDrop {
                location: format!("{url}:{}", index + 2),
                reason: format!("exception {id} appears twice in the file"),
            });
        }
    }
    Ok(rows)
}

/// Writes the drop `<name>-<hash>` of `contributor` (data file `<name>.csv`
/// and manifest) holding `rows`, and returns it. The hash covers the rows and
/// the run that last judged each: the same rows make the same drop.
pub(crate) async fn put_replay_drop(
    plan: &Plan,
    bronze: &Location,
    (contributor, name): (&str, &str),
    rows: &[ReplayRow<'_>],
) -> Result<DropRef> {
    let file = format!("{name}.csv");
    let (data, carried) = replay_file(plan, &file, rows)?;
    let mut hash = Sha256::new();
    hash.update(&data);
    for row in rows {
        hash.update(row.exception.run_id.as_bytes());
    }
    let drop = DropRef::new(
        contributor,
        &format!("{name}-{}", &hex::encode(hash.finalize())[..16]),
    )?;
    bronze
        .put(
            &format!("{}/{REPLAY_MANIFEST}", drop.prefix()),
            manifest_csv(&carried)?,
        )
        .await?;
    bronze
        .put(&format!("{}/{file}", drop.prefix()), data)
        .await?;
    Ok(drop)
}

/// The data file `file` (the contract's columns, rows in exception-id order)
/// and the exception behind each of its lines.
fn replay_file(
    plan: &Plan,
    file: &str,
    rows: &[ReplayRow<'_>],
) -> Result<(Vec<u8>, Vec<CarriedException>)> {
    let columns: Vec<&str> = plan.contract.column_names().collect();
    let mut ordered: Vec<&ReplayRow<'_>> = rows.iter().collect();
    ordered.sort_by(|a, b| a.exception.exception_id.cmp(&b.exception.exception_id));
    let mut writer = csv::Writer::from_writer(Vec::new());
    let failed = |e: csv::Error| Error::Internal(format!("cannot write the replay file: {e}"));
    writer.write_record(&columns).map_err(failed)?;
    let mut carried = Vec::with_capacity(ordered.len());
    let (mut line, mut counted) = (1u64, 0usize);
    for row in ordered {
        writer.flush().map_err(|e| failed(e.into()))?;
        let written = writer.get_ref();
        line += written[counted..].iter().filter(|b| **b == b'\n').count() as u64;
        counted = written.len();
        let record: Vec<&str> = columns
            .iter()
            .map(|c| row.values.get(*c).map_or("", String::as_str))
            .collect();
        writer.write_record(&record).map_err(failed)?;
        carried.push(CarriedException {
            file: file.to_string(),
            line,
            exception_id: row.exception.exception_id.clone(),
            drop_id: row.exception.drop_id.clone(),
            rule: row.exception.rule.clone(),
            entered_at: row.exception.entered_at,
        });
    }
    let data = writer
        .into_inner()
        .map_err(|e| Error::Internal(format!("cannot write the replay file: {e}")))?;
    Ok((data, carried))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_plain_pending_file_is_read_back() {
        let ok = "pending/date=2026-11-30/contributor=BANK_A/run=0123456789abcdef/part-00000.csv";
        let pending = [SetAside::Pending];
        assert!(check_dq_file(ok, Some("e1"), &pending).is_ok());
        for bad in [
            "pending/../../etc/passwd",
            "/pending/x.csv",
            "quarantine/date=2026-11-30/x.csv",
            "pending//x.csv",
            "pending/x\u{1b}.csv",
        ] {
            let error = check_dq_file(bad, Some("e1"), &pending)
                .err()
                .map(|e| e.to_string());
            assert!(error.is_some_and(|e| e.contains("exception e1")), "{bad}");
        }
        let both = [SetAside::Quarantine, SetAside::Pending];
        let quarantined =
            "quarantine/date=2026-11-30/contributor=BANK_A/run=0123456789abcdef/part-00000.csv";
        assert!(check_dq_file(quarantined, Some("e1"), &both).is_ok());
        let dropped =
            "dropped/date=2026-11-30/contributor=BANK_A/run=0123456789abcdef/part-00000.csv";
        let error = check_dq_file(dropped, Some("e1"), &both).err();
        assert!(error.is_some_and(|e| e.to_string().contains("quarantine or pending")));
    }
}
