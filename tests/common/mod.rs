//! Shared helpers for the integration tests: a throw-away workspace on the
//! embedded default, and readers of what a run left behind (the Silver table
//! through the real catalog, the dq_error CSVs from disk).

#![allow(clippy::unwrap_used, clippy::expect_used)]
#![allow(dead_code)]

pub mod doctor;
pub mod fault_proxy;
pub mod pyiceberg;
pub mod reliability;
pub mod suite;

use std::collections::BTreeMap;

use arrow::record_batch::RecordBatch;
use futures::TryStreamExt;
use iceberg::table::Table;
use silverline::config::plan::CatalogSpec;
use silverline::demo::Workspace;
use silverline::infra::catalog::{connect, load_silver};
use silverline::infra::storage::Stores;
use silverline::pipeline::summary::Summary;

/// A workspace in a temporary folder, removed when dropped.
pub struct TestWorkspace {
    /// Keeps the folder alive.
    pub tmp: tempfile::TempDir,
    /// The workspace.
    pub ws: Workspace,
}

/// A workspace on the local stack (S3 + Iceberg REST catalog started by
/// `localstack/up.sh`), with its own prefixes and namespace.
pub async fn stack_workspace() -> TestWorkspace {
    stack_workspace_with(&[]).await
}

/// [`stack_workspace`] with more setting overrides.
pub async fn stack_workspace_with(extra: &[(&str, &str)]) -> TestWorkspace {
    let need = |name: &str| {
        std::env::var(name).unwrap_or_else(|_| {
            panic!("{name} is not set: run the suite with `bash localstack/test.sh`, or `bash localstack/up.sh && source localstack/env.sh`")
        })
    };
    let endpoint = need("SILVERLINE_S3_ENDPOINT");
    let rest_uri = need("SILVERLINE_REST_URI");
    let id = uuid::Uuid::new_v4().simple().to_string()[..12].to_string();
    let overrides = vec![
        ("storage.endpoint".to_string(), endpoint),
        ("storage.bronze".to_string(), format!("s3://bronze/{id}")),
        (
            "storage.dq_error".to_string(),
            format!("s3://lake/{id}/dq_error"),
        ),
        ("catalog.uri".to_string(), rest_uri),
        ("table.namespace".to_string(), format!("t_{id}")),
        (
            "references.0.location".to_string(),
            format!("s3://lake/{id}/reference/holders"),
        ),
    ];
    let overrides: Vec<(String, String)> = overrides
        .into_iter()
        .chain(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())))
        .collect();
    let config = std::fs::read_to_string("config/localstack.toml").unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let ws = Workspace::create_with(&tmp.path().join("ws"), &config, &overrides)
        .await
        .unwrap();
    TestWorkspace { tmp, ws }
}

/// The binary's `run` of one drop against a stack workspace: its config file
/// with the workspace's own prefixes, namespace and endpoint as environment overrides.
pub fn stack_run_command(
    ws: &Workspace,
    contributor: &str,
    drop_id: &str,
) -> std::process::Command {
    stack_command(
        ws,
        "run",
        &["--contributor", contributor, "--drop", drop_id],
    )
}

/// The binary's `subcommand --config <the workspace's config> args...` against a
/// stack workspace: its own prefixes, namespace, endpoint and (for a SQL
/// catalog on S3, the LocalStack lane) catalog as environment overrides.
pub fn stack_command(ws: &Workspace, subcommand: &str, args: &[&str]) -> std::process::Command {
    let plan = &ws.plan;
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_silverline"));
    command
        .args(["--log-format", "text", subcommand, "--config"])
        .arg(ws.dir.join("config/credit_statements.toml"))
        .args(args)
        .env("SILVERLINE__STORAGE__BRONZE", &plan.storage.bronze)
        .env("SILVERLINE__STORAGE__DQ_ERROR", &plan.storage.dq_error)
        .env("SILVERLINE__TABLE__NAMESPACE", &plan.table.namespace)
        .env(
            "SILVERLINE__REFERENCES__0__LOCATION",
            &plan.references[0].location,
        )
        .env(
            "SILVERLINE__STORAGE__ENDPOINT",
            plan.storage.s3.endpoint.clone().unwrap_or_default(),
        );
    if let CatalogSpec::Sql { uri, warehouse, .. } = &plan.catalog {
        command
            .env("SILVERLINE__CATALOG__TYPE", "sql")
            .env("SILVERLINE__CATALOG__URI", uri)
            .env("SILVERLINE__CATALOG__WAREHOUSE", warehouse);
    }
    command
}

/// Runs `command` to its end: its exit code and its stdout and stderr together.
pub fn finish(mut command: std::process::Command) -> (i32, String) {
    let output = command.output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (output.status.code().unwrap_or(-1), text)
}

/// A fresh workspace with the default config.
pub async fn workspace() -> TestWorkspace {
    let tmp = tempfile::tempdir().unwrap();
    let ws = Workspace::create(&tmp.path().join("ws")).await.unwrap();
    TestWorkspace { tmp, ws }
}

/// The Silver table, loaded through the catalog.
pub async fn silver_table(ws: &Workspace) -> Table {
    let stores = Stores::new(&ws.plan.storage, ws.plan.catalog.warehouse())
        .await
        .unwrap();
    let catalog = connect(&ws.plan.catalog, &stores).await.unwrap();
    load_silver(catalog.as_ref(), &ws.plan).await.unwrap()
}

