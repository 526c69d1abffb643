//! Write: the sinks. Rows set aside become CSV files under
//! `<dq_error>/<kind>/date=<run date>/contributor=<id>/run=<run id>/`; Silver
//! rows become Iceberg data files (Parquet) in the table's location, written
//! but not yet committed: [`crate::pipeline::commit`] does that once the books
//! balance.

use std::collections::BTreeMap;

use arrow::array::{Array, ArrayRef, Scalar, StructArray};
use arrow::compute::kernels::cmp::not_distinct;
use arrow::record_batch::RecordBatch;
use iceberg::arrow::{
    PartitionValueCalculator, RecordBatchPartitionSplitter, arrow_struct_to_literal,
    schema_to_arrow_schema,
};
use iceberg::spec::{
    DataFile, DataFileFormat, Literal, PartitionKey, PartitionSpec, PartitionSpecRef, SchemaRef,
    TableProperties,
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
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::infra::storage::Location;
use crate::pipeline::route::{Routed, SetAside};

/// What a run wrote, before the commit.
#[derive(Debug)]
pub struct Written {
    /// Silver data files, uncommitted.
    pub data_files: Vec<DataFile>,
    /// dq_error files per destination, relative to the dq_error root.
    pub set_aside_files: BTreeMap<SetAside, String>,
}

/// The dq_error folder of one run's rows of one kind.
fn dq_folder(kind: &str, run_date: &str, contributor: &str, run_id: &str) -> String {
    format!("{kind}/date={run_date}/contributor={contributor}/run={run_id}")
}

/// The dq_error file of one run's rows of one kind.
pub fn dq_file(kind: &str, run_date: &str, contributor: &str, run_id: &str) -> String {
    format!(
        "{}/part-00000.csv",
        dq_folder(kind, run_date, contributor, run_id)
    )
}

/// Writes the set-aside rows as CSV and the Silver rows as Iceberg data files.
pub async fn write_outputs(
    routed: &Routed,
    dq_error: &Location,
    silver: &Table,
    run_date: &str,
    contributor: &str,
    run_id: &str,
) -> Result<Written> {
    let mut set_aside_files = BTreeMap::new();
    for (destination, rows) in &routed.set_aside {
        let path = dq_file(destination.kind(), run_date, contributor, run_id);
        dq_error.put(&path, to_csv(rows)?).await?;
        set_aside_files.insert(*destination, path);
    }
    let data_files = write_silver_files(silver, &routed.silver, run_id).await?;
    Ok(Written {
        data_files,
        set_aside_files,
    })
}

fn to_csv(rows: &RecordBatch) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    {
        let mut writer = arrow::csv::WriterBuilder::new()
            .with_header(true)
            .build(&mut out);
        writer.write(rows).map_err(Error::arrow("write"))?;
    }
    Ok(out)
}

/// Writes `batches` as data files of `silver`'s current schema and partition
/// spec, with one writer per core, each on its share of the batches.
pub async fn write_silver_files(
    silver: &Table,
    batches: &[RecordBatch],
    run_id: &str,
) -> Result<Vec<DataFile>> {
    let filled: Vec<&RecordBatch> = batches.iter().filter(|b| b.num_rows() > 0).collect();
    let lanes = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .clamp(1, filled.len().max(1));
    let mut shares: Vec<Vec<RecordBatch>> = vec![Vec::new(); lanes];
    for (i, batch) in filled.into_iter().enumerate() {
        shares[i % lanes].push(batch.clone());
    }
    let writers = shares.into_iter().map(|share| {
        let (silver, run_id) = (silver.clone(), run_id.to_string());
        tokio::spawn(async move { write_share(&silver, &share, &run_id).await })
    });
    let written = futures::future::try_join_all(writers)
        .await
        .map_err(|e| Error::Internal(format!("write: a writer task failed: {e}")))?;
    let mut files = Vec::new();
    for share in written {
        files.extend(share?);
    }
    Ok(files)
}

