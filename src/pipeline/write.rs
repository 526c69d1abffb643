//! Write: the sinks. Rows set aside become CSV files under
//! `<dq_error>/<kind>/date=<run date>/contributor=<id>/run=<run id>/`; Silver
//! rows become Iceberg data files (Parquet) in the table's location, written
//! but not yet committed: [`crate::pipeline::commit`] does that once the books
//! balance. A dry run passes a scratch dq_error store and a Silver table whose
//! FileIO is in memory ([`crate::infra::datafile::in_memory`]): it writes and
//! counts everything, and leaves nothing behind.

use std::collections::BTreeMap;

use arrow::record_batch::RecordBatch;

use iceberg::spec::DataFile;

use crate::core::place::RunPlace;
use crate::core::set_aside::SetAside;
use crate::error::{Error, Result};
use crate::infra::storage::Location;
use crate::pipeline::baseline::Missing;
use crate::pipeline::context::Context;
use crate::pipeline::mask::mask_set_aside;
use crate::pipeline::route::Routed;
use crate::stage::Stage;

/// What a run wrote, before the commit.
#[derive(Debug)]
pub struct Written {
    /// Silver data files, uncommitted.
    pub data_files: Vec<DataFile>,
    /// dq_error files per destination, relative to the dq_error root.
    pub set_aside_files: BTreeMap<SetAside, String>,
}

/// Writes the set-aside rows as CSV files; returns their paths.
pub async fn write_set_aside(
    routed: &Routed,
    dq_error: &Location,
    place: &RunPlace,
    contributor: &str,
) -> Result<BTreeMap<SetAside, String>> {
    let mut set_aside_files = BTreeMap::new();
    for destination in SetAside::ALL {
        let path = place.dq_file(destination, contributor);
        match routed.set_aside.get(&destination) {
            Some(rows) => {
                dq_error.put(&path, to_csv(rows)?).await?;
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
    context.dq_out.put(&path, to_csv(&rows)?).await?;
    Ok(Some(path))
}

fn to_csv(rows: &RecordBatch) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    {
        let mut writer = arrow::csv::WriterBuilder::new()
            .with_header(true)
            .build(&mut out);
        writer.write(rows).map_err(Error::arrow(Stage::Write))?;
    }
    Ok(out)
}
