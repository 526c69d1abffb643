//! The run's connections and tables, opened once.

use std::sync::Arc;

use iceberg::Catalog;
use iceberg::table::Table;

use crate::config::Plan;
use crate::core::drop::DropRef;
use crate::error::{Error, Result};
use crate::infra::catalog::{connect, load_or_create_silver, table_ident};
use crate::infra::storage::{Location, Stores};

/// The run's connections and table, opened once.
pub(crate) struct Context<'a> {
    pub(crate) plan: &'a Plan,
    pub(crate) drop: &'a DropRef,
    pub(crate) stores: Stores,
    pub(crate) bronze: Location,
    /// The dq_error root: claims, other runs' records, the exception files.
    pub(crate) dq_error: Location,
    /// Where this run writes its dq_error files: `dq_error`, or for a dry
    /// run a scratch store that vanishes with it (invariant 12).
    pub(crate) dq_out: Location,
    pub(crate) catalog: Arc<dyn Catalog>,
    pub(crate) silver: Table,
}

/// Opens everything a run of `drop` needs; a dry run's dq_error writes go to a scratch store.
pub(super) async fn open<'a>(
    plan: &'a Plan,
    drop: &'a DropRef,
    dry_run: bool,
) -> Result<Context<'a>> {
    let stores = Stores::new(&plan.storage, plan.catalog.warehouse()).await?;
    let bronze = stores.open(&plan.storage.bronze, "storage.bronze")?;
    let dq_error = stores.open(&plan.storage.dq_error, "storage.dq_error")?;
    let dq_out = if dry_run {
        stores.open("memory:///", "dry run scratch")?
    } else {
        dq_error.clone()
    };
    let catalog = connect(&plan.catalog, &stores).await?;
    let silver = load_or_create_silver(catalog.as_ref(), plan).await?;
    Ok(Context {
        plan,
        drop,
        stores,
        bronze,
        dq_error,
        dq_out,
        catalog,
        silver,
    })
}

/// Silver as it is now.
pub(super) async fn reload_silver(context: &Context<'_>) -> Result<Table> {
    let ident = table_ident(&context.plan.table);
    context
        .catalog
        .load_table(&ident)
        .await
        .map_err(Error::catalog("load-table", ident.to_string()))
}
