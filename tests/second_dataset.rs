//! A second dataset, onboarded from configuration alone, through the binary:
//! the loan contracts of `config/examples/loan_contracts/` (a holders
//! reference, row, trend, aggregate and reference rules, no key rule) run
//! month by month with a duplicate, a foreign contributor's row, schema drift
//! and a resubmission; and `silverline init`, run the way the README's
//! "Your own dataset" walk-through goes (its shell block is run as written),
//! on CSV and Parquet samples.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod harness;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use harness::{committed_rows, output, set_aside_rows, silverline, summaries_in, walk};

/// The example, as shipped.
const EXAMPLE: &str = "config/examples/loan_contracts";
const CONFIG: &str = "config/examples/loan_contracts/loan_contracts.toml";
const LENDER: &str = "LENDER_A";

/// Copies the files under `from` to `to`.
fn copy_tree(from: &Path, to: &Path) {
    for file in walk(from) {
        let target = to.join(file.strip_prefix(from).unwrap());
        std::fs::create_dir_all(target.parent().unwrap()).unwrap();
        std::fs::copy(&file, target).unwrap();
    }
}

/// A temp folder holding a copy of the example at its place in the
/// repository, so that its `../../../data` stays inside the folder.
fn example_copy() -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    copy_tree(Path::new(EXAMPLE), &tmp.path().join(EXAMPLE));
    let config = tmp.path().join(CONFIG);
    (tmp, config)
}

/// How many rows `rule` failed in a run, as its summary says.
fn failed(summary: &serde_json::Value, rule: &str) -> u64 {
    let rules = summary["rules"].as_array().unwrap();
    let found = rules.iter().find(|r| r["rule"] == rule);
    found.unwrap_or_else(|| panic!("rule {rule} in {summary}"))["failed"]
        .as_u64()
        .unwrap()
}

/// The one summary of `drop_id` under `dq_error`.
fn summary_of(dq_error: &Path, drop_id: &str) -> serde_json::Value {
    let mut found: Vec<_> = summaries_in(dq_error)
        .into_iter()
        .filter(|s| s["drop_id"] == drop_id)
        .collect();
    assert_eq!(found.len(), 1, "one summary for {drop_id}: {found:?}");
    found.remove(0)
}

/// received, committed, quarantined, pending, warned.
fn counts(summary: &serde_json::Value) -> [u64; 5] {
    ["received", "committed", "quarantined", "pending", "warned"]
        .map(|k| summary["counts"][k].as_u64().unwrap())
}

#[test]
fn the_loan_example_passes_check_config_and_declares_no_key_rule() {
    let text = output(&silverline(&["check-config", "--config", CONFIG]).success());
    assert!(text.contains("ok (15 columns"), "{text}");

    let rules =
        output(&silverline(&["rules", "--config", CONFIG, "--contributor", LENDER]).success());
    for line in [
        "contributor LENDER_A: type lender",
        "commitment_stable [row / quarantine / trend]",
        "rate_level [aggregate / quarantine / trend]",
        "holder_known [reference / pending]",
        "unique_key [row / quarantine] from the engine",
        "resubmission [row / quarantine] from the engine",
        "contributor [row / quarantine] from the engine",
    ] {
        assert!(rules.contains(line), "{line} in {rules}");
    }
    let file = std::fs::read_to_string(format!("{EXAMPLE}/rules/loan_rules.csv")).unwrap();
    for line in file.lines().skip(1) {
        let id = line.split(',').next().unwrap();
        assert!(
            !["unique_key", "resubmission", "contributor"].contains(&id),
            "{line}"
        );
        for column in ["_key_occurrences", "_key_committed", "_drop_contributor"] {
            assert!(!line.contains(column), "{column} in {line}");
        }
    }
}

