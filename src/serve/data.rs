//! What the workbench shows, read live from the exception store and the
//! dq_error files: the exceptions a person may see, filtered and paged, and
//! one exception in full (its row, masked unless they may see personal data,
//! its reasons with the rules' descriptions, its history).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use chrono::{DateTime, Utc};
use serde::Deserialize;

use super::access::{Permission, Principal};
use super::previous::previous_state;
use crate::config::Plan;
use crate::core::set_aside::SetAside;
use crate::core::sql::QueryMemory;
use crate::error::Result;
use crate::exceptions::backlog::{ExceptionState, states};
use crate::exceptions::store::{Read, for_each_state, open_exceptions, read_exception};
use crate::exceptions::{ExceptionEvent, ExceptionStatus};
use crate::infra::storage::Stores;
use crate::pipeline::mask::{WITHHELD_RAW_RECORD, mask_value};
use crate::pipeline::read::PARSE_RULE;
use crate::replay::dq_file_rows;
use crate::transient::{DQ_ERRORS, EXCEPTION_ID, RAW_RECORD};

/// Exceptions listed per page.
pub const PAGE_SIZE: usize = 50;

/// The last page a list shows (its exceptions and those before it are
/// held while the store streams): 100,000 exceptions deep.
pub const LAST_PAGE: usize = 2_000;

/// Which statuses a list shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StatusFilter {
    /// Pending, quarantined or missing.
    #[default]
    Open,
    /// Exactly this status.
    Is(ExceptionStatus),
    /// Every status.
    All,
}

impl StatusFilter {
    /// The filter a form value names (`open`, `all` or a status); None for anything else.
    pub fn parse(text: &str) -> Option<StatusFilter> {
        match text {
            "" | "open" => Some(StatusFilter::Open),
            "all" => Some(StatusFilter::All),
            other => ExceptionStatus::parse(other).map(StatusFilter::Is),
        }
    }

    /// The form value.
    pub fn as_str(self) -> &'static str {
        match self {
            StatusFilter::Open => "open",
            StatusFilter::All => "all",
            StatusFilter::Is(status) => status.as_str(),
        }
    }

    fn keeps(self, status: ExceptionStatus) -> bool {
        match self {
            StatusFilter::Open => status.is_open(),
            StatusFilter::All => true,
            StatusFilter::Is(wanted) => status == wanted,
        }
    }
}

/// The list's query string as a form sends it (empty fields are empty strings).
#[derive(Debug, Default, Deserialize)]
pub struct ListQuery {
    /// Contributor id.
    pub contributor: Option<String>,
    /// Primary rule.
    pub rule: Option<String>,
    /// `open`, `all` or a status.
    pub status: Option<String>,
    /// At least this many days old.
    pub min_age: Option<String>,
    /// At most this many days old.
    pub max_age: Option<String>,
    /// Page, from 1.
    pub page: Option<String>,
}

/// A validated list filter.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Filter {
    /// Only this contributor.
    pub contributor: Option<String>,
    /// Only this primary rule.
    pub rule: Option<String>,
    /// Which statuses.
    pub status: StatusFilter,
    /// At least this many days old.
    pub min_age: Option<u64>,
    /// At most this many days old.
    pub max_age: Option<u64>,
    /// Page, from 1.
    pub page: usize,
}

impl Filter {
    /// The filter of a query; what does not read is named in the error.
    pub fn from_query(query: &ListQuery) -> std::result::Result<Filter, String> {
        let text = |v: &Option<String>| {
            v.as_deref()
                .map(str::trim)
                .filter(|t| !t.is_empty())
                .map(str::to_string)
        };
        let number = |name: &str, v: &Option<String>| -> std::result::Result<Option<u64>, String> {
            text(v)
                .map(|t| {
                    t.parse::<u64>()
                        .map_err(|_| format!("{name} must be a whole number of days"))
                })
                .transpose()
        };
        let status = query.status.as_deref().unwrap_or_default();
        Ok(Filter {
            contributor: text(&query.contributor),
            rule: text(&query.rule),
            status: StatusFilter::parse(status)
                .ok_or_else(|| "status: unknown status".to_string())?,
            min_age: number("min_age", &query.min_age)?,
            max_age: number("max_age", &query.max_age)?,
            page: number("page", &query.page)?.map_or(1, |p| p.max(1) as usize),
        })
    }

