//! The configuration file as written (TOML), before validation.
//!
//! Every struct denies unknown fields so that a typo is an error, not a
//! silently ignored setting. Defaults are stated on each field.

use std::collections::BTreeMap;

use serde::Deserialize;

/// The whole configuration file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SilverlineConfig {
    /// The dataset contract: columns, keys, order column.
    pub dataset: DatasetConfig,
    /// The Silver table: where it lives and how it is partitioned.
    pub table: TableConfig,
    /// How far back the baseline reaches. Default: 3 months.
    #[serde(default)]
    pub baseline: BaselineConfig,
    /// Where bronze drops are read and dq_error output is written.
    pub storage: StorageConfig,
    /// The Iceberg catalog that holds the Silver table.
    pub catalog: CatalogConfig,
    /// How contributor ids map to contributor types. Default: every contributor is `default`.
    #[serde(default)]
    pub contributors: ContributorsConfig,
    /// Rules written in this file. Default: none.
    #[serde(default)]
    pub rules: Vec<RuleConfig>,
    /// More rules from files: control CSVs (`.csv`) and dlt-meta expectation files
    /// (`.json`, `.yaml`, `.yml`). Paths resolve against this file's folder. Default: none.
    #[serde(default)]
    pub rule_files: Vec<RuleFileConfig>,
    /// Named metrics that aggregate rules compare across periods. Default: none.
    #[serde(default)]
    pub metrics: Vec<MetricConfig>,
    /// How aggregate rules look back. Default: averages over 3 periods.
    #[serde(default)]
    pub aggregates: AggregatesConfig,
    /// Which entities each period of a drop is expected to declare. Default:
    /// none (no entity is expected: missing entities are not looked for).
    #[serde(default)]
    pub completeness: Option<CompletenessConfig>,
    /// Reference tables that reference rules join to (LEFT join). Default: none.
    #[serde(default)]
    pub references: Vec<ReferenceConfig>,
    /// How commits to Silver are retried. Default: 6 attempts.
    #[serde(default)]
    pub commit: CommitConfig,
    /// OpenLineage run events. Default: none written.
    #[serde(default)]
    pub lineage: LineageConfig,
    /// Each run's metrics pushed to a Prometheus Pushgateway. Default: none pushed.
    #[serde(default)]
    pub metrics_push: MetricsPushConfig,
    /// How rows set aside are written. Default: sensitive columns written as received.
    #[serde(default)]
    pub quarantine: QuarantineConfig,
    /// The exception store. Default: `<table.name>_exceptions` beside Silver.
    #[serde(default)]
    pub exceptions: ExceptionsConfig,
    /// Alerts: failure rates creeping up, exceptions ageing, exceptions that
    /// enter and never leave; where they are sent. Default: only the age
    /// alert (open exceptions older than `exceptions.stale_after_days`), sent
    /// nowhere but the summary, the report and `backlog --check`.
    #[serde(default)]
    pub alerts: AlertsConfig,
    /// How much memory a run's queries may hold and where they spill past
    /// it. Default: 1 GiB, spilling to the system's temporary folder.
    #[serde(default)]
    pub resources: ResourcesConfig,
    /// Severities of the engine's own key rules (`unique_key`, `resubmission`,
    /// `contributor`). Default: `quarantine` each; they cannot be turned off.
    #[serde(default)]
    pub engine_rules: crate::config::engine::EngineRulesConfig,
}

/// The `[resources]` section: the memory budget of a run's queries.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResourcesConfig {
    /// What the run's queries (joins, aggregates, sorts) may hold together,
    /// e.g. `"1GiB"` or `"512MiB"` (`"1GB"` is 10^9 bytes), or a number of
    /// bytes; past it they spill to `scratch_dir`. Default: `"1GiB"`.
    #[serde(default)]
    pub memory_limit: Option<Size>,
    /// Where queries spill, relative to this file's folder. Default: the
    /// system's temporary folder (`TMPDIR`).
    #[serde(default)]
    pub scratch_dir: Option<String>,
    /// The most rows judged at once: a larger drop is judged in buckets
    /// of entities. Default: a drop that half of `memory_limit` holds is
    /// judged whole, a larger one in buckets of an eighth of it.
    #[serde(default)]
    pub bucket_rows: Option<u64>,
}

