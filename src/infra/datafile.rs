//! Iceberg data files: a table's rows written as Parquet in its location,
//! split by partition, not yet committed (see [`crate::infra::append`]).

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{ArrayRef, StructArray, UInt32Array};
use arrow::compute::take_record_batch;
use arrow::record_batch::RecordBatch;
use iceberg::arrow::{PartitionValueCalculator, arrow_struct_to_literal, schema_to_arrow_schema};
use iceberg::spec::{
    DataFile, DataFileFormat, Literal, PartitionKey, PartitionSpec, PartitionSpecRef, SchemaRef,
    TableMetadataBuilder, TableProperties,
};
use iceberg::table::Table;
use iceberg::writer::base_writer::data_file_writer::DataFileWriterBuilder;
use iceberg::writer::file_writer::ParquetWriterBuilder;
use iceberg::writer::file_writer::location_generator::{
    DefaultFileNameGenerator, DefaultLocationGenerator,
};
use iceberg::writer::file_writer::rolling_writer::RollingFileWriterBuilder;
use iceberg::writer::partitioning::PartitioningWriter;
use iceberg::writer::partitioning::fanout_writer::FanoutWriter;
use iceberg::writer::partitioning::unpartitioned_writer::UnpartitionedWriter;
use parquet::basic::Compression;
use parquet::file::properties::{CdcOptions, EnabledStatistics, WriterProperties};
use parquet::schema::types::ColumnPath;

use crate::core::keys::KeyIndex;
use crate::error::{Error, Result};
use crate::infra::catalog::{METRICS_COLUMN_PREFIX, parquet_compression};
use crate::stage::Stage;

/// Writes `batches` as data files of `silver`'s current schema and partition
/// spec, with one writer per core, each on its share of the batches.
pub async fn write_silver_files(
    silver: &Table,
    batches: &[RecordBatch],
    run_id: &str,
) -> Result<Vec<DataFile>> {
    let mut writers = SilverWriters::open(silver, run_id);
    writers.write(batches).await?;
    writers.finish().await
}

/// Silver's data files written by one writer per core, fed batch after
/// batch (a run's buckets one after the other) and closed once: a run
/// writes about one file per core, rolled at the table's target file size,
/// however many buckets it judges; a writer writes while the next bucket
/// is judged.
pub struct SilverWriters {
    lanes: Vec<Lane>,
    /// The lane the next slice goes to.
    next: usize,
}

/// One writer: the task writing what its channel brings.
struct Lane {
    sender: tokio::sync::mpsc::Sender<RecordBatch>,
    task: tokio::task::JoinHandle<Result<Vec<DataFile>>>,
}

/// Rows a writer is handed at once: a large batch is shared by the writers.
const WRITE_SLICE_ROWS: usize = 65_536;

/// Slices a writer's channel holds before the sender waits.
const LANE_SLICES: usize = 2;

impl SilverWriters {
    /// One writer per core for `silver`'s data files, named after `run_id`.
    pub fn open(silver: &Table, run_id: &str) -> SilverWriters {
        let lanes = (0..crate::core::parallel::lanes())
            .map(|_| {
                let (sender, receiver) = tokio::sync::mpsc::channel(LANE_SLICES);
                let (silver, run_id) = (silver.clone(), run_id.to_string());
                let task =
                    tokio::spawn(async move { write_lane(&silver, receiver, &run_id).await });
                Lane { sender, task }
            })
            .collect();
        SilverWriters { lanes, next: 0 }
    }

    /// Hands `batches` to the writers, in slices.
    pub async fn write(&mut self, batches: &[RecordBatch]) -> Result<()> {
        for batch in batches {
            for start in (0..batch.num_rows()).step_by(WRITE_SLICE_ROWS) {
                let rows = WRITE_SLICE_ROWS.min(batch.num_rows() - start);
                let lane = self.next % self.lanes.len();
                self.next += 1;
                if self.lanes[lane]
                    .sender
                    .send(batch.slice(start, rows))
                    .await
                    .is_err()
                {
                    // The writer stopped: its error says why.
                    let stopped = self.lanes.swap_remove(lane);
                    return Err(match joined(stopped.task).await {
                        Err(error) => error,
                        Ok(_) => Error::Internal("write: a writer stopped early".to_string()),
                    });
                }
            }
        }
        Ok(())
    }

