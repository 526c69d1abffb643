//! Backlog measures from the exception events: what is open, how old, how
//! fast exceptions enter and leave.
//!
//! An exception *entered* when its first event put it in an open status
//! (pending or quarantined); it *left* when its latest event closed it
//! (resolved, accepted or ignored) after it had been open. Rows of a `drop`
//! rule, ignored from the start, neither enter nor leave the backlog. Closed
//! exceptions a person accepted or ignored are counted apart.

use std::collections::{BTreeMap, HashMap};

use chrono::{DateTime, Datelike, Duration, NaiveDate, Utc};

use super::ExceptionEvent;
use crate::exceptions::figures::{AGE_BUCKETS, BacklogFigures, RuleBacklog, WeekFlow};

/// One exception's history, reduced to what the measures need.
#[derive(Debug, Clone)]
pub struct ExceptionState<'a> {
    /// Its latest event: current status, rule, contributor.
    pub latest: &'a ExceptionEvent,
    /// Whether it ever was open (pending or quarantined).
    pub was_open: bool,
    /// Whether its first event opened it.
    pub entered_open: bool,
}

impl ExceptionState<'_> {
    /// Whether it is open now.
    pub fn is_open(&self) -> bool {
        self.latest.status.is_open()
    }

    /// When it left the backlog, if it did.
    pub fn exited_at(&self) -> Option<DateTime<Utc>> {
        (self.was_open && !self.is_open()).then_some(self.latest.event_at)
    }

    /// Its age in whole days at `now`.
    pub fn age_days(&self, now: DateTime<Utc>) -> u64 {
        u64::try_from((now - self.latest.entered_at).num_days()).unwrap_or(0)
    }
}

/// Each exception's state, from its events (latest by event time; ties go to
/// the event listed last).
pub fn states<'a>(events: impl IntoIterator<Item = &'a ExceptionEvent>) -> Vec<ExceptionState<'a>> {
    let mut by_id: HashMap<&str, Vec<&ExceptionEvent>> = HashMap::new();
    for event in events {
        by_id.entry(&event.exception_id).or_default().push(event);
    }
    let mut states: Vec<ExceptionState<'_>> = by_id
        .into_values()
        .filter_map(|mut history| {
            history.sort_by_key(|e| e.event_at);
            state_of(history)
        })
        .collect();
    states.sort_by(|a, b| a.latest.exception_id.cmp(&b.latest.exception_id));
    states
}

/// One exception's state, from its events in time order (`None`: no events).
pub fn state_of<'a>(
    history: impl IntoIterator<Item = &'a ExceptionEvent>,
) -> Option<ExceptionState<'a>> {
    let mut events = history.into_iter();
    let first = events.next()?;
    let opened = first.status.is_open();
    let mut state = ExceptionState {
        latest: first,
        was_open: opened,
        entered_open: opened,
    };
    for event in events {
        state.was_open |= event.status.is_open();
        state.latest = event;
    }
    Some(state)
}

/// A backlog's figures, its exceptions' states folded in one at a time
/// (they need not be held together: a contributor may have millions).
#[derive(Debug, Clone)]
pub struct BacklogTally {
    now: DateTime<Utc>,
    stale_after_days: u32,
    figures: BacklogFigures,
    by_rule: BTreeMap<String, [u64; 4]>,
    flow: BTreeMap<NaiveDate, (u64, u64)>,
}

impl BacklogTally {
    /// An empty backlog at `now`, open exceptions older than
    /// `stale_after_days` stale, its flow over the last `weeks` weeks
    /// (weeks start on Monday).
    pub fn new(now: DateTime<Utc>, stale_after_days: u32, weeks: u32) -> BacklogTally {
        let this_week = monday_of(now.date_naive());
        let first = this_week - Duration::weeks(i64::from(weeks.saturating_sub(1)));
        BacklogTally {
            now,
            stale_after_days,
            figures: BacklogFigures::default(),
            by_rule: BTreeMap::new(),
            flow: (0..weeks)
                .map(|i| (first + Duration::weeks(i64::from(i)), (0, 0)))
                .collect(),
        }
    }