    /// The query string of this filter at `page`.
    pub fn query_string(&self, page: usize) -> String {
        let mut pairs = url::form_urlencoded::Serializer::new(String::new());
        if let Some(c) = &self.contributor {
            pairs.append_pair("contributor", c);
        }
        if let Some(r) = &self.rule {
            pairs.append_pair("rule", r);
        }
        pairs.append_pair("status", self.status.as_str());
        if let Some(a) = self.min_age {
            pairs.append_pair("min_age", &a.to_string());
        }
        if let Some(a) = self.max_age {
            pairs.append_pair("max_age", &a.to_string());
        }
        pairs.append_pair("page", &page.to_string());
        pairs.finish()
    }

    fn keeps(&self, state: &ExceptionState<'_>, now: DateTime<Utc>) -> bool {
        let e = state.latest;
        let age = state.age_days(now);
        self.contributor
            .as_ref()
            .is_none_or(|c| *c == e.contributor)
            && self.rule.as_ref().is_none_or(|r| *r == e.rule)
            && self.status.keeps(e.status)
            && self.min_age.is_none_or(|min| age >= min)
            && self.max_age.is_none_or(|max| age <= max)
    }
}

/// One line of the list.
#[derive(Debug, Clone)]
pub struct Listed {
    /// The exception's latest event.
    pub latest: ExceptionEvent,
    /// Its age in days.
    pub age_days: u64,
}

/// A page of the list and what its filter form offers.
#[derive(Debug, Clone, Default)]
pub struct Listing {
    /// The exceptions of this page.
    pub rows: Vec<Listed>,
    /// How many match the filter, over every page.
    pub matching: usize,
    /// The contributors the person may see that have exceptions.
    pub contributors: Vec<String>,
    /// The primary rules of the exceptions they may see.
    pub rules: Vec<String>,
}

/// The page of `filter` among the exceptions `who` may see, oldest first:
/// the store is read one exception at a time within `memory`
/// ([`for_each_state`]), and only the page's exceptions (and those before
/// it) are held.
pub(crate) async fn load_list(
    plan: &Plan,
    memory: &QueryMemory,
    (who, filter): (&Principal, &Filter),
    now: DateTime<Utc>,
) -> Result<Listing> {
    let table = open_exceptions(plan).await?.exceptions;
    let mut fold = ListFold::new(who, filter, now);
    let scope = filter.contributor.as_deref().into();
    for_each_state(&table, (scope, Read::Whole), memory, |state| {
        fold.add(state)
    })
    .await?;
    Ok(fold.finish())
}

/// Every event of exception `id`, oldest first (none: the store does not know it).
pub async fn load_exception(plan: &Plan, id: &str) -> Result<Vec<ExceptionEvent>> {
    let table = open_exceptions(plan).await?.exceptions;
    let mut events = read_exception(&table, id).await?;
    events.sort_by_key(|e| e.event_at);
    Ok(events)
}

/// The list, folded one exception at a time: what the filter form offers
/// and how many match, and the first `page` pages of the matching ones.
struct ListFold<'a> {
    who: &'a Principal,
    filter: &'a Filter,
    now: DateTime<Utc>,
    contributors: BTreeSet<String>,
    rules: BTreeSet<String>,
    matching: usize,
    /// The earliest matching exceptions seen: trimmed to the `kept`
    /// earliest whenever it holds twice as many.
    earliest: Vec<Listed>,
    kept: usize,
}

