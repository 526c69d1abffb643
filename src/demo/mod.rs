//! The demo: generates the reference dataset, loads twelve months of clean
//! history for two contributors (a bank and an instalment lender), then runs
//! a clean month and the corruptions that row and trend rules catch, and
//! prints what each run did. It needs no services: the embedded default
//! (local files + SQLite catalog) under one folder.
//!
//! The same scenarios serve the end-to-end tests, which hold every run to the
//! number of rows the generator says it damaged.

pub mod generate;
pub mod scenarios;

use std::path::{Path, PathBuf};

use crate::config::plan::{CatalogSpec, ReferenceFormat};
use crate::config::{Plan, parse_plan};
use crate::core::drop::DropRef;
use crate::error::{Error, Result};
use crate::infra::storage::{Location, Stores};
use crate::pipeline::{RunOptions, RunOutcome, run};
use generate::{Statement, holders_csv, to_csv};

/// The default configuration, shipped inside the binary so the demo needs no file.
pub const DEFAULT_CONFIG: &str = include_str!("../../config/credit_statements.toml");

/// The rule files the default configuration names, relative to its folder.
pub const DEFAULT_RULE_FILES: [(&str, &str); 3] = [
    (
        "rules/credit_rules.csv",
        include_str!("../../config/rules/credit_rules.csv"),
    ),
    (
        "rules/credit_expectations.yaml",
        include_str!("../../config/rules/credit_expectations.yaml"),
    ),
    (
        "rules/credit_expectations.json",
        include_str!("../../config/rules/credit_expectations.json"),
    ),
];

const DEMO_MARKER: &str = ".silverline-demo";

/// The reference table of account holders.
pub const HOLDERS: &str = "holders";

/// A self-contained workspace: config, bronze, warehouse, catalog and dq_error under one folder.
pub struct Workspace {
    /// The folder.
    pub dir: PathBuf,
    /// The plan loaded from the workspace's copy of the default config.
    pub plan: Plan,
    bronze: Location,
    dq_error: Location,
    holders: Option<Location>,
}

impl Workspace {
    /// Creates a fresh workspace in `dir` with the default (embedded) configuration.
    pub async fn create(dir: &Path) -> Result<Workspace> {
        Workspace::create_with(dir, DEFAULT_CONFIG, &[]).await
    }

    /// Creates a fresh workspace in `dir`, which must be empty, missing, or an earlier
    /// demo workspace, with configuration `config` and `overrides` (dotted keys).
    pub async fn create_with(
        dir: &Path,
        config: &str,
        overrides: &[(String, String)],
    ) -> Result<Workspace> {
        prepare_folder(dir)?;
        let config_dir = dir.join("config");
        let config_path = config_dir.join("credit_statements.toml");
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| Error::Io { path, source }
        };
        std::fs::create_dir_all(&config_dir).map_err(io(&config_dir))?;
        std::fs::write(&config_path, config).map_err(io(&config_path))?;
        for (name, text) in DEFAULT_RULE_FILES {
            let path = config_dir.join(name);
            let folder = path.parent().unwrap_or(&config_dir);
            std::fs::create_dir_all(folder).map_err(io(folder))?;
            std::fs::write(&path, text).map_err(io(&path))?;
        }
        std::fs::write(dir.join(DEMO_MARKER), b"").map_err(io(dir))?;
        let plan = parse_plan(config, &config_path, overrides)?;
        let stores = Stores::new(&plan.storage, plan.catalog.warehouse()).await?;
        let bronze = stores.open(&plan.storage.bronze, "storage.bronze")?;
        let dq_error = stores.open(&plan.storage.dq_error, "storage.dq_error")?;
        let holders = plan
            .references
            .iter()
            .find(|r| r.name == HOLDERS && r.format != ReferenceFormat::Iceberg)
            .map(|r| stores.open(&r.location, "references 'holders'"))
            .transpose()?;
        Ok(Workspace {
            dir: dir.to_path_buf(),
            plan,
            bronze,
            dq_error,
            holders,
        })
    }

    /// Writes `rows` as the drop `drop_id` of `contributor`, and registers their holders.
    pub async fn put_drop(
        &self,
        contributor: &str,
        drop_id: &str,
        rows: &[Statement],
    ) -> Result<()> {
        self.put_drop_holding_back(contributor, drop_id, rows, &[])
            .await
    }

    /// Writes the drop and registers its holders in the `holders` reference,
    /// except `held_back`: those arrive late (the reference-lag case).
    pub async fn put_drop_holding_back(
        &self,
        contributor: &str,
        drop_id: &str,
        rows: &[Statement],
        held_back: &[&str],
    ) -> Result<()> {
        self.put_file(
            contributor,
            drop_id,
            "statements.csv",
            to_csv(rows).into_bytes(),
        )
        .await?;
        let holders = rows
            .iter()
            .map(|r| r.holder.as_str())
            .filter(|h| !held_back.contains(h));
        self.register_holders(&format!("{contributor}-{drop_id}"), holders)
            .await
    }

    /// Adds holders to the `holders` reference, as a file named after `batch`.
    pub async fn register_holders<'a>(
        &self,
        batch: &str,
        holder_ids: impl IntoIterator<Item = &'a str>,
    ) -> Result<()> {
        let Some(holders) = &self.holders else {
            return Ok(());
        };
        let file = format!("holders-{batch}.csv");
        holders
            .put(&file, holders_csv(holder_ids).into_bytes())
            .await
    }

    /// Writes one file of a drop as it is.
    pub async fn put_file(
        &self,
        contributor: &str,
        drop_id: &str,
        name: &str,
        bytes: Vec<u8>,
    ) -> Result<()> {
        self.bronze
            .put(&format!("{contributor}/{drop_id}/{name}"), bytes)
            .await
    }

    /// Writes one file of a drop from `parts`, one after the other (a drop
    /// too large to build in one buffer).
    pub async fn put_file_parts(
        &self,
        contributor: &str,
        drop_id: &str,
        name: &str,
        parts: Vec<bytes::Bytes>,
    ) -> Result<()> {
        self.bronze
            .put_parts(&format!("{contributor}/{drop_id}/{name}"), parts)
            .await
    }

    /// Writes a file under dq_error (a corrected file, say), relative to its root.
    pub async fn put_output(&self, relative: &str, bytes: Vec<u8>) -> Result<()> {
        self.dq_error.put(relative, bytes).await
    }

    /// Reads a file the runs wrote under dq_error, by its URL (as summaries name them).
    pub async fn read_output(&self, url: &str) -> Result<Vec<u8>> {
        let relative = self
            .dq_error
            .relative_path(url)
            .ok_or_else(|| Error::Usage {
                arg: url.to_string(),
                reason: format!("not under storage.dq_error {}", self.plan.storage.dq_error),
            })?;
        Ok(self.dq_error.get(relative).await?.to_vec())
    }

    /// Every file the runs wrote under dq_error below `prefix`, relative to dq_error.
    pub async fn list_outputs(&self, prefix: &str) -> Result<Vec<String>> {
        Ok(self
            .dq_error
            .list(prefix)
            .await?
            .into_iter()
            .map(|o| o.relative)
            .collect())
    }

    /// Runs one drop with `options`.
    pub async fn run_drop(
        &self,
        contributor: &str,
        drop_id: &str,
        options: &RunOptions,
    ) -> Result<RunOutcome> {
        run(&self.plan, &DropRef::new(contributor, drop_id)?, options).await
    }
}

