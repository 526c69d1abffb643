//! OpenLineage run events (optional, `[lineage] location`): every attempt
//! at a drop is a run with a fresh id, START when it begins and COMPLETE or
//! FAIL when it ends — a drop that is missing or a run that fails before its
//! claim included — with a `parent` facet naming the drop, so every attempt
//! at one drop ties together. The drop is the input (row and null counts,
//! one assertion per rule), the Silver table the output (rows committed).
//! Events are typed ([`event`]), named per the naming spec ([`naming`]) and
//! written to a folder or POSTed to an endpoint ([`transport`]). A lineage
//! failure is logged, never fatal.

pub mod event;
mod naming;
mod transport;

use std::collections::BTreeMap;

use chrono::{DateTime, Days, NaiveDate, NaiveTime, SecondsFormat, Utc};

use crate::config::Plan;
use crate::config::rules::Rule;
use crate::core::drop::DropRef;
use crate::error::Error;
use crate::pipeline::summary::{RunStatus, Summary};
use event::{
    Assertion, ColumnMetric, DataQualityAssertions, DataQualityMetrics, DatasetName, ErrorMessage,
    EventType, Facet, InputDataset, InputFacets, Job, NominalTime, OutputDataset, OutputFacets,
    OutputStatistics, ParentRun, ParentRunId, Run, RunEvent, RunFacets,
};
use transport::Sink;

/// The namespace of silverline's jobs.
const JOB_NAMESPACE: &str = "silverline";

/// The namespace of the name-based (v5) UUIDs of drops (the parent runs).
const DROP_UUID_NAMESPACE: uuid::Uuid = uuid::Uuid::NAMESPACE_URL;

/// One attempt at a drop, as OpenLineage sees it.
pub struct Lineage {
    sink: Sink,
    job: Job,
    run_id: String,
    parent: ParentRun,
    started: DateTime<Utc>,
    input: DatasetName,
    output: DatasetName,
    file_prefix: String,
}

