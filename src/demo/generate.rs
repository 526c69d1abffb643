//! A deterministic generator of the reference dataset (monthly credit
//! statements, see `shared/spec/credit_statements.md`) and of the corruptions
//! the engine must catch. It belongs to the demo and the tests: the engine
//! itself knows no dataset's columns.
//!
//! Accounts evolve month by month with a seeded RNG: balances drift,
//! arrears move by at most one month at a time, limits change only in
//! `ADMIN_CHANGE` months. Every corruption reports how many rows it damaged,
//! so tests can demand that exactly those rows are quarantined.

use chrono::{Datelike, Months, NaiveDate};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// The header of a generated CSV, in the spec's column order.
pub const HEADER: [&str; 17] = [
    "contributor_id",
    "account_id",
    "statement_date",
    "operation_code",
    "holder_id",
    "new_ic",
    "old_ic",
    "passport_no",
    "product_type",
    "account_status",
    "credit_limit",
    "product_limit",
    "temporary_limit",
    "instalment_amount",
    "outstanding_balance",
    "amount_in_arrears",
    "month_in_arrears",
];

/// How an account identifies its holder.
#[derive(Debug, Clone)]
enum Identity {
    NewIc(String),
    OldIc(String),
    Passport(String),
}

/// One account's state; amounts in cents.
#[derive(Debug, Clone)]
struct Account {
    id: String,
    holder: String,
    identity: Identity,
    product: &'static str,
    product_limit: i64,
    temporary_limit: i64,
    instalment: i64,
    balance: i64,
    months_in_arrears: i32,
    admin_change: bool,
    statements: u32,
}

/// One generated statement row; amounts in cents.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Statement {
    /// Contributor id.
    pub contributor: String,
    /// Account id.
    pub account: String,
    /// Month-end date.
    pub date: NaiveDate,
    /// A, U or C.
    pub operation: &'static str,
    /// Holder id.
    pub holder: String,
    /// national id / legacy id / passport.
    pub identity: (Option<String>, Option<String>, Option<String>),
    /// Product type.
    pub product: &'static str,
    /// Account status.
    pub status: &'static str,
    /// product_limit in cents.
    pub product_limit: i64,
    /// temporary_limit in cents.
    pub temporary_limit: i64,
    /// instalment_amount in cents.
    pub instalment: i64,
    /// outstanding_balance in cents.
    pub balance: i64,
    /// amount_in_arrears in cents.
    pub arrears: i64,
    /// month_in_arrears.
    pub months_in_arrears: i32,
}

impl Statement {
    /// credit_limit = product_limit + temporary_limit.
    pub fn credit_limit(&self) -> i64 {
        self.product_limit + self.temporary_limit
    }

    fn csv_line(&self) -> String {
        let (new_ic, old_ic, passport) = &self.identity;
        let text = |v: &Option<String>| v.clone().unwrap_or_default();
        [
            self.contributor.clone(),
            self.account.clone(),
            self.date.to_string(),
            self.operation.to_string(),
            self.holder.clone(),
            text(new_ic),
            text(old_ic),
            text(passport),
            self.product.to_string(),
            self.status.to_string(),
            money(self.credit_limit()),
            money(self.product_limit),
            money(self.temporary_limit),
            money(self.instalment),
            money(self.balance),
            money(self.arrears),
            self.months_in_arrears.to_string(),
        ]
        .join(",")
    }
}

fn money(cents: i64) -> String {
    format!("{}.{:02}", cents / 100, cents % 100)
}

/// Renders statements as a CSV file with the spec's header.
pub fn to_csv(rows: &[Statement]) -> String {
    let mut out = HEADER.join(",");
    out.push('\n');
    out.push_str(&csv_lines(rows));
    out
}

/// Statements as CSV lines, without the header (a file written in parts).
pub fn csv_lines(rows: &[Statement]) -> String {
    let mut out = String::new();
    for row in rows {
        out.push_str(&row.csv_line());
        out.push('\n');
    }
    out
}

/// A `holders` reference file (holder_id, holder_name, registered_on) for `holder_ids`.
pub fn holders_csv<'a>(holder_ids: impl IntoIterator<Item = &'a str>) -> String {
    let mut out = String::from("holder_id,holder_name,registered_on\n");
    for id in holder_ids {
        out.push_str(&format!("{id},Holder {id},2020-01-01\n"));
    }
    out
}

/// The last day of the month of `month`.
pub fn month_end(month: NaiveDate) -> NaiveDate {
    let first = month.with_day(1).unwrap_or(month);
    first
        .checked_add_months(Months::new(1))
        .and_then(|d| d.pred_opt())
        .unwrap_or(first)
}

/// A contributor's accounts, evolving one month at a time.
#[derive(Debug, Clone)]
pub struct Portfolio {
    contributor: String,
    instalment_lender: bool,
    accounts: Vec<Account>,
    rng: ChaCha8Rng,
}