/// Every row of Silver, read back through an Iceberg scan.
pub async fn silver_batches(ws: &Workspace) -> Vec<RecordBatch> {
    let table = silver_table(ws).await;
    if table.metadata().current_snapshot().is_none() {
        return Vec::new();
    }
    let scan = table.scan().build().unwrap();
    scan.to_arrow().await.unwrap().try_collect().await.unwrap()
}

/// Number of rows in Silver.
pub async fn silver_count(ws: &Workspace) -> usize {
    silver_batches(ws)
        .await
        .iter()
        .map(RecordBatch::num_rows)
        .sum()
}

/// Every `account_id` in Silver.
pub async fn silver_accounts(ws: &Workspace) -> std::collections::BTreeSet<String> {
    let mut accounts = std::collections::BTreeSet::new();
    for batch in silver_batches(ws).await {
        let column = batch.column_by_name("account_id").unwrap();
        let column = column
            .as_any()
            .downcast_ref::<arrow::array::StringArray>()
            .unwrap();
        accounts.extend(column.iter().flatten().map(str::to_string));
    }
    accounts
}

/// Number of snapshots of Silver.
pub async fn snapshot_count(ws: &Workspace) -> usize {
    silver_table(ws).await.metadata().snapshots().len()
}

/// Every event of the exception store.
pub async fn exception_events(ws: &Workspace) -> Vec<silverline::exceptions::ExceptionEvent> {
    let stores = Stores::new(&ws.plan.storage, ws.plan.catalog.warehouse())
        .await
        .unwrap();
    let catalog = connect(&ws.plan.catalog, &stores).await.unwrap();
    let table =
        silverline::exceptions::store::load_or_create_exceptions(catalog.as_ref(), &ws.plan)
            .await
            .unwrap();
    silverline::exceptions::store::read_events(&table, None)
        .await
        .unwrap()
}

/// Number of snapshots of Silver, 0 when no run has created the table yet.
pub async fn snapshots_if_created(ws: &Workspace) -> usize {
    let stores = Stores::new(&ws.plan.storage, ws.plan.catalog.warehouse())
        .await
        .unwrap();
    let catalog = connect(&ws.plan.catalog, &stores).await.unwrap();
    let ident = silverline::infra::catalog::table_ident(&ws.plan.table);
    if !catalog.table_exists(&ident).await.unwrap() {
        return 0;
    }
    snapshot_count(ws).await
}

/// The records of a dq_error CSV named in `summary.outputs[kind]`, as header -> value maps.
pub async fn dq_records(
    ws: &Workspace,
    summary: &Summary,
    kind: &str,
) -> Vec<BTreeMap<String, String>> {
    let Some(url) = summary.outputs.get(kind) else {
        return Vec::new();
    };
    let bytes = ws.read_output(url).await.unwrap();
    let mut reader = csv::Reader::from_reader(bytes.as_slice());
    let headers = reader.headers().unwrap().clone();
    reader
        .records()
        .map(|r| {
            let r = r.unwrap();
            headers
                .iter()
                .map(str::to_string)
                .zip(r.iter().map(str::to_string))
                .collect()
        })
        .collect()
}

/// The rule names in a dq_error record's `_dq_errors`.
pub fn error_rules(record: &BTreeMap<String, String>) -> Vec<String> {
    let errors: serde_json::Value = serde_json::from_str(&record["_dq_errors"]).unwrap();
    errors
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["rule"].as_str().unwrap().to_string())
        .collect()
}

/// A workspace whose storage is LocalStack S3 (`localstack/localstack-up.sh`) and whose
/// catalog is the embedded SQL catalog with its warehouse on that S3.
pub async fn localstack_workspace() -> TestWorkspace {
    let endpoint = std::env::var("SILVERLINE_LOCALSTACK_ENDPOINT").unwrap_or_else(|_| {
        panic!("SILVERLINE_LOCALSTACK_ENDPOINT is not set: run the suite with `bash localstack/test.sh`, or `bash localstack/localstack-up.sh`")
    });
    let id = uuid::Uuid::new_v4().simple().to_string()[..12].to_string();
    let tmp = tempfile::tempdir().unwrap();
    let overrides = vec![
        ("storage.endpoint".to_string(), endpoint),
        ("storage.bronze".to_string(), format!("s3://bronze/{id}")),
        (
            "storage.dq_error".to_string(),
            format!("s3://lake/{id}/dq_error"),
        ),
        ("catalog.type".to_string(), "sql".to_string()),
        (
            "catalog.uri".to_string(),
            format!("sqlite://{}/catalog.db", tmp.path().display()),
        ),
        (
            "catalog.warehouse".to_string(),
            format!("s3://warehouse/{id}"),
        ),
        (
            "references.0.location".to_string(),
            format!("s3://lake/{id}/reference/holders"),
        ),
    ];
    let config = std::fs::read_to_string("config/localstack.toml").unwrap();
    let ws = Workspace::create_with(&tmp.path().join("ws"), &config, &overrides)
        .await
        .unwrap();
    TestWorkspace { tmp, ws }
}
