//! The roles `silverline init` guesses for a sample's columns: the order
//! column (a date column named like a reporting or statement date), the
//! contributor column (named like one, else the text column holding one value
//! throughout) and the entity key (an id-like column unique per contributor
//! and order date in the sample). Each guess says why, naming columns only,
//! never a value: the starter config marks them for review.

use std::collections::HashSet;

use crate::config::contract::ColumnType;
use crate::config::starter::sample::{Sample, SampleColumn};

/// Name parts of an order column, most telling first.
const ORDER_HINTS: [&str; 9] = [
    "reporting",
    "report",
    "statement",
    "as_of",
    "asof",
    "period",
    "snapshot",
    "business",
    "valuation",
];

/// Name parts of a contributor column, most telling first.
const CONTRIBUTOR_HINTS: [&str; 9] = [
    "contributor",
    "reporter",
    "reporting_agent",
    "lender",
    "institution",
    "bank",
    "provider",
    "member",
    "submitter",
];

/// Name endings of an identifier.
const KEY_ENDINGS: [&str; 7] = ["id", "_key", "_no", "_nr", "_number", "_ref", "_code"];

/// A column picked for a role, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pick {
    /// The column.
    pub column: String,
    /// Why it was picked, naming columns only.
    pub why: String,
}

/// The guessed roles of a sample's columns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Roles {
    /// `dataset.order_column`.
    pub order: Pick,
    /// `dataset.contributor_column`.
    pub contributor: Pick,
    /// The identifier that, with the contributor column, makes `dataset.entity_key`.
    pub key: Pick,
}

impl Roles {
    /// `dataset.entity_key`: the contributor column and the identifier (once, when they are one).
    pub fn entity_key(&self) -> Vec<String> {
        let mut key = vec![self.contributor.column.clone()];
        if self.key.column != self.contributor.column {
            key.push(self.key.column.clone());
        }
        key
    }

    /// Whether `column` is part of the record key or the contributor column.
    pub fn is_key_part(&self, column: &str) -> bool {
        [&self.order, &self.contributor, &self.key]
            .iter()
            .any(|pick| pick.column == column)
    }
}

/// Guesses the roles; why not, when no column holds dates (the order column must).
pub fn guess_roles(sample: &Sample) -> Result<Roles, String> {
    let order = guess_order(sample).ok_or_else(|| {
        "no column holds a date (YYYY-MM-DD) in every row: silverline orders an entity's \
         states by a date column (dataset.order_column), so the sample needs one"
            .to_string()
    })?;
    let contributor = guess_contributor(sample, &order.column);
    let key = guess_key(sample, &order.column, &contributor.column);
    Ok(Roles {
        order,
        contributor,
        key,
    })
}

fn lower(column: &SampleColumn) -> String {
    column.name.to_ascii_lowercase()
}

/// The first column whose name holds the first hint any name holds.
fn by_hint<'s>(columns: &[&'s SampleColumn], hints: &[&str]) -> Option<&'s SampleColumn> {
    hints
        .iter()
        .find_map(|hint| columns.iter().find(|c| lower(c).contains(hint)).copied())
}

fn names(columns: &[&SampleColumn], except: &str) -> String {
    let others: Vec<&str> = columns
        .iter()
        .map(|c| c.name.as_str())
        .filter(|n| *n != except)
        .collect();
    if others.is_empty() {
        String::new()
    } else {
        format!(" (other candidates: {})", others.join(", "))
    }
}

fn guess_order(sample: &Sample) -> Option<Pick> {
    let dates: Vec<&SampleColumn> = sample
        .columns
        .iter()
        .filter(|c| c.column_type == ColumnType::Date && !c.blanks)
        .collect();
    let (column, why) = match by_hint(&dates, &ORDER_HINTS) {
        Some(c) => (c, "a date in every row, named like a reporting date"),
        None => match by_hint(&dates, &["date"]) {
            Some(c) => (
                c,
                "the first column named like a date with a date in every row",
            ),
            None => (*dates.first()?, "the first column with a date in every row"),
        },
    };
    Some(Pick {
        column: column.name.clone(),
        why: format!("{why}{}", names(&dates, &column.name)),
    })
}

fn guess_contributor(sample: &Sample, order: &str) -> Pick {
    let texts: Vec<&SampleColumn> = sample
        .columns
        .iter()
        .filter(|c| c.column_type == ColumnType::String && c.name != order)
        .collect();
    let (column, why) = if let Some(c) = by_hint(&texts, &CONTRIBUTOR_HINTS) {
        (c, "named like a contributor")
    } else if let Some(c) = texts.iter().find(|c| distinct(c) == 1 && !c.blanks) {
        (*c, "the first text column holding one value in every row")
    } else if let Some(c) = texts.first() {
        (*c, "no column looks like one: the first text column")
    } else {
        let first = sample.columns.iter().find(|c| c.name != order);
        let first = first.unwrap_or(&sample.columns[0]);
        (first, "no text column: the first column")
    };
    Pick {
        column: column.name.clone(),
        why: why.to_string(),
    }
}

/// How many distinct values (blanks aside) the column's first rows hold.
fn distinct(column: &SampleColumn) -> usize {
    column.values.iter().flatten().collect::<HashSet<_>>().len()
}

fn is_key_like(column: &SampleColumn) -> bool {
    let name = lower(column);
    name == "key" || KEY_ENDINGS.iter().any(|e| name.ends_with(e))
}