#[test]
fn the_loan_example_runs_month_by_month_through_the_binary() {
    let (tmp, config) = example_copy();
    let config = config.to_str().unwrap();
    let data = tmp.path().join("data/loan_contracts");
    let dq_error = data.join("dq_error");
    // drop, then received, committed, quarantined, pending, warned
    let months: [(&str, [u64; 5]); 4] = [
        ("2026-01", [10, 8, 1, 1, 0]),
        ("2026-02", [12, 7, 4, 1, 0]),
        ("2026-03", [10, 8, 1, 1, 1]),
        ("2026-03-corrections", [2, 1, 1, 0, 0]),
    ];
    for (drop_id, expected) in months {
        let args = [
            "run",
            "--config",
            config,
            "--contributor",
            LENDER,
            "--drop",
            drop_id,
        ];
        let text = output(&silverline(&args).success());
        let summary = summary_of(&dq_error, drop_id);
        assert_eq!(counts(&summary), expected, "{drop_id}: {text}\n{summary}");
        // holder_tax_id is sensitive: none of its values (TX...) in the output or the summary.
        for written in [text, summary.to_string()] {
            assert!(
                !written.contains("TX44") && !written.contains("TX55"),
                "{written}"
            );
        }
    }

    let january = summary_of(&dq_error, "2026-01");
    assert_eq!(failed(&january, "drawn_within_commitment"), 1, "{january}");
    assert_eq!(failed(&january, "holder_known"), 1, "{january}");

    let february = summary_of(&dq_error, "2026-02");
    assert_eq!(failed(&february, "unique_key"), 2, "{february}");
    assert_eq!(failed(&february, "contributor"), 1, "{february}");
    assert_eq!(failed(&february, "commitment_stable"), 1, "{february}");
    assert_eq!(failed(&february, "resubmission"), 0, "{february}");
    assert_eq!(
        february["schema_drift"],
        serde_json::json!([{
            "file": "contracts.csv",
            "extra_columns": ["branch_code"],
            "missing_columns": []
        }])
    );

    let march = summary_of(&dq_error, "2026-03");
    assert_eq!(failed(&march, "rate_range"), 1, "{march}");
    assert_eq!(failed(&march, "commitment_stable"), 0, "{march}");
    let corrections = summary_of(&dq_error, "2026-03-corrections");
    assert_eq!(failed(&corrections, "resubmission"), 1, "{corrections}");

    // A drop run again adds nothing.
    let again = [
        "run",
        "--config",
        config,
        "--contributor",
        LENDER,
        "--drop",
        "2026-02",
    ];
    let text = output(&silverline(&again).success());
    assert!(text.contains("already committed"), "{text}");

    // The reasons the engine gave the duplicate and the foreign row.
    let quarantined = set_aside_rows(&dq_error, "quarantine");
    // The dq_error files keep the rows as received (mask_sensitive is off), tax ids included.
    assert!(
        quarantined
            .iter()
            .any(|r| r["holder_tax_id"].starts_with("TX44"))
    );
    let reasons = |contract: &str| -> Vec<String> {
        let rows = quarantined.iter().filter(|r| r["contract_id"] == contract);
        rows.map(|r| r["_dq_errors"].clone()).collect()
    };
    let duplicates = reasons("C003");
    assert_eq!(duplicates.len(), 2, "{quarantined:?}");
    assert!(
        duplicates.iter().all(|r| r.contains("unique_key")),
        "{duplicates:?}"
    );
    let foreign = reasons("B001");
    assert_eq!(foreign.len(), 1, "{quarantined:?}");
    assert!(foreign[0].contains("contributor"), "{foreign:?}");
    assert!(!foreign[0].contains("unique_key"), "{foreign:?}");
    let resent = reasons("C002");
    assert!(
        resent.len() == 1 && resent[0].contains("resubmission"),
        "{resent:?}"
    );

    // Silver holds every committed row once.
    let table = data.join("warehouse/silver/loan_contracts");
    let rows = committed_rows(&table, &["contract_id", "reporting_date"]);
    let distinct: std::collections::BTreeSet<&Vec<String>> = rows.iter().collect();
    assert_eq!(rows.len(), 24, "{rows:?}");
    assert_eq!(distinct.len(), 24, "{rows:?}");
    assert!(rows.contains(&vec!["C005".to_string(), "2026-03-31".to_string()]));
    assert!(
        !rows.iter().any(|r| r[0] == "B001" || r[0] == "C009"),
        "{rows:?}"
    );
}

/// The first `sh` block after the README's heading `heading`.
fn readme_block(heading: &str) -> String {
    let readme = std::fs::read_to_string("README.md").unwrap();
    let after = readme.split_once(heading).unwrap().1;
    let block = after.split_once("```sh\n").unwrap().1;
    block.split_once("\n```").unwrap().0.to_string()
}

