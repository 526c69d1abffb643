//! Rule sets as configuration, end to end on the embedded default: contributor
//! types with their own thresholds, dlt-meta files in JSON and YAML, filters,
//! escalation past a failure rate, and baselines taken from committed Silver
//! only.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use chrono::NaiveDate;
use silverline::Error;
use silverline::demo::generate::{Portfolio, jump_arrears, mis_map_limits};
use silverline::demo::{DEFAULT_CONFIG, Workspace};
use silverline::pipeline::RunOptions;
use silverline::pipeline::summary::Summary;

fn month(y: i32, m: u32) -> NaiveDate {
    NaiveDate::from_ymd_opt(y, m, 1).unwrap()
}

async fn workspace_with(
    config: &str,
    overrides: &[(&str, &str)],
) -> (tempfile::TempDir, Workspace) {
    let tmp = tempfile::tempdir().unwrap();
    let overrides: Vec<(String, String)> = overrides
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let ws = Workspace::create_with(&tmp.path().join("ws"), config, &overrides)
        .await
        .unwrap();
    (tmp, ws)
}

/// Commits one month of history, then runs `next` (built from the following month) and returns its summary.
async fn history_then(
    ws: &Workspace,
    portfolio: &mut Portfolio,
    contributor: &str,
    next: impl FnOnce(&mut Vec<silverline::demo::generate::Statement>),
) -> Result<Summary, Error> {
    let history = portfolio.statements(month(2026, 1), false);
    ws.put_drop(contributor, "2026-01", &history).await.unwrap();
    ws.run_drop(contributor, "2026-01", &RunOptions::default())
        .await
        .unwrap();
    let mut rows = portfolio.statements(month(2026, 2), false);
    next(&mut rows);
    ws.put_drop(contributor, "2026-02", &rows).await.unwrap();
    ws.run_drop(contributor, "2026-02", &RunOptions::default())
        .await
        .map(|o| o.summary)
}

fn failed(summary: &Summary, rule: &str) -> u64 {
    summary
        .rules
        .iter()
        .filter(|r| r.rule == rule)
        .map(|r| r.failed)
        .sum()
}

#[tokio::test]
async fn bank_and_instalment_contributors_get_their_own_thresholds_from_one_control_csv() {
    let (_tmp, ws) = workspace_with(DEFAULT_CONFIG, &[]).await;
    let jump = |rows: &mut Vec<_>| jump_arrears(rows, 4, 2);
    let bank = history_then(
        &ws,
        &mut Portfolio::new("BANK_J", 200, false, 1),
        "BANK_J",
        jump,
    )
    .await
    .unwrap();
    let lender = history_then(
        &ws,
        &mut Portfolio::new("BNPL_J", 200, true, 1),
        "BNPL_J",
        jump,
    )
    .await
    .unwrap();
    assert_eq!(bank.contributor_type, "bank");
    assert_eq!(lender.contributor_type, "instalment");
    assert_eq!(
        (failed(&bank, "arrears_step"), bank.counts.quarantined),
        (0, 0)
    );
    assert_eq!(
        (failed(&lender, "arrears_step"), lender.counts.quarantined),
        (4, 4)
    );
    assert_ne!(bank.rules_fingerprint, lender.rules_fingerprint);
}

#[tokio::test]
async fn a_dlt_json_file_and_its_yaml_twin_give_identical_results() {
    let mut outcomes = Vec::new();
    for file in [
        "rules/credit_expectations.json",
        "rules/credit_expectations.yaml",
    ] {
        let (_tmp, ws) = workspace_with(
            DEFAULT_CONFIG,
            &[
                ("rule_files.0.path", file),
                ("rule_files.0.quarantine_expressions", "valid_rows"),
            ],
        )
        .await;
        let mut bank = Portfolio::new("BANK_D", 60, false, 2);
        let summary = history_then(&ws, &mut bank, "BANK_D", |rows| {
            mis_map_limits(&mut rows[..10]);
        })
        .await
        .unwrap();
        let rules: Vec<(String, u64, u64)> = summary
            .rules
            .iter()
            .map(|r| (r.rule.clone(), r.passed, r.failed))
            .collect();
        outcomes.push((summary.counts.quarantined, summary.counts.committed, rules));
    }
    assert_eq!(outcomes[0], outcomes[1]);
    assert_eq!(outcomes[0].0, 10);
    assert!(
        outcomes[0]
            .2
            .iter()
            .any(|(rule, _, failed)| rule == "limit_stable" && *failed == 10)
    );
}

