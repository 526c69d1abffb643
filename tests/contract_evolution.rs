//! Contract evolution through the binary, on the embedded default: months
//! committed under contract v1, then a contract that adds a nullable column
//! with rules on it, widens types, or changes what Iceberg cannot evolve.
//! `check-config` and `run` say what evolves, or refuse it (exit 2) naming
//! the column and what to do; history written before reads the new column
//! as null, and another engine (pyiceberg) reads every month.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod harness;
#[allow(dead_code)]
#[path = "common/pyiceberg.rs"]
mod pyiceberg;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use arrow::array::{Array, Int64Array, StringArray};
use arrow::compute::cast;
use arrow::datatypes::DataType;
use arrow::record_batch::RecordBatch;
use futures::TryStreamExt;
use harness::{
    add_column, month, output, project, put_drop, rewrite, rule_outcome, run_args,
    set_aside_accounts, silverline, summary_of,
};
use iceberg::table::Table;
use serde_json::json;
use silverline::demo::generate::{Portfolio, Statement};
use silverline::infra::catalog::{connect, table_ident};
use silverline::infra::ledger::RUN_KEY_PROPERTY;
use silverline::infra::storage::Stores;
use silverline::pipeline::commit::SCHEMA_EVOLUTION_PROPERTY;

const BANK: &str = "BANK_V";

const RULE_FILES: &str = r#"rule_files = [{ path = "rules/credit_rules.csv" }]"#;

/// Contract v1's rules: a row rule and a trend rule on existing columns.
const V1_RULES: &str = r#"[[rules]]
name = "mia_range"
expression = "month_in_arrears BETWEEN 0 AND 36"
severity = "quarantine"

[[rules]]
name = "arrears_step"
expression = "abs(month_in_arrears - prev_month_in_arrears) <= 2"
severity = "quarantine"
"#;

/// What contract v2 adds: a row rule and a trend rule on its new column.
const GRADE_RULES: &str = r#"
[[rules]]
name = "grade_known"
expression = "risk_grade IS NULL OR risk_grade IN ('A', 'B', 'C', 'D')"
severity = "quarantine"

[[rules]]
name = "grade_steady"
expression = "risk_grade = prev_risk_grade"
severity = "quarantine"
"#;

const LAST_COLUMN: &str =
    r#"  { name = "month_in_arrears",    type = "int",           nullable = false },"#;

/// Contract v1: the shipped config with [`V1_RULES`] for its rule files.
fn v1(text: String) -> String {
    text.replace(RULE_FILES, V1_RULES)
}

/// Contract v2: v1 with a nullable column `risk_grade` and two rules on it.
fn v2(text: String) -> String {
    let column = format!("{LAST_COLUMN}\n  {{ name = \"risk_grade\", type = \"string\" }},");
    text.replace(LAST_COLUMN, &column)
        .replace(V1_RULES, &format!("{V1_RULES}{GRADE_RULES}"))
}

/// Rewrites the config file through `edit`, which must change it.
fn edit_config(config: &Path, edit: impl Fn(String) -> String) {
    let text = std::fs::read_to_string(config).unwrap();
    let edited = edit(text.clone());
    assert_ne!(edited, text, "the edit changed nothing");
    std::fs::write(config, edited).unwrap();
}

fn drop_id(m: u32) -> String {
    format!("2026-{m:02}")
}

fn check_config(config: &str) -> assert_cmd::assert::Assert {
    silverline(&["check-config", "--config", config])
}

/// January to March of BANK_V's 12 accounts, committed under the config as it is.
fn three_months(root: &Path, config: &str) -> Portfolio {
    let mut bank = Portfolio::new(BANK, 12, false, 11);
    for m in 1..=3 {
        let rows = bank.statements(month(2026, m), false);
        put_drop(root, BANK, &drop_id(m), &rows);
        let text = output(&silverline(&run_args(config, BANK, &drop_id(m))).success());
        assert!(text.contains("committed 12 rows"), "{text}");
    }
    bank
}