/// A size: text with a unit (`"512MiB"`) or a number of bytes.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum Size {
    /// A number of bytes.
    Bytes(u64),
    /// A size with its unit.
    Text(String),
}

/// The exception store: an Iceberg table of status events of the rows set aside.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExceptionsConfig {
    /// Table name, in Silver's namespace. Default: `<table.name>_exceptions`.
    #[serde(default)]
    pub table: Option<String>,
    /// Open exceptions older than this many days are flagged stale. Default: 30.
    #[serde(default = "default_stale_after_days")]
    pub stale_after_days: u32,
}

impl Default for ExceptionsConfig {
    fn default() -> Self {
        Self {
            table: None,
            stale_after_days: default_stale_after_days(),
        }
    }
}

/// The `[alerts]` section: which alerts are raised and where they go.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AlertsConfig {
    /// Alert when open exceptions are older than `exceptions.stale_after_days`. Default: true.
    #[serde(default)]
    pub age: Option<bool>,
    /// Alert when exceptions entered in the last this many days and none
    /// left. Default: none (no such alert).
    #[serde(default)]
    pub no_exit_days: Option<u32>,
    /// A rule's failure rate creeping up over a contributor's runs. Default: none.
    #[serde(default)]
    pub creep: Option<CreepConfig>,
    /// Where alerts are POSTed. Default: nowhere.
    #[serde(default)]
    pub webhook: Option<WebhookConfig>,
}

/// `[alerts.creep]`: when a rule's failure rate (failed / received per run)
/// counts as creeping up. Either test or both.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreepConfig {
    /// Alert after this many rises in a row (each run's rate above the one
    /// before). Default: none.
    #[serde(default)]
    pub rises_in_a_row: Option<u32>,
    /// Alert when the latest rate is above the mean plus this many standard
    /// deviations of the `window` runs before it. Default: none.
    #[serde(default)]
    pub sigma: Option<f64>,
    /// How many runs before the latest `sigma` compares with. Default: 6.
    #[serde(default)]
    pub window: Option<u32>,
}

/// `[alerts.webhook]`: an HTTP endpoint that receives alerts as JSON.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WebhookConfig {
    /// The URL alerts are POSTed to (http or https). Required.
    pub url: String,
    /// Environment variable holding a token sent with each POST. Default: none.
    #[serde(default)]
    pub token_env: Option<String>,
    /// The header that carries the token: `Authorization` sends `Bearer
    /// <token>`, any other header the token as it is. Default: `Authorization`.
    #[serde(default)]
    pub token_header: Option<String>,
    /// How many times a POST is tried in all. Default: 3.
    #[serde(default)]
    pub attempts: Option<u32>,
    /// Seconds one POST may take. Default: 5.
    #[serde(default)]
    pub timeout_seconds: Option<u64>,
}

/// How rows set aside (quarantine, dropped, pending) are written.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QuarantineConfig {
    /// Mask the values of `sensitive` columns in dq_error files, and withhold
    /// the raw text of records that could not be parsed (which cannot be split
    /// into columns reliably). Default: false.
    #[serde(default)]
    pub mask_sensitive: bool,
}

/// OpenLineage run events.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LineageConfig {
    /// Where START / COMPLETE / FAIL events go: a folder (path, `file://`,
    /// `s3://`), one JSON file per event, or an `http(s)://` endpoint each
    /// event is POSTed to. Default: none.
    #[serde(default)]
    pub location: Option<String>,
    /// The environment variable holding a bearer token for an `http(s)`
    /// location. Default: none (no `Authorization` header).
    #[serde(default)]
    pub api_key_env: Option<String>,
}