const EXTRA_RULES: &str = r#"
[[rules]]
name = "card_limit_cap"
severity = "warn"
expression = "credit_limit <= 1500000"
filter = "product_type = 'CARD'"

[[rules]]
name = "no_temporary_limits"
severity = "warn"
expression = "temporary_limit = 0"
escalate_above = 0.10
escalate_to = "fail"
"#;

#[tokio::test]
async fn a_filter_leaves_rows_outside_it_unchecked() {
    let config = format!("{DEFAULT_CONFIG}{EXTRA_RULES}");
    let (_tmp, ws) = workspace_with(&config, &[]).await;
    let mut bank = Portfolio::new("BANK_F", 90, false, 3);
    let rows = bank.statements(month(2026, 1), false);
    let cards = rows.iter().filter(|r| r.product == "CARD").count() as u64;
    ws.put_drop("BANK_F", "2026-01", &rows).await.unwrap();
    let summary = ws
        .run_drop("BANK_F", "2026-01", &RunOptions::default())
        .await
        .unwrap()
        .summary;
    let cap = summary
        .rules
        .iter()
        .find(|r| r.rule == "card_limit_cap")
        .unwrap();
    assert!(cards > 0 && cards < 90);
    assert_eq!(cap.not_applicable, 90 - cards);
    assert_eq!(cap.passed + cap.failed, cards);
}

#[tokio::test]
async fn a_threshold_escalates_only_past_its_rate() {
    let config = format!("{DEFAULT_CONFIG}{EXTRA_RULES}");
    let (_tmp, ws) = workspace_with(&config, &[]).await;
    let mut bank = Portfolio::new("BANK_T", 100, false, 4);
    let rows = bank.statements(month(2026, 1), false);
    let rate = rows.iter().filter(|r| r.temporary_limit != 0).count();
    assert!(rate > 0 && rate <= 10, "{rate} rows with a temporary limit");
    ws.put_drop("BANK_T", "2026-01", &rows).await.unwrap();
    let below = ws
        .run_drop("BANK_T", "2026-01", &RunOptions::default())
        .await
        .unwrap()
        .summary;
    let rule = below
        .rules
        .iter()
        .find(|r| r.rule == "no_temporary_limits")
        .unwrap();
    assert!(!rule.escalated);
    assert_eq!(below.counts.committed, 100);

    let mut next = bank.statements(month(2026, 2), false);
    for row in next.iter_mut().take(20) {
        row.temporary_limit = 1;
    }
    ws.put_drop("BANK_T", "2026-02", &next).await.unwrap();
    let err = ws
        .run_drop("BANK_T", "2026-02", &RunOptions::default())
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::FailRule { rule, .. } if rule == "no_temporary_limits"),
        "{err}"
    );
}

#[tokio::test]
async fn a_corrected_rerun_is_baselined_on_the_last_committed_month_not_the_rejected_one() {
    let (_tmp, ws) = workspace_with(DEFAULT_CONFIG, &[]).await;
    let mut bank = Portfolio::new("BANK_R", 50, false, 5);
    let mut bad = Vec::new();
    let rejected = history_then(&ws, &mut bank.clone(), "BANK_R", |rows| {
        mis_map_limits(rows);
        bad = rows.clone();
    })
    .await
    .unwrap();
    assert_eq!(rejected.counts.quarantined, 50);
    // The corrected February, the same accounts as the generator meant them.
    bank.statements(month(2026, 1), false);
    let corrected = bank.statements(month(2026, 2), false);
    assert_ne!(corrected, bad);
    ws.put_drop("BANK_R", "2026-02-fixed", &corrected)
        .await
        .unwrap();
    let fixed = ws
        .run_drop("BANK_R", "2026-02-fixed", &RunOptions::default())
        .await
        .unwrap()
        .summary;
    assert_eq!(fixed.counts.quarantined, 0);
    assert_eq!(fixed.baseline.rows_with_baseline, 50);
    let volume = &fixed.aggregates[0];
    assert_eq!(volume.period, "2026-02-01");
    assert_eq!(volume.previous["accounts"], Some(50.0));
}