fn prepare_folder(dir: &Path) -> Result<()> {
    let io = |source| Error::Io {
        path: dir.to_path_buf(),
        source,
    };
    if !dir.exists() {
        return std::fs::create_dir_all(dir).map_err(io);
    }
    if dir.join(DEMO_MARKER).exists() {
        std::fs::remove_dir_all(dir).map_err(io)?;
        return std::fs::create_dir_all(dir).map_err(io);
    }
    let empty = std::fs::read_dir(dir).map_err(io)?.next().is_none();
    if empty {
        return Ok(());
    }
    Err(Error::Usage {
        arg: "--dir".to_string(),
        reason: format!(
            "{} exists, is not empty and is not a silverline demo folder",
            dir.display()
        ),
    })
}

/// Three lines of Python that open the plan's Silver table with pyiceberg, when
/// its catalog is the SQL one: the same SQLite database, read under the same
/// catalog name (the database keys every table by it).
pub fn pyiceberg_snippet(plan: &Plan) -> Option<[String; 3]> {
    let CatalogSpec::Sql {
        uri,
        warehouse,
        name,
    } = &plan.catalog
    else {
        return None;
    };
    // sqlx's `sqlite:///abs/path?mode=rwc` is SQLAlchemy's `sqlite:////abs/path`.
    let path = uri.strip_prefix("sqlite://")?;
    let path = path.split_once('?').map_or(path, |(path, _)| path);
    let uri = format!("sqlite:///{path}");
    let table = (&plan.table.namespace, &plan.table.name);
    Some([
        "from pyiceberg.catalog import load_catalog".to_string(),
        format!(
            "catalog = load_catalog({name:?}, type=\"sql\", uri={uri:?}, warehouse={warehouse:?})"
        ),
        format!(
            "print(catalog.load_table(({:?}, {:?})).scan().to_arrow().num_rows)",
            table.0, table.1
        ),
    ])
}

/// Runs the whole demo under `dir` and prints the results; fails if any
/// scenario was not caught exactly as the generator says it should be.
pub async fn run_demo(dir: &Path) -> Result<()> {
    let workspace = Workspace::create(dir).await?;
    println!("silverline demo in {}", workspace.dir.display());
    let results = scenarios::run_all(&workspace).await?;
    println!("{}", scenarios::render_table(&results));
    let storage = &workspace.plan.storage;
    let table = crate::infra::catalog::table_ident(&workspace.plan.table);
    println!("Silver table:  {table} in the {}", workspace.plan.catalog);
    println!("quarantine:    {}/quarantine/", storage.dq_error);
    println!("summaries:     {}/summaries/", storage.dq_error);
    if let Some(snippet) = pyiceberg_snippet(&workspace.plan) {
        println!("open Silver with pyiceberg (pip install 'pyiceberg[pyarrow,sql-sqlite]'):");
        snippet.iter().for_each(|line| println!("    {line}"));
    }
    let misses: Vec<&str> = results
        .iter()
        .filter(|r| !r.as_expected())
        .map(|r| r.scenario.name)
        .collect();
    if misses.is_empty() {
        println!("every scenario was caught by the rule meant to catch it");
        return Ok(());
    }
    Err(Error::BadDrop {
        location: "demo".to_string(),
        reason: format!("scenarios not caught as expected: {}", misses.join(", ")),
    })
}