    /// Closes every writer and waits for all of them; the data files
    /// written, or the first writer's error.
    pub async fn finish(self) -> Result<Vec<DataFile>> {
        let tasks: Vec<_> = self.lanes.into_iter().map(|lane| lane.task).collect();
        let mut files = Vec::new();
        let mut failed = None;
        for task in tasks {
            match joined(task).await {
                Ok(written) => files.extend(written),
                Err(error) => {
                    failed.get_or_insert(error);
                }
            }
        }
        match failed {
            Some(error) => Err(error),
            None => Ok(files),
        }
    }
}

/// A writer task's outcome.
async fn joined(task: tokio::task::JoinHandle<Result<Vec<DataFile>>>) -> Result<Vec<DataFile>> {
    task.await
        .map_err(|e| Error::Internal(format!("write: a writer task failed: {e}")))?
}

/// `table` relocated to the local folder `scratch`: data files written for
/// it land there (a dry run's, counted and then deleted with the folder),
/// never in the warehouse, and cost no memory.
pub(crate) fn in_scratch(table: &Table, scratch: &std::path::Path) -> Result<Table> {
    let target = table.identifier().to_string();
    let location = format!("file://{}", scratch.display());
    let metadata = TableMetadataBuilder::new_from_metadata(table.metadata().clone(), None)
        .set_location(location)
        .build()
        .map_err(Error::catalog("write", &target))?
        .metadata;
    Table::builder()
        .metadata(metadata)
        .identifier(table.identifier().clone())
        .file_io(iceberg::io::FileIO::new_with_fs())
        .runtime(iceberg::Runtime::try_current().map_err(Error::catalog("write", &target))?)
        .readonly(true)
        .build()
        .map_err(Error::catalog("write", &target))
}

/// One writer of [`SilverWriters`]: writes what `batches` brings until it
/// closes (no file when it brings no row).
async fn write_lane(
    silver: &Table,
    mut batches: tokio::sync::mpsc::Receiver<RecordBatch>,
    run_id: &str,
) -> Result<Vec<DataFile>> {
    let target = silver.identifier().to_string();
    let Some(first) = batches.recv().await else {
        return Ok(Vec::new());
    };
    let metadata = silver.metadata();
    let iceberg_schema = metadata.current_schema().clone();
    let arrow_schema = Arc::new(
        schema_to_arrow_schema(&iceberg_schema).map_err(Error::catalog("write", &target))?,
    );
    let props = metadata
        .table_properties()
        .map_err(Error::catalog("write", &target))?;
    let compression = parquet_compression(silver)?;
    let builder = data_file_writer_builder(silver, (&props, compression), run_id)
        .map_err(Error::catalog("write", &target))?;
    let spec = metadata.default_partition_spec().clone();
    let stamped = |b: RecordBatch| {
        RecordBatch::try_new(arrow_schema.clone(), b.columns().to_vec())
            .map_err(Error::arrow(Stage::Write))
    };
    let mut next = Some(first);
    let written = if spec.is_unpartitioned() {
        let mut writer = UnpartitionedWriter::new(builder);
        while let Some(batch) = next {
            writer
                .write(stamped(batch)?)
                .await
                .map_err(Error::catalog("write", &target))?;
            next = batches.recv().await;
        }
        writer.close().await
    } else {
        let splitter = PartitionSplitter::try_new(iceberg_schema, spec)
            .map_err(Error::catalog("write", &target))?;
        let mut writer = FanoutWriter::new(builder);
        while let Some(batch) = next {
            for (key, part) in splitter
                .split(&stamped(batch)?)
                .map_err(Error::catalog("write", &target))?
            {
                writer
                    .write(key, part)
                    .await
                    .map_err(Error::catalog("write", &target))?;
            }
            next = batches.recv().await;
        }
        writer.close().await
    };
    written.map_err(Error::catalog("write", &target))
}