/// One writer's share of [`write_silver_files`].
async fn write_share(
    silver: &Table,
    batches: &[RecordBatch],
    run_id: &str,
) -> Result<Vec<DataFile>> {
    let target = silver.identifier().to_string();
    let metadata = silver.metadata();
    let iceberg_schema = metadata.current_schema().clone();
    let arrow_schema = Arc::new(
        schema_to_arrow_schema(&iceberg_schema).map_err(Error::catalog("write", &target))?,
    );
    let props = metadata
        .table_properties()
        .map_err(Error::catalog("write", &target))?;
    let builder = data_file_writer_builder(silver, &props, run_id)
        .map_err(Error::catalog("write", &target))?;
    let spec = metadata.default_partition_spec().clone();
    let stamped = batches
        .iter()
        .map(|b| {
            RecordBatch::try_new(arrow_schema.clone(), b.columns().to_vec())
                .map_err(Error::arrow("write"))
        })
        .collect::<Result<Vec<_>>>()?;
    let written = if spec.is_unpartitioned() {
        let mut writer = UnpartitionedWriter::new(builder);
        for batch in stamped {
            writer
                .write(batch)
                .await
                .map_err(Error::catalog("write", &target))?;
        }
        writer.close().await
    } else {
        let splitter = PartitionSplitter::try_new(iceberg_schema, spec)
            .map_err(Error::catalog("write", &target))?;
        let mut writer = FanoutWriter::new(builder);
        for batch in stamped {
            for (key, part) in splitter
                .split(&batch)
                .map_err(Error::catalog("write", &target))?
            {
                writer
                    .write(key, part)
                    .await
                    .map_err(Error::catalog("write", &target))?;
            }
        }
        writer.close().await
    };
    written.map_err(Error::catalog("write", &target))
}

/// Splits batches by partition. A batch whose rows all share one partition
/// (a monthly drop of one contributor: every batch) costs one vectorized
/// pass and is written as it is; iceberg's splitter, which builds a key per
/// row and copies every part, is kept for batches that mix partitions.
struct PartitionSplitter {
    calculator: PartitionValueCalculator,
    mixed: RecordBatchPartitionSplitter,
    spec: PartitionSpec,
    schema: SchemaRef,
}

impl PartitionSplitter {
    fn try_new(schema: SchemaRef, spec: PartitionSpecRef) -> iceberg::Result<PartitionSplitter> {
        Ok(PartitionSplitter {
            calculator: PartitionValueCalculator::try_new(&spec, &schema)?,
            mixed: RecordBatchPartitionSplitter::try_new_with_computed_values(
                schema.clone(),
                spec.clone(),
            )?,
            spec: spec.as_ref().clone(),
            schema,
        })
    }

    fn split(&self, batch: &RecordBatch) -> iceberg::Result<Vec<(PartitionKey, RecordBatch)>> {
        let values = self.calculator.calculate(batch)?;
        if batch.num_rows() == 0 || !is_constant(&values)? {
            return self.mixed.split(batch);
        }
        let first = arrow_struct_to_literal(&values.slice(0, 1), self.calculator.partition_type())?;
        match first.into_iter().next() {
            Some(Some(Literal::Struct(key))) => Ok(vec![(
                PartitionKey::new(self.spec.clone(), self.schema.clone(), key),
                batch.clone(),
            )]),
            _ => self.mixed.split(batch),
        }
    }
}

/// Whether every row of the partition values equals the first (nulls equal nulls).
fn is_constant(values: &ArrayRef) -> iceberg::Result<bool> {
    let values = values
        .as_any()
        .downcast_ref::<StructArray>()
        .ok_or_else(|| {
            iceberg::Error::new(
                iceberg::ErrorKind::DataInvalid,
                "partition values are not a struct",
            )
        })?;
    for column in values.columns() {
        let first = Scalar::new(column.slice(0, 1));
        let same = not_distinct(column, &first)
            .map_err(|e| iceberg::Error::new(iceberg::ErrorKind::DataInvalid, e.to_string()))?;
        if same.true_count() != column.len() {
            return Ok(false);
        }
    }
    Ok(true)
}

type SilverWriterBuilder =
    DataFileWriterBuilder<ParquetWriterBuilder, DefaultLocationGenerator, DefaultFileNameGenerator>;

fn data_file_writer_builder(
    silver: &Table,
    props: &TableProperties,
    run_id: &str,
) -> iceberg::Result<SilverWriterBuilder> {
    let metadata = silver.metadata();
    let parquet =
        ParquetWriterBuilder::from_table_properties(props, metadata.current_schema().clone());
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