impl Portfolio {
    /// `size` accounts for `contributor`; the same seed gives the same data.
    pub fn new(contributor: &str, size: usize, instalment_lender: bool, seed: u64) -> Portfolio {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let accounts = (0..size)
            .map(|i| new_account(&mut rng, contributor, i, instalment_lender))
            .collect();
        Portfolio {
            contributor: contributor.to_string(),
            instalment_lender,
            accounts,
            rng,
        }
    }

    /// Advances every account to the end of `month` and returns its statements.
    /// With `admin_changes`, about 2% of accounts get a legitimate limit change.
    pub fn statements(&mut self, month: NaiveDate, admin_changes: bool) -> Vec<Statement> {
        self.statements_of(month, admin_changes, 0..self.accounts.len())
    }

    /// How many accounts.
    pub fn len(&self) -> usize {
        self.accounts.len()
    }

    /// Whether the portfolio has no account.
    pub fn is_empty(&self) -> bool {
        self.accounts.is_empty()
    }

    /// [`Portfolio::statements`] of the accounts at `positions` only, for a
    /// portfolio too large to hold a month's statements at once: a month
    /// taken in consecutive slices, first to last, gives the same statements.
    pub fn statements_of(
        &mut self,
        month: NaiveDate,
        admin_changes: bool,
        positions: std::ops::Range<usize>,
    ) -> Vec<Statement> {
        let date = month_end(month);
        let accounts = self.accounts.get_mut(positions).unwrap_or_default();
        let mut rows = Vec::with_capacity(accounts.len());
        for account in accounts {
            evolve(
                account,
                &mut self.rng,
                admin_changes && account.statements > 0,
                self.instalment_lender,
            );
            rows.push(statement(&self.contributor, account, date));
            account.statements += 1;
        }
        rows
    }

    /// Changes the limits of the first `count` accounts without an `ADMIN_CHANGE`
    /// status: the next statements carry the new limits as if nothing happened.
    pub fn change_limits_silently(&mut self, count: usize) {
        for account in self.accounts.iter_mut().take(count) {
            account.product_limit += 100_000;
        }
    }
}

fn new_account(
    rng: &mut ChaCha8Rng,
    contributor: &str,
    index: usize,
    instalment_lender: bool,
) -> Account {
    let products: &[&'static str] = if instalment_lender {
        &["BNPL"]
    } else {
        &["CARD", "LOAN", "OVERDRAFT"]
    };
    let product = products[rng.gen_range(0..products.len())];
    let product_limit = rng.gen_range(10..=200) * 10_000;
    let identity = match rng.gen_range(0..100) {
        0..80 => Identity::NewIc(format!("{:012}", rng.gen_range(0..1_000_000_000_000u64))),
        80..95 => Identity::OldIc(format!("A{:07}", rng.gen_range(0..10_000_000))),
        _ => Identity::Passport(format!("P{:08}", rng.gen_range(0..100_000_000))),
    };
    Account {
        id: format!("{contributor}-{index:06}"),
        holder: format!("H{:07}", rng.gen_range(0..10_000_000)),
        identity,
        product,
        product_limit,
        temporary_limit: if rng.gen_bool(0.03) { 50_000 } else { 0 },
        instalment: product_limit / 20,
        balance: rng.gen_range(0..product_limit),
        months_in_arrears: if rng.gen_bool(0.08) {
            rng.gen_range(1..=3)
        } else {
            0
        },
        admin_change: false,
        statements: 0,
    }
}

fn evolve(
    account: &mut Account,
    rng: &mut ChaCha8Rng,
    admin_changes: bool,
    instalment_lender: bool,
) {
    account.admin_change = admin_changes && rng.gen_bool(0.02);
    if account.admin_change {
        account.product_limit += 50_000;
        account.instalment = account.product_limit / 20;
    }
    let drift = rng.gen_range(-5..=5) * account.product_limit / 100;
    account.balance = (account.balance + drift).clamp(0, account.product_limit);
    // Arrears move by at most one month at a time, in a steady state of about
    // one account in ten: the contributor's total arrears drift, never jump.
    let worsen = if instalment_lender { 0.03 } else { 0.02 };
    account.months_in_arrears = match account.months_in_arrears {
        0 if rng.gen_bool(worsen) => 1,
        0 => 0,
        m if rng.gen_bool(0.2) => m - 1,
        m if rng.gen_bool(0.25) => (m + 1).min(36),
        m => m,
    };
}

