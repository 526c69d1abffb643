//! Where a run's rows wait between two passes over its buckets: in memory
//! when the drop is judged as one bucket, else in Arrow IPC files (LZ4
//! frame compressed: half the bytes through the page cache) in a
//! `silverline-buckets-*` folder of the scratch folder (`[resources]
//! scratch_dir`), deleted when the run ends (a run killed from outside
//! leaves it behind, safe to delete when no run is using the folder).

use std::fs::File;
use std::path::{Path, PathBuf};

use arrow::array::ArrayRef;
use arrow::datatypes::SchemaRef;
use arrow::ipc::CompressionType;
use arrow::ipc::reader::FileReader;
use arrow::ipc::writer::{FileWriter, IpcWriteOptions};
use arrow::record_batch::RecordBatch;

use crate::core::keys::Buckets;
use crate::core::merge::Batches;
use crate::core::parallel::each_mut_in_lanes;
use crate::error::{Error, Result};
use crate::stage::Stage;

/// The extension of spill files (as DataFusion lists Arrow files).
pub(crate) const SPILL_EXTENSION: &str = ".arrow";

/// What the writers of one set of buckets hold between them before they
/// write: 1/32 of the run's budget (`memory_limit`; 32 MiB of the default
/// 1 GiB). A bucket's share of a chunk is a few hundred rows, and every
/// batch written costs an IPC message and an LZ4 frame per buffer, so each
/// bucket's pieces are gathered until they hold its share of this, between
/// [`MIN_HELD`] and [`MAX_HELD`] bytes (the last piece may pass it; at the
/// floor, 256 buckets hold 16 MiB whatever the budget).
const BUCKETS_HELD_DIVISOR: u64 = 32;

/// The most one bucket's writer gathers before it writes.
const MAX_HELD: usize = 1024 * 1024;
/// The least, however small the budget or many the buckets: smaller
/// batches cost more to write than they save.
const MIN_HELD: usize = 64 * 1024;

/// Where a run writes to local disk: `[resources] scratch_dir` when set
/// (`scratch`), else the system's temporary folder.
pub(crate) fn scratch_folder(scratch: Option<&Path>) -> PathBuf {
    scratch.map_or_else(std::env::temp_dir, Path::to_path_buf)
}

/// The run's spill folder: none when everything stays in memory.
#[derive(Debug)]
pub(crate) struct SpillDir {
    dir: Option<tempfile::TempDir>,
    /// What one set of bucket writers gathers in all before it writes.
    held: usize,
}

impl SpillDir {
    /// Keeps everything in memory.
    pub(crate) fn in_memory() -> SpillDir {
        SpillDir { dir: None, held: 0 }
    }

    /// Spills to files under `scratch` (the system's temporary folder when
    /// `None`) when `to_disk`, else keeps everything in memory; a run of
    /// budget `memory_limit` (bytes).
    pub(crate) fn new(
        to_disk: bool,
        (memory_limit, scratch): (u64, Option<&Path>),
    ) -> Result<SpillDir> {
        if !to_disk {
            return Ok(SpillDir::in_memory());
        }
        let held = usize::try_from(memory_limit / BUCKETS_HELD_DIVISOR).unwrap_or(usize::MAX);
        let parent = scratch_folder(scratch);
        let dir = tempfile::Builder::new()
            .prefix("silverline-buckets-")
            .tempdir_in(&parent)
            .map_err(|source| Error::Io {
                path: parent,
                source,
            })?;
        Ok(SpillDir {
            dir: Some(dir),
            held,
        })
    }

    /// The folder `name` of the spill folder (made if missing), where a
    /// table's files are listed together; `None` in memory.
    pub(crate) fn folder(&self, name: &str) -> Result<Option<PathBuf>> {
        let Some(dir) = &self.dir else {
            return Ok(None);
        };
        let path = dir.path().join(name);
        std::fs::create_dir_all(&path).map_err(|source| Error::Io {
            path: path.clone(),
            source,
        })?;
        Ok(Some(path))
    }

    /// Keeps `batches` as `name` (a file name in `folder`, or the spill
    /// folder itself): in memory, or written to a file and freed (no rows:
    /// no file).
    pub(crate) fn keep(
        &self,
        (folder, name): (Option<&Path>, &str),
        batches: Vec<RecordBatch>,
    ) -> Result<Spill> {
        let Some(schema) = batches.first().map(RecordBatch::schema) else {
            return Ok(Spill::Memory(batches));
        };
        let mut writer = self.writer((folder, name), &schema)?;
        for batch in &batches {
            writer.write(batch)?;
        }
        writer.finish()
    }