/// A reference kept as an Iceberg table of the catalog: rows whose holder is
/// not in it are pending, the others reach Silver.
#[tokio::test]
async fn an_iceberg_table_can_be_the_reference() {
    use std::sync::Arc;

    use arrow::array::StringArray;
    use arrow::datatypes::{DataType, Field, Schema};
    use iceberg::spec::{NestedField, PrimitiveType, Type};
    use iceberg::transaction::{ApplyTransactionAction, Transaction};
    use iceberg::{NamespaceIdent, TableCreation};
    use silverline::infra::catalog::connect;
    use silverline::infra::datafile::write_silver_files;
    use silverline::infra::storage::Stores;

    let overrides = [
        ("references.0.format", "iceberg"),
        ("references.0.location", "reference.holders"),
    ];
    let (_tmp, ws) = workspace_with(DEFAULT_CONFIG, &overrides).await;
    let rows = Portfolio::new("BANK_I", 30, false, 6).statements(month(2026, 1), false);
    let known: Vec<&str> = rows.iter().skip(4).map(|r| r.holder.as_str()).collect();

    let stores = Stores::new(&ws.plan.storage, ws.plan.catalog.warehouse())
        .await
        .unwrap();
    let catalog = connect(&ws.plan.catalog, &stores).await.unwrap();
    let namespace = NamespaceIdent::new("reference".to_string());
    catalog
        .create_namespace(&namespace, Default::default())
        .await
        .unwrap();
    let schema = iceberg::spec::Schema::builder()
        .with_fields(vec![Arc::new(NestedField::required(
            1,
            "holder_id",
            Type::Primitive(PrimitiveType::String),
        ))])
        .build()
        .unwrap();
    let creation = TableCreation::builder()
        .name("holders".to_string())
        .schema(schema)
        .build();
    let table = catalog.create_table(&namespace, creation).await.unwrap();
    let arrow_schema = Arc::new(
        iceberg::arrow::schema_to_arrow_schema(table.metadata().current_schema()).unwrap(),
    );
    assert_eq!(arrow_schema.fields()[0].data_type(), &DataType::Utf8);
    let batch = arrow::record_batch::RecordBatch::try_new(
        Arc::new(Schema::new(vec![Field::new(
            "holder_id",
            DataType::Utf8,
            false,
        )])),
        vec![Arc::new(StringArray::from(known.clone()))],
    )
    .unwrap();
    let files = write_silver_files(&table, &[batch], "reference")
        .await
        .unwrap();
    let tx = Transaction::new(&table);
    tx.fast_append()
        .add_data_files(files)
        .apply(tx)
        .unwrap()
        .commit(catalog.as_ref())
        .await
        .unwrap();

    ws.put_file(
        "BANK_I",
        "2026-01",
        "statements.csv",
        silverline::demo::generate::to_csv(&rows).into_bytes(),
    )
    .await
    .unwrap();
    let summary = ws
        .run_drop("BANK_I", "2026-01", &RunOptions::default())
        .await
        .unwrap()
        .summary;
    assert_eq!((summary.counts.pending, summary.counts.committed), (4, 26));
    assert_eq!(failed(&summary, "holder_exists"), 4);
}

/// With `[lineage] location` set, a run leaves an OpenLineage START and a
/// COMPLETE event (one run id) naming the drop, the table and one assertion
/// per rule, under `<contributor>/<drop>/`; a failed run leaves FAIL.
#[tokio::test]
async fn runs_emit_openlineage_start_and_complete_or_fail_events() {
    let (tmp, ws) = workspace_with(DEFAULT_CONFIG, &[("lineage.location", "lineage")]).await;
    let lineage = tmp.path().join("ws/config/lineage/BANK_L");
    let mut bank = Portfolio::new("BANK_L", 40, false, 7);
    history_then(&ws, &mut bank, "BANK_L", |rows| rows.truncate(5))
        .await
        .unwrap();
    let events = |drop: &str, kind: &str| -> Vec<serde_json::Value> {
        std::fs::read_dir(lineage.join(drop))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.to_string_lossy().ends_with(&format!("-{kind}.json")))
            .map(|p| serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap())
            .collect()
    };
    let (start, complete) = (events("2026-02", "start"), events("2026-02", "complete"));
    assert_eq!((start.len(), complete.len()), (1, 1));
    let event = &complete[0];
    assert_eq!(event["run"]["runId"], start[0]["run"]["runId"]);
    assert_eq!(event["eventType"], "COMPLETE");
    let input = event["inputs"][0]["name"].as_str().unwrap();
    assert!(input.ends_with("/bronze/BANK_L/2026-02"), "{input}");
    let output = event["outputs"][0]["name"].as_str().unwrap();
    assert!(output.ends_with("/silver/credit_statements"), "{output}");
    let assertions = event["inputs"][0]["inputFacets"]["dataQualityAssertions"]["assertions"]
        .as_array()
        .unwrap();
    let volume = assertions
        .iter()
        .find(|a| a["assertion"] == "volume")
        .unwrap();
    assert_eq!(volume["success"], false);
    assert_eq!(
        event["inputs"][0]["inputFacets"]["dataQualityMetrics"]["rowCount"],
        5
    );

    ws.put_file("BANK_L", "2026-03", "broken.csv", b"a,b\n1,2\n".to_vec())
        .await
        .unwrap();
    assert!(
        ws.run_drop("BANK_L", "2026-03", &RunOptions::default())
            .await
            .is_err()
    );
    assert_eq!(events("2026-03", "fail").len(), 1);
}

