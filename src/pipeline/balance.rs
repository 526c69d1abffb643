//! Balance: the books must close before anything is committed.
//!
//! In: the number of records received and what [`Written`] produced. Out: a
//! [`Balanced`] run, the only value [`crate::pipeline::commit`] accepts, so the
//! compiler guarantees the check happened (DESIGN.md invariant 1). Each count
//! comes from what was written: the Silver data files' record counts and the
//! dq_error files read back, never from in-memory frames.

use std::collections::BTreeMap;

use iceberg::spec::DataFile;

use crate::core::set_aside::SetAside;
use crate::error::{Error, Result};
use crate::infra::storage::Location;
use crate::pipeline::write::Written;

/// A run whose books closed: received == silver + quarantined + dropped + pending.
#[derive(Debug)]
pub struct Balanced {
    received: u64,
    silver: u64,
    set_aside: BTreeMap<SetAside, u64>,
    data_files: Vec<DataFile>,
}

impl Balanced {
    /// Records received.
    pub fn received(&self) -> u64 {
        self.received
    }

    /// Rows in the Silver data files.
    pub fn silver(&self) -> u64 {
        self.silver
    }

    /// Rows read back from the dq_error files of `destination`.
    pub fn set_aside(&self, destination: SetAside) -> u64 {
        self.set_aside.get(&destination).copied().unwrap_or(0)
    }

    /// The data files to commit.
    pub fn into_data_files(self) -> Vec<DataFile> {
        self.data_files
    }
}

/// Counts what was written and checks it against `received`. `miscount` is a
/// test hook that falsifies the Silver count to prove a broken balance stops the run.
pub async fn check_balance(
    received: u64,
    written: Written,
    dq_error: &Location,
    miscount: i64,
) -> Result<Balanced> {
    let counted: u64 = written.data_files.iter().map(DataFile::record_count).sum();
    let silver = counted.saturating_add_signed(miscount);
    let mut set_aside = BTreeMap::new();
    for (destination, path) in &written.set_aside_files {
        set_aside.insert(*destination, count_csv_records(dq_error, path).await?);
    }
    let quarantined = set_aside.get(&SetAside::Quarantine).copied().unwrap_or(0);
    let dropped = set_aside.get(&SetAside::Dropped).copied().unwrap_or(0);
    let pending = set_aside.get(&SetAside::Pending).copied().unwrap_or(0);
    let accounted = silver + quarantined + dropped + pending;
    if accounted != received {
        return Err(Error::Unbalanced {
            received,
            accounted,
            silver,
            quarantined,
            dropped,
            pending,
            gap: received as i64 - accounted as i64,
        });
    }
    Ok(Balanced {
        received,
        silver,
        set_aside,
        data_files: written.data_files,
    })
}

/// Reads a dq_error CSV back and counts its records (quoted newlines included).
async fn count_csv_records(dq_error: &Location, path: &str) -> Result<u64> {
    let bytes = dq_error.get(path).await?;
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(true)
        .from_reader(bytes.as_ref());
    let mut record = csv::ByteRecord::new();
    let mut count = 0;
    while reader.read_byte_record(&mut record).map_err(|e| {
        // Our own file, just written: storage did not give it back whole.
        let source = object_store::Error::Generic {
            store: "dq_error",
            source: Box::new(e),
        };
        Error::storage("read-back", dq_error.url_of(path))(source)
    })? {
        count += 1;
    }
    Ok(count)
}