fn statement(contributor: &str, account: &Account, date: NaiveDate) -> Statement {
    let identity = match &account.identity {
        Identity::NewIc(v) => (Some(v.clone()), None, None),
        Identity::OldIc(v) => (None, Some(v.clone()), None),
        Identity::Passport(v) => (None, None, Some(v.clone())),
    };
    Statement {
        contributor: contributor.to_string(),
        account: account.id.clone(),
        date,
        operation: if account.statements == 0 { "A" } else { "U" },
        holder: account.holder.clone(),
        identity,
        product: account.product,
        status: if account.admin_change {
            "ADMIN_CHANGE"
        } else {
            "ACTIVE"
        },
        product_limit: account.product_limit,
        temporary_limit: account.temporary_limit,
        instalment: account.instalment,
        balance: account.balance,
        arrears: account.instalment * i64::from(account.months_in_arrears),
        months_in_arrears: account.months_in_arrears,
    }
}

/// Corruption 1, a mis-mapped export: every row carries another product's
/// limits, consistent with each other and lower by a plausible amount.
/// Returns how many rows the trend rules must catch (all but `ADMIN_CHANGE` rows).
pub fn mis_map_limits(rows: &mut [Statement]) -> usize {
    for row in rows.iter_mut() {
        let lower = (row.product_limit / 5 / 10_000) * 10_000 + 5_000;
        row.product_limit = (row.product_limit - lower).max(5_000);
    }
    rows.iter().filter(|r| r.status != "ADMIN_CHANGE").count()
}

/// Corruption 3, doubled limits from a bad upstream join on every `every`-th account.
/// Returns how many rows were damaged (and must be caught).
pub fn double_limits(rows: &mut [Statement], every: usize) -> usize {
    let mut damaged = 0;
    for row in rows.iter_mut().step_by(every.max(1)) {
        row.product_limit *= 2;
        damaged += usize::from(row.status != "ADMIN_CHANGE");
    }
    damaged
}

/// Corruption 2, a truncated extract: only every other account arrives.
pub fn truncate(rows: Vec<Statement>) -> Vec<Statement> {
    rows.into_iter().step_by(2).collect()
}

/// Corruption 4, arrears collapse: every `amount_in_arrears` 90% lower. Rows
/// stay consistent (arrears still imply months in arrears), so only the
/// contributor's total, compared with last month, can tell.
pub fn collapse_arrears(rows: &mut [Statement]) {
    for row in rows.iter_mut() {
        row.arrears /= 10;
    }
}

/// Arrears of the first `count` rows jump by `months` (arrears amounts follow),
/// a movement fine for a bank (at most 2) and not for an instalment lender (at most 1).
pub fn jump_arrears(rows: &mut [Statement], count: usize, months: i32) {
    for row in rows.iter_mut().take(count) {
        row.months_in_arrears += months;
        row.arrears = row.instalment * i64::from(row.months_in_arrears);
    }
}

/// The first day of each of `count` months starting at `first`.
pub fn months(first: NaiveDate, count: u32) -> Vec<NaiveDate> {
    (0..count)
        .filter_map(|i| first.checked_add_months(Months::new(i)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn month(y: i32, m: u32) -> NaiveDate {
        NaiveDate::from_ymd_opt(y, m, 1).unwrap()
    }

    #[test]
    fn the_same_seed_gives_the_same_statements() {
        let mut a = Portfolio::new("BANK_A", 20, false, 7);
        let mut b = Portfolio::new("BANK_A", 20, false, 7);
        assert_eq!(
            a.statements(month(2026, 1), true),
            b.statements(month(2026, 1), true)
        );
    }

    #[test]
    fn a_month_taken_in_slices_gives_the_statements_of_the_whole() {
        let mut whole = Portfolio::new("BANK_A", 25, false, 7);
        let mut sliced = whole.clone();
        for m in [month(2026, 1), month(2026, 2)] {
            let expected = whole.statements(m, true);
            let parts: Vec<Statement> = [0..10, 10..20, 20..25]
                .into_iter()
                .flat_map(|positions| sliced.statements_of(m, true, positions))
                .collect();
            assert_eq!(parts, expected);
        }
    }

    #[test]
    fn clean_months_move_arrears_by_at_most_one_and_change_limits_only_with_admin_change() {
        let mut portfolio = Portfolio::new("BNPL_7", 200, true, 1);
        let mut previous = portfolio.statements(month(2025, 1), true);
        for m in months(month(2025, 2), 12) {
            let current = portfolio.statements(m, true);
            for (before, now) in previous.iter().zip(&current) {
                assert!((now.months_in_arrears - before.months_in_arrears).abs() <= 1);
                if now.status != "ADMIN_CHANGE" {
                    assert_eq!(now.product_limit, before.product_limit);
                }
                assert_eq!(now.arrears > 0, now.months_in_arrears > 0);
            }
            previous = current;
        }
    }

    #[test]
    fn month_end_handles_leap_years() {
        assert_eq!(month_end(month(2028, 2)).to_string(), "2028-02-29");
        assert_eq!(month_end(month(2026, 12)).to_string(), "2026-12-31");
    }
}