    /// Folds one exception's state in.
    pub fn add(&mut self, state: &ExceptionState<'_>) {
        count_state(&mut self.figures, state, self.now, self.stale_after_days);
        if state.is_open() {
            let age = state.age_days(self.now);
            let bucket = AGE_BUCKETS
                .iter()
                .position(|(_, upper)| upper.is_none_or(|upper| age <= u64::from(upper)))
                .unwrap_or(AGE_BUCKETS.len() - 1);
            match self.by_rule.get_mut(&state.latest.rule) {
                Some(by_age) => by_age[bucket] += 1,
                None => {
                    let mut by_age = [0; 4];
                    by_age[bucket] = 1;
                    self.by_rule.insert(state.latest.rule.clone(), by_age);
                }
            }
        }
        if state.entered_open
            && let Some(week) = self
                .flow
                .get_mut(&monday_of(state.latest.entered_at.date_naive()))
        {
            week.0 += 1;
        }
        if let Some(week) = state
            .exited_at()
            .and_then(|at| self.flow.get_mut(&monday_of(at.date_naive())))
        {
            week.1 += 1;
        }
    }

    /// The headline figures, open exceptions per primary rule and age
    /// bucket (largest first), and entries and exits per week (oldest first).
    pub fn finish(self) -> (BacklogFigures, Vec<RuleBacklog>, Vec<WeekFlow>) {
        let mut rules: Vec<RuleBacklog> = self
            .by_rule
            .into_iter()
            .map(|(rule, by_age)| RuleBacklog {
                rule,
                total: by_age.iter().sum(),
                by_age,
            })
            .collect();
        rules.sort_by(|a, b| b.total.cmp(&a.total).then_with(|| a.rule.cmp(&b.rule)));
        let flow = self
            .flow
            .into_iter()
            .map(|(week, (entered, exited))| WeekFlow {
                week: week.to_string(),
                entered,
                exited,
            })
            .collect();
        (self.figures, rules, flow)
    }
}

/// Adds `state` to the headline `figures` at `now`.
pub fn count_state(
    figures: &mut BacklogFigures,
    state: &ExceptionState<'_>,
    now: DateTime<Utc>,
    stale_after_days: u32,
) {
    let entered = state.entered_open.then_some(state.latest.entered_at);
    let within = |at: Option<DateTime<Utc>>, days: i64| {
        at.is_some_and(|at| at > now - Duration::days(days) && at <= now)
    };
    figures.entered_7d += u64::from(within(entered, 7));
    figures.entered_30d += u64::from(within(entered, 30));
    figures.exited_7d += u64::from(within(state.exited_at(), 7));
    figures.exited_30d += u64::from(within(state.exited_at(), 30));
    if !state.is_open() {
        match state.latest.status {
            super::ExceptionStatus::Accepted => figures.accepted += 1,
            super::ExceptionStatus::Ignored if state.was_open => figures.ignored += 1,
            _ => {}
        }
        return;
    }
    figures.open += 1;
    match state.latest.status {
        super::ExceptionStatus::Pending => figures.pending += 1,
        super::ExceptionStatus::Missing => figures.missing += 1,
        _ => figures.quarantined += 1,
    }
    let age = state.age_days(now);
    figures.stale += u64::from(age > u64::from(stale_after_days));
    figures.oldest_age_days = figures.oldest_age_days.max(Some(age));
}

