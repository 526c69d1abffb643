//! OpenLineage through the binary: the events of a run sequence (a committed
//! run, a run a `fail` rule stops, its rerun, a missing drop) written to a
//! folder, each valid against the official 2-0-2 spec and every facet
//! against its own published schema (copies in `tests/openlineage/`,
//! resolved offline); and the HTTP transport against a real receiver on
//! loopback (bearer token, a 500 retried, each event delivered once).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod harness;

use std::io::Write;
use std::path::Path;

use assert_cmd::Command;
use harness::{month, output, project, put_drop, receiver, run_args, sensitive_values, silverline};
use jsonschema::Registry;
use serde_json::{Value, json};
use silverline::demo::generate::{Portfolio, Statement, mis_map_limits};

/// The core spec's `$id`.
const SPEC: &str = "https://openlineage.io/spec/2-0-2/OpenLineage.json";

/// The older core versions the vendored facet schemas `$ref` for their base
/// facet; resolved to the 2-0-2 copy (see tests/openlineage/README.md).
const OLDER_SPECS: [&str; 2] = [
    "https://openlineage.io/spec/1-0-1/OpenLineage.json",
    "https://openlineage.io/spec/1-0-2/OpenLineage.json",
];

/// A vendored schema file.
fn vendored(name: &str) -> Value {
    let path = Path::new("tests/openlineage").join(name);
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
}

/// The vendored spec and facet schemas, each under its `$id`.
fn registry() -> Registry<'static> {
    let spec = vendored("OpenLineage.json");
    let mut resources = vec![(SPEC.to_string(), spec.clone())];
    for older in OLDER_SPECS {
        let mut copy = spec.clone();
        copy["$id"] = json!(older);
        resources.push((older.to_string(), copy));
    }
    for entry in std::fs::read_dir("tests/openlineage/facets").unwrap() {
        let path = entry.unwrap().path();
        let facet: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        resources.push((facet["$id"].as_str().unwrap().to_string(), facet));
    }
    let mut registry = Registry::new();
    for (uri, schema) in resources {
        registry = registry.add(uri, schema).unwrap();
    }
    registry.prepare().unwrap()
}

/// What `value` breaks of the schema at `reference` (a URL into a vendored
/// schema; one that is not vendored fails, nothing is fetched).
fn violations(registry: &Registry, value: &Value, reference: &str) -> Vec<String> {
    let validator = jsonschema::options()
        .with_registry(registry)
        .should_validate_formats(true)
        .build(&json!({ "$ref": reference }))
        .unwrap_or_else(|e| panic!("no vendored schema for {reference}: {e}"));
    validator
        .iter_errors(value)
        .map(|e| e.to_string())
        .collect()
}

/// Every facet of `event`, by where it sits (`run.parent`, `inputs[0].dataQualityMetrics`...).
fn facets(event: &Value) -> Vec<(String, Value)> {
    let mut found = Vec::new();
    let mut collect = |at: &str, facets: &Value| {
        for (name, facet) in facets.as_object().into_iter().flatten() {
            found.push((format!("{at}.{name}"), facet.clone()));
        }
    };
    collect("run", &event["run"]["facets"]);
    for (i, input) in event["inputs"].as_array().unwrap().iter().enumerate() {
        collect(&format!("inputs[{i}]"), &input["inputFacets"]);
    }
    for (i, output) in event["outputs"].as_array().unwrap().iter().enumerate() {
        collect(&format!("outputs[{i}]"), &output["outputFacets"]);
    }
    found
}

/// Asserts `event` is a valid RunEvent (and a valid document of the whole
/// spec) and every facet valid against the schema its `_schemaURL` names.
fn assert_valid(registry: &Registry, event: &Value) {
    for reference in [format!("{SPEC}#/$defs/RunEvent"), SPEC.to_string()] {
        let errors = violations(registry, event, &reference);
        assert!(errors.is_empty(), "{reference}: {errors:?}\n{event:#}");
    }
    assert_eq!(event["schemaURL"], format!("{SPEC}#/$defs/RunEvent"));
    for (at, facet) in facets(event) {
        let schema = facet["_schemaURL"].as_str().unwrap();
        let errors = violations(registry, &facet, schema);
        assert!(
            errors.is_empty(),
            "{at} against {schema}: {errors:?}\n{facet:#}"
        );
    }
}

