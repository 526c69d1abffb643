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
use crate::error::{Error, Result};
use crate::stage::Stage;

/// The extension of spill files (as DataFusion lists Arrow files).
pub(crate) const SPILL_EXTENSION: &str = ".arrow";

/// The run's spill folder: none when everything stays in memory.
#[derive(Debug)]
pub(crate) struct SpillDir {
    dir: Option<tempfile::TempDir>,
}

impl SpillDir {
    /// Spills to files under `scratch` (the system's temporary folder when
    /// `None`) when `to_disk`, else keeps everything in memory.
    pub(crate) fn new(to_disk: bool, scratch: Option<&Path>) -> Result<SpillDir> {
        if !to_disk {
            return Ok(SpillDir { dir: None });
        }
        let parent = scratch.map_or_else(std::env::temp_dir, Path::to_path_buf);
        let dir = tempfile::Builder::new()
            .prefix("silverline-buckets-")
            .tempdir_in(&parent)
            .map_err(|source| Error::Io {
                path: parent,
                source,
            })?;
        Ok(SpillDir { dir: Some(dir) })
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
    /// bucket of `buckets`.
    pub(crate) fn bucket_writers(
        &self,
        (folder, prefix): (Option<&Path>, &str),
        buckets: &Buckets,
        schema: &SchemaRef,
    ) -> Result<BucketWriters> {
        let writers = (0..buckets.count())
            .map(|b| self.writer((folder, &format!("{prefix}-{b}")), schema))
            .collect::<Result<_>>()?;
        Ok(BucketWriters {
            buckets: buckets.clone(),
            writers,
        })
    }
}

/// One spill per bucket, each row written to its entity's.
pub(crate) struct BucketWriters {
    buckets: Buckets,
    writers: Vec<SpillWriter>,
}

impl BucketWriters {
    /// Adds the rows of `batch`, whose entity key columns are `keys`.
    pub(crate) fn add(
        &mut self,
        batch: &RecordBatch,
        keys: &[ArrayRef],
        stage: Stage,
    ) -> Result<()> {
        let parts = self.buckets.split(batch, keys, stage)?;
        for (writer, part) in self.writers.iter_mut().zip(&parts) {
            if part.num_rows() > 0 {
                writer.write(part)?;
            }
        }
        Ok(())
    }

    /// Every bucket's spill, in bucket order.
    pub(crate) fn finish(self) -> Result<Vec<Spill>> {
        self.writers.into_iter().map(SpillWriter::finish).collect()
    }
}

/// Batches written one by one to a spill.
pub(crate) enum SpillWriter {
    /// Held in memory.
    Memory(Vec<RecordBatch>),
    /// Written to an Arrow IPC file.
    File(Box<FileWriter<File>>, PathBuf),
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
        Ok(SpillWriter::File(Box::new(writer), path.to_path_buf()))
    }

    /// Adds `batch`.
    pub(crate) fn write(&mut self, batch: &RecordBatch) -> Result<()> {
        match self {
            SpillWriter::Memory(batches) => batches.push(batch.clone()),
            SpillWriter::File(writer, _) => {
                writer.write(batch).map_err(Error::arrow(Stage::Baseline))?;
            }
        }
        Ok(())
    }

    /// The spill written.
    pub(crate) fn finish(self) -> Result<Spill> {
        match self {
            SpillWriter::Memory(batches) => Ok(Spill::Memory(batches)),
            SpillWriter::File(mut writer, path) => {
                writer.finish().map_err(Error::arrow(Stage::Baseline))?;
                Ok(Spill::File(path))
            }
        }
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

    fn batch(values: Vec<i64>) -> RecordBatch {
        RecordBatch::try_from_iter([("v", Arc::new(Int64Array::from(values)) as ArrayRef)]).unwrap()
    }

    #[test]
    fn batches_read_back_as_kept_in_memory_and_on_disk() {
        let batches = vec![batch(vec![1, 2]), batch(vec![]), batch(vec![3])];
        let schema = batches[0].schema();
        for to_disk in [false, true] {
            let dir = SpillDir::new(to_disk, None).unwrap();
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
    fn bucket_writers_write_each_row_to_its_bucket_and_lose_none() {
        let keys = StringArray::from_iter_values((0..1000).map(|i| format!("entity-{i}")));
        let rows = RecordBatch::try_from_iter([
            ("key", Arc::new(keys) as ArrayRef),
            (
                "v",
                Arc::new(Int64Array::from_iter_values(0..1000)) as ArrayRef,
            ),
        ])
        .unwrap();
        let buckets = Buckets::new(3);
        for to_disk in [false, true] {
            let dir = SpillDir::new(to_disk, None).unwrap();
            let mut writers = dir
                .bucket_writers((None, "b"), &buckets, &rows.schema())
                .unwrap();
            for start in (0..1000).step_by(100) {
                let piece = rows.slice(start, 100);
                writers
                    .add(&piece, &[piece.column(0).clone()], Stage::Read)
                    .unwrap();
            }
            let mut values = Vec::new();
            for (bucket, spill) in writers.finish().unwrap().iter().enumerate() {
                for batch in spill.read().unwrap() {
                    let of_rows = buckets.of_rows(&[batch.column(0).clone()], Stage::Read);
                    assert!(of_rows.unwrap().iter().all(|b| *b as usize == bucket));
                    let v = batch.column(1).as_any().downcast_ref::<Int64Array>();
                    values.extend(v.unwrap().values().iter().copied());
                }
            }
            values.sort_unstable();
            assert_eq!(values, (0..1000).collect::<Vec<i64>>());
        }
    }

    #[test]
    fn a_spill_file_is_lz4_compressed_and_reads_back_whole() {
        // 100,000 repetitive values: 800,000 bytes as plain Arrow.
        let rows = batch((0..100_000).map(|v| v % 7).collect());
        let dir = SpillDir::new(true, None).unwrap();
        let kept = dir.keep((None, "repetitive"), vec![rows.clone()]).unwrap();
        let Spill::File(path) = &kept else {
            panic!("kept in memory");
        };
        let bytes = std::fs::metadata(path).unwrap().len();
        assert!(bytes < 100_000, "{bytes} bytes: not compressed");
        assert_eq!(kept.read().unwrap(), vec![rows]);
    }
}
