//! Table maintenance: `silverline maintain` expires the snapshots of Silver and
//! of the exception store that are older than a retention, keeping everything
//! idempotency needs. What proves a run committed is the ledger (table
//! properties, see [`crate::infra::ledger`]), which expiry does not touch;
//! runs committed before the ledger existed get their entries in the same
//! commit that expires their snapshots, so no proof is ever lost.

use std::sync::Arc;

use iceberg::table::Table;
use iceberg::transaction::{ApplyTransactionAction, Transaction};
use iceberg::{Catalog, TableIdent};

use crate::config::Plan;
use crate::error::{Error, Result};
use crate::infra::catalog::exceptions_ident;
use crate::infra::catalog::{connect, table_ident};
use crate::infra::ledger::{ledger_key, ledger_value, unledgered_runs};
use crate::infra::storage::{Location, Stores};
use crate::pipeline::claim::marker_place;

/// How much history to keep.
#[derive(Debug, Clone, Copy)]
pub struct Retention {
    /// Snapshots older than this many days are expired.
    pub older_than_days: u32,
    /// The newest snapshots kept whatever their age (at least 1).
    pub retain_last: usize,
}

/// What maintenance did to one table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableMaintained {
    /// The table.
    pub table: String,
    /// Snapshots before.
    pub before: usize,
    /// Snapshots expired.
    pub expired: usize,
    /// Ledger entries added for runs committed before the ledger.
    pub ledgered: usize,
}

/// Expires old snapshots of Silver and of the exception store.
pub async fn maintain(plan: &Plan, retention: Retention) -> Result<Vec<TableMaintained>> {
    if retention.retain_last == 0 {
        return Err(Error::Usage {
            arg: "--retain-last".to_string(),
            reason: "at least the newest snapshot is kept: use 1 or more".to_string(),
        });
    }
    let stores = Stores::new(&plan.storage, plan.catalog.warehouse()).await?;
    let dq_error = stores.open(&plan.storage.dq_error, "storage.dq_error")?;
    let catalog = connect(&plan.catalog, &stores).await?;
    let mut done = Vec::new();
    for ident in [table_ident(&plan.table), exceptions_ident(plan)] {
        let exists = catalog
            .table_exists(&ident)
            .await
            .map_err(Error::catalog("table-exists", ident.to_string()))?;
        if exists {
            done.push(maintain_table(&catalog, &ident, (&dq_error, retention)).await?);
        }
    }
    Ok(done)
}

async fn maintain_table(
    catalog: &Arc<dyn Catalog>,
    ident: &TableIdent,
    (dq_error, retention): (&Location, Retention),
) -> Result<TableMaintained> {
    let target = ident.to_string();
    let table = catalog
        .load_table(ident)
        .await
        .map_err(Error::catalog("load-table", &target))?;
    let before = table.metadata().snapshots().count();
    let (tx, ledgered) = with_ledger_entries(&table, dq_error).await?;
    let cutoff = chrono::Utc::now() - chrono::Duration::days(i64::from(retention.older_than_days));
    let expire = tx
        .expire_snapshots()
        .expire_older_than_ms(cutoff.timestamp_millis())
        .retain_last(retention.retain_last);
    let tx = expire
        .apply(tx)
        .map_err(Error::catalog("expire-snapshots", &target))?;
    let after = tx
        .commit(catalog.as_ref())
        .await
        .map_err(Error::catalog("expire-snapshots", &target))?;
    let expired = before.saturating_sub(after.metadata().snapshots().count());
    tracing::info!(table = %target, before, expired, ledgered, "snapshots expired");
    Ok(TableMaintained {
        table: target,
        before,
        expired,
        ledgered,
    })
}

/// A transaction on `table` that first adds the ledger entries of runs known
/// only from their snapshots, each with the run date of its claim marker (the
/// snapshot's date when it has none); returns it and how many entries it adds.
async fn with_ledger_entries(table: &Table, dq_error: &Location) -> Result<(Transaction, usize)> {
    let target = table.identifier().to_string();
    let missing = unledgered_runs(table);
    let tx = Transaction::new(table);
    if missing.is_empty() {
        return Ok((tx, 0));
    }
    let mut update = tx.update_table_properties();
    for (run_key, from_snapshot) in &missing {
        let place = marker_place(dq_error, run_key).await?;
        let place = place.as_ref().unwrap_or(from_snapshot);
        update = update.set(ledger_key(run_key), ledger_value(place)?);
    }
    let tx = update
        .apply(tx)
        .map_err(Error::catalog("set-properties", &target))?;
    Ok((tx, missing.len()))
}