/// Appends `lines` to the config file.
fn append(config: &Path, lines: &str) {
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(config)
        .unwrap();
    writeln!(file, "\n{lines}").unwrap();
}

/// Every event under the lineage folder, oldest first (run ids are UUIDv7).
fn events_in(folder: &Path) -> Vec<Value> {
    let mut files = harness::walk(folder);
    files.sort();
    let mut events: Vec<Value> = files
        .iter()
        .map(|p| serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap())
        .collect();
    events.sort_by(|a, b| {
        let key = |e: &Value| {
            (
                e["run"]["runId"].as_str().unwrap().to_string(),
                e["eventType"] != "START",
            )
        };
        key(a).cmp(&key(b))
    });
    events
}

/// The events of `drop_id` (its input's name ends with it), oldest first.
fn events_of<'a>(events: &'a [Value], drop_id: &str) -> Vec<&'a Value> {
    events
        .iter()
        .filter(|e| {
            e["inputs"][0]["name"]
                .as_str()
                .unwrap()
                .ends_with(&format!("/BANK_C/{drop_id}"))
        })
        .collect()
}

/// The project with a `fail` trend rule (`limit_stable`): a drop whose
/// limits moved fails the run and commits nothing.
fn failing_limits_project() -> (tempfile::TempDir, std::path::PathBuf) {
    project(|t| {
        t.replace(
            "prev_instalment_amount),critical,",
            "prev_instalment_amount),fail,",
        )
    })
}

