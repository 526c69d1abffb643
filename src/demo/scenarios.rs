//! The demo's scenarios: history loads, a clean month and the corruptions of
//! the spec that row and trend rules catch, each with the number of rows the
//! generator damaged and the rule that must catch them.

use chrono::NaiveDate;

use super::Workspace;
use super::generate::{
    Portfolio, Statement, collapse_arrears, double_limits, mis_map_limits, month_end, months,
    truncate,
};
use crate::error::Result;
use crate::pipeline::RunOptions;
use crate::pipeline::summary::Summary;

/// The bank of the demo.
pub const BANK: &str = "BANK_A";
/// The instalment lender of the demo.
pub const LENDER: &str = "BNPL_7";
/// The contributor with no history.
pub const NEWCOMER: &str = "NEWBANK_1";
/// A bank whose next file leaves out some of its open accounts.
pub const OMITTING: &str = "BANK_O";
/// A new lender some of whose holders are not in the reference yet.
pub const LATE_HOLDERS: &str = "NEWBNPL_2";

/// Accounts per contributor.
const BANK_ACCOUNTS: usize = 300;
const LENDER_ACCOUNTS: usize = 200;
const NEWCOMER_ACCOUNTS: usize = 80;
const OMITTING_ACCOUNTS: usize = 300;
/// Open accounts the omitting bank's file leaves out (5%).
const LEFT_OUT: usize = 15;
/// Holders of the late contributor not yet in the reference.
const LATE_HOLDER_COUNT: usize = 5;
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
    /// Rows whose holders are held back from the reference: exactly these must be pending.
    pub expected_pending: u64,
    /// Holders left out of the reference.
    pub held_back: Vec<String>,
    /// The rule that must catch them.
    pub expected_rule: Option<&'static str>,
    /// Open accounts the drop leaves out: exactly these must be missing.
    pub expected_missing: u64,
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

    /// Set aside exactly the damaged rows, and by the rule meant to catch them.
    pub fn as_expected(&self) -> bool {
        let counts = &self.summary.counts;
        let scenario = &self.scenario;
        let set_aside = scenario.expected_quarantined + scenario.expected_pending;
        let by_rule = scenario
            .expected_rule
            .is_none_or(|rule| self.failed(rule) == set_aside);
        let missing = self
            .summary
            .missing_entities
            .as_ref()
            .map_or(0, |m| m.total);
        counts.quarantined == scenario.expected_quarantined
            && counts.pending == scenario.expected_pending
            && missing == scenario.expected_missing
            && by_rule
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
        expected_pending: 0,
        held_back: Vec::new(),
        expected_missing: 0,
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
        expected_pending: 0,
        held_back: Vec::new(),
        expected_missing: 0,
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
        expected_pending: 0,
        held_back: Vec::new(),
        expected_missing: 0,
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
        expected_pending: 0,
        held_back: Vec::new(),
        expected_missing: 0,
    });
    scenarios.push(truncated_extract(&mut lender));
    scenarios.push(arrears_collapse(&mut bank));
    scenarios.push(reference_lag());
    let first_month = newcomer.statements(month(2026, 11), false);
    let resent = stale_resend(&first_month, month(2026, 12));
    scenarios.push(Scenario {
        name: "6 new contributor",
        contributor: NEWCOMER,
        drop_id: "2026-11".to_string(),
        rows: first_month,
        expected_quarantined: 0,
        expected_rule: None,
        expected_pending: 0,
        held_back: Vec::new(),
        expected_missing: 0,
    });
    scenarios.push(resent);
    let mut omitting = Portfolio::new(OMITTING, OMITTING_ACCOUNTS, false, 55);
    scenarios.push(history(&mut omitting, OMITTING));
    scenarios.push(accounts_left_out(&mut omitting));
    scenarios
}

/// Corruption 8: the next file silently leaves out 5% of the open accounts:
/// every row passes and the volume holds, but `missing_share` sets the
/// period aside and the left-out accounts are listed as missing.
fn accounts_left_out(bank: &mut Portfolio) -> Scenario {
    let rows: Vec<Statement> = bank
        .statements(month(2026, 11), false)
        .into_iter()
        .skip(LEFT_OUT)
        .collect();
    Scenario {
        name: "8 accounts left out",
        contributor: OMITTING,
        drop_id: "2026-11".to_string(),
        expected_quarantined: rows.len() as u64,
        rows,
        expected_rule: Some("missing_share"),
        expected_pending: 0,
        held_back: Vec::new(),
        expected_missing: LEFT_OUT as u64,
    }
}