    /// A writer of the file `name` in `folder` (in memory without a folder).
    pub(crate) fn writer(
        &self,
        (folder, name): (Option<&Path>, &str),
        schema: &SchemaRef,
    ) -> Result<SpillWriter> {
        match &self.dir {
            None => Ok(SpillWriter::Memory(Vec::new())),
            Some(dir) => SpillWriter::create(
                &folder
                    .unwrap_or(dir.path())
                    .join(format!("{name}{SPILL_EXTENSION}")),
                schema,
            ),
        }
    }

    /// Writers of the files `{prefix}-{bucket}` in `folder`, one per
    /// bucket of `buckets`, each gathering the pieces it is given into
    /// larger batches, all of them together holding about 1/32 of the
    /// budget ([`BUCKETS_HELD_DIVISOR`]).
    pub(crate) fn bucket_writers(
        &self,
        (folder, prefix): (Option<&Path>, &str),
        buckets: &Buckets,
        schema: &SchemaRef,
    ) -> Result<BucketWriters> {
        let held = self.held_per_bucket(buckets.count());
        let writers = (0..buckets.count())
            .map(|b| {
                let writer = self.writer((folder, &format!("{prefix}-{b}")), schema)?;
                Ok(writer.gathering(held))
            })
            .collect::<Result<_>>()?;
        Ok(BucketWriters {
            buckets: buckets.clone(),
            writers,
        })
    }

    /// What each of `buckets` writers gathers before it writes.
    pub(crate) fn held_per_bucket(&self, buckets: usize) -> usize {
        (self.held / buckets.max(1)).clamp(MIN_HELD, MAX_HELD)
    }
}

/// One spill per bucket, each row written to its entity's.
pub(crate) struct BucketWriters {
    buckets: Buckets,
    writers: Vec<SpillWriter>,
}

impl BucketWriters {
    /// Adds the rows of `batch`, whose entity key columns are `keys`: a
    /// piece of 32,768 rows or more by one thread per core, each with a
    /// contiguous share of the buckets.
    pub(crate) fn add(
        &mut self,
        batch: &RecordBatch,
        keys: &[ArrayRef],
        stage: Stage,
    ) -> Result<()> {
        let layout = self.buckets.layout(keys, stage)?;
        // Each bucket's rows taken, and gathered or written, by the thread
        // of its share of the buckets.
        let what = (stage, "a spill writing thread");
        let rows = batch.num_rows();
        each_mut_in_lanes(what, rows, &mut self.writers, |bucket, writer| {
            let part = layout.bucket(batch, bucket)?;
            match part.num_rows() {
                0 => Ok(()),
                _ => writer.write(&part),
            }
        })
    }

    /// Every bucket's spill, in bucket order.
    pub(crate) fn finish(self) -> Result<Vec<Spill>> {
        self.writers.into_iter().map(SpillWriter::finish).collect()
    }
}

/// Batches written to a spill (gathered first when the writer is a
/// bucket's).
pub(crate) enum SpillWriter {
    /// Held in memory.
    Memory(Vec<RecordBatch>),
    /// Written to an Arrow IPC file.
    File(Box<FileSpill>),
}

/// A spill file being written.
pub(crate) struct FileSpill {
    writer: FileWriter<File>,
    path: PathBuf,
    /// Batches not written yet, gathered until they hold `held` bytes.
    pending: Vec<RecordBatch>,
    pending_bytes: usize,
    /// 0: every batch written as it comes.
    held: usize,
}

impl SpillWriter {
    fn create(path: &Path, schema: &SchemaRef) -> Result<SpillWriter> {
        let io = |source| Error::Io {
            path: path.to_path_buf(),
            source,
        };
        let file = File::create(path).map_err(io)?;
        let options = IpcWriteOptions::default()
            .try_with_compression(Some(CompressionType::LZ4_FRAME))
            .map_err(Error::arrow(Stage::Baseline))?;
        let writer = FileWriter::try_new_with_options(file, schema, options)
            .map_err(Error::arrow(Stage::Baseline))?;
        Ok(SpillWriter::File(Box::new(FileSpill {
            writer,
            path: path.to_path_buf(),
            pending: Vec::new(),
            pending_bytes: 0,
            held: 0,
        })))
    }

    /// The same writer, gathering batches into batches of about `held`
    /// bytes before it writes them (in memory: no change).
    fn gathering(mut self, held: usize) -> SpillWriter {
        if let SpillWriter::File(file) = &mut self {
            file.held = held;
        }
        self
    }

