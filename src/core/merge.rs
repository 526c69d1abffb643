//! Runs of batches, each sorted by a key of a text and an integer column
//! (a file and a line), merged into one stream in key order, holding one
//! batch of each run at a time: the rows a run sets aside come bucket by
//! bucket, each bucket in the drop's order, and leave in the drop's order.
//! A merge, not a sort: the runs are sorted already, so it costs a heap
//! step per row and memory for one batch per run (arrow's
//! `interleave_record_batch` builds each output batch).

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::Arc;

use arrow::array::{Array, Int64Array, StringArray};
use arrow::compute::interleave_record_batch;
use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;

use crate::error::{Error, Result};
use crate::stage::Stage;

/// A run: batches read one at a time.
pub(crate) type Batches<'a> = Box<dyn Iterator<Item = Result<RecordBatch>> + Send + 'a>;

/// Rows per batch the merge hands out.
const MERGED_ROWS: usize = 8192;

/// The merge of sorted runs, as an iterator of batches.
pub(crate) struct Merge<'a> {
    cursors: Vec<Cursor<'a>>,
    /// The next row of each run not exhausted: (file, line, run).
    heap: BinaryHeap<Reverse<(Arc<str>, i64, usize)>>,
    failed: bool,
}

/// Where a run stands.
struct Cursor<'a> {
    batches: Batches<'a>,
    key: (usize, usize),
    batch: RecordBatch,
    files: StringArray,
    lines: Int64Array,
    row: usize,
    /// The current row's file, shared while it stays the same.
    file: Arc<str>,
    /// The current batch's place among the batches of the output being built.
    held: Option<usize>,
}

impl<'a> Merge<'a> {
    /// Merges `runs`, each sorted by its `schema`'s columns `file` (text)
    /// then `line` (64-bit integer).
    pub(crate) fn new(
        schema: &SchemaRef,
        (file, line): (&str, &str),
        runs: Vec<Batches<'a>>,
    ) -> Result<Merge<'a>> {
        let column = |name: &str| {
            schema
                .index_of(name)
                .map_err(|_| Error::Internal(format!("merge: column {name} is missing")))
        };
        let key = (column(file)?, column(line)?);
        let mut merge = Merge {
            cursors: Vec::with_capacity(runs.len()),
            heap: BinaryHeap::with_capacity(runs.len()),
            failed: false,
        };
        for batches in runs {
            if let Some(mut cursor) = Cursor::start(batches, key)? {
                merge
                    .heap
                    .push(Reverse(cursor.position(merge.cursors.len())));
                merge.cursors.push(cursor);
            }
        }
        Ok(merge)
    }

    /// The next batch of merged rows; `None` once every run is exhausted.
    fn merged(&mut self) -> Result<Option<RecordBatch>> {
        let mut held: Vec<RecordBatch> = Vec::new();
        let mut indices = Vec::with_capacity(MERGED_ROWS);
        for cursor in &mut self.cursors {
            cursor.held = None;
        }
        while indices.len() < MERGED_ROWS {
            let Some(Reverse((_, _, run))) = self.heap.pop() else {
                break;
            };
            let cursor = &mut self.cursors[run];
            let slot = *cursor.held.get_or_insert_with(|| {
                held.push(cursor.batch.clone());
                held.len() - 1
            });
            indices.push((slot, cursor.row));
            if cursor.advance()? {
                self.heap.push(Reverse(cursor.position(run)));
            }
        }
        if indices.is_empty() {
            return Ok(None);
        }
        let batches: Vec<&RecordBatch> = held.iter().collect();
        interleave_record_batch(&batches, &indices)
            .map(Some)
            .map_err(Error::arrow(Stage::Write))
    }
}

impl Iterator for Merge<'_> {
    type Item = Result<RecordBatch>;

    fn next(&mut self) -> Option<Result<RecordBatch>> {
        if self.failed {
            return None;
        }
        let merged = self.merged();
        self.failed = merged.is_err();
        merged.transpose()
    }
}