/// Puts BANK_V's statements of month `m` with a `risk_grade` column: row `i` graded `grade(i)`.
fn put_graded(
    root: &Path,
    bank: &mut Portfolio,
    m: u32,
    grade: impl Fn(usize) -> &'static str,
) -> Vec<Statement> {
    let rows = bank.statements(month(2026, m), false);
    put_drop(root, BANK, &drop_id(m), &rows);
    let file = root.join(format!("data/bronze/{BANK}/{}/statements.csv", drop_id(m)));
    rewrite(&file, "statements.csv", b',', |records| {
        add_column(records, "risk_grade", |i| grade(i - 1).to_string())
    });
    rows
}

/// Silver, loaded through the catalog `config` names.
async fn silver(config: &Path) -> Table {
    let plan = silverline::config::load_plan(config).unwrap();
    let stores = Stores::new(&plan.storage, plan.catalog.warehouse())
        .await
        .unwrap();
    let catalog = connect(&plan.catalog, &stores).await.unwrap();
    catalog.load_table(&table_ident(&plan.table)).await.unwrap()
}

/// Every row of `table`, read by Iceberg's own reader.
async fn scan(table: &Table) -> RecordBatch {
    let stream = table.scan().build().unwrap().to_arrow().await.unwrap();
    let batches: Vec<RecordBatch> = stream.try_collect().await.unwrap();
    arrow::compute::concat_batches(&batches[0].schema(), &batches).unwrap()
}

/// Per statement month (`2026-01`): rows, and rows with a `risk_grade`.
fn graded_per_month(rows: &RecordBatch) -> BTreeMap<String, (usize, usize)> {
    let dates = cast(
        rows.column_by_name("statement_date").unwrap(),
        &DataType::Utf8,
    )
    .unwrap();
    let dates = dates.as_any().downcast_ref::<StringArray>().unwrap();
    let grades = rows.column_by_name("risk_grade").unwrap();
    let mut months: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    for row in 0..rows.num_rows() {
        let entry = months.entry(dates.value(row)[..7].to_string()).or_default();
        entry.0 += 1;
        entry.1 += usize::from(grades.is_valid(row));
    }
    months
}

#[tokio::test]
async fn a_new_nullable_column_evolves_silver_and_its_trend_rule_skips_older_history() {
    let (tmp, config) = project(v1);
    let (root, cfg) = (tmp.path(), config.to_str().unwrap());
    let mut bank = three_months(root, cfg);
    edit_config(&config, v2);
    let text = output(&check_config(cfg).success());
    assert!(
        text.contains("the next run evolves its schema")
            && text.contains("add column risk_grade (string, optional)"),
        "{text}"
    );

    let april = put_graded(root, &mut bank, 4, |row| if row == 2 { "Z" } else { "A" });
    let text = output(&silverline(&run_args(cfg, BANK, "2026-04")).success());
    assert!(text.contains("committed 11 rows"), "{text}");
    let evolved = "schema 0 -> 1: add column risk_grade (string, optional)";
    assert!(
        text.contains(&format!("evolved silver.credit_statements: {evolved}")),
        "{text}"
    );
    let summary = summary_of(root, "2026-04");
    assert_eq!(
        summary["schema_evolution"],
        json!({"from_schema_id": 0, "to_schema_id": 1, "changes": [
            {"change": "add_column", "column": "risk_grade", "type": "string"}
        ]})
    );
    assert_eq!(rule_outcome(&summary, "grade_known")["failed"], 1);
    // Every April row's previous state is a March row, written before the
    // column existed: nothing to compare with, so no check and no failure.
    assert_eq!(rule_outcome(&summary, "grade_steady")["failed"], 0);
    assert_eq!(
        rule_outcome(&summary, "grade_steady")["skipped_no_baseline"],
        12
    );
    assert_eq!(rule_outcome(&summary, "arrears_step")["passed"], 12);
    assert_eq!(
        set_aside_accounts(root, "quarantine"),
        BTreeSet::from([april[2].account.clone()])
    );
    let text = output(&check_config(cfg).success());
    assert!(text.contains("has the contract's schema"), "{text}");

    // In May the April grades are there to compare with; the account
    // quarantined in April still has only March's state (no grade).
    let may = put_graded(root, &mut bank, 5, |row| if row == 4 { "B" } else { "A" });
    let text = output(&silverline(&run_args(cfg, BANK, "2026-05")).success());
    assert!(text.contains("committed 11 rows"), "{text}");
    let summary = summary_of(root, "2026-05");
    assert!(summary.get("schema_evolution").is_none(), "{summary}");
    assert_eq!(rule_outcome(&summary, "grade_steady")["failed"], 1);
    assert_eq!(
        rule_outcome(&summary, "grade_steady")["skipped_no_baseline"],
        1
    );
    assert!(set_aside_accounts(root, "quarantine").contains(&may[4].account));

    let table = silver(&config).await;
    let rows = scan(&table).await;
    let months = |list: &[(&str, (usize, usize))]| {
        list.iter()
            .map(|(m, counts)| (m.to_string(), *counts))
            .collect::<BTreeMap<_, _>>()
    };
    assert_eq!(
        graded_per_month(&rows),
        months(&[
            ("2026-01", (12, 0)),
            ("2026-02", (12, 0)),
            ("2026-03", (12, 0)),
            ("2026-04", (11, 11)),
            ("2026-05", (11, 11)),
        ])
    );
    let recorded: Vec<(String, String)> = table
        .metadata()
        .snapshots()
        .filter_map(|s| {
            let properties = &s.summary().additional_properties;
            let evolution = properties.get(SCHEMA_EVOLUTION_PROPERTY)?;
            Some((properties[RUN_KEY_PROPERTY].clone(), evolution.clone()))
        })
        .collect();
    assert_eq!(recorded.len(), 1, "{recorded:?}");
    assert!(recorded[0].0.starts_with("BANK_V/2026-04/"), "{recorded:?}");
    assert_eq!(recorded[0].1, evolved);
}

