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
use crate::infra::storage::{Location, ObjectSink};
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

/// Reads a dq_error CSV back, as a stream, and counts its records (quoted
/// newlines included, the header not).
async fn count_csv_records(dq_error: &Location, path: &str) -> Result<u64> {
    let mut count = RecordCount::default();
    dq_error.stream_to(path, &mut count).await?;
    Ok(count.finish())
}

/// Counts the records of a CSV file as its pieces come.
struct RecordCount {
    reader: csv_core::Reader,
    records: u64,
    /// Where the reader copies a record's fields (only counted: a record
    /// larger than this just takes several calls).
    output: Vec<u8>,
    ends: Vec<usize>,
}

impl Default for RecordCount {
    fn default() -> RecordCount {
        RecordCount {
            reader: csv_core::Reader::new(),
            records: 0,
            output: vec![0; 64 << 10],
            ends: vec![0; 1024],
        }
    }
}

impl RecordCount {
    /// Reads `input`; an empty one is the end of the file.
    fn feed(&mut self, mut input: &[u8]) {
        loop {
            let (result, read, _, _) =
                self.reader
                    .read_record(input, &mut self.output, &mut self.ends);
            input = &input[read..];
            match result {
                csv_core::ReadRecordResult::Record => self.records += 1,
                csv_core::ReadRecordResult::OutputFull
                | csv_core::ReadRecordResult::OutputEndsFull => {}
                csv_core::ReadRecordResult::InputEmpty | csv_core::ReadRecordResult::End => {
                    return;
                }
            }
        }
    }

    /// The records counted, the header line not.
    fn finish(mut self) -> u64 {
        self.feed(&[]);
        self.records.saturating_sub(1)
    }
}

impl ObjectSink for RecordCount {
    fn size(&mut self, _size: u64) {}

    fn piece(&mut self, piece: &[u8]) -> Result<()> {
        // An empty input is the end of the file to the reader.
        if !piece.is_empty() {
            self.feed(piece);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::RecordCount;

    fn counted(pieces: &[&[u8]]) -> u64 {
        let mut count = RecordCount::default();
        for piece in pieces {
            count.feed(piece);
        }
        count.finish()
    }

    #[test]
    fn records_are_counted_across_pieces_as_the_csv_reader_counts_them() {
        let big = format!("h\n\"{}\"\n", "x".repeat(200_000));
        let files: [&[u8]; 6] = [
            b"",
            b"a,b\n",
            b"a,b\n1,2\n3,4",
            b"a,b\r\n1,\"two\nlines\"\r\n3,4\r\n",
            b"a\n\n1\n\n2\n",
            big.as_bytes(),
        ];
        for file in files {
            let expected = csv::Reader::from_reader(file).records().count() as u64;
            assert_eq!(
                counted(&[file]),
                expected,
                "{}",
                String::from_utf8_lossy(file)
            );
            for cut in [1, 3, 7] {
                let pieces: Vec<&[u8]> = file.chunks(cut).collect();
                assert_eq!(counted(&pieces), expected, "in pieces of {cut}");
            }
        }
    }
}
