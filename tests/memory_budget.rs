//! `[resources] memory_limit`: a run whose queries need more than the budget
//! spills them to the scratch folder and goes on, and judges, sets aside and
//! commits exactly what a run with room does. Through the binary.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod harness;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use harness::{
    committed_rows, month, output, project, put_drop, put_january, run_args, set_aside_accounts,
    set_aside_rows, silverline, summary_of,
};
use silverline::demo::generate::{Portfolio, Statement};

/// Accounts per month: their distinct count per period (a metric of the
/// shipped config) needs several times the tight budget.
const ACCOUNTS: usize = 200_000;

/// A budget the drop needs several buckets under (half of it holds about
/// 65,000 rows: a larger drop goes in buckets of an eighth, 16,384 rows),
/// and the queries several spills.
const TIGHT: &str = "64MiB";

/// A drop the tight budget judges whole (up to 65,536 rows), smaller than
/// the months before it.
const SMALL_DROP: usize = 20_000;

/// A metric that counts distinct values a split by entity could count
/// twice (two accounts may read alike once lowered): measured over every
/// row of a period at once, it is what spills past a tight budget.
const SPILLING_METRIC: &str = "\n[[metrics]]\nname = \"lowered_accounts\"\nexpression = \"count(DISTINCT lower(account_id))\"\n";

/// A project whose runs have `budget` (the default when `None`) and whose
/// rule files are edited by `rules`, with January committed and February
/// (its statements edited by `edit`) run, January's metrics measured
/// afresh (not read back from its run); the output of February's run, and
/// the bank.
fn january_then_february(
    budget: Option<&str>,
    rules: impl Fn(String) -> String,
    edit: impl Fn(&mut Vec<Statement>),
) -> (tempfile::TempDir, PathBuf, String, Portfolio) {
    let resources = budget.map(|limit| {
        format!("\n[resources]\nmemory_limit = \"{limit}\"\nscratch_dir = \"../scratch\"\n")
    });
    let (tmp, config) = project(|text| match &resources {
        Some(section) if text.contains("[dataset]") => text + section + SPILLING_METRIC,
        _ if text.contains("[dataset]") => text + SPILLING_METRIC,
        _ => rules(text),
    });
    let root = tmp.path().to_path_buf();
    let config_arg = config.to_str().unwrap();
    let mut bank = put_january(&root, "BANK_M", ACCOUNTS);
    silverline(&run_args(config_arg, "BANK_M", "2026-01")).success();
    let kept_metrics = root.join("data/dq_error/metrics");
    assert!(kept_metrics.is_dir(), "January's metrics were not kept");
    std::fs::remove_dir_all(kept_metrics).unwrap();
    let mut february = bank.statements(month(2026, 2), false);
    edit(&mut february);
    put_drop(&root, "BANK_M", "2026-02", &february);
    let run = silverline(&run_args(config_arg, "BANK_M", "2026-02")).success();
    let text = output(&run);
    (tmp, root, text, bank)
}

/// Silver's rows (key and date), sorted.
fn silver(root: &Path) -> Vec<Vec<String>> {
    let table = root.join("data/warehouse/silver/credit_statements");
    let mut rows = committed_rows(&table, &["account_id", "statement_date"]);
    rows.sort();
    rows
}

/// How many files under `dir` (at any depth) have a name starting with `prefix`.
fn files_named_after(dir: &Path, prefix: &str) -> usize {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .map(|path| match path.is_dir() {
            true => files_named_after(&path, prefix),
            false => usize::from(
                path.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with(prefix)),
            ),
        })
        .sum()
}

/// Rule files as shipped.
fn same(text: String) -> String {
    text
}

/// How many files of the run `summary` describes Silver's folder holds.
fn silver_files_of(root: &Path, summary: &serde_json::Value) -> usize {
    let run_id = summary["run_id"].as_str().unwrap();
    files_named_after(
        &root.join("data/warehouse/silver/credit_statements/data"),
        run_id,
    )
}

