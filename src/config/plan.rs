//! The validated run plan: the typed settings a run follows. They are made
//! by [`Plan::from_config`] (in [`crate::config::checks`]), which collects
//! every problem of a configuration; paths are resolved by
//! [`crate::config::locations`].

use std::collections::BTreeSet;
use std::path::PathBuf;

use crate::config::contract::Contract;
use crate::config::lineage::LineageTarget;
use crate::config::metrics_push::MetricsPush;
use crate::config::rules::{Completeness, Metric, Rule};

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

impl PartitionTransform {
    /// The Iceberg transform.
    pub fn iceberg(self) -> iceberg::spec::Transform {
        use iceberg::spec::Transform;
        match self {
            PartitionTransform::Identity => Transform::Identity,
            PartitionTransform::Year => Transform::Year,
            PartitionTransform::Month => Transform::Month,
            PartitionTransform::Day => Transform::Day,
        }
    }

    /// What the partition field's name adds to the source column's: `_month` for `month`.
    pub fn field_suffix(self) -> &'static str {
        match self {
            PartitionTransform::Identity => "",
            PartitionTransform::Year => "_year",
            PartitionTransform::Month => "_month",
            PartitionTransform::Day => "_day",
        }
    }
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
    pub(crate) default_type: Option<String>,
    pub(crate) prefixes: Vec<(String, String)>,
    pub(crate) assign: Vec<(String, String)>,
}

impl ContributorTypes {
    /// The type of `contributor`: an explicit assignment, else the first prefix that matches, else the default.
    pub fn type_of(&self, contributor: &str) -> Option<&str> {
        let assigned = self.assign.iter().find(|(id, _)| id == contributor);
        let by_prefix = || {
            self.prefixes
                .iter()
                .find(|(prefix, _)| contributor.starts_with(prefix.as_str()))
        };
        assigned
            .or_else(by_prefix)
            .map(|(_, ty)| ty.as_str())
            .or(self.default_type.as_deref())
    }

    pub(crate) fn known_types(&self) -> BTreeSet<&str> {
        let mut types: BTreeSet<&str> = self.prefixes.iter().map(|(_, t)| t.as_str()).collect();
        types.extend(self.default_type.as_deref());
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
    /// Metrics aggregate rules compare across periods.
    pub metrics: Vec<Metric>,
    /// How many previous periods `avg_<metric>` averages.
    pub average_periods: u32,
    /// Which entities a period is expected to declare; `None`: missing
    /// entities are not looked for.
    pub completeness: Option<Completeness>,
    /// Reference tables.
    pub references: Vec<Reference>,
    /// How many times a conflicting commit is tried in all.
    pub commit_attempts: u32,
    /// Where OpenLineage run events go, if they are wanted.
    pub lineage: Option<LineageTarget>,
    /// The Pushgateway each run's metrics go to, if any.
    pub metrics_push: Option<MetricsPush>,
    /// Whether sensitive columns are masked in dq_error files.
    pub mask_sensitive: bool,
    /// The exception store.
    pub exceptions: ExceptionsSpec,
    /// Which alerts are raised and where they go.
    pub alerts: crate::config::alerts::AlertSettings,
    /// The memory budget of the run's queries and where they spill.
    pub resources: crate::core::sql::MemoryBudget,
}

/// The exception store's table and backlog settings.
#[derive(Debug, Clone)]
pub struct ExceptionsSpec {
    /// Iceberg namespace (Silver's).
    pub namespace: String,
    /// Table name.
    pub name: String,
    /// Open exceptions older than this many days are stale.
    pub stale_after_days: u32,
}

/// File format of a reference table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReferenceFormat {
    /// CSV with a header.
    Csv,
    /// Parquet.
    Parquet,
    /// An Iceberg table of the catalog (`location` = `<namespace>.<table>`).
    Iceberg,
}

/// A reference table joined to rows (LEFT join) by reference rules.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reference {
    /// Name (`_ref_<name>`).
    pub name: String,
    /// Folder URL of its files.
    pub location: String,
    /// Their format.
    pub format: ReferenceFormat,
    /// Row column -> reference column.
    pub keys: Vec<(String, String)>,
}

impl Plan {
    /// The contributor's type and the rules that apply to it, in file order.
    pub fn rules_for(&self, contributor: &str) -> Result<(&str, Vec<&Rule>), crate::error::Error> {
        let contributor_type = self.contributors.type_of(contributor).ok_or_else(|| crate::error::Error::Usage {
            arg: "--contributor".to_string(),
            reason: format!(
                "contributor '{}' has no type: list it under contributors.assign or a contributors.types prefix, \
                 or set contributors.default_type in {}",
                crate::error::printable(contributor),
                self.source.display()
            ),
        })?;
        let rules = self
            .rules
            .iter()
            .filter(|r| r.applies_to(contributor_type))
            .collect();
        Ok((contributor_type, rules))
    }

    /// The memory pool and spill folder of `[resources]` the queries of a
    /// run or command share; a scratch folder that cannot be made or
    /// written is a configuration error naming this file.
    pub(crate) fn query_memory(
        &self,
    ) -> Result<crate::core::sql::QueryMemory, crate::error::Error> {
        crate::core::sql::QueryMemory::new(&self.resources).map_err(|problem| {
            crate::error::Error::ConfigInvalid {
                path: self.source.clone(),
                problems: vec![problem],
            }
        })
    }
}
