//! OpenLineage run events (optional): START when a run is claimed, COMPLETE
//! or FAIL when it ends, each a JSON file under `[lineage] location`, with the
//! drop as input, the Silver table as output, and data-quality facets (row
//! count, one assertion per rule). A lineage failure is logged, never fatal.

use serde_json::{Value, json};

use crate::config::Plan;
use crate::infra::catalog::table_ident;
use crate::infra::storage::Stores;
use crate::pipeline::summary::{RunStatus, Summary};

/// The OpenLineage event type of a run's state.
fn event_type(status: RunStatus) -> &'static str {
    match status {
        RunStatus::Running => "START",
        RunStatus::Failed => "FAIL",
        _ => "COMPLETE",
    }
}

/// The event for `summary` as it stands.
pub fn run_event(plan: &Plan, summary: &Summary) -> Value {
    let run_key = summary.run_key.clone().unwrap_or_default();
    // A name-based (v5) UUID: the same run key always names the same run.
    let run_uuid = uuid::Uuid::new_v5(&uuid::Uuid::NAMESPACE_OID, run_key.as_bytes());
    let assertions: Vec<Value> = summary
        .rules
        .iter()
        .map(|r| json!({"assertion": r.rule, "success": r.failed == 0}))
        .collect();
    json!({
        "eventType": event_type(summary.status),
        "eventTime": summary.finished_at.clone().unwrap_or_else(|| summary.started_at.clone()),
        "producer": concat!("urn:silverline:", env!("CARGO_PKG_VERSION")),
        "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/definitions/RunEvent",
        "run": {"runId": run_uuid.to_string(), "facets": {}},
        "job": {"namespace": "silverline", "name": format!("{}.{}", summary.dataset, summary.contributor)},
        "inputs": [{
            "namespace": plan.storage.bronze,
            "name": format!("{}/{}", summary.contributor, summary.drop_id),
            "inputFacets": {
                "dataQualityMetrics": {"rowCount": summary.counts.received},
                "dataQualityAssertions": {"assertions": assertions},
            },
        }],
        "outputs": [{
            "namespace": plan.catalog.warehouse(),
            "name": table_ident(&plan.table).to_string(),
            "outputFacets": {"outputStatistics": {"rowCount": summary.counts.committed}},
        }],
    })
}

/// Writes the event for `summary` if `[lineage] location` is set.
pub async fn emit(plan: &Plan, stores: &Stores, summary: &Summary) {
    let Some(location) = &plan.lineage_location else {
        return;
    };
    let event = run_event(plan, summary);
    let name = format!(
        "{}/{}-{}.json",
        summary.contributor,
        summary.run_id.clone().unwrap_or_default(),
        event_type(summary.status).to_ascii_lowercase()
    );
    let written = match stores.open(location, "lineage.location") {
        Ok(folder) => folder.put(&name, event.to_string().into_bytes()).await,
        Err(e) => Err(e),
    };
    if let Err(error) = written {
        tracing::warn!(error = %error, "could not write the OpenLineage event");
    }
}