    /// Adds `batch`.
    pub(crate) fn write(&mut self, batch: &RecordBatch) -> Result<()> {
        match self {
            SpillWriter::Memory(batches) => batches.push(batch.clone()),
            SpillWriter::File(file) => {
                file.pending_bytes += batch.get_array_memory_size();
                file.pending.push(batch.clone());
                if file.pending_bytes >= file.held {
                    file.flush()?;
                }
            }
        }
        Ok(())
    }

    /// The spill written.
    pub(crate) fn finish(self) -> Result<Spill> {
        match self {
            SpillWriter::Memory(batches) => Ok(Spill::Memory(batches)),
            SpillWriter::File(mut file) => {
                file.flush()?;
                file.writer
                    .finish()
                    .map_err(Error::arrow(Stage::Baseline))?;
                Ok(Spill::File(file.path))
            }
        }
    }
}

impl FileSpill {
    /// Writes the pending batches as one.
    fn flush(&mut self) -> Result<()> {
        let batch = match self.pending.as_slice() {
            [] => return Ok(()),
            [one] => one.clone(),
            many => arrow::compute::concat_batches(&many[0].schema(), many)
                .map_err(Error::arrow(Stage::Baseline))?,
        };
        self.pending.clear();
        self.pending_bytes = 0;
        self.writer
            .write(&batch)
            .map_err(Error::arrow(Stage::Baseline))
    }
}

/// Rows of one schema kept as spills for a later pass: a query's table
/// ([`crate::core::sql::register_spilled`]), or runs merged in order.
#[derive(Debug)]
pub(crate) struct SpilledTable {
    /// Their schema.
    pub(crate) schema: SchemaRef,
    /// The spills (one per bucket, say).
    pub(crate) spills: Vec<Spill>,
    /// The folder that holds the spills and nothing else, when they are files.
    pub(crate) folder: Option<PathBuf>,
}

/// Batches kept for a later pass.
#[derive(Debug)]
pub(crate) enum Spill {
    /// Held in memory.
    Memory(Vec<RecordBatch>),
    /// In an Arrow IPC file.
    File(PathBuf),
}

impl Spill {
    /// The batches, read back.
    pub(crate) fn read(&self) -> Result<Vec<RecordBatch>> {
        self.batches()?.collect()
    }