#[test]
fn the_readme_walk_through_of_your_own_dataset_runs_as_written() {
    let (tmp, _) = example_copy();
    let script = readme_block("## Your own dataset");
    assert!(script.contains("silverline init"), "{script}");
    let binary = Path::new(env!("CARGO_BIN_EXE_silverline"));
    let path = format!(
        "{}:{}",
        binary.parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let run = std::process::Command::new("bash")
        .args(["-euo", "pipefail", "-c", &script])
        .current_dir(tmp.path())
        .env("PATH", path)
        .env("SILVERLINE_LOG_FORMAT", "text")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&run.stdout).to_string();
    let text = format!("{stdout}{}", String::from_utf8_lossy(&run.stderr));
    assert!(run.status.success(), "{script}\n{text}");
    for shown in [
        "entity_key = [\"contributor_id\", \"contract_id\"]",
        "order_column = \"reporting_date\"",
        "contributor_column = \"contributor_id\"",
        "{ name = \"holder_tax_id\", type = \"string\", sensitive = true },  # REVIEW",
        "loans.toml: ok (15 columns",
        "dry run: would commit 9 rows",
        "committed 9 rows",
        "quarantined 1",
        "drawn_within_commitment [row / quarantine]",
    ] {
        assert!(stdout.contains(shown), "{shown} in {stdout}");
    }
    let loans = tmp.path().join("loans");
    let summary = summary_of(&loans.join("data/dq_error"), "2026-01");
    assert_eq!(counts(&summary), [10, 9, 1, 0, 0], "{summary}");
    assert_eq!(failed(&summary, "drawn_within_commitment"), 1, "{summary}");
    let silver = committed_rows(&loans.join("data/warehouse/silver/loans"), &["contract_id"]);
    assert_eq!(silver.len(), 9);

    // Run again, init refuses to overwrite, naming the file.
    let config = loans.join("loans.toml");
    let before = std::fs::read_to_string(&config).unwrap();
    let sample = tmp
        .path()
        .join(EXAMPLE)
        .join("drops/LENDER_A/2026-01/contracts.csv");
    let text = output(&init("loans", &sample, &loans).code(2));
    assert!(text.contains("loans.toml already exists"), "{text}");
    assert_eq!(std::fs::read_to_string(&config).unwrap(), before);
}

/// `silverline init` on `sample` into `out`; the output.
fn init(name: &str, sample: &Path, out: &Path) -> assert_cmd::assert::Assert {
    silverline(&[
        "init",
        "--name",
        name,
        "--sample",
        sample.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ])
}

/// init, check-config, then the sample run as drop `2026-01` of `contributor`.
fn init_check_and_run(name: &str, sample: &Path, contributor: &str) -> (PathBuf, String) {
    let out = sample.parent().unwrap().join(name);
    init(name, sample, &out).success();
    let config = out.join(format!("{name}.toml"));
    let config_arg = config.to_str().unwrap();
    silverline(&["check-config", "--config", config_arg]).success();
    let drop = out.join("data/bronze").join(contributor).join("2026-01");
    std::fs::create_dir_all(&drop).unwrap();
    std::fs::copy(sample, drop.join(sample.file_name().unwrap())).unwrap();
    let args = [
        "run",
        "--config",
        config_arg,
        "--contributor",
        contributor,
        "--drop",
        "2026-01",
    ];
    let text = output(&silverline(&args).success());
    (config, text)
}

#[test]
fn init_on_a_parquet_sample_takes_its_types_from_the_schema() {
    use arrow::array::{
        ArrayRef, BooleanArray, Date32Array, Decimal128Array, Float64Array, Int64Array,
        RecordBatch, StringArray,
    };
    use arrow::datatypes::{DataType, Field, Schema};

    let tmp = tempfile::tempdir().unwrap();
    let days = 20_484; // 2026-01-31
    let columns: Vec<ArrayRef> = vec![
        Arc::new(StringArray::from(vec!["BANK_P"; 4])),
        Arc::new(StringArray::from(vec!["L1", "L2", "L3", "L4"])),
        Arc::new(Date32Array::from(vec![days; 4])),
        Arc::new(
            Decimal128Array::from(vec![Some(1050), Some(99), None, Some(0)])
                .with_precision_and_scale(12, 2)
                .unwrap(),
        ),
        Arc::new(Int64Array::from(vec![1, 2, 3, 4])),
        Arc::new(Float64Array::from(vec![0.5, 1.5, 2.0, 0.25])),
        Arc::new(BooleanArray::from(vec![true, false, true, true])),
    ];
    let schema = Schema::new(vec![
        Field::new("lender", DataType::Utf8, true),
        Field::new("loan_no", DataType::Utf8, true),
        Field::new("as_of", DataType::Date32, true),
        Field::new("balance", DataType::Decimal128(12, 2), true),
        Field::new("payments", DataType::Int64, true),
        Field::new("rate", DataType::Float64, true),
        Field::new("secured", DataType::Boolean, true),
    ]);
    let batch = RecordBatch::try_new(Arc::new(schema), columns).unwrap();
    let sample = tmp.path().join("loans.parquet");
    let file = std::fs::File::create(&sample).unwrap();
    let mut writer = parquet::arrow::ArrowWriter::try_new(file, batch.schema(), None).unwrap();
    writer.write(&batch).unwrap();
    writer.close().unwrap();

    let (config, text) = init_check_and_run("parquet_loans", &sample, "BANK_P");
    assert!(text.contains("committed 4 rows"), "{text}");
    let toml = std::fs::read_to_string(config).unwrap();
    for line in [
        r#"entity_key = ["lender", "loan_no"]"#,
        r#"order_column = "as_of""#,
        r#"contributor_column = "lender""#,
        r#"{ name = "balance", type = "decimal(12,2)" },"#,
        r#"{ name = "payments", type = "long", nullable = false },"#,
        r#"{ name = "rate", type = "double", nullable = false },"#,
        r#"{ name = "secured", type = "boolean", nullable = false },"#,
    ] {
        assert!(toml.contains(line), "{line} in {toml}");
    }
}

