//! The validated run plan: [`Plan::from_config`] turns the raw TOML into typed
//! settings and collects *every* problem it finds, each naming the setting or
//! rule at fault, so one `check-config` shows them all.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use crate::config::contract::{Column, ColumnType, Contract};
use crate::config::raw::{CatalogConfig, ContributorsConfig, SilverlineConfig};
use crate::config::rules::{Rule, RuleChecker, Severity};

/// A partition transform of the Silver table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PartitionTransform {
    /// The value itself.
    Identity,
    /// Year of a date.
    Year,
    /// Month of a date.
    Month,
    /// Day of a date.
    Day,
}

/// The Silver table's identity and layout.
#[derive(Debug, Clone)]
pub struct TableSpec {
    /// Iceberg namespace.
    pub namespace: String,
    /// Table name.
    pub name: String,
    /// Partition fields: source column and transform.
    pub partition: Vec<(String, PartitionTransform)>,
}

/// Where the Iceberg catalog is.
#[derive(Debug, Clone)]
pub enum CatalogSpec {
    /// SQLite SQL catalog (the embedded default).
    Sql {
        /// sqlx URI, with relative paths already resolved.
        uri: String,
        /// Warehouse URL.
        warehouse: String,
        /// Catalog name.
        name: String,
    },
    /// Iceberg REST catalog.
    Rest {
        /// Catalog URI.
        uri: String,
        /// Warehouse.
        warehouse: String,
        /// Environment variable with the OAuth2 credential.
        credential_env: String,
        /// Environment variable with a bearer token.
        token_env: String,
        /// Extra properties.
        properties: Vec<(String, String)>,
        /// Catalog name.
        name: String,
    },
}

impl CatalogSpec {
    /// The warehouse location.
    pub fn warehouse(&self) -> &str {
        match self {
            CatalogSpec::Sql { warehouse, .. } | CatalogSpec::Rest { warehouse, .. } => warehouse,
        }
    }
}

impl std::fmt::Display for CatalogSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CatalogSpec::Sql { uri, warehouse, .. } => {
                write!(f, "sql catalog {uri}, warehouse {warehouse}")
            }
            CatalogSpec::Rest { uri, warehouse, .. } => {
                write!(f, "REST catalog {uri}, warehouse {warehouse}")
            }
        }
    }
}

/// Object storage roots, as URLs, and the S3 settings that serve them.
#[derive(Debug, Clone)]
pub struct StorageSpec {
    /// Root of the bronze drops.
    pub bronze: String,
    /// Root of the dq_error output.
    pub dq_error: String,
    /// S3 settings shared by bronze, dq_error and the Iceberg FileIO.
    pub s3: S3Settings,
}

/// S3 connection settings (credentials come from the AWS chain, never from here).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct S3Settings {
    /// Endpoint of an S3-compatible server.
    pub endpoint: Option<String>,
    /// Region.
    pub region: Option<String>,
    /// Path-style URLs.
    pub path_style: bool,
}

/// How contributor ids map to types.
#[derive(Debug, Clone)]
pub struct ContributorTypes {
    default_type: String,
    prefixes: Vec<(String, String)>,
    assign: Vec<(String, String)>,
}

impl ContributorTypes {
    /// The type of `contributor`: an explicit assignment, else the first prefix that matches, else the default.
    pub fn type_of(&self, contributor: &str) -> &str {
        let assigned = self.assign.iter().find(|(id, _)| id == contributor);
        let by_prefix = || {
            self.prefixes
                .iter()
                .find(|(prefix, _)| contributor.starts_with(prefix.as_str()))
        };
        assigned
            .or_else(by_prefix)
            .map(|(_, ty)| ty.as_str())
            .unwrap_or(&self.default_type)
    }

    fn known_types(&self) -> BTreeSet<&str> {
        let mut types: BTreeSet<&str> = self.prefixes.iter().map(|(_, t)| t.as_str()).collect();
        types.insert(&self.default_type);
        types
    }
}

/// The validated configuration a run follows.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The file it came from.
    pub source: PathBuf,
    /// The dataset contract.
    pub contract: Contract,
    /// The Silver table.
    pub table: TableSpec,
    /// Months of history before the drop's earliest period that the baseline reads.
    pub lookback_months: u32,
    /// Storage roots.
    pub storage: StorageSpec,
    /// The catalog.
    pub catalog: CatalogSpec,
    /// Contributor types.
    pub contributors: ContributorTypes,
    /// Every rule, for every contributor type.
    pub rules: Vec<Rule>,
}

