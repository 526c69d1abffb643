//! What the binary tests share: a temp project folder with the shipped
//! config, drops put into its bronze, and the binary run on it.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

pub mod devtools;
pub mod receiver;
pub mod workbench;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use arrow::array::{Array, StringArray};
use arrow::compute::cast;
use arrow::datatypes::DataType;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

use assert_cmd::Command;
use chrono::NaiveDate;
use silverline::demo::generate::{Portfolio, Statement, holders_csv, to_csv};

/// A folder with `config/credit_statements.toml` and `config/rules/` (the shipped
/// config, each file passed through `edit`) and `data/`.
pub fn project(edit: impl Fn(String) -> String) -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let config = tmp.path().join("config/credit_statements.toml");
    std::fs::create_dir_all(config.parent().unwrap()).unwrap();
    let text = std::fs::read_to_string("config/credit_statements.toml").unwrap();
    std::fs::write(&config, edit(text)).unwrap();
    let rules = tmp.path().join("config/rules");
    std::fs::create_dir_all(&rules).unwrap();
    for entry in std::fs::read_dir("config/rules").unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        std::fs::write(rules.join(path.file_name().unwrap()), edit(text)).unwrap();
    }
    (tmp, config)
}

pub fn put_drop(root: &Path, contributor: &str, drop_id: &str, rows: &[Statement]) {
    let dir = root.join("data/bronze").join(contributor).join(drop_id);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("statements.csv"), to_csv(rows)).unwrap();
    let holders = root.join("data/reference/holders");
    std::fs::create_dir_all(&holders).unwrap();
    let csv = holders_csv(rows.iter().map(|r| r.holder.as_str()));
    std::fs::write(holders.join(format!("{contributor}-{drop_id}.csv")), csv).unwrap();
}

pub fn silverline<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> assert_cmd::assert::Assert {
    Command::cargo_bin("silverline")
        .unwrap()
        .args(["--log-format", "text"])
        .args(args)
        .assert()
}

/// Every file below `dir`.
pub fn walk(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .flat_map(|e| {
            let path = e.unwrap().path();
            if path.is_dir() {
                walk(&path)
            } else {
                vec![path]
            }
        })
        .collect()
}

/// The arguments of `silverline run` for one drop.
pub fn run_args(config: &str, contributor: &str, drop_id: &str) -> [String; 7] {
    [
        "run",
        "--config",
        config,
        "--contributor",
        contributor,
        "--drop",
        drop_id,
    ]
    .map(str::to_string)
}

pub fn output(assert: &assert_cmd::assert::Assert) -> String {
    let out = assert.get_output();
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

pub fn month(y: i32, m: u32) -> NaiveDate {
    NaiveDate::from_ymd_opt(y, m, 1).unwrap()
}

/// Every national id, legacy id and passport number of `rows` (the columns
/// the shipped config marks sensitive).
pub fn sensitive_values(rows: &[Statement]) -> Vec<String> {
    rows.iter()
        .flat_map(|r| [&r.identity.0, &r.identity.1, &r.identity.2])
        .flatten()
        .cloned()
        .collect()
}

/// Everything a run left for people and machines to read: its output and
/// every file under `data/dq_error` (summaries, quarantine).
pub fn everything_written(root: &Path, run_output: &str) -> Vec<(String, String)> {
    let mut texts = vec![("output".to_string(), run_output.to_string())];
    for path in walk(&root.join("data/dq_error")) {
        let text = String::from_utf8_lossy(&std::fs::read(&path).unwrap()).to_string();
        texts.push((path.display().to_string(), text));
    }
    texts
}

/// The `account_id` of every row set aside under `data/dq_error/<kind>/`
/// (`quarantine`, `dropped`, `pending`).
pub fn set_aside_accounts(root: &Path, kind: &str) -> BTreeSet<String> {
    set_aside_values(root, kind, "account_id")
}

/// The values of `column` (`account_id`, `_exception_id`...) of every row set
/// aside under `data/dq_error/<kind>/`.
pub fn set_aside_values(root: &Path, kind: &str, column: &str) -> BTreeSet<String> {
    set_aside_rows(&root.join("data/dq_error"), kind)
        .into_iter()
        .map(|row| row[column].clone())
        .collect()
}

/// Every row set aside under `<dq_error>/<kind>/`, as column -> value.
pub fn set_aside_rows(dq_error: &Path, kind: &str) -> Vec<BTreeMap<String, String>> {
    let mut rows = Vec::new();
    for path in walk(&dq_error.join(kind)) {
        let mut reader = csv::Reader::from_path(&path).unwrap();
        let headers = reader.headers().unwrap().clone();
        for record in reader.records() {
            let record = record.unwrap();
            rows.push(
                headers
                    .iter()
                    .zip(record.iter())
                    .map(|(h, v)| (h.to_string(), v.to_string()))
                    .collect(),
            );
        }
    }
    rows
}

/// The `account_id` of every row in the data files of the Silver table
/// `silver.credit_statements` (all of them live after one commit).
pub fn committed_accounts(root: &Path) -> BTreeSet<String> {
    let table = root.join("data/warehouse/silver/credit_statements");
    committed_rows(&table, &["account_id"])
        .into_iter()
        .flatten()
        .collect()
}

/// `columns` (as text) of every row in the data files under the table folder
/// `table`: every row of the table while nothing was deleted or compacted.
pub fn committed_rows(table: &Path, columns: &[&str]) -> Vec<Vec<String>> {
    let mut rows = Vec::new();
    for path in walk(table)
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "parquet"))
    {
        let file = std::fs::File::open(&path).unwrap();
        let reader = ParquetRecordBatchReaderBuilder::try_new(file)
            .unwrap()
            .build()
            .unwrap();
        for batch in reader {
            let batch = batch.unwrap();
            let texts: Vec<StringArray> = columns
                .iter()
                .map(|c| {
                    let column = cast(batch.column_by_name(c).unwrap(), &DataType::Utf8).unwrap();
                    column
                        .as_any()
                        .downcast_ref::<StringArray>()
                        .unwrap()
                        .clone()
                })
                .collect();
            for row in 0..batch.num_rows() {
                rows.push(texts.iter().map(|t| t.value(row).to_string()).collect());
            }
        }
    }
    rows
}

