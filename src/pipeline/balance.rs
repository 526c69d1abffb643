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

/// What was written, counted: the Silver data files' record counts and the
/// dq_error files read back.
#[derive(Debug)]
pub struct Counted {
    /// Rows in the Silver data files.
    pub(crate) silver: u64,
    set_aside: BTreeMap<SetAside, u64>,
    data_files: Vec<DataFile>,
}

/// Counts what was written.
pub async fn count(written: Written, dq_error: &Location) -> Result<Counted> {
    let silver = written.data_files.iter().map(DataFile::record_count).sum();
    let mut set_aside = BTreeMap::new();
    for (destination, path) in &written.set_aside_files {
        set_aside.insert(*destination, count_csv_records(dq_error, path).await?);
    }
    Ok(Counted {
        silver,
        set_aside,
        data_files: written.data_files,
    })
}

impl Counted {
    /// Checks the counts against `received`: the books close, or nothing goes on.
    pub fn balance(self, received: u64) -> Result<Balanced> {
        let of = |kind| self.set_aside.get(&kind).copied().unwrap_or(0);
        let (quarantined, dropped, pending) = (
            of(SetAside::Quarantine),
            of(SetAside::Dropped),
            of(SetAside::Pending),
        );
        let accounted = self.silver + quarantined + dropped + pending;
        if accounted != received {
            return Err(Error::Unbalanced {
                received,
                accounted,
                silver: self.silver,
                quarantined,
                dropped,
                pending,
                gap: received as i64 - accounted as i64,
            });
        }
        Ok(Balanced {
            received,
            silver: self.silver,
            set_aside: self.set_aside,
            data_files: self.data_files,
        })
    }
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