#[tokio::test]
async fn int_to_long_and_a_wider_decimal_evolve_and_a_dry_run_only_says_so() {
    let (tmp, config) = project(v1);
    let (root, cfg) = (tmp.path(), config.to_str().unwrap());
    let mut bank = Portfolio::new(BANK, 12, false, 5);
    put_drop(
        root,
        BANK,
        "2026-01",
        &bank.statements(month(2026, 1), false),
    );
    silverline(&run_args(cfg, BANK, "2026-01")).success();
    edit_config(&config, |text| {
        text.replace(
            r#""month_in_arrears",    type = "int""#,
            r#""month_in_arrears",    type = "long""#,
        )
        .replace(
            r#""outstanding_balance", type = "decimal(18,2)""#,
            r#""outstanding_balance", type = "decimal(20,2)""#,
        )
    });
    put_drop(
        root,
        BANK,
        "2026-02",
        &bank.statements(month(2026, 2), false),
    );
    let widened = "widen column outstanding_balance from decimal(18, 2) to decimal(20, 2); \
                   widen column month_in_arrears from int to long";

    let mut dry = run_args(cfg, BANK, "2026-02").to_vec();
    dry.push("--dry-run".to_string());
    let text = output(&silverline(&dry).success());
    assert!(
        text.contains(&format!(
            "would evolve silver.credit_statements: schema 0 -> (not committed): {widened}"
        )),
        "{text}"
    );
    assert_eq!(silver(&config).await.metadata().current_schema_id(), 0);

    let text = output(&silverline(&run_args(cfg, BANK, "2026-02")).success());
    assert!(text.contains("committed 12 rows"), "{text}");
    let summary = summary_of(root, "2026-02");
    assert_eq!(
        summary["schema_evolution"]["changes"],
        json!([
            {"change": "widen_type", "column": "outstanding_balance", "from": "decimal(18, 2)", "to": "decimal(20, 2)"},
            {"change": "widen_type", "column": "month_in_arrears", "from": "int", "to": "long"},
        ])
    );
    // January's arrears, written as int, are read as long to compare with.
    assert_eq!(rule_outcome(&summary, "arrears_step")["passed"], 12);
    let rows = scan(&silver(&config).await).await;
    assert_eq!(rows.num_rows(), 24);
    let arrears = rows.column_by_name("month_in_arrears").unwrap();
    assert!(arrears.as_any().downcast_ref::<Int64Array>().is_some());
    assert_eq!(
        rows.column_by_name("outstanding_balance")
            .unwrap()
            .data_type(),
        &DataType::Decimal128(20, 2)
    );
}