#[test]
fn a_run_past_its_memory_budget_spills_and_commits_what_a_roomy_run_commits() {
    // A re-sent row: the engine's unique_key sets both aside.
    let resend = |february: &mut Vec<Statement>| february.push(february[7].clone());
    let (_tight_dir, tight, tight_output, mut bank) =
        january_then_february(Some(TIGHT), same, resend);
    let (_roomy_dir, roomy, roomy_output, _) = january_then_february(None, same, resend);

    // The tight run judged in buckets and spilled; the roomy one had no
    // need to.
    let spilled = "spilled to the scratch folder";
    assert!(tight_output.contains(spilled), "{tight_output}");
    assert!(!roomy_output.contains(spilled), "{roomy_output}");
    // No period failed and no rule escalated: each bucket judged once.
    let again = "judging every bucket again";
    assert!(!tight_output.contains(again), "{tight_output}");
    let bucketed = "judging the drop in buckets of entities";
    assert!(
        tight_output.contains(bucketed) && tight_output.contains("buckets=13"),
        "{tight_output}"
    );
    assert!(!roomy_output.contains(bucketed), "{roomy_output}");

    // The same books, rule by rule and period by period.
    let (a, b) = (summary_of(&tight, "2026-02"), summary_of(&roomy, "2026-02"));
    assert_eq!(a["counts"], b["counts"]);
    assert_eq!(a["counts"]["received"], ACCOUNTS as u64 + 1);
    assert_eq!(
        a["counts"]["quarantined"].as_u64(),
        Some(2),
        "{}",
        a["counts"]
    );
    assert_eq!(a["rules"], b["rules"]);
    // The accounts counted bucket by bucket (and January's in parts of
    // its own rows) as the roomy run counts them at once.
    assert_eq!(a["aggregates"], b["aggregates"]);
    let period = &a["aggregates"][0];
    for counted in [&period["metrics"], &period["previous"]] {
        for metric in ["accounts", "lowered_accounts"] {
            assert_eq!(counted[metric].as_f64(), Some(ACCOUNTS as f64), "{period}");
        }
    }

    // One writer per core for the whole run, not one per bucket: 13
    // buckets, at most one Silver file per core.
    let files = silver_files_of(&tight, &a);
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    assert!((1..=cores).contains(&files), "{files} files, {cores} cores");

    // The same rows committed and set aside.
    let committed = silver(&tight);
    assert_eq!(committed.len(), 2 * ACCOUNTS - 1);
    assert_eq!(committed, silver(&roomy));
    assert_eq!(
        set_aside_accounts(&tight, "quarantine"),
        set_aside_accounts(&roomy, "quarantine")
    );

    // A drop one bucket holds, after months larger than a bucket: the
    // months are split into parts as their own rows need, not the drop's.
    std::fs::remove_dir_all(tight.join("data/dq_error/metrics")).unwrap();
    let mut march = bank.statements(month(2026, 3), false);
    march.truncate(SMALL_DROP);
    put_drop(&tight, "BANK_M", "2026-03", &march);
    let config = tight.join("config/credit_statements.toml");
    let run = silverline(&run_args(config.to_str().unwrap(), "BANK_M", "2026-03")).success();
    let text = output(&run);
    assert!(!text.contains(bucketed), "{text}");
    let in_parts = "measuring a committed month in parts of entities";
    assert_eq!(text.matches(in_parts).count(), 2, "{text}");
    // Each month's rows as its files' manifests count them (more than the
    // 64 MiB budget judges whole), their accounts' fingerprints counted in
    // parts of at most 1 MiB (a sixty-fourth of it): 3.2 MB in 4.
    for month in [
        "2026-01-01 parts=4 estimated_rows=200000",
        "2026-02-01 parts=4 estimated_rows=199999",
    ] {
        assert!(text.contains(&format!("month={month}")), "{text}");
    }
    let period = &summary_of(&tight, "2026-03")["aggregates"][0];
    for metric in ["accounts", "lowered_accounts"] {
        assert_eq!(
            period["metrics"][metric].as_f64(),
            Some(SMALL_DROP as f64),
            "{period}"
        );
        // February's accounts but the one whose statements were both set aside.
        let february = (ACCOUNTS - 1) as f64;
        assert_eq!(
            period["previous"][metric].as_f64(),
            Some(february),
            "{period}"
        );
    }
}

/// Every quarantined row of `root`'s February, in file order, without the
/// run's stamp (its id and time).
fn quarantined(root: &Path) -> Vec<BTreeMap<String, String>> {
    let mut rows = set_aside_rows(&root.join("data/dq_error"), "quarantine");
    for row in &mut rows {
        row.remove("_dq_run_id");
        row.remove("_dq_timestamp");
    }
    rows
}

