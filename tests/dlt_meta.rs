//! dlt-meta expectation files as people write them, through the binary: the
//! `expect_all*` blocks, a file with all seven blocks, and the two readings of
//! `expect_or_quarantine` (declared per file with `quarantine_expressions`).
//! The files are written in dlt-meta's own words (its `valid_*` and
//! `quarantine_rule` names, one rule name -> SQL per block) over the credit
//! contract's columns; each runs on a small drop whose quarantined, dropped
//! and committed rows are written here.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod harness;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use harness::{
    committed_accounts, month, output, project, put_drop, run_args, set_aside_accounts, silverline,
    summaries,
};
use silverline::demo::generate::{Portfolio, Statement};

const BANK: &str = "BANK_D";

/// The shipped config's rule files entry, replaced by the file under test.
const SHIPPED_RULE_FILES: &str = r#"rule_files = [{ path = "rules/credit_rules.csv" }]"#;

/// Like dlt-meta's transactions silver example: nothing but an `expect_all_or_drop` block.
const EXPECT_ALL_OR_DROP_ONLY: &str = r#"{
  "expect_all_or_drop": {
    "valid_operation": "operation_code IN ('A', 'U', 'C')",
    "valid_new_ic": "length(new_ic) = 12"
  }
}
"#;

/// All seven blocks, the quarantine block written as dlt-meta's own files write
/// it: a condition that selects the rows to quarantine.
const ALL_SEVEN_BLOCKS: &str = "\
expect:
  no_temporary_limit: temporary_limit = 0
expect_all:
  valid_product_type: product_type IN ('CARD', 'LOAN', 'OVERDRAFT')
expect_or_drop:
  no_arrears_without_months: amount_in_arrears <= 0 OR month_in_arrears > 0
expect_all_or_drop:
  valid_operation: operation_code IN ('A', 'U', 'C')
expect_or_quarantine:
  quarantine_rule: new_ic IS NULL AND old_ic IS NULL AND passport_no IS NULL
expect_or_fail:
  valid_account_id: account_id IS NOT NULL
expect_all_or_fail:
  valid_month_in_arrears: month_in_arrears BETWEEN 0 AND 36
";

/// A bronze file in dlt-meta's shape: drop on `expect_or_drop`, quarantine the
/// rows the `quarantine_rule` selects.
const QUARANTINE_ROWS_TO_QUARANTINE: &str = r#"{
   "expect_or_drop": {
      "valid_operation": "operation_code IN ('A', 'U', 'C')"
   },
   "expect_or_quarantine": {
      "quarantine_rule": "length(new_ic) <> 12"
   }
}
"#;

/// The same intent with the quarantine block written as valid rows.
const QUARANTINE_VALID_ROWS: &str = "\
expect_or_drop:
  valid_operation: operation_code IN ('A', 'U', 'C')
expect_or_quarantine:
  valid_new_ic: length(new_ic) = 12
";

