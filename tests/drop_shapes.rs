//! What a drop may hold, through the binary: schema drift (extra and missing
//! columns, reported or refused), header case, compressed CSV, another
//! delimiter, and a timestamp column.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod harness;

use std::io::Write;
use std::path::Path;

use arrow::array::{Array, TimestampMicrosecondArray};
use arrow::datatypes::{DataType, TimeUnit};
use harness::{
    add_column, committed_accounts, month, output, project, put_drop, rewrite, run_args,
    silverline, summaries, walk,
};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use silverline::demo::generate::Portfolio;

const KEY_LINE: &str = "contributor_column = \"contributor_id\"\n";

/// The shipped config with `settings` added to `[dataset]`.
fn with_dataset_settings(settings: &'static str) -> impl Fn(String) -> String {
    move |text| text.replace(KEY_LINE, &format!("{KEY_LINE}{settings}\n"))
}

/// Puts a January drop of 12 rows for BANK_D; returns the statements file.
fn january(root: &Path) -> std::path::PathBuf {
    let rows = Portfolio::new("BANK_D", 12, false, 3).statements(month(2026, 1), false);
    put_drop(root, "BANK_D", "2026-01", &rows);
    root.join("data/bronze/BANK_D/2026-01/statements.csv")
}

fn run(config: &Path) -> assert_cmd::assert::Assert {
    silverline(&run_args(config.to_str().unwrap(), "BANK_D", "2026-01"))
}

fn only_summary(root: &Path) -> serde_json::Value {
    let mut all = summaries(root);
    assert_eq!(all.len(), 1);
    all.remove(0)
}

#[test]
fn an_extra_column_is_warned_in_the_log_and_the_summary_by_default() {
    let (tmp, config) = project(|t| t);
    let file = january(tmp.path());
    rewrite(&file, "statements.csv", b',', |r| {
        add_column(r, "branch_code", |i| format!("BR{i}"))
    });
    let text = output(&run(&config).success());
    assert!(text.contains("committed 12 rows"), "{text}");
    assert!(
        text.contains("schema drift") && text.contains("branch_code"),
        "{text}"
    );
    let summary = only_summary(tmp.path());
    assert_eq!(
        summary["schema_drift"],
        serde_json::json!([{
            "file": "statements.csv",
            "extra_columns": ["branch_code"],
            "missing_columns": []
        }])
    );
}

#[test]
fn an_extra_column_ignored_is_not_reported() {
    let (tmp, config) = project(with_dataset_settings("on_extra_columns = \"ignore\""));
    let file = january(tmp.path());
    rewrite(&file, "statements.csv", b',', |r| {
        add_column(r, "branch_code", |i| format!("BR{i}"))
    });
    let text = output(&run(&config).success());
    assert!(text.contains("committed 12 rows"), "{text}");
    assert!(!text.contains("branch_code"), "{text}");
    assert!(only_summary(tmp.path()).get("schema_drift").is_none());
}

#[test]
fn an_extra_column_under_fail_refuses_the_drop_naming_file_and_column() {
    let (tmp, config) = project(with_dataset_settings("on_extra_columns = \"fail\""));
    let file = january(tmp.path());
    rewrite(&file, "statements.csv", b',', |r| {
        add_column(r, "branch_code", |i| format!("BR{i}"));
        add_column(r, "desk", |_| "x".to_string());
    });
    let text = output(&run(&config).code(1));
    assert!(
        text.contains("statements.csv") && text.contains("branch_code, desk"),
        "{text}"
    );
    assert!(committed_accounts(tmp.path()).is_empty());
    assert_eq!(only_summary(tmp.path())["status"], "failed");
}

#[test]
fn a_missing_nullable_column_reads_as_null_and_is_reported() {
    let (tmp, config) = project(|t| t);
    let file = january(tmp.path());
    rewrite(&file, "statements.csv", b',', |records| {
        let at = records[0].iter().position(|h| h == "passport_no").unwrap();
        for record in records.iter_mut() {
            record.remove(at);
        }
    });
    let text = output(&run(&config).success());
    assert!(
        text.contains("schema drift") && text.contains("passport_no"),
        "{text}"
    );
    let summary = only_summary(tmp.path());
    assert_eq!(summary["status"], "committed", "{summary}");
    assert_eq!(
        summary["schema_drift"][0]["missing_columns"],
        serde_json::json!(["passport_no"])
    );
    assert_eq!(summary["counts"]["received"], 12);
}

#[test]
fn a_missing_required_column_stays_an_error() {
    let (tmp, config) = project(|t| t);
    let file = january(tmp.path());
    rewrite(&file, "statements.csv", b',', |records| {
        let at = records[0].iter().position(|h| h == "product_type").unwrap();
        for record in records.iter_mut() {
            record.remove(at);
        }
    });
    let text = output(&run(&config).code(1));
    assert!(
        text.contains("statements.csv") && text.contains("product_type"),
        "{text}"
    );
}

