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
    check_codecs, connect, connect_for_dry_run, load_or_create_silver, load_silver_if_any,
    table_creation, table_ident,
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
    /// A dry run's scratch store: a folder of the scratch folder (not
    /// memory: a drop's rows set aside are as many as its rows), deleted
    /// with the context.
    _dry_run_dq: Option<tempfile::TempDir>,
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
    let (dq_out, dry_run_dq) = if dry_run {
        let folder = dry_run_folder(plan, "dq-error")?;
        let io = |source| Error::Io {
            path: folder.path().to_path_buf(),
            source,
        };
        // Canonical: the store writes where the folder deleted is.
        let path = std::fs::canonicalize(folder.path()).map_err(io)?;
        let url = url::Url::from_directory_path(&path)
            .map_err(|()| io(std::io::Error::other("not an absolute local folder")))?;
        (stores.open(url.as_str(), "dry run scratch")?, Some(folder))
    } else {
        (dq_error.clone(), None)
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
    check_codecs(catalog.as_ref(), plan, &table).await?;
    Ok(Context {
        plan,
        drop,
        stores,
        bronze,
        dq_error,
        dq_out,
        _dry_run_dq: dry_run_dq,
        catalog,
        silver: table,
        evolution,
        memory,
    })
}

/// A new folder `silverline-dry-run-<what>-*` of the scratch folder
/// (`[resources] scratch_dir`, else the system's temporary folder), where
/// a dry run writes what a run would store (its dq_error files, its Silver
/// data files); deleted when dropped.
pub(super) fn dry_run_folder(plan: &Plan, what: &str) -> Result<tempfile::TempDir> {
    let parent = crate::core::spill::scratch_folder(plan.resources.scratch_dir.as_deref());
    tempfile::Builder::new()
        .prefix(&format!("silverline-dry-run-{what}-"))
        .tempdir_in(&parent)
        .map_err(|source| Error::Io {
            path: parent,
            source,
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The folders of `dir`'s whose names start with `prefix`.
    fn folders(dir: &std::path::Path, prefix: &str) -> Vec<std::path::PathBuf> {
        std::fs::read_dir(dir)
            .unwrap()
            .map(|entry| entry.unwrap().path())
            .filter(|path| {
                let name = path.file_name().unwrap().to_string_lossy();
                name.starts_with(prefix)
            })
            .collect()
    }

    #[tokio::test]
    async fn a_dry_run_writes_its_dq_error_files_to_the_scratch_folder_and_leaves_none() {
        let scratch = tempfile::tempdir().unwrap();
        let mut plan =
            crate::config::load_plan(std::path::Path::new("config/credit_statements.toml"))
                .expect("the shipped config");
        plan.resources.scratch_dir = Some(scratch.path().to_path_buf());
        let bank_a = DropRef::new("BANK_A", "2026-01").unwrap();
        let context = open(&plan, &bank_a, true).await.unwrap();
        // Not memory: a drop's rows set aside are as many as its rows.
        context
            .dq_out
            .put("quarantine/rows.csv", b"a,b\n".to_vec())
            .await
            .unwrap();
        let made = folders(scratch.path(), "silverline-dry-run-dq-error-");
        let [folder] = made.as_slice() else {
            panic!("one dry-run folder in the scratch folder: {made:?}");
        };
        assert_eq!(
            std::fs::read(folder.join("quarantine/rows.csv")).unwrap(),
            b"a,b\n"
        );
        drop(context);
        assert!(!folder.exists(), "deleted with the run's context");
    }
}
