//! The run's connections and tables, opened once.

use std::sync::Arc;

use iceberg::Catalog;
use iceberg::io::FileIO;
use iceberg::spec::TableMetadataBuilder;
use iceberg::table::Table;

use crate::config::Plan;
use crate::core::drop::DropRef;
use crate::core::sql::QueryMemory;
use crate::error::{Error, Result};
use crate::infra::catalog::{
    connect, connect_for_dry_run, load_or_create_silver, load_silver_if_any, table_creation,
    table_ident,
};
use crate::infra::evolve::{EvolvedTable, SchemaEvolution};
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
    /// Silver; for a dry run as it is, never created nor altered: a table
    /// not there yet is an empty one in memory, a schema the contract
    /// evolves is evolved in memory only (invariant 12).
    pub(crate) silver: Table,
    /// What the contract changed in Silver's schema as the run opened it
    /// (for a dry run: would change).
    pub(crate) evolution: Option<SchemaEvolution>,
    /// The memory pool and spill folder the run's queries share.
    pub(crate) memory: QueryMemory,
}

/// Opens everything a run of `drop` needs, evolving Silver's schema to the
/// contract's; a dry run's dq_error writes go to a scratch store, and it
/// creates no catalog, namespace or table, changes no schema and sets no
/// table property.
pub(super) async fn open<'a>(
    plan: &'a Plan,
    drop: &'a DropRef,
    dry_run: bool,
) -> Result<Context<'a>> {
    let memory = plan.query_memory()?;
    let stores = Stores::new(&plan.storage, plan.catalog.warehouse()).await?;
    let bronze = stores.open(&plan.storage.bronze, "storage.bronze")?;
    let dq_error = stores.open(&plan.storage.dq_error, "storage.dq_error")?;
    let dq_out = if dry_run {
        stores.open("memory:///", "dry run scratch")?
    } else {
        dq_error.clone()
    };
    let (catalog, EvolvedTable { table, evolution }) = if dry_run {
        let catalog = connect_for_dry_run(&plan.catalog, &stores).await?;
        let silver = match load_silver_if_any(catalog.as_ref(), plan).await? {
            Some(silver) => silver,
            None => EvolvedTable {
                table: empty_silver(plan)?,
                evolution: None,
            },
        };
        (catalog, silver)
    } else {
        let catalog = connect(&plan.catalog, &stores).await?;
        let silver = load_or_create_silver(catalog.as_ref(), plan).await?;
        (catalog, silver)
    };
    Ok(Context {
        plan,
        drop,
        stores,
        bronze,
        dq_error,
        dq_out,
        catalog,
        silver: table,
        evolution,
        memory,
    })
}

/// Silver as the contract would create it, with no snapshot, in memory: what
/// a dry run judges against before the first run created the table.
fn empty_silver(plan: &Plan) -> Result<Table> {
    let ident = table_ident(&plan.table);
    let target = ident.to_string();
    let mut creation = table_creation(plan).map_err(Error::catalog("create-table", &target))?;
    creation.location = Some(format!(
        "memory:///dry-run/{}/{}",
        ident.namespace().join("/"),
        ident.name()
    ));
    let metadata = TableMetadataBuilder::from_table_creation(creation)
        .and_then(|builder| builder.build())
        .map_err(Error::catalog("create-table", &target))?
        .metadata;
    Table::builder()
        .metadata(metadata)
        .identifier(ident)
        .file_io(FileIO::new_with_memory())
        .runtime(iceberg::Runtime::try_current().map_err(Error::catalog("create-table", &target))?)
        .readonly(true)
        .build()
        .map_err(Error::catalog("create-table", &target))
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