#[test]
fn init_quotes_names_a_csv_header_may_hold() {
    let tmp = tempfile::tempdir().unwrap();
    let sample = tmp.path().join("export.csv");
    std::fs::write(
        &sample,
        "Contributor;Loan ID;date;Net Amount;Fee Rate;Note\n\
         BANK_Q;A-1;2026-01-31;-10.50;0.5;\n\
         BANK_Q;A-2;2026-01-31;20.00;1.25;first\n\
         BANK_Q;A-3;2026-01-31;0;0;\n",
    )
    .unwrap();
    let (config, text) = init_check_and_run("quoted", &sample, "BANK_Q");
    assert!(text.contains("committed 3 rows"), "{text}");
    let toml = std::fs::read_to_string(&config).unwrap();
    for line in [
        r#"entity_key = ["Contributor", "Loan ID"]"#,
        r#"order_column = "date""#,
        r#"delimiter = ";""#,
        r#"{ name = "Net Amount", type = "decimal(18,2)", nullable = false },"#,
        r#"{ name = "Note", type = "string" },"#,
    ] {
        assert!(toml.contains(line), "{line} in {toml}");
    }
    let rules =
        std::fs::read_to_string(config.parent().unwrap().join("rules/quoted_rules.csv")).unwrap();
    assert!(
        rules.contains(r#"Fee_Rate_not_negative,*,row,"""Fee Rate"" >= 0",warn"#),
        "{rules}"
    );
    assert!(!rules.contains("Net_Amount_not_negative"), "{rules}");

    // The commented examples (a trend rule, an aggregate rule and its metric) work once uncommented.
    let uncomment = |path: &Path, starts: &[&str]| {
        let text = std::fs::read_to_string(path).unwrap();
        let lines: Vec<&str> = text
            .lines()
            .map(|l| match l.strip_prefix("# ") {
                Some(rest) if starts.iter().any(|s| rest.starts_with(s)) => rest,
                _ => l,
            })
            .collect();
        std::fs::write(path, lines.join("\n") + "\n").unwrap();
    };
    let rules_file = config.parent().unwrap().join("rules/quoted_rules.csv");
    uncomment(&rules_file, &["trend_example,", "volume,"]);
    uncomment(&config, &["[[metrics]]", "name = ", "expression = "]);
    let config_arg = config.to_str().unwrap();
    silverline(&["check-config", "--config", config_arg]).success();
    let shown = output(
        &silverline(&["rules", "--config", config_arg, "--contributor", "BANK_Q"]).success(),
    );
    for line in [
        r#"passes when "Fee Rate" BETWEEN 0.5 * "prev_Fee Rate" AND 2 * "prev_Fee Rate""#,
        "volume [aggregate / quarantine / trend]",
    ] {
        assert!(shown.contains(line), "{line} in {shown}");
    }
}

#[test]
fn init_refuses_what_it_cannot_write_with_exit_2() {
    let tmp = tempfile::tempdir().unwrap();
    let no_date = tmp.path().join("no_date.csv");
    std::fs::write(&no_date, "lender,loan_id,month\nB,L1,2026-01\n").unwrap();
    let good = Path::new(EXAMPLE).join("drops/LENDER_A/2026-01/contracts.csv");
    let taken = tmp.path().join("taken");
    std::fs::create_dir_all(&taken).unwrap();
    std::fs::write(taken.join("loans.toml"), "# mine\n").unwrap();
    let gzipped = tmp.path().join("sample.csv.gz");
    std::fs::write(&gzipped, [0x1f, 0x8b, 8, 0, 0, 0]).unwrap();
    let missing = tmp.path().join("missing.csv");
    let good = good.as_path();
    let cases: [(&str, &Path, &str, &str); 6] = [
        ("loans", &no_date, "fresh", "dataset.order_column"),
        ("loans", &gzipped, "fresh", "decompress the sample first"),
        ("Loans", good, "fresh", "--name Loans"),
        ("loans", &missing, "fresh", "cannot read the file"),
        ("loans", good, "taken", "loans.toml already exists"),
        ("loans", good, "taken/loans.toml", "is a file, not a folder"),
    ];
    for (name, sample, out, shown) in cases {
        let out = tmp.path().join(out);
        let text = output(&init(name, sample, &out).code(2));
        assert!(text.contains(shown), "{shown} in {text}");
        assert!(!out.join("rules").exists(), "{shown}: {:?}", walk(&out));
    }
    assert_eq!(
        std::fs::read_to_string(taken.join("loans.toml")).unwrap(),
        "# mine\n"
    );
}