#[test]
fn a_header_in_another_case_is_read_when_configured_insensitive() {
    let upper = |records: &mut Vec<Vec<String>>| {
        for name in records[0].iter_mut() {
            *name = name.to_ascii_uppercase();
        }
    };
    let (tmp, config) = project(|t| t);
    rewrite(&january(tmp.path()), "statements.csv", b',', upper);
    let text = output(&run(&config).code(1));
    assert!(
        text.contains("account_id") && text.contains("header_case = \"insensitive\""),
        "{text}"
    );

    let (tmp, config) = project(with_dataset_settings("header_case = \"insensitive\""));
    rewrite(&january(tmp.path()), "statements.csv", b',', upper);
    let text = output(&run(&config).success());
    assert!(text.contains("committed 12 rows"), "{text}");
    assert!(!text.contains("schema drift"), "{text}");
}

/// The shipped config, the drop judged in buckets of 4 rows.
fn in_buckets_of_four(text: String) -> String {
    match text.contains("[dataset]") {
        true => text + "\n[resources]\nbucket_rows = 4\n",
        false => text,
    }
}

#[test]
fn gzip_and_zstd_drops_commit_the_same_rows_as_plain() {
    let (tmp, config) = project(in_buckets_of_four);
    january(tmp.path());
    run(&config).success();
    let plain = committed_accounts(tmp.path());
    assert_eq!(plain.len(), 12);
    for name in ["statements.csv.gz", "statements.csv.zst"] {
        let (tmp, config) = project(in_buckets_of_four);
        let file = january(tmp.path());
        let text = std::fs::read(&file).unwrap();
        let packed = if name.ends_with(".gz") {
            let mut encoder =
                flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
            encoder.write_all(&text).unwrap();
            encoder.finish().unwrap()
        } else {
            zstd::encode_all(&text[..], 3).unwrap()
        };
        std::fs::remove_file(&file).unwrap();
        std::fs::write(file.with_file_name(name), packed).unwrap();
        let out = output(&run(&config).success());
        assert!(out.contains("committed 12 rows"), "{name}: {out}");
        // Its lines counted once decompressed (the header and 12 rows),
        // not guessed from its size.
        assert!(out.contains("estimated_rows=13"), "{name}: {out}");
        assert_eq!(committed_accounts(tmp.path()), plain, "{name}");
    }
}

#[test]
fn a_semicolon_delimited_drop_is_read_when_configured() {
    let (tmp, config) = project(with_dataset_settings("delimiter = \";\""));
    rewrite(&january(tmp.path()), "statements.csv", b';', |_| {});
    let text = output(&run(&config).success());
    assert!(text.contains("committed 12 rows"), "{text}");
    assert_eq!(committed_accounts(tmp.path()).len(), 12);
}

#[test]
fn a_bad_delimiter_is_refused_by_check_config() {
    let (_tmp, config) = project(with_dataset_settings("delimiter = \";;\""));
    let text = output(&silverline(&["check-config", "--config", config.to_str().unwrap()]).code(2));
    assert!(text.contains("dataset.delimiter"), "{text}");
}

#[test]
fn a_timestamp_column_is_committed_as_utc_microseconds() {
    let (tmp, config) = project(|t| {
        t.replace(
            "  { name = \"month_in_arrears\",",
            "  { name = \"reported_at\",         type = \"timestamp\" },\n  { name = \"month_in_arrears\",",
        )
    });
    let values = [
        "2026-01-31T12:00:00Z",
        "2026-01-31T14:00:00+02:00",
        "2026-01-31 12:00:00",
        "2026-01-31 12:00:00.5",
        "",
        "2026-01-31 12:00",
    ];
    rewrite(&january(tmp.path()), "statements.csv", b',', |r| {
        add_column(r, "reported_at", |i| {
            values[(i - 1) % values.len()].to_string()
        })
    });
    let text = output(&run(&config).success());
    // Rows 6 and 12 carry an unreadable timestamp: parse rejects.
    assert!(text.contains("committed 10 rows"), "{text}");
    let summary = only_summary(tmp.path());
    assert_eq!(summary["counts"]["received"], 12);

    let table = tmp.path().join("data/warehouse/silver/credit_statements");
    let mut read = Vec::new();
    for path in walk(&table)
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "parquet"))
    {
        let file = std::fs::File::open(&path).unwrap();
        for batch in ParquetRecordBatchReaderBuilder::try_new(file)
            .unwrap()
            .build()
            .unwrap()
        {
            let batch = batch.unwrap();
            let column = batch.column_by_name("reported_at").unwrap();
            assert_eq!(
                column.data_type(),
                &DataType::Timestamp(TimeUnit::Microsecond, Some("+00:00".into()))
            );
            let column = column
                .as_any()
                .downcast_ref::<TimestampMicrosecondArray>()
                .unwrap();
            read.extend(column.iter());
        }
    }
    let noon = 1_769_860_800_000_000i64;
    read.sort();
    assert_eq!(
        read,
        vec![
            None,
            None,
            Some(noon),
            Some(noon),
            Some(noon),
            Some(noon),
            Some(noon),
            Some(noon),
            Some(noon + 500_000),
            Some(noon + 500_000),
        ]
    );
}
