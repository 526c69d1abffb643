//! Hostile inputs through the binary: odd file names, rules that cannot be
//! evaluated, nested Parquet columns, repeated header columns, dates no
//! reader takes, symbolic links out of bronze, control characters in ids,
//! bad settings. Each gets the exit code the table promises (3 only for what
//! a retry can fix) and a message naming the culprit, never a row value.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod harness;

use std::path::Path;
use std::sync::Arc;

use arrow::array::{ArrayRef, ListBuilder, RecordBatch, StringArray, StringBuilder, StructArray};
use arrow::datatypes::{DataType, Field, Schema};
use harness::{
    everything_written, month, output, project, put_drop, run_args, sensitive_values, silverline,
};
use silverline::demo::generate::{Portfolio, Statement, to_csv};

/// A project with one 12-row drop of `BANK_C` for 2026-01 (config edited by
/// `edit`); its root, config path and rows.
fn one_drop(edit: impl Fn(String) -> String) -> (tempfile::TempDir, String, Vec<Statement>) {
    let (tmp, config) = project(edit);
    let rows = Portfolio::new("BANK_C", 12, false, 3).statements(month(2026, 1), false);
    put_drop(tmp.path(), "BANK_C", "2026-01", &rows);
    (tmp, config.to_str().unwrap().to_string(), rows)
}

fn drop_dir(root: &Path) -> std::path::PathBuf {
    root.join("data/bronze/BANK_C/2026-01")
}

/// The shipped config with one more row rule (severity warn).
fn with_rule(name: &str, expression: &str) -> impl Fn(String) -> String {
    let rule = format!(
        "rule_files = [{{ path = \"rules/credit_rules.csv\" }}]\n\n[[rules]]\nname = \"{name}\"\nexpression = \"{expression}\"\nseverity = \"warn\"\n"
    );
    move |t: String| {
        t.replace(
            "rule_files = [{ path = \"rules/credit_rules.csv\" }]",
            &rule,
        )
    }
}

#[test]
fn drop_files_named_with_reserved_characters_are_read() {
    let (tmp, config, _) = one_drop(|t| t);
    let dir = drop_dir(tmp.path());
    let name = "state ments #1 %41 ?ü.csv";
    std::fs::rename(dir.join("statements.csv"), dir.join(name)).unwrap();
    let text = output(&silverline(&run_args(&config, "BANK_C", "2026-01")).success());
    assert!(text.contains("committed 12 rows"), "{text}");
}

#[test]
fn a_rule_that_cannot_be_evaluated_exits_1_naming_the_rule_and_no_value() {
    let cases = [
        ("by_zero", "month_in_arrears / 0 >= 0", "division by zero"),
        ("ic_number", "CAST(account_id AS BIGINT) > 0", "cast failed"),
        (
            "ic_pattern",
            "regexp_like('x', new_ic || '(')",
            "invalid regular expression",
        ),
    ];
    for (name, expression, kind) in cases {
        let (tmp, config, rows) = one_drop(with_rule(name, expression));
        let run = silverline(&run_args(&config, "BANK_C", "2026-01")).code(1);
        let text = output(&run);
        assert!(
            text.contains(&format!("rule '{name}' could not be evaluated: {kind}")),
            "{name}: {text}"
        );
        let written = everything_written(tmp.path(), &text);
        assert!(written.iter().any(|(p, _)| p.contains("summaries")));
        assert!(!sensitive_values(&rows).is_empty());
        for (path, text) in &written {
            for value in sensitive_values(&rows) {
                assert!(!text.contains(value.as_str()), "{value} in {path}: {text}");
            }
        }
    }
}

#[test]
fn a_metric_that_cannot_be_evaluated_exits_1_naming_the_metric() {
    let metric =
        "[[metrics]]\nname = \"broken\"\nexpression = \"sum(month_in_arrears) / 0\"\n\n[[metrics]]";
    let (_tmp, config, _) = one_drop(|t| t.replacen("[[metrics]]", metric, 1));
    let text = output(&silverline(&run_args(&config, "BANK_C", "2026-01")).code(1));
    assert!(
        text.contains("metric 'broken' could not be evaluated: division by zero"),
        "{text}"
    );
}

