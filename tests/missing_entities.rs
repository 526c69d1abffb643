//! Completeness against the previous state, through the binary on the
//! embedded default: the accounts open in their latest state that a drop
//! leaves out are listed under `<dq_error>/missing/`, counted in the summary
//! and by the `missing_entities` metric the shipped rules read, and become
//! `missing` exceptions until a later drop declares them.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod harness;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use harness::{month, output, project, put_drop, rule_outcome, run_args, silverline, summary_of};
use silverline::demo::generate::{Portfolio, Statement};

const BANK: &str = "BANK_T";

/// Runs `drop_id` of the bank; returns the run's summary.
fn run(root: &Path, config: &str, drop_id: &str, rows: &[Statement]) -> serde_json::Value {
    put_drop(root, BANK, drop_id, rows);
    let assert = silverline(&run_args(config, BANK, drop_id));
    let text = output(&assert);
    assert.code(0).get_output();
    assert!(!text.is_empty());
    summary_of(root, drop_id)
}

/// The rows of every missing list under `data/dq_error/missing/`.
fn missing_rows(root: &Path) -> Vec<BTreeMap<String, String>> {
    harness::set_aside_rows(&root.join("data/dq_error"), "missing")
}

fn accounts(rows: &[Statement]) -> Vec<String> {
    rows.iter().map(|r| r.account.clone()).collect()
}

fn without(rows: &[Statement], left_out: &[String]) -> Vec<Statement> {
    rows.iter()
        .filter(|r| !left_out.contains(&r.account))
        .cloned()
        .collect()
}

fn by_period(summary: &serde_json::Value) -> BTreeMap<String, u64> {
    let periods = summary["missing_entities"]["by_period"]
        .as_object()
        .unwrap();
    periods
        .iter()
        .map(|(p, n)| (p.clone(), n.as_u64().unwrap()))
        .collect()
}

fn backlog(config: &str) -> serde_json::Value {
    let assert = silverline(&["backlog", "--config", config, "--json"]).code(0);
    serde_json::from_slice(&assert.get_output().stdout).unwrap()
}

