//! The Iceberg catalog that holds Silver, and the Silver table itself:
//! connecting (REST in production, SQLite SQL catalog for the embedded
//! default), and creating the table from the contract on the first run.

use std::collections::HashMap;
use std::sync::Arc;

use iceberg::spec::{Schema, Transform, UnboundPartitionSpec};
use iceberg::table::Table;
use iceberg::transaction::{ApplyTransactionAction, Transaction};
use iceberg::{Catalog, CatalogBuilder, NamespaceIdent, TableCreation, TableIdent};
use iceberg_catalog_rest::RestCatalogBuilder;
use iceberg_catalog_sql::SqlCatalogBuilder;
use iceberg_storage_opendal::OpenDalResolvingStorageFactory;

use crate::config::Plan;
use crate::config::plan::{CatalogSpec, PartitionTransform, TableSpec};
use crate::error::{Error, Result};
use crate::infra::storage::Stores;

/// Connects to the catalog the plan names; its FileIO uses the same S3 settings and identity as `stores`.
pub async fn connect(spec: &CatalogSpec, stores: &Stores) -> Result<Arc<dyn Catalog>> {
    let mut props: HashMap<String, String> =
        stores.fileio_properties().await?.into_iter().collect();
    props.insert("warehouse".to_string(), spec.warehouse().to_string());
    let storage = Arc::new(OpenDalResolvingStorageFactory::new());
    match spec {
        CatalogSpec::Sql { uri, name, .. } => {
            create_sqlite_folder(uri)?;
            props.insert("uri".to_string(), uri.clone());
            props.insert("sql_bind_style".to_string(), "QMark".to_string());
            let catalog = SqlCatalogBuilder::default()
                .with_storage_factory(storage)
                .load(name, props)
                .await
                .map_err(Error::catalog("connect", format!("catalog.uri {uri}")))?;
            Ok(Arc::new(catalog))
        }
        CatalogSpec::Rest {
            uri,
            credential_env,
            token_env,
            properties,
            name,
            ..
        } => {
            props.extend(properties.iter().cloned());
            props.insert("uri".to_string(), uri.clone());
            for (key, variable) in [("credential", credential_env), ("token", token_env)] {
                if let Ok(secret) = std::env::var(variable) {
                    props.insert(key.to_string(), secret);
                }
            }
            let catalog = RestCatalogBuilder::default()
                .with_storage_factory(storage)
                .load(name, props)
                .await
                .map_err(Error::catalog("connect", format!("catalog.uri {uri}")))?;
            Ok(Arc::new(catalog))
        }
    }
}

fn create_sqlite_folder(uri: &str) -> Result<()> {
    let Some(path) = uri.strip_prefix("sqlite://") else {
        return Ok(());
    };
    let path = std::path::Path::new(path.split('?').next().unwrap_or(path));
    match path.parent() {
        Some(folder) if !folder.as_os_str().is_empty() => {
            std::fs::create_dir_all(folder).map_err(|source| Error::Io {
                path: folder.to_path_buf(),
                source,
            })
        }
        _ => Ok(()),
    }
}

/// The Silver table's identifier.
pub fn table_ident(spec: &TableSpec) -> TableIdent {
    TableIdent::new(
        NamespaceIdent::new(spec.namespace.clone()),
        spec.name.clone(),
    )
}

/// How many times loading or creating Silver is tried: when many runs create the
/// namespace and table at once, a catalog may answer some of them with errors
/// until the winner's creation is visible.
const CREATE_ATTEMPTS: u32 = 5;

/// Loads the Silver table, creating its namespace and the table from the contract if missing.
pub async fn load_or_create_silver(catalog: &dyn Catalog, plan: &Plan) -> Result<Table> {
    let ident = table_ident(&plan.table);
    load_or_create_table(catalog, &ident, &|| table_creation(plan), "dataset.columns").await
}

/// How to create a table: called for each attempt (a creation is used up).
pub type MakeCreation<'a> = &'a (dyn Fn() -> iceberg::Result<TableCreation> + Sync);

/// Loads a table silverline owns, creating its namespace and the table from
/// `creation` if missing; a table found with another schema is an error naming
/// `setting`. Retried, for runs that create the table at the same moment.
pub async fn load_or_create_table(
    catalog: &dyn Catalog,
    ident: &TableIdent,
    creation: MakeCreation<'_>,
    setting: &str,
) -> Result<Table> {
    let mut attempt = 1;
    loop {
        match try_load_or_create_table(catalog, ident, creation, setting).await {
            Err(error @ Error::Catalog { .. }) if attempt < CREATE_ATTEMPTS => {
                tracing::warn!(attempt, table = %ident, error = %error, "loading or creating a table failed: retrying");
                tokio::time::sleep(std::time::Duration::from_millis(200 * u64::from(attempt)))
                    .await;
                attempt += 1;
            }
            outcome => return outcome,
        }
    }
}