/// Corruption 7: the newcomer re-sends its previous month's file under the
/// next month's date: every balance and arrears figure is last month's.
fn stale_resend(previous: &[Statement], next: NaiveDate) -> Scenario {
    let date = month_end(next);
    let rows: Vec<Statement> = previous
        .iter()
        .map(|row| Statement {
            date,
            ..row.clone()
        })
        .collect();
    Scenario {
        name: "7 stale re-send",
        contributor: NEWCOMER,
        drop_id: next.format("%Y-%m").to_string(),
        expected_quarantined: rows.len() as u64,
        rows,
        expected_rule: Some("stale_resend"),
        expected_pending: 0,
        held_back: Vec::new(),
        expected_missing: 0,
    }
}

/// Corruption 2: half of the lender's accounts are missing from its next month.
fn truncated_extract(lender: &mut Portfolio) -> Scenario {
    let rows = truncate(lender.statements(month(2026, 12), false));
    Scenario {
        expected_missing: (LENDER_ACCOUNTS - rows.len()) as u64,
        name: "2 truncated extract",
        contributor: LENDER,
        drop_id: "2026-12".to_string(),
        expected_quarantined: rows.len() as u64,
        rows,
        expected_rule: Some("volume"),
        expected_pending: 0,
        held_back: Vec::new(),
    }
}

/// Corruption 4: every arrears amount of the bank's next month 90% lower.
fn arrears_collapse(bank: &mut Portfolio) -> Scenario {
    let mut rows = bank.statements(month(2027, 4), false);
    collapse_arrears(&mut rows);
    Scenario {
        name: "4 arrears collapse",
        contributor: BANK,
        drop_id: "2027-04".to_string(),
        expected_quarantined: rows.len() as u64,
        rows,
        expected_rule: Some("arrears_total"),
        expected_pending: 0,
        held_back: Vec::new(),
        expected_missing: 0,
    }
}

/// Reference lag: a few holders registered after the reference snapshot was taken.
fn reference_lag() -> Scenario {
    let rows = Portfolio::new(LATE_HOLDERS, 60, true, 44).statements(month(2026, 11), false);
    let held_back: Vec<String> = rows
        .iter()
        .take(LATE_HOLDER_COUNT)
        .map(|r| r.holder.clone())
        .collect();
    let pending = rows
        .iter()
        .filter(|r| held_back.contains(&r.holder))
        .count();
    Scenario {
        name: "reference lag",
        contributor: LATE_HOLDERS,
        drop_id: "2026-11".to_string(),
        rows,
        expected_quarantined: 0,
        expected_rule: Some("holder_exists"),
        expected_pending: pending as u64,
        held_back,
        expected_missing: 0,
    }
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
        expected_pending: 0,
        held_back: Vec::new(),
        expected_missing: 0,
    }
}

/// Writes and runs every scenario in order.
pub async fn run_all(workspace: &Workspace) -> Result<Vec<ScenarioResult>> {
    let mut results = Vec::new();
    for scenario in build_all() {
        let held_back: Vec<&str> = scenario.held_back.iter().map(String::as_str).collect();
        let (contributor, drop_id) = (scenario.contributor, scenario.drop_id.as_str());
        workspace
            .put_drop_holding_back(contributor, drop_id, &scenario.rows, &held_back)
            .await?;
        let outcome = workspace
            .run_drop(contributor, drop_id, &RunOptions::default())
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
    let header = [
        "received",
        "committed",
        "quarantined",
        "pending",
        "expected",
        "missing",
        "trend skipped",
    ];
    let mut out = format!("{:<24} {:<10} {:<26}", "scenario", "contrib.", "drop");
    for title in header {
        out.push_str(&format!(" {title:>w$}", w = title.len().max(8)));
    }
    out.push_str("  rules that fired\n");
    for r in results {
        let c = &r.summary.counts;
        let expected = r.scenario.expected_quarantined + r.scenario.expected_pending;
        let skipped = r.summary.baseline.trend_checks_skipped;
        let missing = r.summary.missing_entities.as_ref().map_or(0, |m| m.total);
        let values = [
            c.received,
            c.committed,
            c.quarantined,
            c.pending,
            expected,
            missing,
            skipped,
        ];
        out.push_str(&format!(
            "{:<24} {:<10} {:<26}",
            r.scenario.name, r.scenario.contributor, r.scenario.drop_id
        ));
        for (title, value) in header.iter().zip(values) {
            out.push_str(&format!(" {value:>w$}", w = title.len().max(8)));
        }
        let fired: Vec<String> = r
            .fired()
            .iter()
            .map(|(rule, n)| format!("{rule}:{n}"))
            .collect();
        let fired = if fired.is_empty() {
            "-".to_string()
        } else {
            fired.join(" ")
        };
        let verdict = if r.as_expected() {
            ""
        } else {
            "   <- NOT AS EXPECTED"
        };
        out.push_str(&format!("  {fired}{verdict}\n"));
    }
    out
}
