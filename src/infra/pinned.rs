//! A catalog view that commits only on the table state the caller checked.
//!
//! iceberg-rust's `Transaction::commit` reloads the table and re-applies its
//! actions on whatever it finds, even on the first attempt. silverline checks
//! a table for its run key before it appends; if another run committed in
//! between, that re-apply would add the same rows a second time. Committing
//! through [`PinnedCatalog`] refuses (as a commit conflict) any commit made
//! when the table's current snapshot is no longer the one checked; the
//! catalog's own atomic check then covers the moment of the write.
//!
//! It can also answer for the table with a state the caller built
//! ([`PinnedCatalog::serving`]): a transaction then derives its updates from
//! that state, which is how a schema update beyond what iceberg-rust's
//! actions offer is committed (see [`crate::infra::evolve`]).

use std::collections::HashMap;

use async_trait::async_trait;
use iceberg::table::Table;
use iceberg::{
    Catalog, Error, ErrorKind, Namespace, NamespaceIdent, Result, TableCommit, TableCreation,
    TableIdent,
};

/// `inner`, with commits pinned to the snapshot `base` (None: an empty table).
#[derive(Debug)]
pub struct PinnedCatalog<'a> {
    inner: &'a dyn Catalog,
    base: Option<i64>,
    /// What `load_table` answers for this table instead of loading it.
    serves: Option<Table>,
}

impl<'a> PinnedCatalog<'a> {
    /// Pins commits to `table`'s current snapshot.
    pub fn on(inner: &'a dyn Catalog, table: &Table) -> PinnedCatalog<'a> {
        PinnedCatalog {
            inner,
            base: table.metadata().current_snapshot_id(),
            serves: None,
        }
    }

    /// Pins commits to `table`'s current snapshot, and answers a load of
    /// `table` with `state`: iceberg-rust's `Transaction::commit` reloads the
    /// table and derives its updates from what it loads, so a transaction
    /// begun on `state` commits the updates its actions derive from `state`.
    pub(crate) fn serving(
        inner: &'a dyn Catalog,
        table: &Table,
        state: Table,
    ) -> PinnedCatalog<'a> {
        PinnedCatalog {
            serves: Some(state),
            ..PinnedCatalog::on(inner, table)
        }
    }
}

#[async_trait]
impl Catalog for PinnedCatalog<'_> {
    async fn update_table(&self, commit: TableCommit) -> Result<Table> {
        let current = self.inner.load_table(commit.identifier()).await?;
        if current.metadata().current_snapshot_id() != self.base {
            return Err(Error::new(
                ErrorKind::CatalogCommitConflicts,
                format!(
                    "{} moved since it was checked (snapshot {:?}, now {:?})",
                    commit.identifier(),
                    self.base,
                    current.metadata().current_snapshot_id()
                ),
            )
            .with_retryable(true));
        }
        self.inner.update_table(commit).await
    }

    async fn list_namespaces(
        &self,
        parent: Option<&NamespaceIdent>,
    ) -> Result<Vec<NamespaceIdent>> {
        self.inner.list_namespaces(parent).await
    }

    async fn create_namespace(
        &self,
        namespace: &NamespaceIdent,
        properties: HashMap<String, String>,
    ) -> Result<Namespace> {
        self.inner.create_namespace(namespace, properties).await
    }

    async fn get_namespace(&self, namespace: &NamespaceIdent) -> Result<Namespace> {
        self.inner.get_namespace(namespace).await
    }

    async fn namespace_exists(&self, namespace: &NamespaceIdent) -> Result<bool> {
        self.inner.namespace_exists(namespace).await
    }

    async fn update_namespace(
        &self,
        namespace: &NamespaceIdent,
        properties: HashMap<String, String>,
    ) -> Result<()> {
        self.inner.update_namespace(namespace, properties).await
    }

    async fn drop_namespace(&self, namespace: &NamespaceIdent) -> Result<()> {
        self.inner.drop_namespace(namespace).await
    }

    async fn list_tables(&self, namespace: &NamespaceIdent) -> Result<Vec<TableIdent>> {
        self.inner.list_tables(namespace).await
    }

    async fn create_table(
        &self,
        namespace: &NamespaceIdent,
        creation: TableCreation,
    ) -> Result<Table> {
        self.inner.create_table(namespace, creation).await
    }

    async fn load_table(&self, table: &TableIdent) -> Result<Table> {
        match &self.serves {
            Some(state) if state.identifier() == table => Ok(state.clone()),
            _ => self.inner.load_table(table).await,
        }
    }

    async fn drop_table(&self, table: &TableIdent) -> Result<()> {
        self.inner.drop_table(table).await
    }

    async fn purge_table(&self, table: &TableIdent) -> Result<()> {
        self.inner.purge_table(table).await
    }

    async fn table_exists(&self, table: &TableIdent) -> Result<bool> {
        self.inner.table_exists(table).await
    }

    async fn rename_table(&self, src: &TableIdent, dest: &TableIdent) -> Result<()> {
        self.inner.rename_table(src, dest).await
    }

    async fn register_table(&self, table: &TableIdent, metadata_location: String) -> Result<Table> {
        self.inner.register_table(table, metadata_location).await
    }
}
