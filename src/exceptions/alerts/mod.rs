//! Alerts: what a person should hear about before anyone opens a report.
//!
//! - **creep**: a rule's failure rate (failed / received per run, from the
//!   contributor's run summaries) rising `rises_in_a_row` runs in a row, or
//!   above the mean plus `sigma` standard deviations of the `window` runs
//!   before the latest;
//! - **age**: open exceptions older than `exceptions.stale_after_days`;
//! - **exit rate**: exceptions entered in the last `no_exit_days` days and
//!   none left, while the backlog is at least that old.
//!
//! [`StateWatch`] computes a contributor's from its exceptions' states,
//! folded in one at a time, and its runs; a committed run puts its
//! contributor's in its summary, `silverline backlog --check` and the report
//! show everyone's, and [`webhook::notify`] POSTs them.
//! Only counts, rates, ids and rule names appear: never a row's value.

mod creep;
pub mod webhook;

use std::collections::BTreeMap;

use chrono::{DateTime, Duration, Utc};
use serde::{Deserialize, Serialize};

use super::backlog::{ExceptionState, count_state};
use super::figures::BacklogFigures;
use super::runs::SummaryFile;
use crate::config::alerts::AlertSettings;
use crate::core::drop::is_made_of_exceptions;
pub use creep::creep_alerts;

/// What an alert is about.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum AlertKind {
    /// A rule's failure rate is creeping up.
    Creep,
    /// Open exceptions are older than the stale age.
    Age,
    /// Exceptions enter and none leave.
    ExitRate,
}

impl AlertKind {
    /// The kind as written.
    pub fn as_str(self) -> &'static str {
        match self {
            AlertKind::Creep => "creep",
            AlertKind::Age => "age",
            AlertKind::ExitRate => "exit_rate",
        }
    }
}

/// One alert.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Alert {
    /// What it is about.
    pub kind: AlertKind,
    /// Contributor id.
    pub contributor: String,
    /// The rule, for a creep alert.
    pub rule: Option<String>,
    /// The figures that raised it.
    pub figures: AlertFigures,
    /// What it says, for a person.
    pub message: String,
}

impl Alert {
    /// An alert of `figures`' kind.
    fn new(contributor: &str, rule: Option<&str>, figures: AlertFigures, message: String) -> Alert {
        Alert {
            kind: figures.kind(),
            contributor: contributor.to_string(),
            rule: rule.map(str::to_string),
            figures,
            message,
        }
    }
}

/// The figures of an alert, by kind.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(untagged)]
pub enum AlertFigures {
    /// Of a creep alert.
    Creep(CreepFigures),
    /// Of an age alert.
    Age(AgeFigures),
    /// Of an exit-rate alert.
    ExitRate(ExitRateFigures),
}

impl AlertFigures {
    /// The kind of alert they raise.
    pub fn kind(&self) -> AlertKind {
        match self {
            AlertFigures::Creep(_) => AlertKind::Creep,
            AlertFigures::Age(_) => AlertKind::Age,
            AlertFigures::ExitRate(_) => AlertKind::ExitRate,
        }
    }
}

/// A rule's failure rates, and which test they failed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CreepFigures {
    /// The rule's rate in the runs the tests looked at, oldest first.
    pub runs: Vec<RunRate>,
    /// Rises in a row up to the latest run (when that test raised it).
    pub rises_in_a_row: Option<u32>,
    /// The mean and deviation the latest rate exceeded (when that test raised it).
    pub sigma: Option<SigmaFigures>,
}

/// One run's failure rate of a rule.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunRate {
    /// The drop.
    pub drop_id: String,
    /// Rows the rule failed.
    pub failed: u64,
    /// Rows the run received.
    pub received: u64,
    /// `failed / received`.
    pub rate: f64,
}

/// The mean-plus-k-sigma test of the latest rate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SigmaFigures {
    /// Mean rate of the runs before the latest.
    pub mean: f64,
    /// Their standard deviation (population).
    pub std_dev: f64,
    /// How many deviations above the mean alert.
    pub k: f64,
    /// `mean + k * std_dev`: the latest rate is above it.
    pub threshold: f64,
    /// How many runs before the latest.
    pub window: u32,
}

/// Open exceptions past the stale age.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AgeFigures {
    /// Open exceptions older than `stale_after_days`.
    pub stale: u64,
    /// Age of the oldest open exception, in whole days.
    pub oldest_age_days: u64,
    /// The stale age, in days.
    pub stale_after_days: u32,
}

/// Exceptions that entered while none left.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExitRateFigures {
    /// Exceptions that entered in the period.
    pub entered: u64,
    /// Exceptions that left in it (0).
    pub exited: u64,
    /// Open exceptions now.
    pub open: u64,
    /// The period, in days.
    pub days: u32,
}

/// One committed run of a contributor's delivery: what each rule failed of
/// what it received (replay and accept drops, made of exceptions, are not
/// deliveries and do not count).
#[derive(Debug, Clone, PartialEq)]
pub struct RunFailures {
    /// Contributor id.
    pub contributor: String,
    /// Run id (a run counts once).
    pub run_id: String,
    /// Drop id.
    pub drop_id: String,
    /// When it finished (RFC 3339): runs follow each other in this order.
    pub at: String,
    /// Rows received.
    pub received: u64,
    /// Rows each rule failed.
    pub failed: BTreeMap<String, u64>,
}