impl Plan {
    /// Validates `raw`, read from `source`; relative paths resolve against the file's folder.
    pub fn from_config(raw: SilverlineConfig, source: &Path) -> Result<Plan, Vec<String>> {
        let base = source.parent().unwrap_or(Path::new("."));
        let mut problems = Vec::new();
        let contract = check_contract(&raw, &mut problems);
        let table = check_table(&raw, &contract, &mut problems);
        let contributors = check_contributors(&raw.contributors, &mut problems);
        let rules = check_rules(&raw, &contract, &contributors, &mut problems);
        let plan = Plan {
            source: source.to_path_buf(),
            contract,
            table,
            lookback_months: raw.baseline.lookback_months,
            storage: StorageSpec {
                bronze: resolve_location(&raw.storage.bronze, base),
                dq_error: resolve_location(&raw.storage.dq_error, base),
                s3: S3Settings {
                    endpoint: raw.storage.endpoint.clone(),
                    region: raw.storage.region.clone(),
                    path_style: raw.storage.path_style,
                },
            },
            catalog: catalog_spec(&raw.catalog, base),
            contributors,
            rules,
        };
        if problems.is_empty() {
            Ok(plan)
        } else {
            Err(problems)
        }
    }

    /// The contributor's type and the rules that apply to it, in file order.
    pub fn rules_for(&self, contributor: &str) -> (&str, Vec<&Rule>) {
        let contributor_type = self.contributors.type_of(contributor);
        let rules = self
            .rules
            .iter()
            .filter(|r| r.applies_to(contributor_type))
            .collect();
        (contributor_type, rules)
    }
}

fn check_contract(raw: &SilverlineConfig, problems: &mut Vec<String>) -> Contract {
    let dataset = &raw.dataset;
    let mut seen = BTreeSet::new();
    let mut columns = Vec::new();
    for column in &dataset.columns {
        if !seen.insert(column.name.as_str()) {
            problems.push(format!(
                "dataset.columns: column '{}' is declared twice",
                column.name
            ));
        }
        match ColumnType::parse(&column.data_type) {
            Some(column_type) => columns.push(Column {
                name: column.name.clone(),
                column_type,
                nullable: column.nullable,
            }),
            None => problems.push(format!(
                "dataset.columns: column '{}' has unknown type '{}' (expected string, date, int, long, double, boolean or decimal(P,S))",
                column.name, column.data_type
            )),
        }
    }
    if columns.is_empty() {
        problems.push("dataset.columns: no columns declared".to_string());
    }
    let contract = Contract {
        name: dataset.name.clone(),
        columns,
        entity_key: dataset.entity_key.clone(),
        order_column: dataset.order_column.clone(),
        contributor_column: dataset.contributor_column.clone(),
    };
    check_key_columns(&contract, problems);
    contract
}

fn check_key_columns(contract: &Contract, problems: &mut Vec<String>) {
    if contract.entity_key.is_empty() {
        problems.push("dataset.entity_key: at least one column is needed".to_string());
    }
    for key in &contract.entity_key {
        if contract.column(key).is_none() {
            problems.push(format!("dataset.entity_key: unknown column '{key}'"));
        }
    }
    match contract.column(&contract.order_column) {
        Some(c) if c.column_type == ColumnType::Date => {}
        Some(_) => problems.push(format!(
            "dataset.order_column: column '{}' must be of type date",
            contract.order_column
        )),
        None => problems.push(format!(
            "dataset.order_column: unknown column '{}'",
            contract.order_column
        )),
    }
    if contract.column(&contract.contributor_column).is_none() {
        problems.push(format!(
            "dataset.contributor_column: unknown column '{}'",
            contract.contributor_column
        ));
    }
}

fn check_table(
    raw: &SilverlineConfig,
    contract: &Contract,
    problems: &mut Vec<String>,
) -> TableSpec {
    let mut partition = Vec::new();
    for field in &raw.table.partition {
        let transform = match field.transform.to_ascii_lowercase().as_str() {
            "identity" => Some(PartitionTransform::Identity),
            "year" => Some(PartitionTransform::Year),
            "month" => Some(PartitionTransform::Month),
            "day" => Some(PartitionTransform::Day),
            _ => None,
        };
        let Some(transform) = transform else {
            problems.push(format!(
                "table.partition: unknown transform '{}' on column '{}' (expected identity, year, month or day)",
                field.transform, field.column
            ));
            continue;
        };
        match contract.column(&field.column) {
            None => problems.push(format!(
                "table.partition: unknown column '{}'",
                field.column
            )),
            Some(c)
                if transform != PartitionTransform::Identity
                    && c.column_type != ColumnType::Date =>
            {
                problems.push(format!(
                    "table.partition: transform '{}' needs a date column, '{}' is not one",
                    field.transform, field.column
                ))
            }
            Some(_) => partition.push((field.column.clone(), transform)),
        }
    }
    TableSpec {
        namespace: raw.table.namespace.clone(),
        name: raw.table.name.clone(),
        partition,
    }
}

fn check_contributors(raw: &ContributorsConfig, problems: &mut Vec<String>) -> ContributorTypes {
    let prefixes: Vec<(String, String)> = raw
        .types
        .iter()
        .flat_map(|t| t.prefixes.iter().map(|p| (p.clone(), t.name.clone())))
        .collect();
    let types = ContributorTypes {
        default_type: raw.default_type.clone(),
        prefixes,
        assign: raw
            .assign
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
    };
    let known = types.known_types();
    for (contributor, ty) in &raw.assign {
        if !known.contains(ty.as_str()) {
            problems.push(format!(
                "contributors.assign: contributor '{contributor}' is given unknown type '{ty}'"
            ));
        }
    }
    types
}