/// The rule compiler (config parsing, SQL parsing, type checking, scope and
/// severity checks) over generated rules: it never panics, accepts what it
/// accepts as a rule of the plan, and names the rule in every refusal.
mod rule_compiler_properties {
    use std::path::Path;

    use proptest::prelude::*;
    use silverline::config::parse_plan;

    /// Pieces of rule expressions: columns (current, previous, transient,
    /// unknown), literals, operators, functions, punctuation and junk.
    fn token() -> impl Strategy<Value = String> {
        let fixed = prop::sample::select(vec![
            "credit_limit",
            "prev_credit_limit",
            "account_status",
            "new_ic",
            "statement_date",
            "month_in_arrears",
            "_key_occurrences",
            "_ref_holders",
            "accounts",
            "prev_accounts",
            "no_such_column",
            "'ACTIVE'",
            "12",
            "-3.5",
            "NULL",
            "TRUE",
            "DATE '2026-01-31'",
            "=",
            "<>",
            "<",
            ">=",
            "+",
            "-",
            "*",
            "/",
            "%",
            "AND",
            "OR",
            "NOT",
            "IN",
            "BETWEEN",
            "IS NULL",
            "IS NOT NULL",
            "LIKE",
            "(",
            ")",
            ",",
            "abs(",
            "length(",
            "coalesce(",
            "regexp_like(",
            "sum(",
            "count(*)",
            "CAST(",
            "AS INT",
            "CASE WHEN",
            "THEN",
            "ELSE",
            "END",
            "'",
            "\"",
            ";",
            "--",
            "/*",
        ])
        .prop_map(str::to_string);
        prop_oneof![4 => fixed, 1 => "[\\PC]{0,6}"]
    }

    fn expression() -> impl Strategy<Value = String> {
        proptest::collection::vec(token(), 1..12).prop_map(|tokens| tokens.join(" "))
    }

    fn rule_toml(expression: &str, severity: &str, scope: &str, filter: Option<&str>) -> String {
        let quoted = |text: &str| toml::Value::String(text.to_string()).to_string();
        let mut rule = format!(
            "\n[[rules]]\nname = \"generated_rule\"\nexpression = {}\nseverity = {}\nscope = {}\n",
            quoted(expression),
            quoted(severity),
            quoted(scope)
        );
        if let Some(filter) = filter {
            rule.push_str(&format!("filter = {}\n", quoted(filter)));
        }
        rule
    }

    proptest! {
        #[test]
        fn generated_rules_are_compiled_or_refused_by_name(
            expression in expression(),
            severity in prop::sample::select(vec!["warn", "drop", "quarantine", "critical", "fail", "pending", "loud"]),
            scope in prop::sample::select(vec!["row", "aggregate", "reference", "galaxy"]),
            filter in proptest::option::of(expression()),
        ) {
            let text = std::fs::read_to_string("config/credit_statements.toml").unwrap();
            let (head, tail) = text.split_once("\n[dataset]").unwrap();
            let config = format!("{head}{}\n[dataset]{tail}", rule_toml(&expression, severity, scope, filter.as_deref()));
            match parse_plan(&config, Path::new("config/credit_statements.toml"), &[]) {
                Ok(plan) => {
                    let rule = plan.rules.iter().find(|r| r.name == "generated_rule");
                    prop_assert!(rule.is_some(), "an accepted rule is in the plan");
                }
                Err(error) => {
                    let message = error.to_string();
                    prop_assert!(message.contains("generated_rule"), "{message}");
                }
            }
        }
    }
}