/// The drop's CSV as a Parquet file of text columns, with `column` replaced by `values`.
fn parquet_drop(rows: &[Statement], column: &str, values: ArrayRef) -> Vec<u8> {
    let csv = to_csv(rows);
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let records: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    let mut fields = Vec::new();
    let mut arrays: Vec<ArrayRef> = Vec::new();
    for (i, name) in header.iter().enumerate() {
        if *name == column {
            fields.push(Field::new(*name, values.data_type().clone(), true));
            arrays.push(values.clone());
        } else {
            let text = records.iter().map(|r| Some(r[i]).filter(|v| !v.is_empty()));
            fields.push(Field::new(*name, DataType::Utf8, true));
            arrays.push(Arc::new(text.collect::<StringArray>()));
        }
    }
    let schema = Arc::new(Schema::new(fields));
    let batch = RecordBatch::try_new(schema.clone(), arrays).unwrap();
    let mut bytes = Vec::new();
    let mut writer = parquet::arrow::ArrowWriter::try_new(&mut bytes, schema, None).unwrap();
    writer.write(&batch).unwrap();
    writer.close().unwrap();
    bytes
}

#[test]
fn a_nested_parquet_column_where_the_contract_expects_a_value_exits_1_naming_file_and_column() {
    let (tmp, config, rows) = one_drop(|t| t);
    let mut lists = ListBuilder::new(StringBuilder::new());
    for row in &rows {
        lists.values().append_value(&row.account);
        lists.append(true);
    }
    let structs = StructArray::from(vec![(
        Arc::new(Field::new("id", DataType::Utf8, true)),
        Arc::new(
            rows.iter()
                .map(|r| Some(r.account.as_str()))
                .collect::<StringArray>(),
        ) as ArrayRef,
    )]);
    let cases: [(ArrayRef, &str); 2] = [
        (Arc::new(lists.finish()), "list"),
        (Arc::new(structs), "struct"),
    ];
    let dir = drop_dir(tmp.path());
    std::fs::remove_file(dir.join("statements.csv")).unwrap();
    for (values, kind) in cases {
        std::fs::write(
            dir.join("statements.parquet"),
            parquet_drop(&rows, "account_id", values),
        )
        .unwrap();
        let text = output(&silverline(&run_args(&config, "BANK_C", "2026-01")).code(1));
        assert!(
            text.contains("statements.parquet")
                && text.contains("column 'account_id'")
                && text.contains(kind),
            "{kind}: {text}"
        );
    }
}

#[test]
fn a_csv_header_naming_a_column_twice_exits_1_naming_file_line_and_column() {
    let (tmp, config, rows) = one_drop(|t| t);
    let csv = to_csv(&rows);
    let twice: String = csv
        .lines()
        .enumerate()
        .map(|(i, l)| match i {
            0 => format!("{l},account_id\n"),
            _ => format!("{l},OTHER\n"),
        })
        .collect();
    std::fs::write(drop_dir(tmp.path()).join("statements.csv"), twice).unwrap();
    let text = output(&silverline(&run_args(&config, "BANK_C", "2026-01")).code(1));
    assert!(
        text.contains("statements.csv:1")
            && text.contains("more than once")
            && text.contains("account_id"),
        "{text}"
    );
}

#[test]
fn a_date_no_reader_takes_is_quarantined_by_the_parse_rule() {
    let (tmp, config, rows) = one_drop(|t| t);
    let csv = to_csv(&rows);
    let last = rows[11].date.to_string();
    let patched = csv.replacen(&last, "0000-01-01", 1);
    assert_ne!(patched, csv);
    std::fs::write(drop_dir(tmp.path()).join("statements.csv"), patched).unwrap();
    let text = output(&silverline(&run_args(&config, "BANK_C", "2026-01")).success());
    assert!(text.contains("committed 11 rows"), "{text}");
    let quarantined = harness::walk(&tmp.path().join("data/dq_error"))
        .into_iter()
        .filter(|p| p.to_string_lossy().contains("/quarantine/"))
        .map(|p| std::fs::read_to_string(p).unwrap())
        .collect::<String>();
    assert!(
        quarantined.contains("parse") && quarantined.contains("column 'statement_date'"),
        "{quarantined}"
    );
}

#[test]
fn a_symbolic_link_out_of_bronze_exits_1_naming_the_file() {
    let (tmp, config, _) = one_drop(|t| t);
    let outside = tmp.path().join("outside.csv");
    let dir = drop_dir(tmp.path());
    std::fs::rename(dir.join("statements.csv"), &outside).unwrap();
    std::os::unix::fs::symlink(&outside, dir.join("statements.csv")).unwrap();
    let text = output(&silverline(&run_args(&config, "BANK_C", "2026-01")).code(1));
    assert!(
        text.contains("BANK_C/2026-01/statements.csv") && text.contains("symbolic link"),
        "{text}"
    );
}