fn check_rules(
    raw: &SilverlineConfig,
    contract: &Contract,
    contributors: &ContributorTypes,
    problems: &mut Vec<String>,
) -> Vec<Rule> {
    let checker = match RuleChecker::new(contract) {
        Ok(checker) => checker,
        Err(e) => {
            problems.push(format!("dataset: cannot build the rule schema: {e}"));
            return Vec::new();
        }
    };
    let known_types = contributors.known_types();
    let mut rules: Vec<Rule> = not_null_rule(contract).into_iter().collect();
    for rule in &raw.rules {
        let at = format!("rules '{}'", rule.name);
        let severity = Severity::parse(&rule.severity);
        if severity.is_none() {
            problems.push(format!(
                "{at}: unknown severity '{}' (expected warn, drop, quarantine or fail)",
                rule.severity
            ));
        }
        for ty in &rule.contributor_types {
            if ty != "*" && !known_types.contains(ty.as_str()) {
                problems.push(format!("{at}: unknown contributor type '{ty}'"));
            }
        }
        let prev_columns = checker
            .check(&rule.expression)
            .map_err(|e| problems.push(format!("{at}: expression `{}`: {e}", rule.expression)))
            .unwrap_or_default();
        let Some(severity) = severity else { continue };
        let candidate = Rule {
            name: rule.name.clone(),
            expression: rule.expression.clone(),
            severity,
            contributor_types: rule.contributor_types.clone(),
            message: rule
                .description
                .clone()
                .unwrap_or_else(|| rule.expression.clone()),
            prev_columns,
        };
        if rules
            .iter()
            .any(|r| r.name == candidate.name && r.overlaps(&candidate))
        {
            problems.push(format!(
                "{at}: defined twice for overlapping contributor types {:?}",
                candidate.contributor_types
            ));
        }
        rules.push(candidate);
    }
    rules
}

/// Name of the built-in rule that enforces the contract's not-null columns.
pub const NOT_NULL_RULE: &str = "not_null";

/// The contract's own rule: every column declared not null is present, so a
/// row that would break Silver's required columns is quarantined, never written.
fn not_null_rule(contract: &Contract) -> Option<Rule> {
    let required: Vec<&str> = contract
        .columns
        .iter()
        .filter(|c| !c.nullable)
        .map(|c| c.name.as_str())
        .collect();
    if required.is_empty() {
        return None;
    }
    Some(Rule {
        name: NOT_NULL_RULE.to_string(),
        expression: required
            .iter()
            .map(|c| format!("\"{c}\" IS NOT NULL"))
            .collect::<Vec<_>>()
            .join(" AND "),
        severity: Severity::Quarantine,
        contributor_types: vec!["*".to_string()],
        message: format!(
            "columns the contract declares not null are present: {}",
            required.join(", ")
        ),
        prev_columns: BTreeSet::new(),
    })
}

fn catalog_spec(raw: &CatalogConfig, base: &Path) -> CatalogSpec {
    match raw {
        CatalogConfig::Sql {
            uri,
            warehouse,
            name,
        } => CatalogSpec::Sql {
            uri: resolve_sqlite_uri(uri, base),
            warehouse: resolve_location(warehouse, base),
            name: name.clone(),
        },
        CatalogConfig::Rest {
            uri,
            warehouse,
            credential_env,
            token_env,
            properties,
            name,
        } => CatalogSpec::Rest {
            uri: uri.clone(),
            warehouse: warehouse.clone(),
            credential_env: credential_env.clone(),
            token_env: token_env.clone(),
            properties: properties
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            name: name.clone(),
        },
    }
}

/// Turns a relative local path into an absolute `file://` URL; leaves URLs alone.
pub fn resolve_location(location: &str, base: &Path) -> String {
    if location.contains("://") {
        return location.to_string();
    }
    let path = Path::new(location);
    let absolute = if path.is_absolute() {
        path.to_path_buf()
    } else {
        base.join(path)
    };
    format!("file://{}", normalize(&absolute).display())
}

fn resolve_sqlite_uri(uri: &str, base: &Path) -> String {
    let Some(rest) = uri.strip_prefix("sqlite://") else {
        return uri.to_string();
    };
    let (path, query) = rest.split_once('?').unwrap_or((rest, ""));
    let path = Path::new(path);
    let absolute = if path.is_absolute() {
        path.to_path_buf()
    } else {
        base.join(path)
    };
    let query = if query.is_empty() { "mode=rwc" } else { query };
    format!("sqlite://{}?{query}", normalize(&absolute).display())
}

fn normalize(path: &Path) -> PathBuf {
    let absolute = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir().unwrap_or_default().join(path)
    };
    let mut out = PathBuf::new();
    for part in absolute.components() {
        match part {
            std::path::Component::CurDir => {}
            std::path::Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}
