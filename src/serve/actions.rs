//! What an operator does from the workbench, each through the path the
//! command line uses, so that a click and a command leave the same record:
//!
//! - **ignore**: `exceptions ignore` ([`crate::exceptions::close::ignore`]);
//! - **accept as is**: `accept`, for this one exception ([`crate::accept`]);
//! - **correct**: the corrected row goes to
//!   `<dq_error>/corrections/contributor=<id>/workbench-<exception id>.csv`
//!   (one file per exception, overwritten by a later correction), an event
//!   records who corrected it and why, and the contributor's replay runs it
//!   through the same baseline and rules (`replay --include-quarantined`);
//! - **replay** a contributor's pending rows (`replay`).
//!
//! Each returns what it did as lines for a person.

use std::collections::{BTreeSet, HashMap};

use sha2::{Digest, Sha256};

use crate::accept::{AcceptRequest, accept};
use crate::config::Plan;
use crate::core::drop::DropRef;
use crate::error::{Error, Result};
use crate::exceptions::close::{Decision, ignore, record_correction};
use crate::exceptions::{ExceptionEvent, ExceptionStatus};
use crate::infra::storage::Stores;
use crate::pipeline::RunOptions;
use crate::replay::{ReplayOptions, corrections_folder, replay};
use crate::transient::EXCEPTION_ID;

/// Closes one exception as ignored.
pub async fn ignore_one(plan: &Plan, id: &str, decision: &Decision) -> Result<Vec<String>> {
    tracing::info!(actor = %decision.by(), exception = %id, "workbench: ignore");
    let outcome = ignore(plan, &[id.to_string()], decision).await?;
    Ok(outcome.describe(decision))
}

/// Commits one exception's row as judged (`accept`, for it alone).
pub async fn accept_one(
    plan: &Plan,
    exception: &ExceptionEvent,
    decision: Decision,
) -> Result<Vec<String>> {
    let request = AcceptRequest {
        drop: DropRef::new(&exception.contributor, &exception.drop_id)?,
        rule: None,
        decision,
        only: Some(BTreeSet::from([exception.exception_id.clone()])),
    };
    tracing::info!(actor = %request.decision.by(), exception = %exception.exception_id, "workbench: accept as is");
    let outcome = accept(plan, &request, &RunOptions::default()).await?;
    Ok(outcome.describe(&request))
}

/// Writes the corrected row of a quarantined exception, records who
/// corrected it, and replays the contributor's corrections and pending rows.
/// `row` holds the contract's columns as the row should read.
pub async fn correct(
    plan: &Plan,
    exception: &ExceptionEvent,
    row: &HashMap<String, String>,
    decision: &Decision,
) -> Result<Vec<String>> {
    if exception.status != ExceptionStatus::Quarantined {
        return Err(Error::Usage {
            arg: "correct".to_string(),
            reason: format!(
                "exception {} is {}: only a quarantined row is corrected (a pending one is replayed as it is)",
                exception.exception_id,
                exception.status.as_str()
            ),
        });
    }
    let file = correction_file(plan, exception, row)?;
    let fingerprint = hex::encode(Sha256::digest(&file));
    let stores = Stores::new(&plan.storage, plan.catalog.warehouse()).await?;
    let dq_error = stores.open(&plan.storage.dq_error, "storage.dq_error")?;
    let path = format!(
        "{}/workbench-{}.csv",
        corrections_folder(&exception.contributor),
        exception.exception_id
    );
    dq_error.put(&path, file).await?;
    record_correction(plan, exception, decision, &fingerprint).await?;
    tracing::info!(actor = %decision.by(), exception = %exception.exception_id, "workbench: corrected, replaying");
    let mut lines = vec![format!(
        "corrected row written to {}",
        dq_error.url_of(&path)
    )];
    lines.extend(replay_contributor(plan, &exception.contributor, true).await?);
    Ok(lines)
}

/// Replays a contributor's open pending rows (and, with `corrections`, the
/// quarantined rows that have a corrected row).
pub async fn replay_contributor(
    plan: &Plan,
    contributor: &str,
    corrections: bool,
) -> Result<Vec<String>> {
    let options = ReplayOptions {
        include_quarantined: corrections,
        run: RunOptions::default(),
    };
    let outcome = replay(plan, contributor, &options).await?;
    Ok(outcome.describe(contributor))
}

/// The correction file of one row: the contract's columns and `_exception_id`.
fn correction_file(
    plan: &Plan,
    exception: &ExceptionEvent,
    row: &HashMap<String, String>,
) -> Result<Vec<u8>> {
    let failed = |e: csv::Error| Error::Internal(format!("cannot write the corrected row: {e}"));
    let columns: Vec<&str> = plan.contract.column_names().collect();
    let mut writer = csv::Writer::from_writer(Vec::new());
    let header: Vec<&str> = columns.iter().copied().chain([EXCEPTION_ID]).collect();
    writer.write_record(&header).map_err(failed)?;
    let values: Vec<&str> = columns
        .iter()
        .map(|c| row.get(*c).map_or("", String::as_str))
        .chain([exception.exception_id.as_str()])
        .collect();
    writer.write_record(&values).map_err(failed)?;
    writer
        .into_inner()
        .map_err(|e| Error::Internal(format!("cannot write the corrected row: {e}")))
}
