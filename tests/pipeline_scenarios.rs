//! The spec's corruptions 1, 3, 5 and 6 and a clean month, end to end on the
//! embedded default: each run must quarantine exactly the rows the generator
//! damaged, by the rule meant to catch them.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use silverline::demo::scenarios::{NEWCOMER, ScenarioResult, run_all};
use silverline::pipeline::summary::RunStatus;

async fn results() -> (common::TestWorkspace, Vec<ScenarioResult>) {
    let tw = common::workspace().await;
    let results = run_all(&tw.ws).await.unwrap();
    (tw, results)
}

fn by_name<'a>(results: &'a [ScenarioResult], name: &str) -> &'a ScenarioResult {
    results.iter().find(|r| r.scenario.name == name).unwrap()
}

#[tokio::test]
async fn every_scenario_quarantines_exactly_what_the_generator_damaged() {
    let (tw, results) = results().await;
    let mut total_committed = 0;
    for r in &results {
        let counts = &r.summary.counts;
        assert_eq!(
            r.summary.status,
            RunStatus::Committed,
            "{}",
            r.scenario.name
        );
        assert_eq!(
            counts.received,
            r.scenario.rows.len() as u64,
            "{}",
            r.scenario.name
        );
        assert_eq!(
            counts.quarantined, r.scenario.expected_quarantined,
            "{}",
            r.scenario.name
        );
        assert_eq!(
            counts.received,
            counts.committed + counts.quarantined + counts.dropped
        );
        if let Some(rule) = r.scenario.expected_rule {
            assert_eq!(
                r.failed(rule),
                r.scenario.expected_quarantined,
                "{}: {rule}",
                r.scenario.name
            );
            for record in common::dq_records(&r.summary, "quarantine") {
                assert!(
                    common::error_rules(&record).contains(&rule.to_string()),
                    "{record:?}"
                );
            }
        }
        total_committed += counts.committed;
    }
    assert_eq!(common::silver_count(&tw.ws).await as u64, total_committed);
}

#[tokio::test]
async fn clean_month_quarantines_nothing_and_every_row_has_a_baseline() {
    let (_tw, results) = results().await;
    let clean = by_name(&results, "clean month");
    assert_eq!(clean.summary.counts.quarantined, 0);
    assert_eq!(
        clean.summary.counts.committed,
        clean.scenario.rows.len() as u64
    );
    assert_eq!(clean.summary.baseline.rows_without_baseline, 0);
    assert_eq!(clean.summary.baseline.trend_checks_skipped, 0);
}

#[tokio::test]
async fn a_new_contributor_has_its_trend_checks_skipped_not_failed() {
    let (_tw, results) = results().await;
    let newcomer = results
        .iter()
        .find(|r| r.scenario.contributor == NEWCOMER)
        .unwrap();
    let rows = newcomer.scenario.rows.len() as u64;
    let trend_rules = newcomer.summary.rules.iter().filter(|r| r.trend).count() as u64;
    assert!(trend_rules >= 2);
    assert_eq!(newcomer.summary.counts.quarantined, 0);
    assert_eq!(newcomer.summary.baseline.rows_without_baseline, rows);
    assert_eq!(
        newcomer.summary.baseline.trend_checks_skipped,
        rows * trend_rules
    );
    for rule in newcomer.summary.rules.iter().filter(|r| r.trend) {
        assert_eq!(
            (rule.failed, rule.skipped_no_baseline),
            (0, rows),
            "{}",
            rule.rule
        );
    }
}
