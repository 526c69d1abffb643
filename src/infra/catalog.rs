//! The Iceberg catalog that holds Silver, and the Silver table itself:
//! connecting (REST in production, SQLite SQL catalog for the embedded
//! default), creating the table from the contract on the first run, and
//! evolving its schema to the contract's on later ones ([`evolve`]).

use std::collections::HashMap;
use std::sync::Arc;

use iceberg::spec::{Schema, UnboundPartitionSpec};
use iceberg::table::Table;
use iceberg::transaction::{ApplyTransactionAction, Transaction};
use iceberg::{Catalog, CatalogBuilder, NamespaceIdent, TableCreation, TableIdent};
use iceberg_catalog_rest::RestCatalogBuilder;
use iceberg_catalog_sql::SqlCatalogBuilder;
use iceberg_storage_opendal::OpenDalResolvingStorageFactory;
use parquet::basic::{BrotliLevel, Compression, GzipLevel, ZstdLevel};
use parquet::errors::ParquetError;

use crate::config::Plan;
use crate::config::plan::{CatalogSpec, TableSpec};
use crate::error::{Error, Result};
use crate::infra::evolve::{self, EvolvedTable, SchemaEvolution};
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

/// Connects for a dry run, which must create nothing: a SQLite catalog whose
/// database file does not exist yet is not created; the run sees an empty
/// in-memory catalog instead (no namespace, no table).
pub(crate) async fn connect_for_dry_run(
    spec: &CatalogSpec,
    stores: &Stores,
) -> Result<Arc<dyn Catalog>> {
    let missing = match spec {
        CatalogSpec::Sql { uri, .. } => sqlite_file(uri).is_some_and(|path| !path.exists()),
        CatalogSpec::Rest { .. } => false,
    };
    if !missing {
        return connect(spec, stores).await;
    }
    memory_catalog("dry-run").await
}

/// An empty catalog in memory named `name`, its warehouse `memory:///<name>`.
pub(crate) async fn memory_catalog(name: &str) -> Result<Arc<dyn Catalog>> {
    let catalog = iceberg::memory::MemoryCatalogBuilder::default()
        .load(
            name,
            HashMap::from([(
                iceberg::memory::MEMORY_CATALOG_WAREHOUSE.to_string(),
                format!("memory:///{name}"),
            )]),
        )
        .await
        .map_err(Error::catalog(
            "connect",
            format!("in-memory catalog {name}"),
        ))?;
    Ok(Arc::new(catalog))
}

/// The database file of a `sqlite://` catalog URI; `None` for another
/// database or an in-memory one.
pub(crate) fn sqlite_file(uri: &str) -> Option<&std::path::Path> {
    let rest = uri.strip_prefix("sqlite://")?;
    let path = rest.split('?').next().unwrap_or(rest);
    (!path.contains(":memory:")).then(|| std::path::Path::new(path))
}