async fn try_load_or_create_table(
    catalog: &dyn Catalog,
    ident: &TableIdent,
    creation: MakeCreation<'_>,
    setting: &str,
) -> Result<Table> {
    let target = ident.to_string();
    let creation = creation().map_err(Error::catalog("create-table", &target))?;
    let namespace = ident.namespace().clone();
    let exists = catalog
        .namespace_exists(&namespace)
        .await
        .map_err(Error::catalog("namespace-exists", &target))?;
    if !exists {
        // Another run may create it at the same moment: only a real failure counts.
        let created = catalog.create_namespace(&namespace, HashMap::new()).await;
        if created.is_err() && !catalog.namespace_exists(&namespace).await.unwrap_or(false) {
            created.map_err(Error::catalog("create-namespace", &target))?;
        }
    }
    if catalog
        .table_exists(ident)
        .await
        .map_err(Error::catalog("table-exists", &target))?
    {
        return load_table_checked(catalog, ident, &creation.schema, setting).await;
    }
    let expected = creation.schema.clone();
    match catalog.create_table(&namespace, creation).await {
        Ok(table) => Ok(table),
        Err(_) if catalog.table_exists(ident).await.unwrap_or(false) => {
            load_table_checked(catalog, ident, &expected, setting).await
        }
        Err(e) => Err(Error::catalog("create-table", &target)(e)),
    }
}

/// Silverline retries Silver commits itself, re-checking the run key each time
/// (see `pipeline::commit`); Iceberg's blind re-apply must stay off.
const NO_ICEBERG_RETRIES: (&str, &str) = ("commit.retry.num-retries", "0");

/// Turns Iceberg's own commit retries off on a Silver table created elsewhere.
async fn disable_iceberg_retries(catalog: &dyn Catalog, table: Table) -> Result<Table> {
    let (key, value) = NO_ICEBERG_RETRIES;
    if table.metadata().properties().get(key).map(String::as_str) == Some(value) {
        return Ok(table);
    }
    let target = table.identifier().to_string();
    let tx = Transaction::new(&table);
    let update = tx
        .update_table_properties()
        .set(key.to_string(), value.to_string());
    let tx = update
        .apply(tx)
        .map_err(Error::catalog("set-properties", &target))?;
    tx.commit(catalog)
        .await
        .map_err(Error::catalog("set-properties", &target))
}

/// Loads the Silver table and checks that its schema is the contract.
pub async fn load_silver(catalog: &dyn Catalog, plan: &Plan) -> Result<Table> {
    let ident = table_ident(&plan.table);
    let schema = plan
        .contract
        .iceberg_schema()
        .map_err(Error::catalog("load-table", ident.to_string()))?;
    load_table_checked(catalog, &ident, &schema, "dataset.columns").await
}

/// Loads a table silverline owns and checks its columns against `expected`.
async fn load_table_checked(
    catalog: &dyn Catalog,
    ident: &TableIdent,
    expected: &Schema,
    setting: &str,
) -> Result<Table> {
    let table = catalog
        .load_table(ident)
        .await
        .map_err(Error::catalog("load-table", ident.to_string()))?;
    check_schema(&table, expected, setting)?;
    disable_iceberg_retries(catalog, table).await
}

fn check_schema(table: &Table, expected: &Schema, setting: &str) -> Result<()> {
    let columns = |schema: &Schema| -> Vec<String> {
        schema
            .as_struct()
            .fields()
            .iter()
            .map(|f| format!("{} {}", f.name, f.field_type))
            .collect()
    };
    let (actual, expected) = (
        columns(table.metadata().current_schema()),
        columns(expected),
    );
    if actual == expected {
        return Ok(());
    }
    Err(Error::ConfigInvalid {
        path: setting.into(),
        problems: vec![format!(
            "table {} has columns [{}] but silverline expects [{}]",
            table.identifier(),
            actual.join(", "),
            expected.join(", ")
        )],
    })
}

fn table_creation(plan: &Plan) -> iceberg::Result<TableCreation> {
    let schema = plan.contract.iceberg_schema()?;
    let mut spec = UnboundPartitionSpec::builder();
    for (column, transform) in &plan.table.partition {
        let source_id = schema.field_by_name(column).map(|f| f.id).ok_or_else(|| {
            iceberg::Error::new(
                iceberg::ErrorKind::DataInvalid,
                format!("no column {column}"),
            )
        })?;
        let (transform, suffix) = match transform {
            PartitionTransform::Identity => (Transform::Identity, ""),
            PartitionTransform::Year => (Transform::Year, "_year"),
            PartitionTransform::Month => (Transform::Month, "_month"),
            PartitionTransform::Day => (Transform::Day, "_day"),
        };
        spec = spec.add_partition_field(source_id, format!("{column}{suffix}"), transform)?;
    }
    Ok(TableCreation::builder()
        .name(plan.table.name.clone())
        .schema(schema)
        .partition_spec(spec.build())
        .properties(owned_table_properties())
        .build())
}

/// Properties of every table silverline creates: Iceberg's own commit retries
/// off, since silverline retries commits itself, re-checking the run key.
pub fn owned_table_properties() -> HashMap<String, String> {
    HashMap::from([(
        NO_ICEBERG_RETRIES.0.to_string(),
        NO_ICEBERG_RETRIES.1.to_string(),
    )])
}