/// Splits batches by partition: the partition values are computed for the
/// whole batch at once and the rows grouped by them in a key index; a batch
/// whose rows share one partition (a monthly drop of one contributor: every
/// batch) is written as it is. (iceberg's own splitter builds and hashes a
/// key per row and copies every part.)
struct PartitionSplitter {
    calculator: PartitionValueCalculator,
    spec: PartitionSpec,
    schema: SchemaRef,
}

impl PartitionSplitter {
    fn try_new(schema: SchemaRef, spec: PartitionSpecRef) -> iceberg::Result<PartitionSplitter> {
        Ok(PartitionSplitter {
            calculator: PartitionValueCalculator::try_new(&spec, &schema)?,
            spec: spec.as_ref().clone(),
            schema,
        })
    }

    fn split(&self, batch: &RecordBatch) -> iceberg::Result<Vec<(PartitionKey, RecordBatch)>> {
        if batch.num_rows() == 0 {
            return Ok(Vec::new());
        }
        let values = self.calculator.calculate(batch)?;
        let parts = values
            .as_any()
            .downcast_ref::<StructArray>()
            .ok_or_else(|| invalid("partition values are not a struct"))?;
        let mut index = KeyIndex::new(Stage::Write);
        let groups = index.insert(parts.columns()).map_err(invalid)?;
        if index.len() == 1 {
            return Ok(vec![(self.key_of(&values, 0)?, batch.clone())]);
        }
        let mut rows: Vec<Vec<u32>> = vec![Vec::new(); index.len()];
        for (row, group) in groups.into_iter().enumerate() {
            rows[group as usize].push(row as u32);
        }
        rows.into_iter()
            .map(|rows| {
                let key = self.key_of(&values, rows[0] as usize)?;
                let part = take_record_batch(batch, &UInt32Array::from(rows)).map_err(invalid)?;
                Ok((key, part))
            })
            .collect()
    }

    /// The partition key of row `row`'s partition values.
    fn key_of(&self, values: &ArrayRef, row: usize) -> iceberg::Result<PartitionKey> {
        let literal =
            arrow_struct_to_literal(&values.slice(row, 1), self.calculator.partition_type())?;
        match literal.into_iter().next() {
            Some(Some(Literal::Struct(key))) => Ok(PartitionKey::new(
                self.spec.clone(),
                self.schema.clone(),
                key,
            )),
            _ => Err(invalid("partition value is not a struct")),
        }
    }
}

fn invalid(error: impl std::fmt::Display) -> iceberg::Error {
    iceberg::Error::new(iceberg::ErrorKind::DataInvalid, error.to_string())
}

type SilverWriterBuilder =
    DataFileWriterBuilder<ParquetWriterBuilder, DefaultLocationGenerator, DefaultFileNameGenerator>;

fn data_file_writer_builder(
    silver: &Table,
    (props, compression): (&TableProperties, Compression),
    run_id: &str,
) -> iceberg::Result<SilverWriterBuilder> {
    let metadata = silver.metadata();
    let parquet = ParquetWriterBuilder::new(
        parquet_properties(metadata.properties(), (props, compression)),
        metadata.current_schema().clone(),
    );
    let rolling = RollingFileWriterBuilder::new(
        parquet,
        props.write_target_file_size_bytes,
        silver.file_io().clone(),
        DefaultLocationGenerator::new(metadata)?,
        DefaultFileNameGenerator::new(
            format!("{run_id}-{}", uuid::Uuid::new_v4()),
            None,
            DataFileFormat::Parquet,
        ),
    );
    Ok(DataFileWriterBuilder::new(rolling))
}

/// Parquet settings of a table's data files: the `write.parquet.*` ones
/// iceberg translates (content-defined chunking), the codec
/// ([`parquet_compression`]), and no column statistics for
/// a column whose Iceberg metrics mode (`write.metadata.metrics.column.<name>`)
/// is `none` or `counts`. Iceberg takes a data file's lower/upper bounds from
/// the Parquet column statistics, so such a column gets none in the manifests
/// (nor a null count; value counts stay). Every other column keeps its statistics.
fn parquet_properties(
    table_properties: &HashMap<String, String>,
    (props, compression): (&TableProperties, Compression),
) -> WriterProperties {
    let cdc = props.cdc_enabled.then_some(CdcOptions {
        min_chunk_size: props.cdc_min_chunk_size,
        max_chunk_size: props.cdc_max_chunk_size,
        norm_level: props.cdc_norm_level,
    });
    let builder = WriterProperties::builder()
        .set_content_defined_chunking(cdc)
        .set_compression(compression);
    no_bounds_columns(table_properties)
        .fold(builder, |builder, column| {
            builder.set_column_statistics_enabled(column, EnabledStatistics::None)
        })
        .build()
}