impl<'a> Cursor<'a> {
    /// A cursor on the first row of `batches`; `None` if it has none.
    fn start(batches: Batches<'a>, key: (usize, usize)) -> Result<Option<Cursor<'a>>> {
        let empty = || StringArray::from(Vec::<&str>::new());
        let mut cursor = Cursor {
            batches,
            key,
            batch: RecordBatch::new_empty(Arc::new(arrow::datatypes::Schema::empty())),
            files: empty(),
            lines: Int64Array::from(Vec::<i64>::new()),
            row: 0,
            file: Arc::from(""),
            held: None,
        };
        Ok(cursor.next_batch()?.then_some(cursor))
    }

    /// Moves to the next row; false at the end of the run.
    fn advance(&mut self) -> Result<bool> {
        self.row += 1;
        if self.row < self.batch.num_rows() {
            return Ok(true);
        }
        self.next_batch()
    }

    /// Moves to the first row of the next batch with rows; false if none.
    fn next_batch(&mut self) -> Result<bool> {
        for batch in self.batches.by_ref() {
            let batch = batch?;
            if batch.num_rows() == 0 {
                continue;
            }
            let (file, line) = self.key;
            let files = batch.column(file).as_any().downcast_ref::<StringArray>();
            let lines = batch.column(line).as_any().downcast_ref::<Int64Array>();
            let (Some(files), Some(lines)) = (files, lines) else {
                return Err(Error::Internal(
                    "merge: the key columns are not a text and a number".to_string(),
                ));
            };
            (self.files, self.lines) = (files.clone(), lines.clone());
            self.batch = batch;
            self.row = 0;
            self.held = None;
            return Ok(true);
        }
        Ok(false)
    }

    /// The current row's key, for run `run`.
    fn position(&mut self, run: usize) -> (Arc<str>, i64, usize) {
        let file = match self.files.is_null(self.row) {
            true => "",
            false => self.files.value(self.row),
        };
        if *self.file != *file {
            self.file = Arc::from(file);
        }
        (self.file.clone(), self.lines.value(self.row), run)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::ArrayRef;

    fn batch(rows: &[(&str, i64)]) -> RecordBatch {
        let files: ArrayRef = Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.0)));
        let lines: ArrayRef = Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.1)));
        RecordBatch::try_from_iter([("file", files), ("line", lines)]).unwrap()
    }

    fn run(batches: Vec<RecordBatch>) -> Batches<'static> {
        Box::new(batches.into_iter().map(Ok))
    }

    fn keys(batches: &[RecordBatch]) -> Vec<(String, i64)> {
        let mut keys = Vec::new();
        for b in batches {
            let files = b.column(0).as_any().downcast_ref::<StringArray>().unwrap();
            let lines = b.column(1).as_any().downcast_ref::<Int64Array>().unwrap();
            for r in 0..b.num_rows() {
                keys.push((files.value(r).to_string(), lines.value(r)));
            }
        }
        keys
    }

    #[test]
    fn sorted_runs_come_out_as_one_sorted_run_with_every_row_once() {
        let schema = batch(&[]).schema();
        // Three runs over two files, an empty batch and an empty run among
        // them, more rows than one output batch holds.
        let long: Vec<(String, i64)> = (0..20_000).map(|i| ("b.csv".to_string(), i * 3)).collect();
        let long: Vec<(&str, i64)> = long.iter().map(|(f, l)| (f.as_str(), *l)).collect();
        let runs = vec![
            run(vec![
                batch(&[("a.csv", 2), ("a.csv", 9)]),
                batch(&[]),
                batch(&long[..7_000]),
            ]),
            run(vec![
                batch(&[("a.csv", 1), ("b.csv", 1)]),
                batch(&long[7_000..]),
            ]),
            run(vec![]),
            run(vec![batch(&[("a.csv", 5)])]),
        ];
        let merged: Vec<RecordBatch> = Merge::new(&schema, ("file", "line"), runs)
            .unwrap()
            .collect::<Result<_>>()
            .unwrap();
        assert!(merged.iter().all(|b| b.num_rows() <= MERGED_ROWS));
        let got = keys(&merged);
        let mut expected: Vec<(String, i64)> = [
            ("a.csv", 1),
            ("a.csv", 2),
            ("a.csv", 5),
            ("a.csv", 9),
            ("b.csv", 1),
        ]
        .iter()
        .map(|(f, l)| (f.to_string(), *l))
        .chain(long.iter().map(|(f, l)| (f.to_string(), *l)))
        .collect();
        expected.sort();
        assert_eq!(got, expected);
    }

    #[test]
    fn a_run_that_fails_ends_the_merge_with_its_error() {
        let schema = batch(&[]).schema();
        let failing: Batches<'static> = Box::new(
            vec![
                Ok(batch(&[("a.csv", 1)])),
                Err(Error::Internal("disk gone".to_string())),
            ]
            .into_iter(),
        );
        let mut merge = Merge::new(&schema, ("file", "line"), vec![failing]).unwrap();
        let err = merge.next().unwrap().unwrap_err();
        assert!(err.to_string().contains("disk gone"), "{err}");
        assert!(merge.next().is_none());
    }
}