/// December committed with 5 accounts closed; January leaves out those 5 and
/// 2 open ones: exactly the 2 open ones are missing, listed with their last
/// state, counted, outside the balance, and open as `missing` exceptions; a
/// clean February misses nothing; a later drop declaring the 2 for January
/// expects nothing itself (Silver holds January) and resolves them.
#[test]
fn open_accounts_left_out_are_listed_counted_and_resolved_when_declared() {
    let (tmp, config) = project(|t| t);
    let (root, config) = (tmp.path(), config.to_str().unwrap());
    let mut bank = Portfolio::new(BANK, 200, false, 7);
    let mut december = bank.statements(month(2025, 12), false);
    for row in december.iter_mut().take(5) {
        row.status = "CLOSED";
    }
    let closed: Vec<String> = accounts(&december[..5]);
    let first = run(root, config, "2025-12", &december);
    assert_eq!(first["missing_entities"]["total"], 0, "no history: none");

    let all_january = bank.statements(month(2026, 1), false);
    let left_out: Vec<String> = accounts(&all_january[5..7]);
    let gone: Vec<String> = closed.iter().chain(&left_out).cloned().collect();
    let mut january = without(&all_january, &gone);
    // Declared but quarantined (operation code out of its set): not missing.
    january[0].operation = "Z";
    let summary = run(root, config, "2026-01", &january);
    assert_eq!(
        by_period(&summary),
        BTreeMap::from([("2026-01-01".to_string(), 2)])
    );
    assert_eq!(summary["missing_entities"]["total"], 2);
    assert_eq!(summary["missing_entities"]["in_balance"], false);
    assert_eq!(summary["counts"]["received"], 193);
    assert_eq!(summary["counts"]["committed"], 192);
    assert_eq!(summary["counts"]["quarantined"], 1);
    assert!(
        summary["outputs"]["missing"]
            .as_str()
            .unwrap()
            .contains("/missing/date=")
    );
    let listed = missing_rows(root);
    let listed_accounts: BTreeSet<String> =
        listed.iter().map(|r| r["account_id"].clone()).collect();
    assert_eq!(listed_accounts, left_out.iter().cloned().collect());
    for row in &listed {
        assert_eq!(row["_missing_period"], "2026-01-01");
        assert!(row["statement_date"].starts_with("2025-12"), "{row:?}");
        assert_ne!(row["account_status"], "CLOSED");
    }
    // 2 of December's 200 accounts is 1%: missing_share holds, the warning fires.
    assert_eq!(rule_outcome(&summary, "missing_share")["failed"], 0);
    assert_eq!(rule_outcome(&summary, "missing_accounts")["failed"], 193);
    let aggregates = summary["aggregates"].as_array().unwrap();
    assert_eq!(aggregates[0]["metrics"]["missing_entities"], 2.0);
    let open = backlog(config);
    assert_eq!(open["overall"]["backlog"]["missing"], 2);
    assert!(
        open["overall"]["open_by_rule"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["rule"] == "missing_entities" && r["total"] == 2)
    );
    // An acceptance takes the quarantined row, never a missing entity: there
    // is no row of it to accept.
    let accepted = silverline(&[
        "accept",
        "--config",
        config,
        "--contributor",
        BANK,
        "--drop",
        "2026-01",
        "--reason",
        "checked with the bank",
        "--by",
        "ops",
    ]);
    let text = output(&accepted);
    accepted.code(0);
    assert!(text.contains("missing from the drop"), "{text}");
    assert_eq!(backlog(config)["overall"]["backlog"]["missing"], 2);

    let february = without(&bank.statements(month(2026, 2), false), &closed);
    let clean = run(root, config, "2026-02", &february);
    assert_eq!(clean["missing_entities"]["total"], 0);
    assert_eq!(missing_rows(root).len(), 2, "no new list");

    // Late rows for January, which Silver holds: they expect nothing (the
    // quarantined account was declared in January's drop).
    let late: Vec<Statement> = all_january[5..7].to_vec();
    let late = run(root, config, "2026-01-late", &late);
    assert_eq!(
        by_period(&late),
        BTreeMap::from([("2026-01-01".to_string(), 0)])
    );
    let after = backlog(config);
    assert_eq!(after["overall"]["backlog"]["missing"], 0);
}

/// A backfill of January to March: an account in January, absent in
/// February and back in March is missing for February only.
#[test]
fn a_backfill_misses_an_account_absent_from_its_middle_month() {
    let (tmp, config) = project(|t| t);
    let (root, config) = (tmp.path(), config.to_str().unwrap());
    let mut bank = Portfolio::new(BANK, 100, false, 9);
    run(
        root,
        config,
        "2025-12",
        &bank.statements(month(2025, 12), false),
    );
    let mut rows = bank.statements(month(2026, 1), false);
    let february = bank.statements(month(2026, 2), false);
    let gap = accounts(&february[..1]);
    rows.extend(without(&february, &gap));
    rows.extend(bank.statements(month(2026, 3), false));
    let summary = run(root, config, "backfill", &rows);
    assert_eq!(
        by_period(&summary),
        BTreeMap::from([
            ("2026-01-01".to_string(), 0),
            ("2026-02-01".to_string(), 1),
            ("2026-03-01".to_string(), 0),
        ])
    );
    let listed = missing_rows(root);
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0]["account_id"], gap[0]);
    assert_eq!(listed[0]["_missing_period"], "2026-02-01");
    assert!(listed[0]["statement_date"].starts_with("2026-01"));
}

/// Above 1% of the previous month's accounts, the shipped `missing_share`
/// sets the whole period aside; nothing of it is committed.
#[test]
fn more_than_one_percent_left_out_sets_the_period_aside() {
    let (tmp, config) = project(|t| t);
    let (root, config) = (tmp.path(), config.to_str().unwrap());
    let mut bank = Portfolio::new(BANK, 200, false, 11);
    run(
        root,
        config,
        "2025-12",
        &bank.statements(month(2025, 12), false),
    );
    let january = bank.statements(month(2026, 1), false);
    let left_out = accounts(&january[..3]);
    let summary = run(root, config, "2026-01", &without(&january, &left_out));
    assert_eq!(summary["missing_entities"]["total"], 3);
    assert_eq!(rule_outcome(&summary, "missing_share")["failed"], 197);
    assert_eq!(summary["counts"]["quarantined"], 197);
    assert_eq!(summary["counts"]["committed"], 0);
}