    /// The batches, read back one at a time.
    pub(crate) fn batches(&self) -> Result<Batches<'_>> {
        match self {
            Spill::Memory(batches) => Ok(Box::new(batches.iter().cloned().map(Ok))),
            Spill::File(path) => {
                let file = File::open(path).map_err(|source| Error::Io {
                    path: path.clone(),
                    source,
                })?;
                let reader =
                    FileReader::try_new(file, None).map_err(Error::arrow(Stage::Baseline))?;
                Ok(Box::new(
                    reader.map(|batch| batch.map_err(Error::arrow(Stage::Baseline))),
                ))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{Int64Array, StringArray};

    use super::*;

    /// A budget of `bytes`, spilling to the system's temporary folder.
    fn budget(bytes: u64) -> (u64, Option<&'static Path>) {
        (bytes, None)
    }

    fn batch(values: Vec<i64>) -> RecordBatch {
        RecordBatch::try_from_iter([("v", Arc::new(Int64Array::from(values)) as ArrayRef)]).unwrap()
    }

    #[test]
    fn batches_read_back_as_kept_in_memory_and_on_disk() {
        let batches = vec![batch(vec![1, 2]), batch(vec![]), batch(vec![3])];
        let schema = batches[0].schema();
        for to_disk in [false, true] {
            let dir = SpillDir::new(to_disk, budget(1 << 30)).unwrap();
            let kept = dir.keep((None, "a"), batches.clone()).unwrap();
            assert_eq!(matches!(kept, Spill::File(_)), to_disk);
            assert_eq!(kept.read().unwrap(), batches);
            let folder = dir.folder("rows").unwrap();
            let mut writer = dir.writer((folder.as_deref(), "b"), &schema).unwrap();
            for b in &batches {
                writer.write(b).unwrap();
            }
            assert_eq!(writer.finish().unwrap().read().unwrap(), batches);
            let none = dir.keep((None, "c"), Vec::new()).unwrap();
            assert!(none.read().unwrap().is_empty());
        }
    }

    #[test]
    fn bucket_writers_gather_small_pieces_into_larger_batches() {
        let piece = |p: i64| {
            let keys = StringArray::from(vec![format!("entity-{p}"); 10]);
            RecordBatch::try_from_iter([
                ("key", Arc::new(keys) as ArrayRef),
                ("v", Arc::new(Int64Array::from(vec![p; 10])) as ArrayRef),
            ])
            .unwrap()
        };
        let pieces: Vec<RecordBatch> = (0..1000).map(piece).collect();
        let schema = pieces[0].schema();
        let dir = SpillDir::new(true, budget(1 << 30)).unwrap();
        let buckets = Buckets::new(2);
        let mut writers = dir.bucket_writers((None, "b"), &buckets, &schema).unwrap();
        for piece in &pieces {
            let keys = [piece.column(0).clone()];
            writers.add(piece, &keys, Stage::Read).unwrap();
        }
        let mut back = Vec::new();
        for spill in writers.finish().unwrap() {
            let batches = spill.read().unwrap();
            // 500-odd pieces of 10 rows each: a handful of batches, not hundreds.
            assert!(batches.len() < 10, "{} batches", batches.len());
            back.extend(batches);
        }
        let rows = |batches: &[RecordBatch]| {
            let whole = arrow::compute::concat_batches(&schema, batches).unwrap();
            let mut values: Vec<i64> = whole
                .column(1)
                .as_any()
                .downcast_ref::<Int64Array>()
                .unwrap()
                .values()
                .to_vec();
            values.sort_unstable();
            values
        };
        assert_eq!(rows(&back), rows(&pieces));
    }

    #[test]
    fn large_pieces_spread_over_threads_keep_each_row_once_in_its_bucket_in_order() {
        let rows = 40_000i64;
        let piece = |from: i64| {
            let values = from..from + rows;
            RecordBatch::try_from_iter([
                (
                    "key",
                    Arc::new(StringArray::from_iter_values(
                        values.clone().map(|v| format!("e{}", v % 9_999)),
                    )) as ArrayRef,
                ),
                (
                    "v",
                    Arc::new(Int64Array::from_iter_values(values)) as ArrayRef,
                ),
            ])
            .unwrap()
        };
        let pieces = [piece(0), piece(rows), piece(2 * rows)];
        let dir = SpillDir::new(true, budget(1 << 30)).unwrap();
        let buckets = Buckets::new(5);
        let mut writers = dir
            .bucket_writers((None, "l"), &buckets, &pieces[0].schema())
            .unwrap();
        for piece in &pieces {
            writers
                .add(piece, &[piece.column(0).clone()], Stage::Read)
                .unwrap();
        }
        let mut seen = Vec::new();
        for (bucket, spill) in writers.finish().unwrap().into_iter().enumerate() {
            let batches = spill.read().unwrap();
            let mut values = Vec::new();
            for batch in &batches {
                let keys = [batch.column(0).clone()];
                let of_rows = buckets.of_rows(&keys, Stage::Read).unwrap();
                assert!(
                    of_rows.iter().all(|b| *b as usize == bucket),
                    "bucket {bucket}"
                );
                let v = batch
                    .column(1)
                    .as_any()
                    .downcast_ref::<Int64Array>()
                    .unwrap();
                values.extend(v.values().iter().copied());
            }
            assert!(values.is_sorted(), "bucket {bucket}: rows out of order");
            seen.extend(values);
        }
        seen.sort_unstable();
        assert_eq!(seen, (0..3 * rows).collect::<Vec<_>>());
    }

    #[test]
    fn bucket_writers_gather_a_share_of_the_budget() {
        const MIB: u64 = 1024 * 1024;
        let held = |bytes, buckets| {
            let dir = SpillDir::new(true, budget(bytes)).unwrap();
            dir.held_per_bucket(buckets)
        };
        // 1 GiB: 32 MiB in all, 1 MiB each at most.
        assert_eq!(held(1024 * MIB, 77), 32 * 1024 * 1024 / 77);
        assert_eq!(held(1024 * MIB, 13), 1024 * 1024);
        // 64 MiB: 2 MiB in all, not 13 MiB.
        assert_eq!(held(64 * MIB, 13), 2 * 1024 * 1024 / 13);
        // Never below the floor that keeps batches worth writing.
        assert_eq!(held(32 * MIB, 256), MIN_HELD);
    }

    #[test]
    fn a_spill_file_is_lz4_compressed_and_reads_back_whole() {
        // 100,000 repetitive values: 800,000 bytes as plain Arrow.
        let rows = batch((0..100_000).map(|v| v % 7).collect());
        let dir = SpillDir::new(true, budget(1 << 30)).unwrap();
        let kept = dir.keep((None, "repetitive"), vec![rows.clone()]).unwrap();
        let Spill::File(path) = &kept else {
            panic!("kept in memory");
        };
        let bytes = std::fs::metadata(path).unwrap().len();
        assert!(bytes < 100_000, "{bytes} bytes: not compressed");
        assert_eq!(kept.read().unwrap(), vec![rows]);
    }
}
