//! Commit: one Iceberg fast-append for all of a run's Silver rows (DESIGN.md
//! invariant 4). It takes only a [`Balanced`] run. The snapshot's properties
//! carry the run key, which is how a rerun knows it has nothing to do, and the
//! counts, so the table's history tells what each run did.

use std::collections::HashMap;
use std::sync::Arc;

use iceberg::Catalog;
use iceberg::transaction::{ApplyTransactionAction, Transaction};

use crate::config::Plan;
use crate::error::{Error, Result};
use crate::infra::catalog::table_ident;
use crate::pipeline::balance::Balanced;
use crate::pipeline::claim::committed_snapshot;
use crate::pipeline::route::SetAside;

/// Snapshot property holding the run key.
pub const RUN_KEY_PROPERTY: &str = "silverline.run-key";

/// What the commit did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Committed {
    /// A new snapshot.
    Snapshot(i64),
    /// A concurrent run of the same drop committed first; nothing was added.
    AlreadyCommitted(i64),
}

/// Appends the balanced run's data files to Silver in one snapshot.
pub async fn commit_silver(
    catalog: &Arc<dyn Catalog>,
    plan: &Plan,
    balanced: Balanced,
    run_key: &str,
    run_id: &str,
    rules_fingerprint: &str,
) -> Result<Committed> {
    let ident = table_ident(&plan.table);
    let target = ident.to_string();
    let table = catalog
        .load_table(&ident)
        .await
        .map_err(Error::catalog("load-table", &target))?;
    if let Some(snapshot) = committed_snapshot(&table, run_key) {
        return Ok(Committed::AlreadyCommitted(snapshot));
    }
    let properties = HashMap::from([
        (RUN_KEY_PROPERTY.to_string(), run_key.to_string()),
        ("silverline.run-id".to_string(), run_id.to_string()),
        (
            "silverline.rules-fingerprint".to_string(),
            rules_fingerprint.to_string(),
        ),
        (
            "silverline.received".to_string(),
            balanced.received().to_string(),
        ),
        (
            "silverline.committed".to_string(),
            balanced.silver().to_string(),
        ),
        (
            "silverline.quarantined".to_string(),
            balanced.set_aside(SetAside::Quarantine).to_string(),
        ),
        (
            "silverline.dropped".to_string(),
            balanced.set_aside(SetAside::Dropped).to_string(),
        ),
        (
            "silverline.pending".to_string(),
            balanced.set_aside(SetAside::Pending).to_string(),
        ),
    ]);
    let tx = Transaction::new(&table);
    let append = tx
        .fast_append()
        .add_data_files(balanced.into_data_files())
        .set_snapshot_properties(properties);
    let tx = append
        .apply(tx)
        .map_err(Error::catalog("commit", &target))?;
    let committed = tx
        .commit(catalog.as_ref())
        .await
        .map_err(Error::catalog("commit", &target))?;
    let snapshot = committed_snapshot(&committed, run_key).ok_or_else(|| {
        Error::Internal(format!(
            "commit to {target} left no snapshot with run key {run_key}"
        ))
    })?;
    Ok(Committed::Snapshot(snapshot))
}