#[test]
fn a_symbolic_link_inside_bronze_is_read() {
    let (tmp, config, _) = one_drop(|t| t);
    let dir = drop_dir(tmp.path());
    let kept = tmp.path().join("data/bronze/_kept.csv");
    std::fs::rename(dir.join("statements.csv"), &kept).unwrap();
    std::os::unix::fs::symlink(&kept, dir.join("statements.csv")).unwrap();
    let text = output(&silverline(&run_args(&config, "BANK_C", "2026-01")).success());
    assert!(text.contains("committed 12 rows"), "{text}");
}

#[test]
fn average_periods_0_is_refused_by_check_config_and_run_naming_the_setting() {
    let (_tmp, config, _) = one_drop(|t| t.replace("average_periods = 3", "average_periods = 0"));
    for args in [
        vec!["check-config", "--config", config.as_str()],
        run_args(&config, "BANK_C", "2026-01")
            .iter()
            .map(String::as_str)
            .collect(),
    ] {
        let text = output(&silverline(&args).code(2));
        assert!(text.contains("aggregates.average_periods"), "{text}");
    }
}

#[test]
fn report_out_an_existing_file_exits_2_naming_out() {
    let (tmp, config, _) = one_drop(|t| t);
    let file = tmp.path().join("report.html");
    std::fs::write(&file, "x").unwrap();
    let args = [
        "report",
        "--config",
        &config,
        "--out",
        file.to_str().unwrap(),
    ];
    let text = output(&silverline(&args).code(2));
    assert!(
        text.contains("--out") && text.contains("report.html"),
        "{text}"
    );
}

#[test]
fn backfill_from_or_to_an_unsafe_id_exits_2_naming_the_argument() {
    let (_tmp, config, _) = one_drop(|t| t);
    for (arg, from, to) in [("--from", "../x", "2026-12"), ("--to", "2026-01", "../x")] {
        let args = [
            "backfill",
            "--config",
            &config,
            "--contributor",
            "BANK_C",
            "--from",
            from,
            "--to",
            to,
        ];
        let text = output(&silverline(&args).code(2));
        assert!(text.contains(arg), "{arg}: {text}");
    }
}

#[test]
fn control_characters_of_an_id_reach_stderr_escaped() {
    let (_tmp, config, _) = one_drop(|t| t);
    for id in ["A\x1b[31mB", "A\nFAKE level=ERROR", "BANK_C\r"] {
        for format in ["text", "json"] {
            let assert = assert_cmd::Command::cargo_bin("silverline")
                .unwrap()
                .args(["--log-format", format])
                .args(run_args(&config, id, "2026-01"))
                .assert()
                .code(2);
            let out = assert.get_output();
            let stderr = String::from_utf8_lossy(&out.stderr);
            let stdout = String::from_utf8_lossy(&out.stdout);
            for text in [&stderr, &stdout] {
                assert!(!text.contains('\x1b') && !text.contains('\r'), "{text:?}");
                assert!(!text.contains("\nFAKE"), "{text:?}");
            }
            assert!(stderr.contains("--contributor"), "{stderr}");
        }
    }
}

/// A partition on a sensitive column would write its values into data file
/// paths and manifests: the configuration is refused, naming the setting.
#[test]
fn a_partition_on_a_sensitive_column_is_refused_by_check_config() {
    let (_tmp, config) = project(|text| {
        text.replace(
            "{ column = \"contributor_id\" },",
            "{ column = \"new_ic\" },",
        )
    });
    let assert = silverline(&["check-config", "--config", config.to_str().unwrap()]);
    let text = output(&assert);
    assert.code(2);
    assert!(text.contains("table.partition"), "{text}");
    assert!(text.contains("new_ic"), "{text}");
    assert!(text.contains("sensitive"), "{text}");
}

/// A drop id unsafe in paths fails the backfill when its turn comes (exit
/// 2), never before: the drops ahead of it run and commit.
#[test]
fn a_backfill_runs_the_drops_before_an_unsafe_drop_id() {
    let (tmp, config, _) = one_drop(|t| t);
    let unsafe_id = tmp.path().join("data/bronze/BANK_C/2026-01 again");
    std::fs::create_dir_all(&unsafe_id).unwrap();
    std::fs::write(unsafe_id.join("statements.csv"), "not read").unwrap();
    let args = [
        "backfill",
        "--config",
        &config,
        "--contributor",
        "BANK_C",
        "--from",
        "2026-01",
        "--to",
        "2026-02",
    ];
    silverline(&args).code(2);
    let text = output(&silverline(&run_args(&config, "BANK_C", "2026-01")).success());
    assert!(text.contains("already committed"), "{text}");
}