/// A committed run, a failed one, its rerun with the drop fixed, a missing
/// drop: two events each (START, then COMPLETE or FAIL), all valid, a fresh
/// run id per attempt, one parent per drop, counts but no value.
#[test]
fn every_attempt_is_a_valid_start_and_end_tied_to_its_drop() {
    let registry = registry();
    let (tmp, config) = failing_limits_project();
    append(&config, "[lineage]\nlocation = \"../lineage\"");
    let mut bank = Portfolio::new("BANK_C", 8, false, 3);
    let january = bank.statements(month(2026, 1), false);
    put_drop(tmp.path(), "BANK_C", "2026-01", &january);
    let february = bank.statements(month(2026, 2), false);
    let mut moved = february.clone();
    mis_map_limits(&mut moved);
    put_drop(tmp.path(), "BANK_C", "2026-02", &moved);
    let config = config.to_str().unwrap();

    silverline(&run_args(config, "BANK_C", "2026-01")).success();
    let failed = output(&silverline(&run_args(config, "BANK_C", "2026-02")).code(1));
    assert!(failed.contains("limit_stable"), "{failed}");
    put_drop(tmp.path(), "BANK_C", "2026-02", &february);
    silverline(&run_args(config, "BANK_C", "2026-02")).success();
    silverline(&run_args(config, "BANK_C", "2026-05")).code(5);

    let events = events_in(&tmp.path().join("lineage"));
    assert_eq!(events.len(), 8, "{events:#?}");
    for event in &events {
        assert_valid(&registry, event);
    }
    let kinds: Vec<String> = events
        .iter()
        .map(|e| e["eventType"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        kinds,
        [
            "START", "COMPLETE", "START", "FAIL", "START", "COMPLETE", "START", "FAIL"
        ]
    );
    assert_attempts_and_parents(&events);
    assert_committed_run(events_of(&events, "2026-01")[1], &january);
    assert_failed_run(events_of(&events, "2026-02")[1]);
    assert_missing_drop(&events_of(&events, "2026-05"));
    let text = serde_json::to_string(&events).unwrap();
    for secret in sensitive_values(&[january, february, moved].concat()) {
        assert!(
            !text.contains(&secret),
            "a sensitive value reached an event"
        );
    }
}

/// A fresh run id per attempt shared by its START and its end; the attempts
/// at one drop share one parent (a name-based UUID of the drop), and the
/// drops have different ones.
fn assert_attempts_and_parents(events: &[Value]) {
    let run_ids: Vec<&str> = events
        .iter()
        .map(|e| e["run"]["runId"].as_str().unwrap())
        .collect();
    for pair in run_ids.chunks(2) {
        assert_eq!(
            pair[0], pair[1],
            "an attempt's START and end share its run id"
        );
    }
    let mut attempts: Vec<&str> = run_ids.iter().step_by(2).copied().collect();
    attempts.dedup();
    assert_eq!(attempts.len(), 4, "a fresh run id per attempt: {run_ids:?}");
    let parent = |e: &Value| {
        e["run"]["facets"]["parent"]["run"]["runId"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let february = events_of(events, "2026-02");
    assert_eq!(february.len(), 4);
    assert!(february.iter().all(|e| parent(e) == parent(february[0])));
    assert_ne!(parent(february[0]), parent(events_of(events, "2026-01")[0]));
    assert_ne!(parent(february[0]), parent(events_of(events, "2026-05")[0]));
    for event in events {
        assert_eq!(event["run"]["facets"]["parent"]["job"], event["job"]);
        assert_eq!(event["job"]["namespace"], "silverline");
        assert_eq!(event["job"]["name"], "credit_statements.BANK_C");
        assert!(event["run"]["facets"]["nominalTime"]["nominalStartTime"].is_string());
    }
    // START claims no counts: it knows none yet.
    for start in events.iter().filter(|e| e["eventType"] == "START") {
        assert!(start["inputs"][0].get("inputFacets").is_none(), "{start:#}");
        assert!(
            start["outputs"][0].get("outputFacets").is_none(),
            "{start:#}"
        );
    }
}

/// The committed run: the drop as a local file (`file`, its absolute
/// path), the table by its location, counts per column, one assertion per
/// rule with its column, the rows committed.
fn assert_committed_run(complete: &Value, rows: &[Statement]) {
    let input = &complete["inputs"][0];
    assert_eq!(input["namespace"], "file");
    let name = input["name"].as_str().unwrap();
    assert!(
        Path::new(name).is_absolute() && name.ends_with("/data/bronze/BANK_C/2026-01"),
        "{name}"
    );
    let output = &complete["outputs"][0];
    assert_eq!(output["namespace"], "file");
    let table = output["name"].as_str().unwrap();
    assert!(
        table.ends_with("/data/warehouse/silver/credit_statements"),
        "{table}"
    );
    assert_eq!(
        output["outputFacets"]["outputStatistics"]["rowCount"],
        rows.len()
    );
    let metrics = &input["inputFacets"]["dataQualityMetrics"];
    assert_eq!(metrics["rowCount"], rows.len());
    let account = &metrics["columnMetrics"]["account_id"];
    assert_eq!(
        (account["nullCount"].as_u64(), account["count"].as_u64()),
        (Some(0), Some(rows.len() as u64))
    );
    let passport = &metrics["columnMetrics"]["passport_no"];
    let without = rows.iter().filter(|r| r.identity.2.is_none()).count();
    assert_eq!(passport["nullCount"], without);
    let assertions = input["inputFacets"]["dataQualityAssertions"]["assertions"]
        .as_array()
        .unwrap();
    let limit = assertions
        .iter()
        .find(|a| a["assertion"] == "limit_stable")
        .unwrap();
    assert_eq!(limit["success"], true);
    assert!(
        assertions.iter().any(|a| a.get("column").is_some()),
        "{assertions:#?}"
    );
}

/// The run the `fail` rule stopped: FAIL with the error, the rule's
/// assertion failed, nothing written to the table.
fn assert_failed_run(fail: &Value) {
    let error = &fail["run"]["facets"]["errorMessage"];
    assert_eq!(error["programmingLanguage"], "rust");
    assert!(
        error["message"].as_str().unwrap().contains("limit_stable"),
        "{error:#}"
    );
    let assertions = fail["inputs"][0]["inputFacets"]["dataQualityAssertions"]["assertions"]
        .as_array()
        .unwrap();
    let limit = assertions
        .iter()
        .find(|a| a["assertion"] == "limit_stable")
        .unwrap();
    assert_eq!(limit["success"], false);
    assert!(fail["outputs"][0].get("outputFacets").is_none(), "{fail:#}");
}

/// A drop that is not there: START, then FAIL saying so, no counts.
fn assert_missing_drop(events: &[&Value]) {
    assert_eq!(events.len(), 2);
    assert_fail_without_counts(events[1], "drop not arrived yet");
}

/// A FAIL whose error message says `says`, with no data-quality counts.
fn assert_fail_without_counts(fail: &Value, says: &str) {
    let message = fail["run"]["facets"]["errorMessage"]["message"]
        .as_str()
        .unwrap();
    assert!(message.contains(says), "{message}");
    assert!(fail["inputs"][0].get("inputFacets").is_none());
}

/// A contributor the configuration gives no type: exit 2, and still a
/// START and a FAIL saying why, valid, with no counts.
#[test]
fn a_run_refused_before_its_summary_still_ends_in_fail() {
    let registry = registry();
    let (_tmp, config) = project(|t| {
        t.replace(
            "default_type = \"bank\"\ntypes = [",
            "types = [{ name = \"bank\", prefixes = [\"BANK\"] }, ",
        )
    });
    append(&config, "[lineage]\nlocation = \"../lineage\"");
    let refused =
        output(&silverline(&run_args(config.to_str().unwrap(), "ZZZ_BANK", "2026-01")).code(2));
    assert!(refused.contains("has no type"), "{refused}");
    let events = events_in(&config.parent().unwrap().join("../lineage"));
    let kinds: Vec<&str> = events
        .iter()
        .map(|e| e["eventType"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["START", "FAIL"]);
    for event in &events {
        assert_valid(&registry, event);
    }
    assert_fail_without_counts(&events[1], "has no type");
}

/// The schemas are not a formality: a facet without `_producer`, an event
/// without its job, a metrics facet without `columnMetrics` are refused.
#[test]
fn the_vendored_schemas_refuse_what_the_spec_refuses() {
    let registry = registry();
    let (tmp, config) = project(|t| t);
    append(&config, "[lineage]\nlocation = \"../lineage\"");
    harness::put_january(tmp.path(), "BANK_C", 4);
    silverline(&run_args(config.to_str().unwrap(), "BANK_C", "2026-01")).success();
    let complete = events_in(&tmp.path().join("lineage")).pop().unwrap();
    assert_valid(&registry, &complete);
    let run_event = format!("{SPEC}#/$defs/RunEvent");
    let mut jobless = complete.clone();
    jobless.as_object_mut().unwrap().remove("job");
    assert!(!violations(&registry, &jobless, &run_event).is_empty());
    let mut anonymous = complete.clone();
    anonymous["run"]["facets"]["parent"]
        .as_object_mut()
        .unwrap()
        .remove("_producer");
    assert!(!violations(&registry, &anonymous, &run_event).is_empty());
    let metrics = &complete["inputs"][0]["inputFacets"]["dataQualityMetrics"];
    let mut columnless = metrics.clone();
    columnless.as_object_mut().unwrap().remove("columnMetrics");
    assert!(
        !violations(
            &registry,
            &columnless,
            metrics["_schemaURL"].as_str().unwrap()
        )
        .is_empty()
    );
}

/// An `http://` location: every event POSTed as JSON with the bearer token
/// from the variable `api_key_env` names; a 500 is retried and the event
/// delivered once; the token shows in no output.
#[test]
fn events_are_posted_with_the_token_and_a_500_is_retried() {
    let (url, receiver) = receiver::start();
    receiver.fail_first(1);
    let (tmp, config) = project(|t| t);
    append(
        &config,
        &format!(
            "[lineage]\nlocation = \"{url}/api/v1/lineage\"\napi_key_env = \"SILVERLINE_TEST_OL_TOKEN\""
        ),
    );
    harness::put_january(tmp.path(), "BANK_C", 4);
    let token = "t0ken-5e3c";
    let run = Command::cargo_bin("silverline")
        .unwrap()
        .env("SILVERLINE_TEST_OL_TOKEN", token)
        .args(["--log-format", "text"])
        .args(run_args(config.to_str().unwrap(), "BANK_C", "2026-01"))
        .assert()
        .success();
    assert!(!output(&run).contains(token));

    let received = receiver.received();
    assert_eq!(
        received.iter().map(|r| r.status).collect::<Vec<_>>(),
        [500, 200, 200]
    );
    for request in &received {
        assert_eq!(
            (request.method.as_str(), request.path.as_str()),
            ("POST", "/api/v1/lineage")
        );
        assert_eq!(
            request.header("authorization"),
            Some(format!("Bearer {token}").as_str())
        );
        assert_eq!(request.header("content-type"), Some("application/json"));
    }
    let delivered: Vec<Value> = receiver.delivered().iter().map(|r| r.json()).collect();
    let kinds: Vec<&str> = delivered
        .iter()
        .map(|e| e["eventType"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        ["START", "COMPLETE"],
        "each event delivered exactly once"
    );
    assert_eq!(delivered[0]["run"]["runId"], delivered[1]["run"]["runId"]);
    let registry = registry();
    for event in &delivered {
        assert_valid(&registry, event);
    }
}

/// An endpoint that refuses every connection, or a token variable that is
/// not set: a warning naming the problem, and the run commits as without
/// lineage (exit 0).
#[test]
fn an_event_that_cannot_be_delivered_is_a_warning_and_the_run_stands() {
    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}/api/v1/lineage", listener.local_addr().unwrap())
    };
    let (url, receiver) = receiver::start();
    for (location, token_env, said) in [
        (
            closed.as_str(),
            None,
            "could not deliver the OpenLineage event",
        ),
        (
            url.as_str(),
            Some("SILVERLINE_TEST_UNSET_TOKEN"),
            "SILVERLINE_TEST_UNSET_TOKEN, which is not set",
        ),
    ] {
        let (tmp, config) = project(|t| t);
        let token = token_env
            .map(|v| format!("\napi_key_env = \"{v}\""))
            .unwrap_or_default();
        append(
            &config,
            &format!("[lineage]\nlocation = \"{location}\"{token}"),
        );
        harness::put_january(tmp.path(), "BANK_C", 4);
        let run = silverline(&run_args(config.to_str().unwrap(), "BANK_C", "2026-01")).success();
        let text = output(&run);
        assert!(text.contains(said), "{text}");
    }
    assert!(
        receiver.received().is_empty(),
        "nothing sent without its token"
    );
}

/// check-config takes an `http(s)` endpoint, and refuses a location it
/// cannot deliver to, naming the setting.
#[test]
fn check_config_validates_the_lineage_location() {
    let (_tmp, config) = project(|t| t);
    append(
        &config,
        "[lineage]\nlocation = \"https://lineage.example/api/v1/lineage\"\napi_key_env = \"OPENLINEAGE_API_KEY\"",
    );
    let path = config.to_str().unwrap();
    silverline(&["check-config", "--config", path]).success();
    let (_tmp, config) = project(|t| t);
    append(
        &config,
        "[lineage]\nlocation = \"ftp://lineage.example/events\"",
    );
    let text = output(&silverline(&["check-config", "--config", config.to_str().unwrap()]).code(2));
    assert!(
        text.contains("lineage.location") && text.contains("'ftp'"),
        "{text}"
    );
}

/// The receiver records what it got, and answers 500 to the first N requests.
#[tokio::test]
async fn the_receiver_records_requests_and_fails_the_first_n() {
    let (url, receiver) = receiver::start();
    receiver.fail_first(1);
    let client = reqwest::Client::new();
    let mut statuses = Vec::new();
    for _ in 0..2 {
        let response = client
            .post(format!("{url}/hook?x=1"))
            .header("authorization", "Bearer t0ken")
            .body(r#"{"a":1}"#)
            .send()
            .await
            .unwrap();
        statuses.push(response.status().as_u16());
    }
    assert_eq!(statuses, [500, 200]);
    let received = receiver.received();
    assert_eq!(received.len(), 2);
    assert_eq!(received[1].method, "POST");
    assert_eq!(received[1].path, "/hook?x=1");
    assert_eq!(received[1].header("Authorization"), Some("Bearer t0ken"));
    assert_eq!(received[1].json()["a"], 1);
    assert_eq!(receiver.delivered().len(), 1);
}
