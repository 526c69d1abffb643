//! The demo's scenarios: history loads, a clean month and the corruptions of
//! the spec that row and trend rules catch, each with the number of rows the
//! generator damaged and the rule that must catch them.

use chrono::NaiveDate;

use super::Workspace;
use super::generate::{Portfolio, Statement, double_limits, mis_map_limits, months};
use crate::error::Result;
use crate::pipeline::RunOptions;
use crate::pipeline::summary::Summary;

/// The bank of the demo.
pub const BANK: &str = "BANK_A";
/// The instalment lender of the demo.
pub const LENDER: &str = "BNPL_7";
/// The contributor with no history.
pub const NEWCOMER: &str = "NEWBANK_1";

/// Accounts per contributor.
const BANK_ACCOUNTS: usize = 300;
const LENDER_ACCOUNTS: usize = 200;
const NEWCOMER_ACCOUNTS: usize = 80;
/// Accounts whose limits change silently in the backfill's second month.
const SILENT_CHANGES: usize = 12;

/// One drop to run and what it must produce.
#[derive(Debug, Clone)]
pub struct Scenario {
    /// Short name.
    pub name: &'static str,
    /// Contributor id.
    pub contributor: &'static str,
    /// Drop id.
    pub drop_id: String,
    /// The drop's rows.
    pub rows: Vec<Statement>,
    /// Rows the generator damaged: exactly these must be quarantined.
    pub expected_quarantined: u64,
    /// The rule that must catch them.
    pub expected_rule: Option<&'static str>,
}

/// A scenario and the summary of its run.
#[derive(Debug, Clone)]
pub struct ScenarioResult {
    /// The scenario.
    pub scenario: Scenario,
    /// Its run summary.
    pub summary: Summary,
}

impl ScenarioResult {
    /// How many rows `rule` failed.
    pub fn failed(&self, rule: &str) -> u64 {
        self.summary
            .rules
            .iter()
            .filter(|r| r.rule == rule)
            .map(|r| r.failed)
            .sum()
    }

    /// Rules that failed at least one row, with their counts.
    pub fn fired(&self) -> Vec<(String, u64)> {
        self.summary
            .rules
            .iter()
            .filter(|r| r.failed > 0)
            .map(|r| (r.rule.clone(), r.failed))
            .collect()
    }

    /// Quarantined exactly the damaged rows, and by the rule meant to catch them.
    pub fn as_expected(&self) -> bool {
        let quarantined = self.summary.counts.quarantined == self.scenario.expected_quarantined;
        let by_rule = self
            .scenario
            .expected_rule
            .is_none_or(|rule| self.failed(rule) == self.scenario.expected_quarantined);
        quarantined && by_rule
    }
}

fn month(year: i32, month: u32) -> NaiveDate {
    NaiveDate::from_ymd_opt(year, month, 1).unwrap_or(NaiveDate::MIN)
}

/// First month of the twelve months of history.
pub fn history_start() -> NaiveDate {
    month(2025, 11)
}

fn history(portfolio: &mut Portfolio, contributor: &'static str) -> Scenario {
    let rows = months(history_start(), 12)
        .into_iter()
        .flat_map(|m| portfolio.statements(m, true))
        .collect();
    Scenario {
        name: "history (12 months)",
        contributor,
        drop_id: "history-2025-11-2026-10".to_string(),
        rows,
        expected_quarantined: 0,
        expected_rule: None,
    }
}