impl<'a> ListFold<'a> {
    fn new(who: &'a Principal, filter: &'a Filter, now: DateTime<Utc>) -> ListFold<'a> {
        ListFold {
            who,
            filter,
            now,
            contributors: BTreeSet::new(),
            rules: BTreeSet::new(),
            matching: 0,
            earliest: Vec::new(),
            // Past the last page, none is kept: the page is empty.
            kept: match filter.page <= LAST_PAGE {
                true => filter.page.max(1) * PAGE_SIZE,
                false => 0,
            },
        }
    }

    fn add(&mut self, state: &ExceptionState<'_>) {
        let latest = state.latest;
        if !self.who.may(Permission::View, &latest.contributor) {
            return;
        }
        if !self.contributors.contains(&latest.contributor) {
            self.contributors.insert(latest.contributor.clone());
        }
        if !self.rules.contains(&latest.rule) {
            self.rules.insert(latest.rule.clone());
        }
        if !self.filter.keeps(state, self.now) {
            return;
        }
        self.matching += 1;
        if self.kept == 0 {
            return;
        }
        self.earliest.push(Listed {
            latest: latest.clone(),
            age_days: state.age_days(self.now),
        });
        if self.earliest.len() >= 2 * self.kept {
            self.trim();
        }
    }

    /// Keeps the `kept` earliest, oldest first (by entry, then id).
    fn trim(&mut self) {
        self.earliest.sort_by(|a, b| {
            (a.latest.entered_at, &a.latest.exception_id)
                .cmp(&(b.latest.entered_at, &b.latest.exception_id))
        });
        self.earliest.truncate(self.kept);
    }

    fn finish(mut self) -> Listing {
        self.trim();
        let skipped = self.filter.page.saturating_sub(1).saturating_mul(PAGE_SIZE);
        let rows = self
            .earliest
            .into_iter()
            .skip(skipped)
            .take(PAGE_SIZE)
            .collect();
        Listing {
            rows,
            matching: self.matching,
            contributors: self.contributors.into_iter().collect(),
            rules: self.rules.into_iter().collect(),
        }
    }
}

/// One reason the row was set aside, with the rule's description.
#[derive(Debug, Clone, PartialEq)]
pub struct Reason {
    /// Rule name.
    pub rule: String,
    /// Severity it acted with.
    pub severity: String,
    /// The message recorded with the row.
    pub message: String,
    /// The rule's description and expression, from the configuration.
    pub description: String,
    /// Whether the rule compares with the entity's previous state.
    pub trend: bool,
}

/// A column of the row, as the person may see it.
#[derive(Debug, Clone, PartialEq)]
pub struct Cell {
    /// Column name.
    pub column: String,
    /// The value (masked when sensitive and the person lacks `pii`).
    pub value: String,
    /// Whether the value shown is masked.
    pub masked: bool,
}

/// One exception in full.
#[derive(Debug, Clone)]
pub struct Detail {
    /// Every event, oldest first.
    pub history: Vec<ExceptionEvent>,
    /// The latest event.
    pub latest: ExceptionEvent,
    /// Its age in days.
    pub age_days: u64,
    /// The reasons of the latest event.
    pub reasons: Vec<Reason>,
    /// The row's contract columns, from its dq_error file (empty when there is no row).
    pub row: Vec<Cell>,
    /// The raw text of a record that did not parse.
    pub raw_record: Option<String>,
    /// Why there is no row, or where it came from.
    pub row_note: String,
    /// Whether the row's sensitive columns are shown unmasked.
    pub pii: bool,
    /// For a trend rule: what the page shows as the previous state the row
    /// was compared with, and that state's columns when there is one.
    pub previous: Option<(String, Vec<Cell>)>,
}