/// How an attempt ended, as its last event tells it.
pub enum Ending<'a> {
    /// Without error: the summary and the rules that judged the drop.
    Done(&'a Summary, &'a [&'a Rule]),
    /// With `error`, after getting as far as the summary says (none: before
    /// the run had one).
    Failed(Option<(&'a Summary, &'a [&'a Rule])>, &'a Error),
}

impl Lineage {
    /// Opens `[lineage] location` and reports the attempt's START (`None`
    /// when no location is set or it cannot be opened, which is logged).
    pub async fn start(plan: &Plan, drop: &DropRef) -> Option<Lineage> {
        let target = plan.lineage.as_ref()?;
        let sink = match Sink::open(plan, target).await {
            Ok(sink) => sink,
            Err(problem) => {
                tracing::warn!(problem = %problem, "OpenLineage events off for this run: cannot open lineage.location");
                return None;
            }
        };
        let job = Job {
            namespace: JOB_NAMESPACE.to_string(),
            name: format!("{}.{}", plan.contract.name, drop.contributor),
        };
        let drop_key = format!(
            "{}/{}/{}",
            plan.contract.name, drop.contributor, drop.drop_id
        );
        let run_id = uuid::Uuid::now_v7().to_string();
        let lineage = Lineage {
            sink,
            parent: ParentRun {
                run: ParentRunId {
                    run_id: uuid::Uuid::new_v5(&DROP_UUID_NAMESPACE, drop_key.as_bytes())
                        .to_string(),
                },
                job: job.clone(),
            },
            job,
            file_prefix: format!("{}/{}/{run_id}", drop.contributor, drop.drop_id),
            run_id,
            started: Utc::now(),
            input: naming::drop_dataset(plan, drop),
            output: naming::table_dataset(plan),
        };
        let start = lineage.event(EventType::Start, None);
        lineage.send(&start).await;
        Some(lineage)
    }

    /// Reports how the attempt ended: COMPLETE, or FAIL with its error.
    pub async fn finish(&self, ending: Ending<'_>) {
        let (event_type, judged, error) = match ending {
            Ending::Done(summary, rules) => (EventType::Complete, Some((summary, rules)), None),
            Ending::Failed(judged, error) => (EventType::Fail, judged, Some(error)),
        };
        let mut event = self.event(event_type, error);
        if let Some((summary, rules)) = judged {
            event.inputs[0].input_facets = input_facets(summary, rules);
            if event_type == EventType::Complete {
                event.outputs[0].output_facets = Some(output_facets(summary));
            }
        }
        self.send(&event).await;
    }

    /// The attempt's event of `event_type`, now, without dataset facets.
    fn event(&self, event_type: EventType, error: Option<&Error>) -> RunEvent {
        RunEvent {
            event_type,
            event_time: Utc::now().to_rfc3339_opts(SecondsFormat::Millis, true),
            producer: event::PRODUCER,
            schema_url: event::EVENT_SCHEMA_URL,
            run: Run {
                run_id: self.run_id.clone(),
                facets: RunFacets {
                    parent: Facet::new(self.parent.clone()),
                    nominal_time: Facet::new(nominal_day(self.started)),
                    error_message: error.map(|e| {
                        Facet::new(ErrorMessage {
                            message: e.to_string(),
                            programming_language: "rust",
                        })
                    }),
                },
            },
            job: self.job.clone(),
            inputs: vec![InputDataset {
                dataset: self.input.clone(),
                input_facets: InputFacets::default(),
            }],
            outputs: vec![OutputDataset {
                dataset: self.output.clone(),
                output_facets: None,
            }],
        }
    }

    /// Delivers `event`, logging (never failing on) a problem.
    async fn send(&self, event: &RunEvent) {
        let file = format!("{}-{}.json", self.file_prefix, event.event_type.as_str());
        let sent = match serde_json::to_vec(event) {
            Ok(body) => self.sink.send(&file, body).await,
            Err(e) => Err(e.to_string()),
        };
        if let Err(problem) = sent {
            tracing::warn!(problem = %problem, event = event.event_type.as_str(), "could not deliver the OpenLineage event");
        }
    }
}

/// The UTC day of `started`, midnight to midnight: the day the attempt ran for.
fn nominal_day(started: DateTime<Utc>) -> NominalTime {
    let day = started.date_naive();
    let midnight = |date: NaiveDate| {
        date.and_time(NaiveTime::MIN)
            .and_utc()
            .to_rfc3339_opts(SecondsFormat::Secs, true)
    };
    NominalTime {
        nominal_start_time: midnight(day),
        nominal_end_time: midnight(day.checked_add_days(Days::new(1)).unwrap_or(day)),
    }
}

/// What the run measured of the drop: row and null counts once it was
/// read, one assertion per rule once it was judged.
fn input_facets(summary: &Summary, rules: &[&Rule]) -> InputFacets {
    let metrics = summary.column_nulls.as_ref().map(|read| {
        let column_metrics: BTreeMap<String, ColumnMetric> = read
            .nulls
            .iter()
            .map(|(column, &nulls)| {
                let metric = ColumnMetric {
                    null_count: nulls,
                    count: read.rows.saturating_sub(nulls),
                };
                (column.clone(), metric)
            })
            .collect();
        Facet::new(DataQualityMetrics {
            row_count: summary.counts.received,
            column_metrics,
        })
    });
    let assertions = (!summary.rules.is_empty()).then(|| {
        let column_of = |name: &str| {
            rules
                .iter()
                .find(|r| r.name == name)
                .and_then(|r| r.column.clone())
        };
        Facet::new(DataQualityAssertions {
            assertions: summary
                .rules
                .iter()
                .map(|outcome| Assertion {
                    assertion: outcome.rule.clone(),
                    success: outcome.failed == 0,
                    column: column_of(&outcome.rule),
                })
                .collect(),
        })
    });
    InputFacets {
        data_quality_metrics: metrics,
        data_quality_assertions: assertions,
    }
}

/// What the run wrote to Silver: the rows it committed (none when the drop
/// was committed before or by a concurrent run).
fn output_facets(summary: &Summary) -> OutputFacets {
    let committed = match summary.status {
        RunStatus::Committed => summary.counts.committed,
        _ => 0,
    };
    OutputFacets {
        output_statistics: Facet::new(OutputStatistics {
            row_count: committed,
        }),
    }
}