/// A Prometheus Pushgateway that receives each run's metrics.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MetricsPushConfig {
    /// The Pushgateway's base URL (`http://pushgateway:9091`). Default: none
    /// (nothing pushed); an empty value pushes nothing either.
    #[serde(default)]
    pub url: Option<String>,
    /// The `job` grouping label. Default: `silverline`.
    #[serde(default)]
    pub job: Option<String>,
    /// Seconds one push may take before it is given up. Default: 5.
    #[serde(default)]
    pub timeout_seconds: Option<u64>,
}

/// Completeness against the previous state: an entity whose latest state
/// before a period is open and that the drop does not declare for that period
/// is missing.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CompletenessConfig {
    /// SQL boolean expression over contract columns, true for an entity
    /// state that is closed (a closed entity is not expected any more), e.g.
    /// `account_status IN ('CLOSED', 'WRITTEN_OFF')`. Required.
    pub closed_when: String,
}

/// Commit retries.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CommitConfig {
    /// How many times a commit that meets a concurrent commit is tried in all. Default: 6.
    #[serde(default = "default_commit_attempts")]
    pub attempts: u32,
}

impl Default for CommitConfig {
    fn default() -> Self {
        Self {
            attempts: default_commit_attempts(),
        }
    }
}

/// A file of rules.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuleFileConfig {
    /// The file: `.csv` (control CSV) or `.json` / `.yaml` / `.yml` (dlt-meta expectations).
    pub path: String,
    /// For dlt-meta files, which carry no contributor type: the types the rules apply to.
    /// Default: `["*"]`. A control CSV names the type on each row.
    #[serde(default = "default_all_types")]
    pub contributor_types: Vec<String>,
    /// For dlt-meta files: how the `expect_or_quarantine` expressions read. Required when
    /// the file has an `expect_or_quarantine` block; refused on a control CSV.
    #[serde(default)]
    pub quarantine_expressions: Option<QuarantineExpressions>,
}

/// How the expressions of a dlt-meta `expect_or_quarantine` block read. Both
/// readings exist in the wild, so a file's reading is declared, never guessed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum QuarantineExpressions {
    /// Each expression describes a valid row, like every other rule: false or NULL quarantines.
    ValidRows,
    /// Each expression selects the rows to quarantine, as dlt-meta itself reads the block:
    /// true or NULL quarantines (the rule runs as `(<expression>) IS FALSE`).
    RowsToQuarantine,
}

/// A metric computed per contributor and period over the rows of that period.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MetricConfig {
    /// Name, as aggregate rules read it (`<name>`, `prev_<name>`, `avg_<name>`).
    pub name: String,
    /// Any SQL aggregate over the contract's columns, e.g. `count(DISTINCT account_id)`.
    pub expression: String,
}

/// How aggregate rules look back.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AggregatesConfig {
    /// How many previous periods `avg_<metric>` averages. Default: 3.
    #[serde(default = "default_average_periods")]
    pub average_periods: u32,
}

impl Default for AggregatesConfig {
    fn default() -> Self {
        Self {
            average_periods: default_average_periods(),
        }
    }
}

/// A reference table (Parquet or CSV files under a location).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReferenceConfig {
    /// Name; a row that finds a match has `_ref_<name>` true.
    pub name: String,
    /// Folder (path or URL) holding the reference's files.
    pub location: String,
    /// `csv` or `parquet`. Default: `parquet`.
    #[serde(default = "default_reference_format")]
    pub format: String,
    /// Join keys: row column -> reference column.
    pub keys: BTreeMap<String, String>,
}

/// The dataset contract.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DatasetConfig {
    /// A name for humans and summaries.
    pub name: String,
    /// Every column of the Silver table, in order.
    pub columns: Vec<ColumnConfig>,
    /// The columns that identify one entity (one account) across periods.
    pub entity_key: Vec<String>,
    /// The column that orders an entity's states (a date). Entity key + order column is the record key.
    pub order_column: String,
    /// The column that must equal the drop's contributor id; the baseline is read for this value.
    pub contributor_column: String,
    /// The CSV field delimiter, one ASCII character. Default: `,`.
    #[serde(default)]
    pub delimiter: Option<String>,
    /// How a header names the contract's columns: `exact` or `insensitive` (ASCII case). Default: exact.
    #[serde(default)]
    pub header_case: crate::config::contract::HeaderCase,
    /// Columns of a file that the contract lacks: `ignore`, `warn` (listed in the log and
    /// the summary's `schema_drift`) or `fail` (the drop is refused). Default: warn.
    #[serde(default)]
    pub on_extra_columns: crate::config::contract::ExtraColumns,
}