/// The exception whose events, oldest first, are `history`
/// ([`load_exception`]), for a person who may (`pii`) or may not see
/// personal data; None when there are none.
pub async fn detail(
    plan: &Plan,
    history: Vec<ExceptionEvent>,
    pii: bool,
    now: DateTime<Utc>,
) -> Result<Option<Detail>> {
    let Some(latest) = history.last().cloned() else {
        return Ok(None);
    };
    let state = states(&history)
        .into_iter()
        .next()
        .map(|s| s.age_days(now))
        .unwrap_or(0);
    let reasons = reasons_of(plan, &latest);
    let (values, row_note) = row_of(plan, &history).await;
    let row = values
        .as_ref()
        .map(|values| cells(plan, values, pii))
        .unwrap_or_default();
    let raw_record = values
        .as_ref()
        .and_then(|v| v.get(RAW_RECORD))
        .filter(|raw| !raw.is_empty())
        .map(|raw| {
            if pii || !has_sensitive(plan) {
                raw.clone()
            } else {
                WITHHELD_RAW_RECORD.to_string()
            }
        });
    let trend = reasons.iter().any(|r| r.trend);
    let previous = match &values {
        Some(values) if trend => Some(previous_of(plan, values, pii).await),
        _ => None,
    };
    Ok(Some(Detail {
        previous,
        history,
        latest,
        age_days: state,
        reasons,
        row,
        raw_record,
        row_note,
        pii,
    }))
}

fn has_sensitive(plan: &Plan) -> bool {
    plan.contract.columns.iter().any(|c| c.sensitive)
}

/// The record key as `who` may see it: masked when a column of it is sensitive.
pub fn shown_record_key(plan: &Plan, key: Option<&str>, pii: bool) -> String {
    let key = key.unwrap_or_default();
    let sensitive_key = plan
        .contract
        .record_key()
        .iter()
        .any(|c| plan.contract.column(c).is_some_and(|c| c.sensitive));
    if sensitive_key && !pii {
        mask_value(key)
    } else {
        key.to_string()
    }
}

/// What the page says of the previous state a trend rule compared `values`
/// with, and its columns (masked where they must be) when Silver has one.
async fn previous_of(
    plan: &Plan,
    values: &HashMap<String, String>,
    pii: bool,
) -> (String, Vec<Cell>) {
    let order = &plan.contract.order_column;
    match previous_state(plan, values).await {
        Ok(Some(state)) => (
            format!(
                "The account's latest statement in Silver before this one ({order} {}), read now: the dq_error files and the exception store do not keep the prev_ values the rule compared with. A run committed since may have added a statement in between; one older than the lookback ({} months) was not compared (the rule was skipped).",
                state.get(order).map_or("", String::as_str),
                plan.lookback_months
            ),
            cells(plan, &state, pii),
        ),
        Ok(None) => (
            "Silver holds no earlier statement of this account: the trend rule had nothing to compare with when it was skipped, or the earlier statement is no longer in Silver.".to_string(),
            Vec::new(),
        ),
        Err(error) => (format!("The previous state could not be read from Silver: {error}"), Vec::new()),
    }
}

/// The contract columns of a dq_error row, masked where they must be.
pub fn cells(plan: &Plan, values: &HashMap<String, String>, pii: bool) -> Vec<Cell> {
    plan.contract
        .columns
        .iter()
        .map(|column| {
            let value = values.get(&column.name).cloned().unwrap_or_default();
            let masked = column.sensitive && !pii;
            Cell {
                column: column.name.clone(),
                value: if masked { mask_value(&value) } else { value },
                masked,
            }
        })
        .collect()
}