/// `closed_when` must be a boolean over the contract's columns: check-config
/// names the setting.
#[test]
fn a_closed_when_that_is_not_boolean_is_refused_naming_the_setting() {
    let (_tmp, config) = project(|t| {
        t.replace(
            "closed_when = \"account_status IN ('CLOSED', 'WRITTEN_OFF')\"",
            "closed_when = \"account_status\"",
        )
    });
    let assert = silverline(&["check-config", "--config", config.to_str().unwrap()]);
    let text = output(&assert);
    assert.code(2);
    assert!(text.contains("completeness.closed_when"), "{text}");
}

/// A committed period's `missing_entities` is the count its run recorded in
/// the exception store, so rules read `prev_missing_entities` and
/// `avg_missing_entities` like any metric's. December misses none (its
/// recorded count is 0), January 1, February 2, March 5; the rule "at most
/// double the previous month" fails January (1 > 0) and March (5 > 4) and
/// holds for February (2 <= 2).
#[test]
fn rules_read_the_missing_count_of_committed_periods() {
    let growth = "missing_growth,*,aggregate,prev_missing_entities IS NULL OR missing_entities <= 2 * prev_missing_entities,warn,at most twice as many accounts left out as the month before,true,,,";
    let (tmp, config) = project(|t| {
        t.replace(
            "missing_accounts,*,",
            &format!("{growth}\nmissing_accounts,*,"),
        )
    });
    let (root, config) = (tmp.path(), config.to_str().unwrap());
    let mut bank = Portfolio::new(BANK, 1000, false, 13);
    let mut previous = bank.statements(month(2025, 12), false);
    run(root, config, "2025-12", &previous);
    let mut used: BTreeSet<String> = BTreeSet::new();
    let mut expected = Vec::new();
    for (m, left) in [(1, 1), (2, 2), (3, 5)] {
        let rows = bank.statements(month(2026, m), false);
        // Accounts open last month, not left out before.
        let left_out: Vec<String> = previous
            .iter()
            .filter(|r| !["CLOSED", "WRITTEN_OFF"].contains(&r.status))
            .map(|r| r.account.clone())
            .filter(|a| !used.contains(a))
            .take(left)
            .collect();
        used.extend(left_out.iter().cloned());
        let summary = run(
            root,
            config,
            &format!("2026-0{m}"),
            &without(&rows, &left_out),
        );
        let period = &summary["aggregates"].as_array().unwrap()[0];
        expected.push((
            summary["missing_entities"]["total"].as_u64().unwrap(),
            period["previous"]["missing_entities"].as_f64(),
            period["average"]["missing_entities"].as_f64(),
            rule_outcome(&summary, "missing_growth")["failed"]
                .as_u64()
                .unwrap()
                > 0,
        ));
        previous = rows;
    }
    assert_eq!(
        expected,
        vec![
            (1, Some(0.0), Some(0.0), true),
            (2, Some(1.0), Some(0.5), false),
            (5, Some(2.0), Some(1.0), true),
        ]
    );
}

/// An account left out two months running is missing from both: in
/// February its latest state is December's (older than the month before),
/// found because January recorded it missing; March declares it again and
/// misses nothing.
#[test]
fn an_account_left_out_two_months_running_is_missing_from_both() {
    let (tmp, config) = project(|t| t);
    let (root, config) = (tmp.path(), config.to_str().unwrap());
    let mut bank = Portfolio::new(BANK, 200, false, 17);
    let december = bank.statements(month(2025, 12), false);
    run(root, config, "2025-12", &december);
    let gone: Vec<String> = december
        .iter()
        .filter(|r| !["CLOSED", "WRITTEN_OFF"].contains(&r.status))
        .map(|r| r.account.clone())
        .take(1)
        .collect();
    for m in [1, 2] {
        let rows = without(&bank.statements(month(2026, m), false), &gone);
        let summary = run(root, config, &format!("2026-0{m}"), &rows);
        let period = format!("2026-0{m}-01");
        assert_eq!(by_period(&summary), BTreeMap::from([(period.clone(), 1)]));
        let listed: Vec<_> = missing_rows(root)
            .into_iter()
            .filter(|r| r["_missing_period"] == period)
            .collect();
        assert_eq!(listed.len(), 1, "{period}");
        assert_eq!(listed[0]["account_id"], gone[0]);
        assert!(
            listed[0]["statement_date"].starts_with("2025-12"),
            "{listed:?}"
        );
    }
    assert_eq!(backlog(config)["overall"]["backlog"]["missing"], 2);
    let march = run(
        root,
        config,
        "2026-03",
        &bank.statements(month(2026, 3), false),
    );
    assert_eq!(march["missing_entities"]["total"], 0);
}