#[test]
fn a_run_that_sets_every_row_aside_past_its_budget_writes_them_as_a_roomy_run_does() {
    // Every February row fails mia_range: the rows set aside outgrow the
    // tight budget as the drop does, so they are kept in the scratch
    // folder and merged in the drop's order.
    let out_of_range = |february: &mut Vec<Statement>| {
        for statement in february.iter_mut() {
            statement.months_in_arrears = 40;
        }
    };
    let (_tight_dir, tight, tight_output, _) =
        january_then_february(Some(TIGHT), same, out_of_range);
    let (_roomy_dir, roomy, _, _) = january_then_february(None, same, out_of_range);
    assert!(tight_output.contains("buckets=13"), "{tight_output}");

    let (a, b) = (summary_of(&tight, "2026-02"), summary_of(&roomy, "2026-02"));
    assert_eq!(a["counts"], b["counts"]);
    assert_eq!(
        a["counts"]["quarantined"], ACCOUNTS as u64,
        "{}",
        a["counts"]
    );
    assert_eq!(a["counts"]["committed"], 0, "{}", a["counts"]);

    // The same rows, in the order they stood in the drop.
    let rows = quarantined(&tight);
    assert_eq!(rows.len(), ACCOUNTS);
    let lines: Vec<u64> = rows
        .iter()
        .map(|row| row["_source_line"].parse().unwrap())
        .collect();
    assert!(lines.windows(2).all(|w| w[0] < w[1]), "not in file order");
    assert!(rows == quarantined(&roomy), "the rows set aside differ");

    // One open exception per row set aside, counted by a sort of the
    // exception store that outgrew the budget too.
    let config = tight.join("config/credit_statements.toml");
    let backlog =
        silverline(&["backlog", "--config", config.to_str().unwrap(), "--json"]).success();
    let out = backlog.get_output();
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(
        log.contains("a query spilled to the scratch folder"),
        "{log}"
    );
    let backlog: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        backlog["overall"]["backlog"]["open"], ACCOUNTS as u64,
        "{backlog}"
    );
}

#[test]
fn a_rule_escalated_once_every_bucket_is_counted_judges_again_and_leaves_no_file_of_the_first_judgement()
 {
    // temp_limit_zero warns until more than 1% of the rows fail it; about
    // 3% of the statements carry a temporary limit. Each bucket's rows are
    // written as warned before the last is counted, then judged again.
    let escalated = |text: String| {
        text.replace(
            "worth watching),true,,,",
            "worth watching),true,,0.01,quarantine",
        )
    };
    let no_edit = |_: &mut Vec<Statement>| {};
    let (_tight_dir, tight, tight_output, _) =
        january_then_february(Some(TIGHT), escalated, no_edit);
    let (_roomy_dir, roomy, roomy_output, _) = january_then_february(None, escalated, no_edit);
    assert!(tight_output.contains("buckets=13"), "{tight_output}");
    let again = "judging every bucket again";
    assert!(tight_output.contains(again), "{tight_output}");
    assert!(roomy_output.contains(again), "{roomy_output}");

    let (a, b) = (summary_of(&tight, "2026-02"), summary_of(&roomy, "2026-02"));
    assert_eq!(a["counts"], b["counts"]);
    assert_eq!(a["rules"], b["rules"]);
    let rule = a["rules"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["rule"] == "temp_limit_zero")
        .unwrap();
    assert_eq!(rule["escalated"], true, "{rule}");
    let failed = rule["failed"].as_u64().unwrap();
    assert!(failed > (ACCOUNTS / 100) as u64, "{rule}");
    assert!(
        a["counts"]["quarantined"].as_u64().unwrap() >= failed,
        "{}",
        a["counts"]
    );
    // What a run whose rule quarantines from the start commits and sets
    // aside, judged once.
    let quarantining = |text: String| {
        text.replace(
            ",temporary_limit = 0,warning,",
            ",temporary_limit = 0,quarantine,",
        )
    };
    let (_once_dir, once, once_output, _) = january_then_february(None, quarantining, no_edit);
    assert!(!once_output.contains(again), "{once_output}");
    assert_eq!(summary_of(&once, "2026-02")["counts"], a["counts"]);
    let committed = silver(&once);
    assert_eq!(silver(&tight), committed);
    assert_eq!(silver(&roomy), committed);
    for root in [&tight, &roomy] {
        assert_eq!(
            set_aside_accounts(root, "quarantine"),
            set_aside_accounts(&once, "quarantine")
        );
    }
    // The first judgement's files (the warned rows among them) deleted:
    // Silver's folder holds the rows of January and of the second
    // judgement alone.
    for root in [&tight, &roomy] {
        let january = summary_of(root, "2026-01")["counts"]["committed"].as_u64();
        let february = summary_of(root, "2026-02")["counts"]["committed"].as_u64();
        let rows = silver(root).len() as u64;
        assert_eq!(Some(rows), january.zip(february).map(|(j, f)| j + f));
    }
}

#[test]
fn a_scratch_folder_that_cannot_be_made_is_a_configuration_error() {
    let (tmp, config) = project(|text| match text.contains("[dataset]") {
        true => text + "\n[resources]\nscratch_dir = \"../taken/spill\"\n",
        false => text,
    });
    // A file where the scratch folder's parent should be.
    std::fs::write(tmp.path().join("taken"), "not a folder").unwrap();
    put_january(tmp.path(), "BANK_M", 5);
    let run = silverline(&run_args(config.to_str().unwrap(), "BANK_M", "2026-01")).code(2);
    let text = output(&run);
    assert!(
        text.contains("resources.scratch_dir: cannot create or write") && text.contains("spill"),
        "{text}"
    );
    // Refused before the claim: nothing was committed.
    assert!(!tmp.path().join("data/warehouse").exists());
}