/// One column of the contract.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ColumnConfig {
    /// Column name as it appears in the file header and in Silver.
    pub name: String,
    /// `string`, `date`, `timestamp` (UTC), `int`, `long`, `double`, `boolean` or `decimal(P,S)`.
    #[serde(rename = "type")]
    pub data_type: String,
    /// Whether the column may be null. Default: true.
    #[serde(default = "default_true")]
    pub nullable: bool,
    /// Whether the column holds personal data (national ids, names): its values
    /// never appear in logs or summaries and, with `quarantine.mask_sensitive`,
    /// are masked in dq_error files. Default: false.
    #[serde(default)]
    pub sensitive: bool,
}

/// The Silver table.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TableConfig {
    /// Iceberg namespace. Default: `silver`.
    #[serde(default = "default_namespace")]
    pub namespace: String,
    /// Table name.
    pub name: String,
    /// Partition fields, in order. Default: unpartitioned.
    #[serde(default)]
    pub partition: Vec<PartitionFieldConfig>,
}

/// One partition field.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PartitionFieldConfig {
    /// The source column.
    pub column: String,
    /// `identity`, `year`, `month` or `day`. Default: `identity`.
    #[serde(default = "default_transform")]
    pub transform: String,
}

/// The baseline window.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BaselineConfig {
    /// How many months of Silver history before the drop's earliest period are read. Default: 3.
    #[serde(default = "default_lookback_months")]
    pub lookback_months: u32,
}

impl Default for BaselineConfig {
    fn default() -> Self {
        Self {
            lookback_months: default_lookback_months(),
        }
    }
}

/// Object storage locations (URLs: `file:///abs/path`, a relative path, `s3://bucket/prefix`, `memory://`)
/// and the S3 settings that serve them and the Iceberg warehouse. Credentials never live here: they
/// come from the standard AWS chain (env, profile, web identity, instance metadata).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StorageConfig {
    /// Root of the bronze drops: `<bronze>/<contributor>/<drop_id>/...`.
    pub bronze: String,
    /// Root of the dq_error output (quarantine, dropped, summaries, claims).
    pub dq_error: String,
    /// S3 endpoint for S3-compatible servers. Default: AWS's own endpoint for the region.
    #[serde(default)]
    pub endpoint: Option<String>,
    /// S3 region. Default: the AWS chain's region, else `us-east-1`.
    #[serde(default)]
    pub region: Option<String>,
    /// Path-style S3 URLs (`endpoint/bucket/key`), as most local servers need. Default: false.
    #[serde(default)]
    pub path_style: bool,
}

/// The Iceberg catalog.
#[derive(Debug, Clone, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase", deny_unknown_fields)]
pub enum CatalogConfig {
    /// SQLite-backed SQL catalog with a warehouse on storage: the embedded default.
    Sql {
        /// sqlx URI of the catalog database, e.g. `sqlite://data/catalog.db`. Relative paths are
        /// resolved against the config file's folder.
        uri: String,
        /// Warehouse location (a path or URL).
        warehouse: String,
        /// Catalog name. Default: `silverline`.
        #[serde(default = "default_catalog_name")]
        name: String,
    },
    /// Iceberg REST catalog.
    Rest {
        /// Catalog URI, e.g. `http://127.0.0.1:8181`.
        uri: String,
        /// Warehouse, e.g. `s3://warehouse`.
        warehouse: String,
        /// Environment variable holding the OAuth2 client credential `id:secret`.
        /// Default: `SILVERLINE_REST_CREDENTIAL`. Unset: no credential is sent.
        #[serde(default = "default_credential_env")]
        credential_env: String,
        /// Environment variable holding a bearer token. Default: `SILVERLINE_REST_TOKEN`.
        #[serde(default = "default_token_env")]
        token_env: String,
        /// Extra catalog properties passed as they are. Default: none.
        #[serde(default)]
        properties: BTreeMap<String, String>,
        /// Catalog name. Default: `silverline`.
        #[serde(default = "default_catalog_name")]
        name: String,
    },
}

