//! The OpenLineage 2-0-2 run event and the facets silverline emits, as
//! types: serialising them is the only way an event is written. Every facet
//! carries `_producer` and the `_schemaURL` of the published facet schema
//! version it follows (the copies under `tests/openlineage/` check them).

use std::collections::BTreeMap;

use serde::Serialize;

/// The event schema the events follow.
pub const EVENT_SCHEMA_URL: &str =
    "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent";

/// Who produced an event or facet (`producer`, `_producer`).
pub const PRODUCER: &str = concat!("urn:silverline:", env!("CARGO_PKG_VERSION"));

/// An OpenLineage run event.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RunEvent {
    /// The run's transition.
    pub event_type: EventType,
    /// When it happened (RFC 3339).
    pub event_time: String,
    /// [`PRODUCER`].
    pub producer: &'static str,
    /// [`EVENT_SCHEMA_URL`].
    #[serde(rename = "schemaURL")]
    pub schema_url: &'static str,
    /// The run (one attempt at a drop).
    pub run: Run,
    /// The job the run is of.
    pub job: Job,
    /// The drop.
    pub inputs: Vec<InputDataset>,
    /// The Silver table.
    pub outputs: Vec<OutputDataset>,
}

/// The run transitions silverline reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum EventType {
    /// The attempt began.
    Start,
    /// It ended without error.
    Complete,
    /// It ended with an error.
    Fail,
}

impl EventType {
    /// Lower-case, for file names.
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Start => "start",
            EventType::Complete => "complete",
            EventType::Fail => "fail",
        }
    }
}

/// A run and its facets.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Run {
    /// A fresh UUID per attempt.
    pub run_id: String,
    /// Its facets.
    pub facets: RunFacets,
}

/// The run facets silverline emits.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RunFacets {
    /// The drop every attempt at it belongs to.
    pub parent: Facet<ParentRun>,
    /// The day the attempt ran for.
    pub nominal_time: Facet<NominalTime>,
    /// Why the attempt failed (FAIL only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error_message: Option<Facet<ErrorMessage>>,
}

/// A job (also the parent facet's job).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Job {
    /// Its namespace.
    pub namespace: String,
    /// Its name in the namespace.
    pub name: String,
}

/// A dataset named as the OpenLineage naming spec says.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DatasetName {
    /// The datasource (`file`, `s3://bucket`, ...).
    pub namespace: String,
    /// The dataset in it (a path, a table).
    pub name: String,
}

/// An input dataset with its input facets.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct InputDataset {
    /// Its name.
    #[serde(flatten)]
    pub dataset: DatasetName,
    /// What the run measured of it (none on START).
    #[serde(skip_serializing_if = "InputFacets::is_empty")]
    pub input_facets: InputFacets,
}

/// The input facets silverline emits.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct InputFacets {
    /// Row count and per-column null counts of the rows read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data_quality_metrics: Option<Facet<DataQualityMetrics>>,
    /// One assertion per rule that judged the rows.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data_quality_assertions: Option<Facet<DataQualityAssertions>>,
}

impl InputFacets {
    /// Whether there is no facet to write.
    pub fn is_empty(&self) -> bool {
        self.data_quality_metrics.is_none() && self.data_quality_assertions.is_none()
    }
}

/// An output dataset with its output facets.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OutputDataset {
    /// Its name.
    #[serde(flatten)]
    pub dataset: DatasetName,
    /// What the run wrote to it (COMPLETE only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_facets: Option<OutputFacets>,
}

/// The output facets silverline emits.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OutputFacets {
    /// Rows committed.
    pub output_statistics: Facet<OutputStatistics>,
}

/// A facet's own fields and the base fields every facet carries.
#[derive(Debug, Clone, Serialize)]
pub struct Facet<T> {
    /// [`PRODUCER`].
    #[serde(rename = "_producer")]
    pub producer: &'static str,
    /// The facet schema version it follows.
    #[serde(rename = "_schemaURL")]
    pub schema_url: &'static str,
    /// Its fields.
    #[serde(flatten)]
    pub fields: T,
}

