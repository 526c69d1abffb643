//! How many distinct values one or more columns hold over a stream of
//! batches, counted in bounded memory: as SQL's `count(DISTINCT ...)`, a
//! row with a null part is not counted.
//!
//! Each counted value is reduced to its 128-bit fingerprint (as
//! [`crate::core::keys::KeySet`] keeps keys: XXH3-128 over the parts as
//! text, 16 bytes whatever the value) and sent, by the fingerprint's top
//! bits, to one of several parts; a part's fingerprints are gathered in
//! memory and appended to the part's file in a spill folder. Equal values
//! share a fingerprint, hence a part, so the count is the sum of each
//! part's distinct fingerprints, and each part is sorted and deduplicated
//! alone: a count holds one part at a time, not every value.

use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use arrow::array::{Array, ArrayRef};

use crate::core::keys::{as_text, fingerprints};
use crate::error::{Error, Result};
use crate::stage::Stage;

/// The bytes of one fingerprint in a part's file.
const PRINT_BYTES: usize = std::mem::size_of::<u128>();

/// A distinct count under way.
pub(crate) struct DistinctCount {
    parts: Vec<Part>,
    /// How many fingerprints a part gathers before it writes them.
    held: usize,
    stage: Stage,
}

/// One part: fingerprints gathered, and the file the rest went to.
struct Part {
    held: Vec<u128>,
    path: PathBuf,
    file: BufWriter<File>,
}

impl DistinctCount {
    /// How many parts `values` values are counted in so that each part,
    /// once read back, holds at most a sixty-fourth of `memory_limit`
    /// (bytes; 16 MiB of the default 1 GiB): at least 1, at most 256.
    pub(crate) fn parts_for(values: usize, memory_limit: u64) -> usize {
        let part_bytes = usize::try_from(memory_limit / 64)
            .unwrap_or(usize::MAX)
            .max(PRINT_BYTES);
        values
            .saturating_mul(PRINT_BYTES)
            .div_ceil(part_bytes)
            .clamp(1, 256)
    }

    /// A count over `parts` parts, their files in `folder`, each part
    /// gathering `held_bytes` before it writes; `stage` names its errors.
    pub(crate) fn new(
        parts: usize,
        (folder, held_bytes): (&Path, usize),
        stage: Stage,
    ) -> Result<DistinctCount> {
        let parts = (0..parts.max(1))
            .map(|index| {
                let path = folder.join(format!("distinct-{index}.u128"));
                let file = File::create(&path).map_err(io_error(&path))?;
                Ok(Part {
                    held: Vec::new(),
                    path,
                    file: BufWriter::new(file),
                })
            })
            .collect::<Result<_>>()?;
        Ok(DistinctCount {
            parts,
            held: (held_bytes / PRINT_BYTES).max(1),
            stage,
        })
    }

    /// Counts the values of one batch's `columns` (one per part of the
    /// value, of equal length).
    pub(crate) fn add(&mut self, columns: &[ArrayRef]) -> Result<()> {
        let text = as_text(columns, self.stage)?;
        // The text's nulls: those of a dictionary's values too.
        let whole = |row: usize| text.iter().all(|c| c.is_valid(row));
        let count = self.parts.len() as u128;
        for (row, print) in fingerprints(&text).into_iter().enumerate() {
            if !whole(row) {
                continue;
            }
            // The top 64 bits, scaled to the parts: uniform, as the
            // fingerprint is.
            let part = &mut self.parts[(((print >> 64) * count) >> 64) as usize];
            part.held.push(print);
            if part.held.len() >= self.held {
                part.write()?;
            }
        }
        Ok(())
    }

    /// How many distinct values were added.
    pub(crate) fn count(self) -> Result<u64> {
        let mut distinct = 0u64;
        for part in self.parts {
            let mut prints = part.read_all()?;
            prints.sort_unstable();
            prints.dedup();
            distinct += prints.len() as u64;
        }
        Ok(distinct)
    }
}

impl Part {
    /// Appends the gathered fingerprints to the part's file.
    fn write(&mut self) -> Result<()> {
        for print in self.held.drain(..) {
            self.file
                .write_all(&print.to_le_bytes())
                .map_err(io_error(&self.path))?;
        }
        Ok(())
    }