#[tokio::test]
async fn check_config_and_run_refuse_an_incompatible_contract_naming_each_column_and_setting() {
    let (tmp, config) = project(v1);
    let (root, cfg) = (tmp.path(), config.to_str().unwrap());
    let mut bank = Portfolio::new(BANK, 12, false, 5);
    put_drop(
        root,
        BANK,
        "2026-01",
        &bank.statements(month(2026, 1), false),
    );
    silverline(&run_args(cfg, BANK, "2026-01")).success();
    edit_config(&config, |text| {
        text.replace(
            r#""credit_limit",        type = "decimal(18,2)""#,
            r#""credit_limit",        type = "decimal(16,2)""#,
        )
        .replace(
            r#""operation_code",      type = "string""#,
            r#""operation_code",      type = "int""#,
        )
        .replace(
            "  { name = \"passport_no\",         type = \"string\", sensitive = true },\n",
            "",
        )
        .replace(
            r#"{ column = "statement_date", transform = "month" }"#,
            r#"{ column = "statement_date", transform = "day" }"#,
        )
    });
    put_drop(
        root,
        BANK,
        "2026-02",
        &bank.statements(month(2026, 2), false),
    );
    let expected = [
        "credit_statements.toml",
        "column 'operation_code' is string in table silver.credit_statements but int",
        "declare it as string",
        "column 'credit_limit' is decimal(18, 2) in table silver.credit_statements but decimal(16, 2)",
        "column 'passport_no' (string) that the contract lacks",
        "keep 'passport_no' in dataset.columns, with nullable = true",
        "table.partition: table silver.credit_statements is partitioned by \
         [contributor_id identity, statement_date month] but the configuration says \
         [contributor_id identity, statement_date day]",
    ];
    for attempt in [
        check_config(cfg),
        silverline(&run_args(cfg, BANK, "2026-02")),
    ] {
        let text = output(&attempt.code(2));
        for needle in expected {
            assert!(text.contains(needle), "no '{needle}' in {text}");
        }
    }
    let table = silver(&config).await;
    assert_eq!(table.metadata().current_schema_id(), 0);
    assert_eq!(scan(&table).await.num_rows(), 12);
}

/// pyiceberg reads Silver from its metadata file: three months written under
/// contract v1 and a fourth under v2, the older ones with a null `risk_grade`.
#[tokio::test]
#[ignore = "needs pyiceberg: bash localstack/test.sh sets SILVERLINE_PYTHON"]
async fn pyiceberg_reads_three_v1_months_and_a_v2_month() {
    let (tmp, config) = project(v1);
    let (root, cfg) = (tmp.path(), config.to_str().unwrap());
    let mut bank = three_months(root, cfg);
    edit_config(&config, v2);
    put_graded(root, &mut bank, 4, |_| "B");
    silverline(&run_args(cfg, BANK, "2026-04")).success();
    let table = silver(&config).await;
    let script = r#"
from pyiceberg.table import StaticTable
table = StaticTable.from_metadata(sys.argv[1])
rows = table.scan().to_arrow()
months = {}
for day, grade in zip(rows.column("statement_date").to_pylist(), rows.column("risk_grade").to_pylist()):
    seen = months.setdefault(day.strftime("%Y-%m"), {"rows": 0, "grades": []})
    seen["rows"] += 1
    if grade not in seen["grades"]:
        seen["grades"].append(grade)
print(json.dumps({"fields": [f.name for f in table.schema().fields], "months": months}))
"#;
    let seen = pyiceberg::python(script, &[table.metadata_location().unwrap()]);
    let fields: Vec<&str> = seen["fields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f.as_str().unwrap())
        .collect();
    assert_eq!(fields.len(), 18);
    assert_eq!(fields[16..], ["month_in_arrears", "risk_grade"]);
    let older = json!({"rows": 12, "grades": [null]});
    assert_eq!(
        seen["months"],
        json!({"2026-01": older, "2026-02": older, "2026-03": older,
               "2026-04": {"rows": 12, "grades": ["B"]}})
    );
}