fn guess_key(sample: &Sample, order: &str, contributor: &str) -> Pick {
    let others: Vec<&SampleColumn> = sample
        .columns
        .iter()
        .filter(|c| c.name != order && c.name != contributor)
        .collect();
    let named: Vec<&SampleColumn> = others.iter().copied().filter(|c| is_key_like(c)).collect();
    let unique = |c: &SampleColumn| unique_per(sample, [contributor, c.name.as_str(), order]);
    let per = format!("unique per {contributor} and {order} in the sample");
    let most_distinct = named
        .iter()
        .enumerate()
        .max_by_key(|(i, c)| (distinct(c), std::cmp::Reverse(*i)))
        .map(|(_, c)| *c);
    let (column, why) = if let Some(c) = named.iter().copied().find(|c| unique(c)) {
        let why = format!("named like an identifier and {per}");
        (c, format!("{why}{}", names(&named, &c.name)))
    } else if let Some(c) = most_distinct {
        let why = format!("named like an identifier, but NOT {per}: the record key needs more");
        (c, format!("{why}{}", names(&named, &c.name)))
    } else if let Some(c) = others.iter().copied().find(|c| unique(c)) {
        let why = format!("no column is named like an identifier: the first {per}");
        (c, why)
    } else {
        let first = others.first().copied();
        let fallback = first.or_else(|| sample.column(contributor));
        let column = fallback.unwrap_or(&sample.columns[0]);
        (
            column,
            "nothing identifies a row: the first other column".to_string(),
        )
    };
    Pick {
        column: column.name.clone(),
        why,
    }
}

/// Whether the first rows hold each combination of `columns` once, none blank.
fn unique_per(sample: &Sample, columns: [&str; 3]) -> bool {
    let parts: Vec<&SampleColumn> = columns.iter().filter_map(|c| sample.column(c)).collect();
    let rows = parts.first().map_or(0, |c| c.values.len());
    let mut seen = HashSet::with_capacity(rows);
    (0..rows).all(|row| {
        let key: Option<Vec<&str>> = parts
            .iter()
            .map(|c| c.values.get(row).and_then(Option::as_deref))
            .collect();
        key.is_some_and(|key| seen.insert(key))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn column(name: &str, column_type: ColumnType, values: &[&str]) -> SampleColumn {
        SampleColumn {
            name: name.to_string(),
            column_type,
            blanks: values.iter().any(|v| v.is_empty()),
            values: values
                .iter()
                .map(|v| Some(v.to_string()).filter(|v| !v.is_empty()))
                .collect(),
        }
    }

    fn sample(columns: Vec<SampleColumn>) -> Sample {
        Sample {
            file: "s.csv".to_string(),
            delimiter: b',',
            rows: columns[0].values.len(),
            columns,
            left_out: Vec::new(),
        }
    }

    #[test]
    fn a_loan_sample_gets_its_reporting_date_lender_and_contract() {
        let s = sample(vec![
            column("holder_id", ColumnType::String, &["H1", "H1", "H2"]),
            column("contract_id", ColumnType::String, &["C1", "C2", "C3"]),
            column("start_date", ColumnType::Date, &["2020-01-01"; 3]),
            column("reporting_date", ColumnType::Date, &["2026-01-31"; 3]),
            column("lender_id", ColumnType::String, &["L1"; 3]),
        ]);
        let roles = guess_roles(&s).unwrap();
        assert_eq!(roles.order.column, "reporting_date");
        assert!(roles.order.why.contains("start_date"), "{roles:?}");
        assert_eq!(roles.contributor.column, "lender_id");
        assert_eq!(roles.key.column, "contract_id");
        assert_eq!(roles.entity_key(), ["lender_id", "contract_id"]);
    }

    #[test]
    fn without_hints_a_constant_text_column_and_a_unique_column_are_taken() {
        let s = sample(vec![
            column("source", ColumnType::String, &["X", "X"]),
            column("account", ColumnType::String, &["A", "B"]),
            column("day", ColumnType::Date, &["2026-01-31", "2026-01-31"]),
        ]);
        let roles = guess_roles(&s).unwrap();
        assert_eq!(roles.contributor.column, "source");
        assert_eq!(roles.key.column, "account");
        assert_eq!(roles.order.column, "day");
        assert!(
            roles
                .key
                .why
                .contains("no column is named like an identifier")
        );
    }

    #[test]
    fn an_identifier_repeated_per_date_is_flagged() {
        let s = sample(vec![
            column("contributor", ColumnType::String, &["X", "X"]),
            column("loan_id", ColumnType::String, &["A", "A"]),
            column("as_of", ColumnType::Date, &["2026-01-31", "2026-01-31"]),
        ]);
        let roles = guess_roles(&s).unwrap();
        assert_eq!(roles.key.column, "loan_id");
        assert!(roles.key.why.contains("NOT unique"), "{roles:?}");
    }

    #[test]
    fn a_sample_without_a_full_date_column_has_no_order_column() {
        let s = sample(vec![
            column("id", ColumnType::String, &["A", "B"]),
            column("day", ColumnType::Date, &["2026-01-31", ""]),
        ]);
        let problem = guess_roles(&s).unwrap_err();
        assert!(problem.contains("dataset.order_column"), "{problem}");
    }
}