/// Every scenario, in the order they must run.
pub fn build_all() -> Vec<Scenario> {
    let mut bank = Portfolio::new(BANK, BANK_ACCOUNTS, false, 11);
    let mut lender = Portfolio::new(LENDER, LENDER_ACCOUNTS, true, 22);
    let mut newcomer = Portfolio::new(NEWCOMER, NEWCOMER_ACCOUNTS, false, 33);
    let mut scenarios = vec![history(&mut bank, BANK), history(&mut lender, LENDER)];
    scenarios.push(Scenario {
        name: "clean month",
        contributor: BANK,
        drop_id: "2026-11".to_string(),
        rows: bank.statements(month(2026, 11), false),
        expected_quarantined: 0,
        expected_rule: None,
    });
    scenarios.push(backfill_with_silent_change(&mut bank));
    let mut mis_mapped = bank.statements(month(2027, 3), false);
    let damaged = mis_map_limits(&mut mis_mapped);
    scenarios.push(Scenario {
        name: "1 mis-mapped export",
        contributor: BANK,
        drop_id: "2027-03".to_string(),
        rows: mis_mapped,
        expected_quarantined: damaged as u64,
        expected_rule: Some("limit_stable"),
    });
    let mut doubled = lender.statements(month(2026, 11), false);
    let damaged = double_limits(&mut doubled, 10);
    scenarios.push(Scenario {
        name: "3 doubled limits",
        contributor: LENDER,
        drop_id: "2026-11".to_string(),
        rows: doubled,
        expected_quarantined: damaged as u64,
        expected_rule: Some("limit_stable"),
    });
    scenarios.push(Scenario {
        name: "6 new contributor",
        contributor: NEWCOMER,
        drop_id: "2026-11".to_string(),
        rows: newcomer.statements(month(2026, 11), false),
        expected_quarantined: 0,
        expected_rule: None,
    });
    scenarios
}

/// Corruption 5: three months in one drop; limits change silently before the
/// second month. Only the second month's changed rows may be caught: the third
/// month is baselined on the second and agrees with it.
fn backfill_with_silent_change(bank: &mut Portfolio) -> Scenario {
    let mut rows = bank.statements(month(2026, 12), false);
    bank.change_limits_silently(SILENT_CHANGES);
    rows.extend(bank.statements(month(2027, 1), false));
    rows.extend(bank.statements(month(2027, 2), false));
    Scenario {
        name: "5 backfill of 3 months",
        contributor: BANK,
        drop_id: "backfill-2026-12-2027-02".to_string(),
        rows,
        expected_quarantined: SILENT_CHANGES as u64,
        expected_rule: Some("limit_stable"),
    }
}

/// Writes and runs every scenario in order.
pub async fn run_all(workspace: &Workspace) -> Result<Vec<ScenarioResult>> {
    let mut results = Vec::new();
    for scenario in build_all() {
        workspace
            .put_drop(scenario.contributor, &scenario.drop_id, &scenario.rows)
            .await?;
        let outcome = workspace
            .run_drop(
                scenario.contributor,
                &scenario.drop_id,
                &RunOptions::default(),
            )
            .await?;
        results.push(ScenarioResult {
            scenario,
            summary: outcome.summary,
        });
    }
    Ok(results)
}

/// The results as a text table.
pub fn render_table(results: &[ScenarioResult]) -> String {
    let mut out = format!(
        "{:<24} {:<10} {:<26} {:>8} {:>9} {:>11} {:>8} {:>13}  {}\n",
        "scenario",
        "contrib.",
        "drop",
        "received",
        "committed",
        "quarantined",
        "expected",
        "trend skipped",
        "rules that fired"
    );
    for r in results {
        let c = &r.summary.counts;
        let fired: Vec<String> = r
            .fired()
            .iter()
            .map(|(rule, n)| format!("{rule}:{n}"))
            .collect();
        out.push_str(&format!(
            "{:<24} {:<10} {:<26} {:>8} {:>9} {:>11} {:>8} {:>13}  {}{}\n",
            r.scenario.name,
            r.scenario.contributor,
            r.scenario.drop_id,
            c.received,
            c.committed,
            c.quarantined,
            r.scenario.expected_quarantined,
            r.summary.baseline.trend_checks_skipped,
            if fired.is_empty() {
                "-".to_string()
            } else {
                fired.join(" ")
            },
            if r.as_expected() {
                ""
            } else {
                "   <- NOT AS EXPECTED"
            }
        ));
    }
    out
}