/// Every run summary written under `data/dq_error/summaries`.
pub fn summaries(root: &Path) -> Vec<serde_json::Value> {
    summaries_in(&root.join("data/dq_error"))
}

/// Every run summary written under `<dq_error>/summaries`.
pub fn summaries_in(dq_error: &Path) -> Vec<serde_json::Value> {
    walk(&dq_error.join("summaries"))
        .iter()
        .map(|p| serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap())
        .collect()
}

/// The summary of the run of `drop_id` (the only one).
pub fn summary_of(root: &Path, drop_id: &str) -> serde_json::Value {
    summaries(root)
        .into_iter()
        .find(|s| s["drop_id"] == drop_id)
        .unwrap_or_else(|| panic!("no summary for {drop_id}"))
}

/// The counts of `rule` in `summary`.
pub fn rule_outcome<'a>(summary: &'a serde_json::Value, rule: &str) -> &'a serde_json::Value {
    summary["rules"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["rule"] == rule)
        .unwrap_or_else(|| panic!("rule {rule} in {summary}"))
}

/// The file's records (header first), passed through `edit`, written back
/// with `delimiter` to `to` (the file itself is removed).
pub fn rewrite(file: &Path, to: &str, delimiter: u8, edit: impl Fn(&mut Vec<Vec<String>>)) {
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(false)
        .from_path(file)
        .unwrap();
    let mut records: Vec<Vec<String>> = reader
        .records()
        .map(|r| r.unwrap().iter().map(str::to_string).collect())
        .collect();
    edit(&mut records);
    let mut writer = csv::WriterBuilder::new()
        .delimiter(delimiter)
        .from_writer(Vec::new());
    for record in &records {
        writer.write_record(record).unwrap();
    }
    let bytes = writer.into_inner().unwrap();
    std::fs::remove_file(file).unwrap();
    std::fs::write(file.with_file_name(to), bytes).unwrap();
}

/// Appends a column `name` to `records` (header first), row `i` holding `value(i)`.
pub fn add_column(records: &mut [Vec<String>], name: &str, value: impl Fn(usize) -> String) {
    for (i, record) in records.iter_mut().enumerate() {
        record.push(if i == 0 { name.to_string() } else { value(i) });
    }
}

/// A committed run's summary of `contributor`'s `drop_id`, finished on `day`
/// (YYYY-MM-DD), that received `received` rows of which each rule failed some.
pub fn put_summary(
    root: &Path,
    contributor: &str,
    (drop_id, day): (&str, &str),
    received: u64,
    failed: &[(&str, u64)],
) {
    let run_id = format!("{:0>16}", drop_id.replace('-', ""));
    let rules: Vec<serde_json::Value> = failed
        .iter()
        .map(|(rule, failed)| {
            serde_json::json!({"rule": rule, "failed": failed, "passed": received - failed})
        })
        .collect();
    let summary = serde_json::json!({
        "schema_version": 1,
        "status": "committed",
        "run_id": run_id,
        "contributor": contributor,
        "drop_id": drop_id,
        "started_at": format!("{day}T06:00:00.000Z"),
        "finished_at": format!("{day}T06:01:00.000Z"),
        "counts": {"received": received, "committed": received, "warned": 0,
                   "quarantined": 0, "dropped": 0, "pending": 0},
        "rules": rules,
    });
    let dir = root.join(format!(
        "data/dq_error/summaries/date={day}/contributor={contributor}"
    ));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join(format!("run={run_id}.json")),
        serde_json::to_vec_pretty(&summary).unwrap(),
    )
    .unwrap();
}

/// `accounts` accounts of `contributor` (seed 3) with their January 2026
/// statements put as drop `2026-01`; the portfolio, for the later months.
pub fn put_january(root: &Path, contributor: &str, accounts: usize) -> Portfolio {
    let mut bank = Portfolio::new(contributor, accounts, false, 3);
    let january = bank.statements(month(2026, 1), false);
    put_drop(root, contributor, "2026-01", &january);
    bank
}