fn create_sqlite_folder(uri: &str) -> Result<()> {
    let Some(path) = sqlite_file(uri) else {
        return Ok(());
    };
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

/// The exception store's identifier.
pub(crate) fn exceptions_ident(plan: &Plan) -> TableIdent {
    TableIdent::new(
        NamespaceIdent::new(plan.exceptions.namespace.clone()),
        plan.exceptions.name.clone(),
    )
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

/// Loads the Silver table, creating its namespace and the table from the
/// contract if missing, and evolves its schema to the contract's (its own
/// commit; an incompatible contract is refused: see [`evolve`]).
pub(crate) async fn load_or_create_silver(
    catalog: &dyn Catalog,
    plan: &Plan,
) -> Result<EvolvedTable> {
    let ident = table_ident(&plan.table);
    let table = load_or_create_table(
        catalog,
        plan,
        &ident,
        &|| table_creation(plan),
        Columns::Contract,
    )
    .await?;
    evolve::evolve(catalog, plan, table).await
}

/// What the columns of a table found in the catalog must be.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Columns<'a> {
    /// Exactly those it is created with; a difference is a configuration
    /// error naming this setting.
    Exactly(&'a str),
    /// Silver's: the contract's, or columns the contract evolves compatibly
    /// (see [`evolve`]); an incompatible difference is refused.
    Contract,
}

/// How to create a table: called for each attempt (a creation is used up).
pub(crate) type MakeCreation<'a> = &'a (dyn Fn() -> iceberg::Result<TableCreation> + Sync);

/// Loads a table silverline owns, creating its namespace and the table from
/// `creation` if missing; a table found with other `columns` is refused, and
/// the properties `creation` sets are added to a table that lacks them.
/// Creating is refused when the table's location already holds Iceberg
/// metadata (a catalog that lost the table: see [`adopt_tables`]).
/// Retried, for runs that create the table at the same moment.
pub(crate) async fn load_or_create_table(
    catalog: &dyn Catalog,
    plan: &Plan,
    ident: &TableIdent,
    creation: MakeCreation<'_>,
    columns: Columns<'_>,
) -> Result<Table> {
    let mut attempt = 1;
    loop {
        match try_load_or_create_table(catalog, plan, ident, creation, columns).await {
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

/// What a table silverline owns must look like: its columns and the
/// properties it is created with.
struct Wanted<'a> {
    schema: &'a Schema,
    properties: &'a HashMap<String, String>,
    /// How its columns are checked.
    columns: Columns<'a>,
}

async fn try_load_or_create_table(
    catalog: &dyn Catalog,
    plan: &Plan,
    ident: &TableIdent,
    creation: MakeCreation<'_>,
    columns: Columns<'_>,
) -> Result<Table> {
    let target = ident.to_string();
    let creation = creation().map_err(Error::catalog("create-table", &target))?;
    let (schema, properties) = (creation.schema.clone(), creation.properties.clone());
    let wanted = Wanted {
        schema: &schema,
        properties: &properties,
        columns,
    };
    ensure_namespace(catalog, ident.namespace(), &target).await?;
    if catalog
        .table_exists(ident)
        .await
        .map_err(Error::catalog("table-exists", &target))?
    {
        return load_table_checked(catalog, plan, ident, &wanted).await;
    }
    let location = default_location(catalog, plan, ident).await?;
    let found = existing_metadata(plan, &location).await?;
    if !found.is_empty() {
        if appeared_meanwhile(catalog, ident).await {
            return load_table_checked(catalog, plan, ident, &wanted).await;
        }
        return Err(fork_refused(plan, ident, &location, &found));
    }
    match catalog.create_table(ident.namespace(), creation).await {
        Ok(table) => {
            tracing::info!(
                table = %ident,
                location = %table.metadata().location(),
                catalog = %plan.catalog,
                "created the table: it was not in the catalog and its location held no Iceberg metadata"
            );
            Ok(table)
        }
        Err(_) if catalog.table_exists(ident).await.unwrap_or(false) => {
            load_table_checked(catalog, plan, ident, &wanted).await
        }
        Err(e) => Err(Error::catalog("create-table", &target)(e)),
    }
}

/// Creates `namespace` unless it exists; another run may create it at the
/// same moment, so only a real failure counts.
async fn ensure_namespace(
    catalog: &dyn Catalog,
    namespace: &NamespaceIdent,
    target: &str,
) -> Result<()> {
    let exists = catalog
        .namespace_exists(namespace)
        .await
        .map_err(Error::catalog("namespace-exists", target))?;
    if !exists {
        let created = catalog.create_namespace(namespace, HashMap::new()).await;
        if created.is_err() && !catalog.namespace_exists(namespace).await.unwrap_or(false) {
            created.map_err(Error::catalog("create-namespace", target))?;
        }
    }
    Ok(())
}

/// Iceberg's per-column metrics mode, `write.metadata.metrics.column.<name>`:
/// `none` (or `counts`) means no lower/upper bound of the column in manifests.
pub const METRICS_COLUMN_PREFIX: &str = "write.metadata.metrics.column.";

/// Iceberg's codec of Parquet data files (`zstd` when unset, as Iceberg's).
pub const PARQUET_CODEC: &str = "write.parquet.compression-codec";

/// Iceberg's level of that codec (the codec's default when unset).
pub const PARQUET_CODEC_LEVEL: &str = "write.parquet.compression-level";

/// The codecs [`PARQUET_CODEC`] may name.
const PARQUET_CODECS: &str = "uncompressed, snappy, lz4, zstd, gzip, brotli";

/// How `table`'s Parquet data files are compressed: Iceberg's
/// [`PARQUET_CODEC`] at [`PARQUET_CODEC_LEVEL`] (`lz4` is written as
/// LZ4_RAW, the Parquet format's current LZ4; a level given to a codec
/// that takes none is ignored, as Iceberg does).
pub(crate) fn parquet_compression(table: &Table) -> Result<Compression> {
    compression_in(
        table.metadata().properties(),
        &table.identifier().to_string(),
    )
}

/// Refuses, before anything is read, a run whose tables name a codec or
/// level silverline cannot write ([`parquet_compression`]): Silver's, and
/// the exception store's when it exists (written after Silver's commit,
/// where a refusal would come too late).
pub(crate) async fn check_codecs(catalog: &dyn Catalog, plan: &Plan, silver: &Table) -> Result<()> {
    parquet_compression(silver)?;
    if let (_, Some(exceptions)) = load_if_exists(catalog, &exceptions_ident(plan)).await? {
        parquet_compression(&exceptions)?;
    }
    Ok(())
}

/// The codec of a table's Parquet data files when its properties name none:
/// zstd, Iceberg's default codec, at the parquet crate's default level.
pub(crate) fn default_compression() -> Compression {
    Compression::ZSTD(ZstdLevel::default())
}

/// [`parquet_compression`] of a table named `table` with `properties`.
fn compression_in(properties: &HashMap<String, String>, table: &str) -> Result<Compression> {
    let invalid = |property, value: &str, reason: String| Error::TableProperty {
        table: table.to_string(),
        property,
        value: value.to_string(),
        reason,
    };
    let codec = properties.get(PARQUET_CODEC).map_or("zstd", |c| c.trim());
    // A codec that takes a level: the one named, else `default`.
    let leveled = |make: &dyn Fn(i64) -> std::result::Result<Compression, ParquetError>,
                   default: Compression| {
        let Some(text) = properties.get(PARQUET_CODEC_LEVEL).map(|l| l.trim()) else {
            return Ok(default);
        };
        let bad = |reason| invalid(PARQUET_CODEC_LEVEL, text, reason);
        let level: i64 = text
            .parse()
            .map_err(|_| bad(format!("not a whole number, a level of {codec}")))?;
        make(level).map_err(|error| bad(format!("not a level of {codec}: {error}")))
    };
    // Out of the type's range: a level every codec refuses.
    let small = |level: i64| i32::try_from(level).unwrap_or(i32::MAX);
    let unsigned = |level: i64| u32::try_from(level).unwrap_or(u32::MAX);
    match codec.to_ascii_lowercase().as_str() {
        "uncompressed" | "none" => Ok(Compression::UNCOMPRESSED),
        "snappy" => Ok(Compression::SNAPPY),
        "lz4" => Ok(Compression::LZ4_RAW),
        "zstd" => leveled(
            &|level| ZstdLevel::try_new(small(level)).map(Compression::ZSTD),
            default_compression(),
        ),
        "gzip" => leveled(
            &|level| GzipLevel::try_new(unsigned(level)).map(Compression::GZIP),
            Compression::GZIP(GzipLevel::default()),
        ),
        "brotli" => leveled(
            &|level| BrotliLevel::try_new(unsigned(level)).map(Compression::BROTLI),
            Compression::BROTLI(BrotliLevel::default()),
        ),
        _ => Err(invalid(
            PARQUET_CODEC,
            codec,
            format!("not a codec silverline writes ({PARQUET_CODECS})"),
        )),
    }
}

/// Silverline retries Silver commits itself, re-checking the run key each time
/// (see `infra::append`); Iceberg's blind re-apply must stay off.
const NO_ICEBERG_RETRIES: (&str, &str) = ("commit.retry.num-retries", "0");

/// Sets on `table` every one of `properties` it lacks or holds with another
/// value (a table created elsewhere, or before a column was marked sensitive).
async fn ensure_properties(
    catalog: &dyn Catalog,
    table: Table,
    properties: &HashMap<String, String>,
) -> Result<Table> {
    let current = table.metadata().properties();
    let missing: HashMap<String, String> = properties
        .iter()
        .filter(|(key, value)| current.get(*key) != Some(*value))
        .map(|(key, value)| (key.clone(), value.clone()))
        .collect();
    if missing.is_empty() {
        return Ok(table);
    }
    let target = table.identifier().to_string();
    tracing::info!(table = %target, properties = ?missing.keys().collect::<Vec<_>>(), "setting table properties");
    let tx = Transaction::new(&table);
    let update = missing
        .into_iter()
        .fold(tx.update_table_properties(), |update, (key, value)| {
            update.set(key, value)
        });
    let tx = update
        .apply(tx)
        .map_err(Error::catalog("set-properties", &target))?;
    tx.commit(catalog)
        .await
        .map_err(Error::catalog("set-properties", &target))
}

/// Silver as a dry run sees it: loaded and checked like a run does, its
/// schema evolved to the contract's in memory only ([`evolve::preview`]),
/// neither its namespace nor the table created and no property set; `None`
/// when it does not exist yet. A location holding Iceberg metadata the
/// catalog does not know is refused, as a run refuses it.
pub(crate) async fn load_silver_if_any(
    catalog: &dyn Catalog,
    plan: &Plan,
) -> Result<Option<EvolvedTable>> {
    let ident = table_ident(&plan.table);
    let (namespace_exists, table) = load_if_exists(catalog, &ident).await?;
    if let Some(table) = table {
        return evolve::preview(plan, table).map(Some);
    }
    let location = if namespace_exists {
        default_location(catalog, plan, &ident).await?
    } else {
        format!(
            "{}/{}/{}",
            plan.catalog.warehouse().trim_end_matches('/'),
            ident.namespace().join("/"),
            ident.name()
        )
    };
    let found = existing_metadata(plan, &location).await?;
    if !found.is_empty() {
        return Err(fork_refused(plan, &ident, &location, &found));
    }
    Ok(None)
}

/// Whether the namespace of `ident` exists, and the table when it does: a
/// read that creates nothing (a dry run on a fresh project has neither).
pub(crate) async fn load_if_exists(
    catalog: &dyn Catalog,
    ident: &TableIdent,
) -> Result<(bool, Option<Table>)> {
    let target = ident.to_string();
    let namespace_exists = catalog
        .namespace_exists(ident.namespace())
        .await
        .map_err(Error::catalog("namespace-exists", &target))?;
    let table_exists = namespace_exists
        && catalog
            .table_exists(ident)
            .await
            .map_err(Error::catalog("table-exists", &target))?;
    if !table_exists {
        return Ok((namespace_exists, None));
    }
    let table = catalog
        .load_table(ident)
        .await
        .map_err(Error::catalog("load-table", &target))?;
    Ok((true, Some(table)))
}

/// Loads the Silver table and checks that its schema is the contract.
pub async fn load_silver(catalog: &dyn Catalog, plan: &Plan) -> Result<Table> {
    let ident = table_ident(&plan.table);
    let creation = table_creation(plan).map_err(Error::catalog("load-table", ident.to_string()))?;
    let wanted = Wanted {
        schema: &creation.schema,
        properties: &creation.properties,
        columns: Columns::Exactly("dataset.columns"),
    };
    load_table_checked(catalog, plan, &ident, &wanted).await
}

/// Loads a table silverline owns, checks its columns and adds missing properties.
async fn load_table_checked(
    catalog: &dyn Catalog,
    plan: &Plan,
    ident: &TableIdent,
    wanted: &Wanted<'_>,
) -> Result<Table> {
    let table = catalog
        .load_table(ident)
        .await
        .map_err(Error::catalog("load-table", ident.to_string()))?;
    match wanted.columns {
        Columns::Exactly(setting) => check_schema(&table, wanted.schema, setting)?,
        Columns::Contract => evolve::check(plan, &table)?,
    }
    ensure_properties(catalog, table, wanted.properties).await
}

/// What `check-config` found of Silver.
#[derive(Debug)]
pub(crate) enum SilverCheck {
    /// The catalog or the storage could not be reached (why): nothing compared.
    Unreachable(String),
    /// Not created yet: the first run creates it from the contract.
    Absent,
    /// Found; what the next run changes in its schema (none: it has the contract's).
    Found(Option<SchemaEvolution>),
}

/// How long `check-config` waits for the catalog before it leaves Silver uncompared.
pub(crate) const CHECK_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// Compares the contract with Silver when the catalog can be reached,
/// creating and changing nothing (not even a SQLite catalog that does not
/// exist yet). A contract Silver cannot evolve to is a configuration error.
pub(crate) async fn check_silver(plan: &Plan) -> Result<SilverCheck> {
    let found = tokio::time::timeout(CHECK_TIMEOUT, async {
        let stores = Stores::new(&plan.storage, plan.catalog.warehouse()).await?;
        let catalog = connect_for_dry_run(&plan.catalog, &stores).await?;
        let silver = load_silver_if_any(catalog.as_ref(), plan).await?;
        if let Some(silver) = &silver {
            check_codecs(catalog.as_ref(), plan, &silver.table).await?;
        }
        Ok(silver)
    })
    .await;
    match found {
        Err(_) => Ok(SilverCheck::Unreachable(format!(
            "no answer from the {} within {} s",
            plan.catalog,
            CHECK_TIMEOUT.as_secs()
        ))),
        Ok(Ok(Some(silver))) => Ok(SilverCheck::Found(silver.evolution)),
        Ok(Ok(None)) => Ok(SilverCheck::Absent),
        Ok(Err(error @ (Error::ConfigInvalid { .. } | Error::TableProperty { .. }))) => Err(error),
        Ok(Err(error)) => Ok(SilverCheck::Unreachable(error.to_string())),
    }
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

/// How Silver is created from the contract.
pub(crate) fn table_creation(plan: &Plan) -> iceberg::Result<TableCreation> {
    let schema = plan.contract.iceberg_schema()?;
    let mut spec = UnboundPartitionSpec::builder();
    for (column, transform) in &plan.table.partition {
        let source_id = schema.field_by_name(column).map(|f| f.id).ok_or_else(|| {
            iceberg::Error::new(
                iceberg::ErrorKind::DataInvalid,
                format!("no column {column}"),
            )
        })?;
        spec = spec.add_partition_field(
            source_id,
            format!("{column}{}", transform.field_suffix()),
            transform.iceberg(),
        )?;
    }
    Ok(TableCreation::builder()
        .name(plan.table.name.clone())
        .schema(schema)
        .partition_spec(spec.build())
        .properties(silver_properties(plan))
        .build())
}

/// Properties of Silver: those of every table silverline owns, and no column
/// statistics (lower/upper bounds in manifests) of the columns marked sensitive.
fn silver_properties(plan: &Plan) -> HashMap<String, String> {
    let mut properties = owned_table_properties();
    let sensitive = plan.contract.columns.iter().filter(|c| c.sensitive);
    properties.extend(sensitive.map(|c| {
        (
            format!("{METRICS_COLUMN_PREFIX}{}", c.name),
            "none".to_string(),
        )
    }));
    properties
}

/// Properties of every table silverline creates: Iceberg's own commit retries
/// off, since silverline retries commits itself, re-checking the run key.
pub(crate) fn owned_table_properties() -> HashMap<String, String> {
    HashMap::from([(
        NO_ICEBERG_RETRIES.0.to_string(),
        NO_ICEBERG_RETRIES.1.to_string(),
    )])
}

/// Where the catalog puts `ident` when it creates it without a location: the
/// namespace's `location` property if set, else
/// `<warehouse>/<namespace>/<table>` (the SQL catalog's rule; a REST catalog's
/// server decides for itself, and most use this layout).
async fn default_location(
    catalog: &dyn Catalog,
    plan: &Plan,
    ident: &TableIdent,
) -> Result<String> {
    let namespace = catalog
        .get_namespace(ident.namespace())
        .await
        .map_err(Error::catalog("get-namespace", ident.to_string()))?;
    let base = match namespace.properties().get("location") {
        Some(location) => location.trim_end_matches('/').to_string(),
        None => format!(
            "{}/{}",
            plan.catalog.warehouse().trim_end_matches('/'),
            ident.namespace().join("/")
        ),
    };
    Ok(format!("{base}/{}", ident.name()))
}

/// An Iceberg table metadata file, `<location>/metadata/<version>-<uuid>[.gz].metadata.json`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct MetadataFile {
    version: u64,
    url: String,
}

impl MetadataFile {
    /// The metadata file at `relative` (to the table location), if it is one.
    fn parse(location: &str, relative: &str) -> Option<MetadataFile> {
        let name = relative.strip_prefix("metadata/")?;
        if name.contains('/') || !name.ends_with(".metadata.json") {
            return None;
        }
        let version = name.split('-').next()?.parse().ok()?;
        Some(MetadataFile {
            version,
            url: format!("{location}/{relative}"),
        })
    }
}

/// Every table metadata file under `<location>/metadata/`, oldest version first.
/// A location that is not a URL (a REST warehouse given by name) is not looked at.
async fn metadata_files(plan: &Plan, location: &str) -> Result<Vec<MetadataFile>> {
    if !location.contains("://") {
        tracing::debug!(
            location,
            "table location is not a URL: not checked for metadata"
        );
        return Ok(Vec::new());
    }
    let stores = Stores::new(&plan.storage, plan.catalog.warehouse()).await?;
    let root = stores.open(location, "catalog.warehouse")?;
    let mut files: Vec<MetadataFile> = root
        .list("metadata")
        .await?
        .iter()
        .filter_map(|object| MetadataFile::parse(location, &object.relative))
        .collect();
    files.sort();
    Ok(files)
}

/// [`metadata_files`] before creating a table. The SQL catalog's location is
/// known, so a failed listing is an error; a REST catalog's is a guess, so a
/// failed listing there is only a warning.
async fn existing_metadata(plan: &Plan, location: &str) -> Result<Vec<MetadataFile>> {
    match (metadata_files(plan, location).await, &plan.catalog) {
        (Err(error), CatalogSpec::Rest { .. }) => {
            tracing::warn!(location, error = %error, "cannot look for Iceberg metadata at the table's likely location: creating the table without that check");
            Ok(Vec::new())
        }
        (found, _) => found,
    }
}

/// The metadata files of the highest version: one, unless commits raced and a
/// loser's file was left beside the winner's.
fn newest(files: &[MetadataFile]) -> Vec<&MetadataFile> {
    let top = files.iter().map(|f| f.version).max();
    files.iter().filter(|f| Some(f.version) == top).collect()
}

/// Whether `ident` shows up in the catalog within a moment: a run creating
/// the table writes its first metadata file just before it registers it.
async fn appeared_meanwhile(catalog: &dyn Catalog, ident: &TableIdent) -> bool {
    for _ in 0..8 {
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
        if catalog.table_exists(ident).await.unwrap_or(false) {
            return true;
        }
    }
    false
}

/// The refusal to create `ident` over the metadata already at `location`.
fn fork_refused(plan: &Plan, ident: &TableIdent, location: &str, files: &[MetadataFile]) -> Error {
    let newest: Vec<&str> = newest(files).iter().map(|f| f.url.as_str()).collect();
    Error::ConfigInvalid {
        path: "catalog.uri".into(),
        problems: vec![format!(
            "table {ident} is not in the {catalog}, but its location {location} already holds \
             Iceberg metadata ({count} metadata file(s), newest {newest}): creating the table \
             again would fork it and lose its history, so nothing was done. If the catalog lost \
             the table (catalog database deleted or replaced, catalog.uri changed), register the \
             existing table with `silverline adopt-table --config {config}`; if the files there \
             are not to be kept, move them away first.",
            catalog = plan.catalog,
            count = files.len(),
            newest = newest.join(", "),
            config = plan.source.display(),
        )],
    }
}

/// What `adopt-table` did with one table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Adoption {
    /// The catalog has the table: nothing done.
    InCatalog {
        /// The table.
        table: String,
    },
    /// Registered in the catalog from an existing metadata file.
    Adopted {
        /// The table.
        table: String,
        /// The metadata file registered.
        metadata: String,
        /// Snapshots the table has.
        snapshots: usize,
    },
    /// Neither the catalog nor the table's location holds the table.
    Absent {
        /// The table.
        table: String,
        /// The location that holds no metadata.
        location: String,
    },
}

impl std::fmt::Display for Adoption {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Adoption::InCatalog { table } => {
                write!(f, "{table}: already in the catalog: nothing to do")
            }
            Adoption::Adopted {
                table,
                metadata,
                snapshots,
            } => write!(
                f,
                "{table}: adopted from {metadata} ({snapshots} snapshot(s))"
            ),
            Adoption::Absent { table, location } => write!(
                f,
                "{table}: no Iceberg metadata under {location}/metadata: nothing to adopt (the next run creates the table)"
            ),
        }
    }
}

/// Registers in the catalog the tables silverline owns (Silver and the
/// exception store) that it lacks but whose location holds their metadata,
/// each at its newest metadata file, or at `chosen` (a metadata file URL)
/// for the table it belongs to. Fails if Silver is found nowhere.
pub(crate) async fn adopt_tables(plan: &Plan, chosen: Option<&str>) -> Result<Vec<Adoption>> {
    let stores = Stores::new(&plan.storage, plan.catalog.warehouse()).await?;
    let catalog = connect(&plan.catalog, &stores).await?;
    let idents = [table_ident(&plan.table), exceptions_ident(plan)];
    let mut done = Vec::new();
    for ident in &idents {
        done.push(adopt_table(catalog.as_ref(), plan, ident, chosen).await?);
    }
    if let Some(url) = chosen {
        let used = done
            .iter()
            .any(|a| matches!(a, Adoption::Adopted { metadata, .. } if metadata == url));
        if !used {
            return Err(Error::Usage {
                arg: "--metadata".to_string(),
                reason: format!(
                    "{url} was not adopted: it is not a metadata file of a table missing from the catalog"
                ),
            });
        }
    }
    if let Some(Adoption::Absent { table, location }) = done.first() {
        return Err(Error::ConfigInvalid {
            path: "catalog.warehouse".into(),
            problems: vec![format!(
                "nothing to adopt: {table} is not in the {} and {location}/metadata holds no Iceberg metadata",
                plan.catalog
            )],
        });
    }
    Ok(done)
}

/// [`adopt_tables`] for one table.
async fn adopt_table(
    catalog: &dyn Catalog,
    plan: &Plan,
    ident: &TableIdent,
    chosen: Option<&str>,
) -> Result<Adoption> {
    let target = ident.to_string();
    ensure_namespace(catalog, ident.namespace(), &target).await?;
    if catalog
        .table_exists(ident)
        .await
        .map_err(Error::catalog("table-exists", &target))?
    {
        return Ok(Adoption::InCatalog { table: target });
    }
    let location = default_location(catalog, plan, ident).await?;
    let files = metadata_files(plan, &location).await?;
    let Some(metadata) = metadata_to_adopt(&location, &files, chosen)? else {
        return Ok(Adoption::Absent {
            table: target,
            location,
        });
    };
    let table = catalog
        .register_table(ident, metadata.clone())
        .await
        .map_err(Error::catalog("register-table", &target))?;
    let snapshots = table.metadata().snapshots().len();
    tracing::info!(table = %target, metadata = %metadata, snapshots, catalog = %plan.catalog, "adopted the table into the catalog");
    Ok(Adoption::Adopted {
        table: target,
        metadata,
        snapshots,
    })
}

/// The metadata file to register for the table at `location`: `chosen` if it
/// is one of `files`, else the newest, which must be the only one of its version.
fn metadata_to_adopt(
    location: &str,
    files: &[MetadataFile],
    chosen: Option<&str>,
) -> Result<Option<String>> {
    let usage = |reason: String| Error::Usage {
        arg: "--metadata".to_string(),
        reason,
    };
    if let Some(url) = chosen.filter(|url| url.starts_with(&format!("{location}/metadata/"))) {
        if files.iter().any(|f| f.url == url) {
            return Ok(Some(url.to_string()));
        }
        return Err(usage(format!("{url} is not a table metadata file")));
    }
    match newest(files).as_slice() {
        [] => Ok(None),
        [one] => Ok(Some(one.url.clone())),
        several => Err(usage(format!(
            "{} metadata files under {location}/metadata have the newest version {} (commits that raced): \
             name the one to adopt with --metadata <url>: {}",
            several.len(),
            several[0].version,
            several
                .iter()
                .map(|f| f.url.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const AT: &str = "file:///w/silver/t";

    /// The codec of a table with these codec and level properties.
    fn codec(codec: Option<&str>, level: Option<&str>) -> Result<Compression> {
        let properties = [(PARQUET_CODEC, codec), (PARQUET_CODEC_LEVEL, level)]
            .into_iter()
            .filter_map(|(key, value)| Some((key.to_string(), value?.to_string())))
            .collect();
        compression_in(&properties, "lake.silver")
    }

    #[test]
    fn data_files_are_compressed_as_the_table_properties_say_and_zstd_by_default() {
        let zstd = |level| Compression::ZSTD(ZstdLevel::try_new(level).unwrap());
        assert_eq!(
            codec(None, None).unwrap(),
            Compression::ZSTD(ZstdLevel::default())
        );
        assert_eq!(codec(None, Some("9")).unwrap(), zstd(9));
        assert_eq!(codec(Some(" ZSTD "), Some("3")).unwrap(), zstd(3));
        assert_eq!(codec(Some("snappy"), None).unwrap(), Compression::SNAPPY);
        assert_eq!(
            codec(Some("snappy"), Some("4")).unwrap(),
            Compression::SNAPPY
        );
        assert_eq!(codec(Some("lz4"), None).unwrap(), Compression::LZ4_RAW);
        assert_eq!(
            codec(Some("uncompressed"), None).unwrap(),
            Compression::UNCOMPRESSED
        );
        assert_eq!(
            codec(Some("snappy"), Some("")).unwrap(),
            Compression::SNAPPY
        );
        assert_eq!(
            codec(Some("lz4"), Some("fast")).unwrap(),
            Compression::LZ4_RAW
        );
        let gzip = Compression::GZIP(GzipLevel::try_new(9).unwrap());
        assert_eq!(codec(Some("gzip"), Some("9")).unwrap(), gzip);
        let brotli = Compression::BROTLI(BrotliLevel::try_new(4).unwrap());
        assert_eq!(codec(Some("brotli"), Some("4")).unwrap(), brotli);
        let default = Compression::BROTLI(BrotliLevel::default());
        assert_eq!(codec(Some("brotli"), None).unwrap(), default);
    }

    #[test]
    fn a_codec_or_level_silverline_cannot_write_is_a_configuration_mistake_naming_the_property() {
        for (codec, level, property, value) in [
            (Some("lzo"), None, PARQUET_CODEC, "lzo"),
            (None, Some("fast"), PARQUET_CODEC_LEVEL, "fast"),
            (None, Some("99"), PARQUET_CODEC_LEVEL, "99"),
            (None, Some("-1"), PARQUET_CODEC_LEVEL, "-1"),
            (Some("gzip"), Some("12"), PARQUET_CODEC_LEVEL, "12"),
            (
                Some("brotli"),
                Some("99999999999"),
                PARQUET_CODEC_LEVEL,
                "99999999999",
            ),
        ] {
            let error = self::codec(codec, level).unwrap_err();
            assert_eq!(error.class(), crate::error::ErrorClass::Config);
            let text = error.to_string();
            let named = format!("table lake.silver: property {property} = {value}: ");
            assert!(text.starts_with(&named), "{text}");
        }
        let not_a_number = codec(None, Some("-1")).unwrap_err().to_string();
        assert!(
            not_a_number.contains("not a level of zstd"),
            "{not_a_number}"
        );
    }

    fn files(names: &[&str]) -> Vec<MetadataFile> {
        let mut files: Vec<_> = names
            .iter()
            .filter_map(|n| MetadataFile::parse(AT, n))
            .collect();
        files.sort();
        files
    }

    #[test]
    fn only_table_metadata_files_count_and_versions_sort_as_numbers() {
        let found = files(&[
            "metadata/00009-a.metadata.json",
            "metadata/00010-b.gz.metadata.json",
            "metadata/snap-1-c.avro",
            "metadata/sub/00011-d.metadata.json",
            "data/00012-e.metadata.json",
            "metadata/version-hint.text",
        ]);
        let versions: Vec<u64> = found.iter().map(|f| f.version).collect();
        assert_eq!(versions, vec![9, 10]);
        assert_eq!(
            metadata_to_adopt(AT, &found, None).unwrap().as_deref(),
            Some("file:///w/silver/t/metadata/00010-b.gz.metadata.json")
        );
        assert_eq!(metadata_to_adopt(AT, &[], None).unwrap(), None);
    }

    #[test]
    fn raced_newest_files_need_an_explicit_choice() {
        let found = files(&[
            "metadata/00001-a.metadata.json",
            "metadata/00002-b.metadata.json",
            "metadata/00002-c.metadata.json",
        ]);
        let refused = metadata_to_adopt(AT, &found, None).unwrap_err().to_string();
        assert!(
            refused.contains("--metadata") && refused.contains("00002-c"),
            "{refused}"
        );
        let chosen = "file:///w/silver/t/metadata/00002-b.metadata.json";
        assert_eq!(
            metadata_to_adopt(AT, &found, Some(chosen))
                .unwrap()
                .as_deref(),
            Some(chosen)
        );
        let missing = "file:///w/silver/t/metadata/00003-x.metadata.json";
        assert!(metadata_to_adopt(AT, &found, Some(missing)).is_err());
        // A file of another table's location leaves this one to the newest rule.
        let other = "file:///w/silver/other/metadata/00002-b.metadata.json";
        assert!(metadata_to_adopt(AT, &found, Some(other)).is_err());
    }
}