/// A facet type and the published schema version it follows.
pub trait FacetSchema {
    /// The schema's `$id` and the facet's definition in it.
    const SCHEMA_URL: &'static str;
}

impl<T: FacetSchema> Facet<T> {
    /// `fields` as a facet.
    pub fn new(fields: T) -> Facet<T> {
        Facet {
            producer: PRODUCER,
            schema_url: T::SCHEMA_URL,
            fields,
        }
    }
}

/// `parent`: the run this attempt belongs to.
#[derive(Debug, Clone, Serialize)]
pub struct ParentRun {
    /// The parent run.
    pub run: ParentRunId,
    /// The parent run's job.
    pub job: Job,
}

/// A parent run's id.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ParentRunId {
    /// A UUID.
    pub run_id: String,
}

impl FacetSchema for ParentRun {
    const SCHEMA_URL: &'static str =
        "https://openlineage.io/spec/facets/1-0-0/ParentRunFacet.json#/$defs/ParentRunFacet";
}

/// `nominalTime`: the period the run is for.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NominalTime {
    /// Start (included), RFC 3339.
    pub nominal_start_time: String,
    /// End (excluded), RFC 3339.
    pub nominal_end_time: String,
}

impl FacetSchema for NominalTime {
    const SCHEMA_URL: &'static str = "https://openlineage.io/spec/facets/1-0-0/NominalTimeRunFacet.json#/$defs/NominalTimeRunFacet";
}

/// `errorMessage`: why the run failed.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ErrorMessage {
    /// The error as the run reports it (never a row value).
    pub message: String,
    /// `rust`.
    pub programming_language: &'static str,
}

impl FacetSchema for ErrorMessage {
    const SCHEMA_URL: &'static str = "https://openlineage.io/spec/facets/1-0-0/ErrorMessageRunFacet.json#/$defs/ErrorMessageRunFacet";
}

/// `dataQualityMetrics`: counts of the rows read.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DataQualityMetrics {
    /// Records received.
    pub row_count: u64,
    /// Per contract column, of the rows parsed.
    pub column_metrics: BTreeMap<String, ColumnMetric>,
}

/// One column's counts (never a value: no min, max, sum or quantiles).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ColumnMetric {
    /// Rows without a value.
    pub null_count: u64,
    /// Rows with one.
    pub count: u64,
}

impl FacetSchema for DataQualityMetrics {
    const SCHEMA_URL: &'static str = "https://openlineage.io/spec/facets/1-0-2/DataQualityMetricsInputDatasetFacet.json#/$defs/DataQualityMetricsInputDatasetFacet";
}

/// `dataQualityAssertions`: each rule and whether every row passed it.
#[derive(Debug, Clone, Serialize)]
pub struct DataQualityAssertions {
    /// One per rule.
    pub assertions: Vec<Assertion>,
}

/// One rule's outcome.
#[derive(Debug, Clone, Serialize)]
pub struct Assertion {
    /// The rule's name.
    pub assertion: String,
    /// No row (or period) failed it.
    pub success: bool,
    /// The column it checks, when it reads one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub column: Option<String>,
}

impl FacetSchema for DataQualityAssertions {
    const SCHEMA_URL: &'static str = "https://openlineage.io/spec/facets/1-0-0/DataQualityAssertionsDatasetFacet.json#/$defs/DataQualityAssertionsDatasetFacet";
}

/// `outputStatistics`: what the run wrote.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OutputStatistics {
    /// Rows committed.
    pub row_count: u64,
}

impl FacetSchema for OutputStatistics {
    const SCHEMA_URL: &'static str = "https://openlineage.io/spec/1-0-1/OutputStatisticsOutputDatasetFacet.json#/$defs/OutputStatisticsOutputDatasetFacet";
}