/// The columns whose Iceberg metrics mode keeps bounds out of the manifests.
fn no_bounds_columns(
    table_properties: &HashMap<String, String>,
) -> impl Iterator<Item = ColumnPath> + '_ {
    table_properties.iter().filter_map(|(key, mode)| {
        let name = key.strip_prefix(METRICS_COLUMN_PREFIX)?;
        matches!(mode.trim(), "none" | "counts")
            .then(|| ColumnPath::new(name.split('.').map(str::to_string).collect()))
    })
}

#[cfg(test)]
mod tests {
    use arrow::array::{Date32Array, StringArray};
    use iceberg::spec::{NestedField, PrimitiveType, Schema, Transform, Type};

    use super::*;

    #[test]
    fn rows_are_split_by_partition_and_one_partition_stays_whole() {
        let schema = Arc::new(
            Schema::builder()
                .with_fields(vec![
                    NestedField::required(1, "who", Type::Primitive(PrimitiveType::String)).into(),
                    NestedField::required(2, "day", Type::Primitive(PrimitiveType::Date)).into(),
                ])
                .build()
                .unwrap(),
        );
        let spec = Arc::new(
            PartitionSpec::builder(schema.clone())
                .add_partition_field("who", "who", Transform::Identity)
                .unwrap()
                .add_partition_field("day", "day_month", Transform::Month)
                .unwrap()
                .build()
                .unwrap(),
        );
        let arrow_schema = Arc::new(schema_to_arrow_schema(&schema).unwrap());
        let batch = |who: Vec<&str>, day: Vec<i32>| {
            RecordBatch::try_new(
                arrow_schema.clone(),
                vec![
                    Arc::new(StringArray::from(who)),
                    Arc::new(Date32Array::from(day)),
                ],
            )
            .unwrap()
        };
        let splitter = PartitionSplitter::try_new(schema, spec).unwrap();
        // 2026-01-05, 2026-01-20 and 2026-02-03, two contributors, interleaved.
        let (jan, jan_later, feb) = (20458, 20473, 20487);
        let mixed = batch(
            vec!["A", "B", "A", "A", "B"],
            vec![jan, jan, feb, jan_later, jan],
        );
        let mut parts: Vec<(String, Vec<i32>)> = splitter
            .split(&mixed)
            .unwrap()
            .into_iter()
            .map(|(key, part)| {
                let who = part
                    .column(0)
                    .as_any()
                    .downcast_ref::<StringArray>()
                    .unwrap();
                let day = part
                    .column(1)
                    .as_any()
                    .downcast_ref::<Date32Array>()
                    .unwrap();
                assert!(who.iter().all(|w| w == who.iter().next().flatten()));
                let values: Vec<String> = key.data().iter().map(|v| format!("{v:?}")).collect();
                (
                    format!("{}:{}", who.value(0), values.join("|")),
                    day.values().to_vec(),
                )
            })
            .collect();
        parts.sort();
        assert_eq!(parts.len(), 3);
        assert_eq!(parts[0].1, vec![jan, jan_later]);
        assert_eq!(parts[1].1, vec![feb]);
        assert_eq!(parts[2].1, vec![jan, jan]);
        assert!(parts[0].0.starts_with("A:") && parts[2].0.starts_with("B:"));

        let one = batch(vec!["A", "A"], vec![jan, jan_later]);
        let whole = splitter.split(&one).unwrap();
        assert_eq!(whole.len(), 1);
        assert_eq!(whole[0].1.num_rows(), 2);
        assert!(splitter.split(&batch(vec![], vec![])).unwrap().is_empty());
    }
}