/// Contributor types.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ContributorsConfig {
    /// The type of a contributor that no entry matches. Default: none: such a contributor is an error.
    #[serde(default)]
    pub default_type: Option<String>,
    /// Types, checked in order; the first that matches wins. Default: none.
    #[serde(default)]
    pub types: Vec<ContributorTypeConfig>,
    /// Per-contributor type overrides (contributor id -> type). Default: none.
    #[serde(default)]
    pub assign: BTreeMap<String, String>,
}

impl Default for ContributorsConfig {
    fn default() -> Self {
        Self {
            default_type: Some("default".to_string()),
            types: Vec::new(),
            assign: BTreeMap::new(),
        }
    }
}

/// One contributor type and the ids that belong to it.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ContributorTypeConfig {
    /// Type name, as rules name it.
    pub name: String,
    /// Contributor ids starting with any of these belong to the type. Default: none.
    #[serde(default)]
    pub prefixes: Vec<String>,
}

/// One rule. The expression describes a *valid* row: true passes, false or NULL fails.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuleConfig {
    /// Rule name; it appears in `_dq_errors`, the quarantine files and the summary.
    pub name: String,
    /// SQL boolean expression over the row's columns and `prev_<column>` (the previous state).
    pub expression: String,
    /// `warn`, `drop`, `quarantine` or `fail` (also `warning`, `critical`, `fatal`, and the
    /// dlt names `expect`, `expect_or_drop`, `expect_or_quarantine`, `expect_or_fail` and
    /// `expect_all`, `expect_all_or_drop`, `expect_all_or_fail`).
    pub severity: String,
    /// Contributor types the rule applies to; `*` for all. Default: `["*"]`.
    #[serde(default = "default_all_types")]
    pub contributor_types: Vec<String>,
    /// What the rule checks, for humans; used as the error message. Default: the expression.
    #[serde(default)]
    pub description: Option<String>,
    /// `row` (may read `prev_*`: then a trend rule), `aggregate` (over metrics) or
    /// `reference` (over `_ref_<name>`). Default: `row`.
    #[serde(default = "default_scope")]
    pub scope: String,
    /// SQL condition: rows outside it are not checked (counted as not applicable). Default: all rows.
    #[serde(default)]
    pub filter: Option<String>,
    /// Escalation: when more than this share (0..1) of the checked rows fail, the rule acts
    /// with `escalate_to` for the run. Default: none.
    #[serde(default)]
    pub escalate_above: Option<f64>,
    /// The severity of an escalated rule. Default: `fail`.
    #[serde(default)]
    pub escalate_to: Option<String>,
    /// Whether the rule runs. Default: true.
    #[serde(default = "default_true")]
    pub enabled: bool,
}

fn default_true() -> bool {
    true
}
fn default_namespace() -> String {
    "silver".to_string()
}
fn default_transform() -> String {
    "identity".to_string()
}
fn default_lookback_months() -> u32 {
    3
}
fn default_catalog_name() -> String {
    "silverline".to_string()
}
fn default_commit_attempts() -> u32 {
    6
}
fn default_stale_after_days() -> u32 {
    30
}
fn default_scope() -> String {
    "row".to_string()
}
fn default_average_periods() -> u32 {
    3
}
fn default_reference_format() -> String {
    "parquet".to_string()
}
fn default_credential_env() -> String {
    "SILVERLINE_REST_CREDENTIAL".to_string()
}
fn default_token_env() -> String {
    "SILVERLINE_REST_TOKEN".to_string()
}
fn default_all_types() -> Vec<String> {
    vec!["*".to_string()]
}