impl RunFailures {
    /// The run a summary records, if it committed a delivery.
    pub fn of_summary(file: &SummaryFile) -> Option<RunFailures> {
        let summary = &file.summary;
        if file.text("status") != "committed" || is_made_of_exceptions(file.text("drop_id")) {
            return None;
        }
        let failed = summary["rules"]
            .as_array()?
            .iter()
            .filter_map(|r| Some((r["rule"].as_str()?.to_string(), r["failed"].as_u64()?)))
            .collect();
        Some(RunFailures {
            contributor: file.text("contributor").to_string(),
            run_id: file.text("run_id").to_string(),
            drop_id: file.text("drop_id").to_string(),
            at: file.at().to_string(),
            received: summary["counts"]["received"].as_u64()?,
            failed,
        })
    }
}

/// One contributor's alerts, its exception states folded in one at a time
/// (they need not be held together: a contributor may have millions).
pub struct StateWatch<'a> {
    settings: &'a AlertSettings,
    now: DateTime<Utc>,
    /// The backlog at the age alert's stale age, when it is watched.
    aged: Option<(u32, BacklogFigures)>,
    /// Entries and exits in the exit-rate alert's window, when it is watched.
    flow: Option<ExitFlow>,
}

/// Entries and exits of the last `days` days.
struct ExitFlow {
    days: u32,
    entered: u64,
    exited: u64,
    open: u64,
    /// When the earliest exception entered.
    first_entry: Option<DateTime<Utc>>,
}

impl<'a> StateWatch<'a> {
    /// A watch of the alerts `settings` asks for, at `now`.
    pub fn new(settings: &'a AlertSettings, now: DateTime<Utc>) -> StateWatch<'a> {
        StateWatch {
            settings,
            now,
            aged: settings
                .stale_after_days
                .map(|days| (days, BacklogFigures::default())),
            flow: settings.no_exit_days.map(|days| ExitFlow {
                days,
                entered: 0,
                exited: 0,
                open: 0,
                first_entry: None,
            }),
        }
    }

    /// Folds one exception's state in.
    pub fn add(&mut self, state: &ExceptionState<'_>) {
        let now = self.now;
        if let Some((days, backlog)) = &mut self.aged {
            count_state(backlog, state, now, *days);
        }
        if let Some(flow) = &mut self.flow {
            let since = now - Duration::days(i64::from(flow.days));
            let within = |at: DateTime<Utc>| at > since && at <= now;
            let entered_at = state.entered_open.then_some(state.latest.entered_at);
            flow.entered += u64::from(entered_at.is_some_and(within));
            flow.exited += u64::from(state.exited_at().is_some_and(within));
            flow.open += u64::from(state.is_open());
            flow.first_entry = match (flow.first_entry, entered_at) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
        }
    }

    /// The contributor's alerts: those of the states folded in, and the
    /// creep alerts of its `runs` (other contributors' runs are passed
    /// over), by kind then rule.
    pub fn alerts(self, contributor: &str, runs: &[RunFailures]) -> Vec<Alert> {
        let mut alerts: Vec<Alert> = self
            .aged
            .and_then(|(days, backlog)| age_alert(contributor, &backlog, days))
            .into_iter()
            .chain(
                self.flow
                    .and_then(|flow| exit_rate_alert(contributor, &flow, self.now)),
            )
            .collect();
        if let Some(creep) = &self.settings.creep {
            let their_runs: Vec<&RunFailures> = runs
                .iter()
                .filter(|r| r.contributor == contributor)
                .collect();
            alerts.extend(creep_alerts(creep, contributor, &their_runs));
        }
        sort_alerts(&mut alerts);
        alerts
    }
}

fn sort_alerts(alerts: &mut [Alert]) {
    alerts
        .sort_by(|a, b| (&a.contributor, a.kind, &a.rule).cmp(&(&b.contributor, b.kind, &b.rule)));
}

/// Open exceptions older than `stale_after_days` (the backlog's stale count).
fn age_alert(contributor: &str, backlog: &BacklogFigures, stale_after_days: u32) -> Option<Alert> {
    if backlog.stale == 0 {
        return None;
    }
    let oldest = backlog.oldest_age_days.unwrap_or_default();
    let message = format!(
        "{contributor}: {} open exception(s) older than {stale_after_days} days; the oldest is {oldest} days old",
        backlog.stale
    );
    let figures = AgeFigures {
        stale: backlog.stale,
        oldest_age_days: oldest,
        stale_after_days,
    };
    Some(Alert::new(
        contributor,
        None,
        AlertFigures::Age(figures),
        message,
    ))
}

/// Exceptions that entered in the last `days` days while none left, the
/// backlog being at least that old (a first run's exceptions are not yet a
/// backlog nobody works).
fn exit_rate_alert(contributor: &str, flow: &ExitFlow, now: DateTime<Utc>) -> Option<Alert> {
    let since = now - Duration::days(i64::from(flow.days));
    if flow.entered == 0 || flow.exited > 0 || flow.open == 0 || flow.first_entry? > since {
        return None;
    }
    let (entered, days, open) = (flow.entered, flow.days, flow.open);
    let message = format!(
        "{contributor}: {entered} exception(s) entered in the last {days} days and none left; {open} open"
    );
    let figures = ExitRateFigures {
        entered,
        exited: 0,
        open,
        days,
    };
    Some(Alert::new(
        contributor,
        None,
        AlertFigures::ExitRate(figures),
        message,
    ))
}

/// `rate` as a percentage with two decimals.
fn percent(rate: f64) -> String {
    format!("{:.2}%", rate * 100.0)
}

/// The alerts of `alerts` as one line each, for a person (and a chat's `text`).
pub fn alert_lines(alerts: &[Alert]) -> Vec<String> {
    alerts
        .iter()
        .map(|a| format!("[{}] {}", a.kind.as_str(), a.message))
        .collect()
}
