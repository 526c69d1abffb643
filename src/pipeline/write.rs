//! Write: the sinks. Rows set aside become CSV files under
//! `<dq_error>/<kind>/date=<run date>/contributor=<id>/run=<run id>/`; Silver
//! rows become Iceberg data files (Parquet) in the table's location, written
//! but not yet committed: [`crate::pipeline::commit`] does that once the books
//! balance. A dry run passes a scratch dq_error store and a Silver table whose
//! FileIO is in memory ([`crate::infra::datafile::in_memory`]): it writes and
//! counts everything, and leaves nothing behind.

use std::collections::BTreeMap;

use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;
use bytes::Bytes;
use futures::{Stream, TryStreamExt};
use iceberg::spec::DataFile;

use crate::core::merge::Merge;
use crate::core::place::RunPlace;
use crate::core::set_aside::SetAside;
use crate::core::spill::Spill;
use crate::error::{Error, Result};
use crate::infra::storage::{Location, Upload};
use crate::pipeline::baseline::Missing;
use crate::pipeline::context::Context;
use crate::pipeline::mask::mask_set_aside;
use crate::pipeline::route::Routed;
use crate::stage::Stage;
use crate::transient::{SOURCE_FILE, SOURCE_LINE};

/// What a run wrote, before the commit.
#[derive(Debug)]
pub struct Written {
    /// Silver data files, uncommitted.
    pub data_files: Vec<DataFile>,
    /// dq_error files per destination, relative to the dq_error root.
    pub set_aside_files: BTreeMap<SetAside, String>,
}

/// Writes the set-aside rows as CSV files, each in the order its rows
/// stood in the drop (file, line: the runs the router kept merged) and
/// uploaded as it streams; returns their paths.
pub(crate) async fn write_set_aside(
    routed: Routed,
    dq_error: &Location,
    (place, contributor): (&RunPlace, &str),
) -> Result<BTreeMap<SetAside, String>> {
    let mut set_aside_files = BTreeMap::new();
    for destination in SetAside::ALL {
        let path = place.dq_file(destination, contributor);
        match routed.set_aside.get(&destination) {
            Some(rows) => {
                let runs = rows
                    .spills
                    .iter()
                    .map(Spill::batches)
                    .collect::<Result<Vec<_>>>()?;
                let merged = Merge::new(&rows.schema, (SOURCE_FILE, SOURCE_LINE), runs)?;
                let batches = futures::stream::iter(merged);
                write_csv(dq_error, &path, (rows.schema.clone(), batches)).await?;
                set_aside_files.insert(destination, path);
            }
            // An earlier judgement or attempt of this run may have left one.
            None => dq_error.delete(&path).await?,
        }
    }
    Ok(set_aside_files)
}

/// The summary's `outputs` name of the missing entities' list.
pub const MISSING_OUTPUT: &str = "missing";

/// Writes the list of the entities the drop leaves out, if any (sensitive
/// columns masked as in the other dq_error files); returns its path.
pub(super) async fn write_missing(
    missing: Option<&Missing>,
    context: &Context<'_>,
    place: &RunPlace,
    contributor: &str,
) -> Result<Option<String>> {
    let path = place.missing_file(contributor);
    let Some(rows) = missing.map(|m| &m.rows).filter(|r| r.num_rows() > 0) else {
        // An earlier judgement of this run may have left one (only a run
        // that looks for missing entities writes any).
        if context.plan.completeness.is_some() {
            context.dq_out.delete(&path).await?;
        }
        return Ok(None);
    };
    let rows = match context.plan.mask_sensitive {
        true => mask_set_aside(&context.plan.contract, rows)?,
        false => rows.clone(),
    };
    let schema = rows.schema();
    let batches = futures::stream::iter([Ok(rows)]);
    write_csv(&context.dq_out, &path, (schema, batches)).await?;
    Ok(Some(path))
}

/// Writes `batches` (of `schema`) to `path` as one CSV file with a header,
/// batch by batch; a failure leaves no file.
async fn write_csv(
    location: &Location,
    path: &str,
    (schema, batches): (SchemaRef, impl Stream<Item = Result<RecordBatch>>),
) -> Result<()> {
    let mut upload = location.upload(path);
    match upload_csv(&mut upload, (schema, batches)).await {
        Ok(()) => upload.finish().await,
        Err(error) => {
            upload.abort().await;
            Err(error)
        }
    }
}

async fn upload_csv(
    upload: &mut Upload,
    (schema, batches): (SchemaRef, impl Stream<Item = Result<RecordBatch>>),
) -> Result<()> {
    let mut batches = std::pin::pin!(batches);
    let mut header = true;
    while let Some(batch) = batches.try_next().await? {
        upload.write(csv_bytes(&batch, header)?).await?;
        header = false;
    }
    if header {
        upload
            .write(csv_bytes(&RecordBatch::new_empty(schema), true)?)
            .await?;
    }
    Ok(())
}

/// `rows` as CSV, after a header line when `header`.
fn csv_bytes(rows: &RecordBatch, header: bool) -> Result<Bytes> {
    let mut out = Vec::new();
    {
        let mut writer = arrow::csv::WriterBuilder::new()
            .with_header(header)
            .build(&mut out);
        writer.write(rows).map_err(Error::arrow(Stage::Write))?;
    }
    Ok(Bytes::from(out))
}