fn monday_of(day: NaiveDate) -> NaiveDate {
    day - Duration::days(i64::from(day.weekday().num_days_from_monday()))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::exceptions::ExceptionStatus::{
        self, Accepted, Ignored, Pending, Quarantined, Resolved,
    };

    /// Noon of November `day`, 2026.
    pub(crate) fn at(day: u32) -> DateTime<Utc> {
        // 2026-11-01 (a Sunday) is day 1.
        chrono::NaiveDate::from_ymd_opt(2026, 11, day)
            .and_then(|d| d.and_hms_opt(12, 0, 0))
            .map(|t| t.and_utc())
            .unwrap_or_default()
    }

    /// An event of BANK_A's exception `id` under `rule`, of `status`, on
    /// November `day`, the exception having entered on November `entered`.
    pub(crate) fn event(
        id: &str,
        rule: &str,
        status: ExceptionStatus,
        entered: u32,
        day: u32,
    ) -> ExceptionEvent {
        ExceptionEvent {
            exception_id: id.to_string(),
            contributor: "BANK_A".to_string(),
            drop_id: "2026-10".to_string(),
            run_id: format!("run-{day}"),
            status,
            rule: rule.to_string(),
            rules: rule.to_string(),
            severity: "critical".to_string(),
            reasons: "[]".to_string(),
            record_key: None,
            source_file: None,
            source_line: None,
            dq_file: None,
            entered_at: at(entered),
            event_at: at(day),
            actor: None,
            note: None,
        }
    }

    /// Eight exceptions, judged on 2026-11-30 at noon:
    /// a: quarantined day 1, still open (29 days old);
    /// b: pending day 2, resolved day 25 (left within 7 days);
    /// c: quarantined day 26, open (4 days);
    /// d: pending day 10, re-judged pending day 20 (still open, 20 days);
    /// e: dropped day 28 (ignored from the start: neither enters nor leaves);
    /// f: quarantined day 5, ignored by a person day 12 (left within 30 days, not 7);
    /// g: pending 2026-10-01 (60 days, stale at 30);
    /// h: quarantined day 27, accepted by a person day 29 (left within 7 days).
    fn crafted() -> Vec<ExceptionEvent> {
        let mut g = event("g", "holder_exists", Pending, 1, 1);
        g.entered_at = at(1) - Duration::days(31);
        g.event_at = g.entered_at;
        vec![
            event("a", "limit_stable", Quarantined, 1, 1),
            event("b", "holder_exists", Pending, 2, 2),
            event("b", "holder_exists", Resolved, 2, 25),
            event("c", "limit_stable", Quarantined, 26, 26),
            event("d", "holder_exists", Pending, 10, 10),
            event("d", "holder_exists", Pending, 10, 20),
            event("e", "temp_limit_zero", Ignored, 28, 28),
            event("f", "amounts", Quarantined, 5, 5),
            event("f", "amounts", Ignored, 5, 12),
            g,
            event("h", "volume", Quarantined, 27, 27),
            event("h", "volume", Accepted, 27, 29),
        ]
    }

    /// The backlog of `events` at day 30, stale after 30 days, over 6 weeks.
    fn tally(events: &[ExceptionEvent]) -> (BacklogFigures, Vec<RuleBacklog>, Vec<WeekFlow>) {
        let mut tally = BacklogTally::new(at(30), 30, 6);
        for state in states(events) {
            tally.add(&state);
        }
        tally.finish()
    }

    #[test]
    fn figures_match_hand_computed_values() {
        let events = crafted();
        let (figures, _, _) = tally(&events);
        assert_eq!(
            figures,
            BacklogFigures {
                open: 4,        // a, c, d, g
                pending: 2,     // d, g
                quarantined: 2, // a, c
                missing: 0,
                stale: 1, // g (60 days > 30); a is 29 days
                oldest_age_days: Some(60),
                entered_7d: 2,  // c (day 26), h (27); e never entered
                exited_7d: 2,   // b (day 25), h (29)
                entered_30d: 6, // a, b, c, d, f, h (g entered 60 days ago)
                exited_30d: 3,  // b, f, h
                accepted: 1,    // h
                ignored: 1,     // f (e was dropped: ignored from the start)
            }
        );
    }

    #[test]
    fn open_exceptions_are_bucketed_by_rule_and_age() {
        let events = crafted();
        let (_, rows, _) = tally(&events);
        assert_eq!(
            rows,
            vec![
                RuleBacklog {
                    rule: "holder_exists".to_string(),
                    by_age: [0, 1, 1, 0], // d: 20 days; g: 60 days
                    total: 2,
                },
                RuleBacklog {
                    rule: "limit_stable".to_string(),
                    by_age: [1, 1, 0, 0], // c: 4 days; a: 29 days
                    total: 2,
                },
            ]
        );
    }

    #[test]
    fn weekly_flow_counts_entries_and_exits_in_their_weeks() {
        let events = crafted();
        let (_, _, flow) = tally(&events); // Monday 30 Nov is the 6th week
        let weeks: Vec<(&str, u64, u64)> = flow
            .iter()
            .map(|w| (w.week.as_str(), w.entered, w.exited))
            .collect();
        assert_eq!(
            weeks,
            vec![
                ("2026-10-26", 1, 0), // a (Sun 1 Nov)
                ("2026-11-02", 2, 0), // b (2), f (5)
                ("2026-11-09", 1, 1), // d (10); f ignored (12)
                ("2026-11-16", 0, 0),
                ("2026-11-23", 2, 2), // c (26), h (27); b resolved (25), h accepted (29)
                ("2026-11-30", 0, 0),
            ]
        );
    }
}