    /// Every fingerprint of the part: its file's (read in small pieces,
    /// so the part is held once) and those gathered since.
    fn read_all(self) -> Result<Vec<u128>> {
        let io = io_error(&self.path);
        let file = self.file.into_inner().map_err(|e| io(e.into_error()))?;
        let written = file.metadata().map_err(&io)?.len();
        drop(file);
        let count = usize::try_from(written).unwrap_or(usize::MAX) / PRINT_BYTES;
        let mut prints = Vec::with_capacity(count + self.held.len());
        let mut reader = BufReader::new(File::open(&self.path).map_err(&io)?);
        let mut print = [0u8; PRINT_BYTES];
        for _ in 0..count {
            reader.read_exact(&mut print).map_err(&io)?;
            prints.push(u128::from_le_bytes(print));
        }
        drop(reader);
        std::fs::remove_file(&self.path).map_err(&io)?;
        prints.extend(self.held);
        Ok(prints)
    }
}

fn io_error(path: &Path) -> impl Fn(std::io::Error) -> Error + '_ {
    move |source| Error::Io {
        path: path.to_path_buf(),
        source,
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{Int64Array, StringArray};

    use super::*;

    fn count(parts: usize, folder: &Path, batches: &[Vec<ArrayRef>]) -> u64 {
        // 32 bytes: every second fingerprint is written.
        counted_holding(32, (parts, folder), batches)
    }

    fn counted_holding(
        held: usize,
        (parts, folder): (usize, &Path),
        batches: &[Vec<ArrayRef>],
    ) -> u64 {
        let mut distinct = DistinctCount::new(parts, (folder, held), Stage::Aggregate).unwrap();
        for columns in batches {
            distinct.add(columns).unwrap();
        }
        distinct.count().unwrap()
    }

    fn text(values: &[Option<&str>]) -> ArrayRef {
        Arc::new(StringArray::from(values.to_vec()))
    }

    #[test]
    fn counts_each_value_once_across_batches_and_parts_and_skips_nulls() {
        let batches = [
            vec![text(&[Some("a"), Some("b"), None, Some("a")])],
            vec![text(&[Some("c"), Some("b"), Some("")])],
        ];
        let folder = tempfile::tempdir().unwrap();
        // a, b, c and the empty string; the null is not a value.
        assert_eq!(count(1, folder.path(), &batches), 4);
        assert_eq!(count(3, folder.path(), &batches), 4);
        // Nothing written yet: every value still gathered when counted.
        assert_eq!(counted_holding(1 << 20, (3, folder.path()), &batches), 4);
        assert_eq!(
            std::fs::read_dir(folder.path()).unwrap().count(),
            0,
            "the parts' files are deleted once counted"
        );
    }

    #[test]
    fn parts_hold_a_sixty_fourth_of_the_budget_each() {
        const GIB: u64 = 1 << 30;
        // 16 MiB parts: a million fingerprints each.
        assert_eq!(DistinctCount::parts_for(0, GIB), 1);
        assert_eq!(DistinctCount::parts_for(1 << 20, GIB), 1);
        assert_eq!(DistinctCount::parts_for((1 << 20) + 1, GIB), 2);
        assert_eq!(DistinctCount::parts_for(20_000_000, GIB), 20);
        // 1 MiB parts of 64 MiB; never more than 256.
        assert_eq!(DistinctCount::parts_for(200_000, 64 << 20), 4);
        assert_eq!(DistinctCount::parts_for(usize::MAX, 64 << 20), 256);
    }

    #[test]
    fn many_values_spilled_in_many_parts_count_as_a_set() {
        let values: Vec<i64> = (0..50_000).map(|v| v % 20_011).collect();
        let batches: Vec<Vec<ArrayRef>> = values
            .chunks(4096)
            .map(|chunk| vec![Arc::new(Int64Array::from(chunk.to_vec())) as ArrayRef])
            .collect();
        let folder = tempfile::tempdir().unwrap();
        assert_eq!(count(7, folder.path(), &batches), 20_011);
    }

    #[test]
    fn a_value_of_several_columns_counts_when_no_part_is_null() {
        let batches = [vec![
            text(&[Some("a"), Some("a"), Some("a"), None, Some("ab"), Some("a")]),
            text(&[
                Some("1"),
                Some("2"),
                Some("1"),
                Some("1"),
                Some(""),
                Some("b"),
            ]),
        ]];
        // (a,1) twice, (a,2), (ab,"") and (a,b), which are two values
        // (parts are length-prefixed); a null part is not counted.
        let folder = tempfile::tempdir().unwrap();
        assert_eq!(count(2, folder.path(), &batches), 4);
    }
}