/// The reasons recorded with `latest`, each with its rule's description.
fn reasons_of(plan: &Plan, latest: &ExceptionEvent) -> Vec<Reason> {
    #[derive(Deserialize)]
    struct Recorded {
        rule: String,
        severity: String,
        #[serde(default)]
        message: String,
    }
    let recorded: Vec<Recorded> = serde_json::from_str(&latest.reasons).unwrap_or_default();
    let rules: BTreeMap<&str, &crate::config::rules::Rule> = plan
        .rules_for(&latest.contributor)
        .map(|(_, rules)| rules.into_iter().map(|r| (r.name.as_str(), r)).collect())
        .unwrap_or_default();
    recorded
        .into_iter()
        .map(|r| {
            let rule = rules.get(r.rule.as_str());
            let description = match rule {
                Some(rule) => format!("{} (passes when {})", rule.message, rule.expression),
                None if r.rule == PARSE_RULE => {
                    "the record could not be read with the contract's types".to_string()
                }
                None => "not a rule of the current configuration".to_string(),
            };
            Reason {
                trend: rule.is_some_and(|rule| rule.is_trend()),
                rule: r.rule,
                severity: r.severity,
                message: r.message,
                description,
            }
        })
        .collect()
}

/// The row of the exception, read from the newest dq_error file its events
/// name, and a note saying where it came from or why there is none.
async fn row_of(
    plan: &Plan,
    history: &[ExceptionEvent],
) -> (Option<HashMap<String, String>>, String) {
    let Some(event) = history.iter().rev().find(|e| e.dq_file.is_some()) else {
        return (
            None,
            "no dq_error file holds a row of this exception".to_string(),
        );
    };
    if event.status == ExceptionStatus::Missing {
        return (None, "an entity the drop left out: no row was received (its last state is in the missing list)".to_string());
    }
    let file = event.dq_file.clone().unwrap_or_default();
    let kinds = [SetAside::Quarantine, SetAside::Pending, SetAside::Dropped];
    let read = async {
        let stores = Stores::new(&plan.storage, plan.catalog.warehouse()).await?;
        let dq_error = stores.open(&plan.storage.dq_error, "storage.dq_error")?;
        let rows = dq_file_rows(&dq_error, &[event], &kinds).await?;
        Ok::<_, crate::Error>(rows.into_iter().next().map(|r| r.values))
    };
    match read.await {
        Ok(Some(mut values)) => {
            values.remove(EXCEPTION_ID);
            values.remove(DQ_ERRORS);
            (Some(values), format!("from dq_error file {file}"))
        }
        Ok(None) => (None, format!("dq_error file {file} does not hold the row")),
        Err(error) => (None, format!("the row could not be read: {error}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::serve::access::{Grant, Role, Scope};

    /// The page of `filter` among `events`, folded as the store's read folds them.
    fn list(
        events: &[ExceptionEvent],
        who: &Principal,
        filter: &Filter,
        now: DateTime<Utc>,
    ) -> Listing {
        let mut fold = ListFold::new(who, filter, now);
        for state in states(events) {
            fold.add(&state);
        }
        fold.finish()
    }

    fn event(
        id: usize,
        contributor: &str,
        rule: &str,
        status: ExceptionStatus,
        age: i64,
        now: DateTime<Utc>,
    ) -> ExceptionEvent {
        ExceptionEvent {
            exception_id: format!("e{id:03}"),
            contributor: contributor.to_string(),
            drop_id: "2026-05".to_string(),
            run_id: "0123456789abcdef".to_string(),
            status,
            rule: rule.to_string(),
            rules: rule.to_string(),
            severity: "quarantine".to_string(),
            reasons: "[]".to_string(),
            record_key: None,
            source_file: Some("s.csv".to_string()),
            source_line: Some(id as i64 + 2),
            dq_file: None,
            entered_at: now - chrono::Duration::days(age),
            event_at: now - chrono::Duration::days(age),
            actor: None,
            note: None,
        }
    }

    /// 70 exceptions of BANK_A (ages 0..70 days; every tenth of rule `b`, every
    /// seventh resolved) and 5 of BANK_B, seen by a viewer of BANK_A.
    #[test]
    fn the_list_shows_what_the_person_may_see_filtered_oldest_first_and_paged() {
        let now = Utc::now();
        let mut events: Vec<ExceptionEvent> = (0..70)
            .map(|i| {
                let rule = if i % 10 == 0 { "b" } else { "a" };
                let status = if i % 7 == 0 {
                    ExceptionStatus::Resolved
                } else {
                    ExceptionStatus::Quarantined
                };
                event(i, "BANK_A", rule, status, i as i64, now)
            })
            .collect();
        events.extend((70..75).map(|i| event(i, "BANK_B", "a", ExceptionStatus::Pending, 1, now)));
        let viewer = Principal {
            name: "vic".to_string(),
            grants: vec![Grant {
                role: Role::Viewer,
                pii: false,
                scope: Scope::Only(BTreeSet::from(["BANK_A".to_string()])),
            }],
        };
        let open = list(
            &events,
            &viewer,
            &Filter {
                page: 1,
                ..Filter::default()
            },
            now,
        );
        assert_eq!(open.matching, 60, "70 less the 10 resolved (0, 7, ..., 63)");
        assert_eq!(open.rows.len(), PAGE_SIZE);
        assert_eq!(open.rows[0].latest.exception_id, "e069", "oldest first");
        assert_eq!(
            open.contributors,
            vec!["BANK_A".to_string()],
            "BANK_B is not offered"
        );
        let second = list(
            &events,
            &viewer,
            &Filter {
                page: 2,
                ..Filter::default()
            },
            now,
        );
        let ids: Vec<&str> = second
            .rows
            .iter()
            .map(|r| r.latest.exception_id.as_str())
            .collect();
        assert_eq!(
            ids,
            [
                "e011", "e010", "e009", "e008", "e006", "e005", "e004", "e003", "e002", "e001"
            ],
            "the youngest ten, oldest first"
        );
        let far = Filter {
            page: usize::MAX,
            ..Filter::default()
        };
        assert!(
            list(&events, &viewer, &far, now).rows.is_empty(),
            "no overflow"
        );
        let of_b = Filter {
            rule: Some("b".to_string()),
            page: 1,
            ..Filter::default()
        };
        let ids: Vec<String> = list(&events, &viewer, &of_b, now)
            .rows
            .iter()
            .map(|r| r.latest.exception_id.clone())
            .collect();
        assert_eq!(
            ids,
            ["e060", "e050", "e040", "e030", "e020", "e010"],
            "rule b, open (0 is resolved)"
        );
        let aged = Filter {
            min_age: Some(10),
            max_age: Some(19),
            status: StatusFilter::All,
            page: 1,
            ..Filter::default()
        };
        assert_eq!(
            list(&events, &viewer, &aged, now).matching,
            10,
            "ages 10 to 19, any status"
        );
        let foreign = Filter {
            contributor: Some("BANK_B".to_string()),
            page: 1,
            ..Filter::default()
        };
        assert_eq!(list(&events, &viewer, &foreign, now).matching, 0);
    }

    #[test]
    fn a_filter_reads_its_query_and_writes_it_back() {
        let query = ListQuery {
            contributor: Some("BANK_A".to_string()),
            rule: Some(String::new()),
            status: Some("quarantined".to_string()),
            min_age: Some("3".to_string()),
            max_age: Some(String::new()),
            page: Some("2".to_string()),
        };
        let filter = Filter::from_query(&query).unwrap();
        assert_eq!(filter.contributor.as_deref(), Some("BANK_A"));
        assert_eq!(filter.rule, None);
        assert_eq!(
            filter.status,
            StatusFilter::Is(ExceptionStatus::Quarantined)
        );
        assert_eq!(
            (filter.min_age, filter.max_age, filter.page),
            (Some(3), None, 2)
        );
        assert_eq!(
            filter.query_string(3),
            "contributor=BANK_A&status=quarantined&min_age=3&page=3"
        );
        let bad = ListQuery {
            min_age: Some("x".to_string()),
            ..ListQuery::default()
        };
        assert!(Filter::from_query(&bad).unwrap_err().contains("min_age"));
        let unknown = ListQuery {
            status: Some("gone".to_string()),
            ..ListQuery::default()
        };
        assert!(Filter::from_query(&unknown).is_err());
    }
}