/// A sensitive entity key under `quarantine.mask_sensitive` would leave the
/// missing list unable to name the entities: check-config refuses the pair,
/// naming the column and both settings.
#[test]
fn a_masked_entity_key_is_refused_with_completeness() {
    let (_tmp, config) = project(|t| {
        t.replace(
            "{ name = \"account_id\",          type = \"string\",        nullable = false }",
            "{ name = \"account_id\",          type = \"string\",        nullable = false, sensitive = true }",
        )
        .replace("mask_sensitive = false", "mask_sensitive = true")
    });
    let assert = silverline(&["check-config", "--config", config.to_str().unwrap()]);
    let text = output(&assert);
    assert.code(2);
    for needle in ["completeness", "account_id", "quarantine.mask_sensitive"] {
        assert!(text.contains(needle), "no {needle} in {text}");
    }
}

/// The books of a run that differ from run to run (ids, times, paths).
fn judged_books(summary: &serde_json::Value) -> [serde_json::Value; 5] {
    [
        "counts",
        "rules",
        "aggregates",
        "missing_entities",
        "baseline",
    ]
    .map(|k| summary[k].clone())
}

/// December committed (5 accounts closed); January leaves out the 5 closed
/// and 2 open accounts; a backfill of February and March leaves one out of
/// February. Run with `section` edited into the config; returns each run's
/// books and the missing list, sorted.
fn completeness_story(section: &str) -> (Vec<[serde_json::Value; 5]>, Vec<Vec<String>>) {
    let (tmp, config) = project(|t| match t.contains("[dataset]") {
        true => t + section,
        false => t,
    });
    let (root, config) = (tmp.path(), config.to_str().unwrap());
    let mut bank = Portfolio::new(BANK, 200, false, 7);
    let mut december = bank.statements(month(2025, 12), false);
    for row in december.iter_mut().take(5) {
        row.status = "CLOSED";
    }
    let mut books = vec![judged_books(&run(root, config, "2025-12", &december))];
    let january = bank.statements(month(2026, 1), false);
    let january = without(&january, &accounts(&january[..7]));
    books.push(judged_books(&run(root, config, "2026-01", &january)));
    let february = bank.statements(month(2026, 2), false);
    let mut rows = without(&february, &accounts(&february[10..11]));
    rows.extend(bank.statements(month(2026, 3), false));
    books.push(judged_books(&run(root, config, "backfill", &rows)));
    let mut listed: Vec<Vec<String>> = missing_rows(root)
        .into_iter()
        .map(|row| {
            ["account_id", "_missing_period", "statement_date"]
                .map(|c| row[c].clone())
                .to_vec()
        })
        .collect();
    listed.sort();
    (books, listed)
}

/// A drop judged in buckets of entities (`resources.bucket_rows`) finds
/// the same missing entities, periods and previous states, counts and
/// measures the same, as one judged whole.
#[test]
fn a_drop_judged_in_buckets_misses_what_a_whole_one_misses() {
    let (whole, whole_missing) = completeness_story("");
    let (bucketed, bucketed_missing) = completeness_story("\n[resources]\nbucket_rows = 30\n");
    assert_eq!(whole_missing.len(), 3, "{whole_missing:?}");
    assert_eq!(bucketed_missing, whole_missing);
    for (run, (a, b)) in bucketed.iter().zip(&whole).enumerate() {
        assert_eq!(a, b, "run {run}");
    }
    assert_eq!(whole[1][3]["total"], 2, "{}", whole[1][3]);
}