/// A project whose only rule file is `file` holding `text`; `entry` is added to
/// its `rule_files` entry (e.g. `, quarantine_expressions = "valid_rows"`).
fn project_with(file: &str, text: &str, entry: &str) -> (tempfile::TempDir, PathBuf) {
    let replacement = format!(r#"rule_files = [{{ path = "rules/{file}"{entry} }}]"#);
    let (tmp, config) = project(|t| t.replace(SHIPPED_RULE_FILES, &replacement));
    std::fs::write(tmp.path().join("config/rules").join(file), text).unwrap();
    (tmp, config)
}

/// `rows` made to pass every rule of this file: operation A, an active card
/// with no temporary limit and no arrears, a 12-digit new_ic.
fn clean(mut rows: Vec<Statement>) -> Vec<Statement> {
    for row in &mut rows {
        row.operation = "A";
        row.product = "CARD";
        row.status = "ACTIVE";
        row.temporary_limit = 0;
        row.arrears = 0;
        row.months_in_arrears = 0;
        row.identity = (Some("900101015555".to_string()), None, None);
    }
    rows
}

/// Where each account of a drop went.
#[derive(Debug, PartialEq)]
struct Outcome {
    quarantined: BTreeSet<String>,
    dropped: BTreeSet<String>,
    committed: BTreeSet<String>,
}

impl Outcome {
    /// The accounts of `rows` at the given indexes.
    fn expected(
        rows: &[Statement],
        quarantined: &[usize],
        dropped: &[usize],
        committed: &[usize],
    ) -> Outcome {
        let accounts = |at: &[usize]| at.iter().map(|&i| rows[i].account.clone()).collect();
        Outcome {
            quarantined: accounts(quarantined),
            dropped: accounts(dropped),
            committed: accounts(committed),
        }
    }

    /// What the runs in `root` left: dq_error files and Silver's data files.
    fn found(root: &Path) -> Outcome {
        Outcome {
            quarantined: set_aside_accounts(root, "quarantine"),
            dropped: set_aside_accounts(root, "dropped"),
            committed: committed_accounts(root),
        }
    }
}

/// Puts `rows` as the January drop of `BANK` and runs it; exit 0.
fn run_january(root: &Path, config: &Path, rows: &[Statement]) -> String {
    put_drop(root, BANK, "2026-01", rows);
    let args = run_args(config.to_str().unwrap(), BANK, "2026-01");
    output(&silverline(&args).success())
}

fn check_config(config: &Path) -> assert_cmd::assert::Assert {
    silverline(&["check-config", "--config", config.to_str().unwrap()])
}

fn rules_of(config: &Path) -> String {
    let args = [
        "rules",
        "--config",
        config.to_str().unwrap(),
        "--contributor",
        BANK,
    ];
    output(&silverline(&args).success())
}

#[test]
fn an_expect_all_or_drop_only_file_drops_its_failures_null_included() {
    let (tmp, config) = project_with("silver_dqe.json", EXPECT_ALL_OR_DROP_ONLY, "");
    let mut rows = clean(Portfolio::new(BANK, 4, false, 1).statements(month(2026, 1), false));
    rows[1].operation = "D";
    rows[2].identity = (None, Some("A123456".to_string()), None);
    let text = run_january(tmp.path(), &config, &rows);
    assert!(text.contains("committed 2 rows"), "{text}");
    assert_eq!(
        Outcome::found(tmp.path()),
        Outcome::expected(&rows, &[], &[1, 2], &[0, 3])
    );
}

#[test]
fn a_file_with_all_seven_blocks_warns_drops_quarantines_and_fails() {
    let (tmp, config) = project_with(
        "all_blocks_dqe.yaml",
        ALL_SEVEN_BLOCKS,
        r#", quarantine_expressions = "rows_to_quarantine""#,
    );
    let mut bank = Portfolio::new(BANK, 8, false, 2);
    let mut rows = clean(bank.statements(month(2026, 1), false));
    rows[1].temporary_limit = 50_000; // expect: warned, committed
    rows[2].product = "BNPL"; // expect_all: warned, committed
    rows[3].operation = "D"; // expect_all_or_drop
    (rows[4].arrears, rows[4].balance) = (12_000, 12_000); // expect_or_drop
    rows[5].identity = (None, None, None); // quarantine_rule selects it
    rows[6].operation = "D"; // dropped and quarantined: quarantine wins
    rows[6].identity = (None, None, None);
    run_january(tmp.path(), &config, &rows);
    assert_eq!(
        Outcome::found(tmp.path()),
        Outcome::expected(&rows, &[5, 6], &[3, 4], &[0, 1, 2, 7])
    );
    let summary = &summaries(tmp.path())[0];
    assert_eq!(summary["counts"]["warned"], 2, "{summary}");

    let mut february = clean(bank.statements(month(2026, 2), false));
    february[0].months_in_arrears = 40; // expect_all_or_fail
    put_drop(tmp.path(), BANK, "2026-02", &february);
    let args = run_args(config.to_str().unwrap(), BANK, "2026-02");
    let text = output(&silverline(&args).code(1));
    assert!(
        text.contains("valid_month_in_arrears") && text.contains("nothing committed"),
        "{text}"
    );
    assert_eq!(
        committed_accounts(tmp.path()),
        Outcome::expected(&rows, &[], &[], &[0, 1, 2, 7]).committed
    );
}

/// The drop both quarantine readings are run on, and where its rows must go.
fn quarantine_drop() -> (Vec<Statement>, Outcome) {
    let mut rows = clean(Portfolio::new(BANK, 5, false, 3).statements(month(2026, 1), false));
    rows[1].identity = (Some("12345".to_string()), None, None);
    rows[2].identity = (None, None, Some("P1234567".to_string())); // NULL result: quarantined
    rows[3].operation = "D";
    let expected = Outcome::expected(&rows, &[1, 2], &[3], &[0, 4]);
    (rows, expected)
}

#[test]
fn a_quarantine_block_read_as_rows_to_quarantine_quarantines_what_it_selects() {
    let (tmp, config) = project_with(
        "bronze_dqe.json",
        QUARANTINE_ROWS_TO_QUARANTINE,
        r#", quarantine_expressions = "rows_to_quarantine""#,
    );
    let (rows, expected) = quarantine_drop();
    run_january(tmp.path(), &config, &rows);
    assert_eq!(Outcome::found(tmp.path()), expected);
}

#[test]
fn a_dlt_meta_quarantine_block_read_the_wrong_way_quarantines_the_good_rows() {
    let (tmp, config) = project_with(
        "bronze_dqe.json",
        QUARANTINE_ROWS_TO_QUARANTINE,
        r#", quarantine_expressions = "valid_rows""#,
    );
    let (rows, _) = quarantine_drop();
    run_january(tmp.path(), &config, &rows);
    assert_eq!(
        Outcome::found(tmp.path()),
        Outcome::expected(&rows, &[0, 2, 3, 4], &[], &[1])
    );
}

#[test]
fn a_quarantine_block_read_as_valid_rows_quarantines_what_fails_it() {
    let (tmp, config) = project_with(
        "bronze_dqe.yaml",
        QUARANTINE_VALID_ROWS,
        r#", quarantine_expressions = "valid_rows""#,
    );
    let (rows, expected) = quarantine_drop();
    run_january(tmp.path(), &config, &rows);
    assert_eq!(Outcome::found(tmp.path()), expected);
}

#[test]
fn rules_shows_each_rule_as_evaluated_with_its_block_and_reading() {
    let (_tmp, config) = project_with(
        "all_blocks_dqe.yaml",
        ALL_SEVEN_BLOCKS,
        r#", quarantine_expressions = "rows_to_quarantine""#,
    );
    let text = rules_of(&config);
    let expected = [
        "quarantine_rule [row / quarantine] from",
        "all_blocks_dqe.yaml [expect_or_quarantine.quarantine_rule, rows_to_quarantine]",
        "passes when (new_ic IS NULL AND old_ic IS NULL AND passport_no IS NULL) IS FALSE",
        "valid_product_type [row / warn] from",
        "valid_operation [row / drop] from",
        "valid_month_in_arrears [row / fail] from",
        "passes when month_in_arrears BETWEEN 0 AND 36",
    ];
    for line in expected {
        assert!(text.contains(line), "{line}\n{text}");
    }
    let (_tmp, config) = project_with(
        "bronze_dqe.yaml",
        QUARANTINE_VALID_ROWS,
        r#", quarantine_expressions = "valid_rows""#,
    );
    let text = rules_of(&config);
    assert!(
        text.contains("[expect_or_quarantine.valid_new_ic, valid_rows]")
            && text.contains("passes when length(new_ic) = 12"),
        "{text}"
    );
}

#[test]
fn check_config_refuses_a_quarantine_block_with_no_declared_reading() {
    let (_tmp, config) = project_with("bronze_dqe.json", QUARANTINE_ROWS_TO_QUARANTINE, "");
    let text = output(&check_config(&config).code(2));
    assert!(
        text.contains("bronze_dqe.json")
            && text.contains("expect_or_quarantine")
            && text.contains("quarantine_expressions"),
        "{text}"
    );
}

#[test]
fn check_config_refuses_a_rule_name_in_two_blocks_naming_both() {
    let both = r#"{
    "expect": { "valid_account_id": "account_id IS NOT NULL" },
    "expect_all": { "valid_account_id": "account_id IS NOT NULL" }
}"#;
    let (_tmp, config) = project_with("product_dqe.json", both, "");
    let text = output(&check_config(&config).code(2));
    assert!(
        text.contains("product_dqe.json")
            && text.contains("'valid_account_id'")
            && text.contains("expect and expect_all"),
        "{text}"
    );
}

#[test]
fn check_config_refuses_an_unknown_reading_and_a_reading_on_a_control_csv() {
    let (_tmp, config) = project_with(
        "bronze_dqe.json",
        QUARANTINE_ROWS_TO_QUARANTINE,
        r#", quarantine_expressions = "bad_rows""#,
    );
    let text = output(&check_config(&config).code(2));
    assert!(
        text.contains("bad_rows") && text.contains("rows_to_quarantine"),
        "{text}"
    );
    let (_tmp, config) = project(|t| {
        t.replace(
            SHIPPED_RULE_FILES,
            r#"rule_files = [{ path = "rules/credit_rules.csv", quarantine_expressions = "valid_rows" }]"#,
        )
    });
    let text = output(&check_config(&config).code(2));
    assert!(
        text.contains("credit_rules.csv") && text.contains("quarantine_expressions"),
        "{text}"
    );
}
