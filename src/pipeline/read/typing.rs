//! Typing: one text value at a time into its contract column's Arrow builder.
//!
//! The contract is stricter than Arrow's casts (which read `2026-10-3x` as the
//! 3rd and round a decimal with too many places): dates must be `YYYY-MM-DD`,
//! integers an optional sign and plain digits, decimals at most `scale`
//! places and `precision` digits. A value that does not read is null in the
//! column and a problem of its row.

use std::sync::Arc;

use arrow::array::{
    ArrayRef, BooleanBuilder, Date32Builder, Decimal128Builder, Float64Builder, Int32Builder,
    Int64Builder, StringBuilder, TimestampMicrosecondBuilder,
};
use arrow::compute::kernels::cast_utils::Parser;
use arrow::datatypes::Float64Type;
use chrono::{NaiveDate, NaiveDateTime};

use crate::config::contract::{Column, ColumnType};
use crate::error::{Error, Result};
use crate::stage::Stage;

/// Days from 0001-01-01 (chrono's day 1) to 1970-01-01.
const UNIX_EPOCH_FROM_CE: i32 = 719_163;

/// A contract column being built from text values.
pub(super) enum ColumnBuilder {
    /// `string`.
    Text(StringBuilder),
    /// `date`.
    Date(Date32Builder),
    /// `timestamp` (UTC, microseconds).
    Timestamp(TimestampMicrosecondBuilder),
    /// `int`.
    Int(Int32Builder),
    /// `long`.
    Long(Int64Builder),
    /// `double`.
    Double(Float64Builder),
    /// `boolean`.
    Boolean(BooleanBuilder),
    /// `decimal(precision, scale)`.
    Decimal {
        /// The values, unscaled.
        builder: Decimal128Builder,
        /// Total digits allowed.
        precision: u8,
        /// Digits after the point.
        scale: i8,
    },
}

impl ColumnBuilder {
    /// An empty builder for `column_type`, room for `capacity` values.
    pub(super) fn new(column_type: ColumnType, capacity: usize) -> ColumnBuilder {
        match column_type {
            ColumnType::String => {
                ColumnBuilder::Text(StringBuilder::with_capacity(capacity, capacity * 8))
            }
            ColumnType::Date => ColumnBuilder::Date(Date32Builder::with_capacity(capacity)),
            ColumnType::Timestamp => ColumnBuilder::Timestamp(
                TimestampMicrosecondBuilder::with_capacity(capacity)
                    .with_timezone(iceberg::arrow::UTC_TIME_ZONE),
            ),
            ColumnType::Int => ColumnBuilder::Int(Int32Builder::with_capacity(capacity)),
            ColumnType::Long => ColumnBuilder::Long(Int64Builder::with_capacity(capacity)),
            ColumnType::Double => ColumnBuilder::Double(Float64Builder::with_capacity(capacity)),
            ColumnType::Boolean => ColumnBuilder::Boolean(BooleanBuilder::with_capacity(capacity)),
            ColumnType::Decimal { precision, scale } => ColumnBuilder::Decimal {
                builder: Decimal128Builder::with_capacity(capacity),
                precision,
                scale,
            },
        }
    }

    /// Appends `text` typed; `false` (with a null appended) when it does not read.
    pub(super) fn append(&mut self, text: &str) -> bool {
        match self {
            ColumnBuilder::Text(b) => {
                b.append_value(text);
                true
            }
            ColumnBuilder::Date(b) => append_parsed(b, parse_date(text)),
            ColumnBuilder::Timestamp(b) => append_parsed(b, parse_timestamp(text)),
            ColumnBuilder::Int(b) => append_parsed(b, parse_integer(text)),
            ColumnBuilder::Long(b) => append_parsed(b, parse_integer(text)),
            ColumnBuilder::Double(b) => append_parsed(b, Float64Type::parse(text)),
            ColumnBuilder::Boolean(b) => {
                let value = parse_boolean(text);
                b.append_option(value);
                value.is_some()
            }
            ColumnBuilder::Decimal {
                builder,
                precision,
                scale,
            } => append_parsed(builder, parse_decimal(text, *precision, *scale)),
        }
    }

    /// Appends a null (an empty field).
    pub(super) fn append_null(&mut self) {
        match self {
            ColumnBuilder::Text(b) => b.append_null(),
            ColumnBuilder::Date(b) => b.append_null(),
            ColumnBuilder::Timestamp(b) => b.append_null(),
            ColumnBuilder::Int(b) => b.append_null(),
            ColumnBuilder::Long(b) => b.append_null(),
            ColumnBuilder::Double(b) => b.append_null(),
            ColumnBuilder::Boolean(b) => b.append_null(),
            ColumnBuilder::Decimal { builder, .. } => builder.append_null(),
        }
    }

    /// Appends the values of `other`, a builder of the same type.
    fn append_builder(&mut self, other: ColumnBuilder) -> Result<()> {
        match (self, other) {
            (ColumnBuilder::Text(b), ColumnBuilder::Text(mut o)) => b
                .append_array(&o.finish())
                .map_err(Error::arrow(Stage::Read))?,
            (ColumnBuilder::Date(b), ColumnBuilder::Date(mut o)) => b.append_array(&o.finish()),
            (ColumnBuilder::Timestamp(b), ColumnBuilder::Timestamp(mut o)) => {
                b.append_array(&o.finish())
            }
            (ColumnBuilder::Int(b), ColumnBuilder::Int(mut o)) => b.append_array(&o.finish()),
            (ColumnBuilder::Long(b), ColumnBuilder::Long(mut o)) => b.append_array(&o.finish()),
            (ColumnBuilder::Double(b), ColumnBuilder::Double(mut o)) => b.append_array(&o.finish()),
            (ColumnBuilder::Boolean(b), ColumnBuilder::Boolean(mut o)) => {
                b.append_array(&o.finish())
            }
            (
                ColumnBuilder::Decimal { builder, .. },
                ColumnBuilder::Decimal {
                    builder: mut other, ..
                },
            ) => builder.append_array(&other.finish()),
            _ => {
                return Err(Error::Internal(
                    "read: pieces of one column typed differently".to_string(),
                ));
            }
        }
        Ok(())
    }

    /// The finished column.
    pub(super) fn finish(self) -> Result<ArrayRef> {
        Ok(match self {
            ColumnBuilder::Text(mut b) => Arc::new(b.finish()),
            ColumnBuilder::Date(mut b) => Arc::new(b.finish()),
            ColumnBuilder::Timestamp(mut b) => Arc::new(b.finish()),
            ColumnBuilder::Int(mut b) => Arc::new(b.finish()),
            ColumnBuilder::Long(mut b) => Arc::new(b.finish()),
            ColumnBuilder::Double(mut b) => Arc::new(b.finish()),
            ColumnBuilder::Boolean(mut b) => Arc::new(b.finish()),
            ColumnBuilder::Decimal {
                mut builder,
                precision,
                scale,
            } => Arc::new(
                builder
                    .finish()
                    .with_precision_and_scale(precision, scale)
                    .map_err(Error::arrow(Stage::Read))?,
            ),
        })
    }
}

/// Rows (numbered from 0) whose value did not read, each with why.
pub(super) type Problems = Vec<(usize, String)>;

/// One file's rows being typed, one builder per contract column, with the
/// first problem of each row whose value did not read.
pub(super) struct TypedRows<'c> {
    columns: &'c [Column],
    builders: Vec<ColumnBuilder>,
    rows: usize,
    problems: Problems,
}

impl<'c> TypedRows<'c> {
    /// Empty rows of the contract's `columns`, room for `capacity`.
    pub(super) fn new(columns: &'c [Column], capacity: usize) -> TypedRows<'c> {
        TypedRows {
            columns,
            builders: columns
                .iter()
                .map(|c| ColumnBuilder::new(c.column_type, capacity))
                .collect(),
            rows: 0,
            problems: Vec::new(),
        }
    }

    /// Appends one record: its text per contract column, `None` for a null.
    pub(super) fn append<'v>(&mut self, values: impl Iterator<Item = Option<&'v str>>) {
        let mut problem = None;
        for ((builder, column), value) in self.builders.iter_mut().zip(self.columns).zip(values) {
            match value {
                None => builder.append_null(),
                Some(text) => {
                    if !builder.append(text) && problem.is_none() {
                        problem = Some(unreadable_reason(column, text));
                    }
                }
            }
        }
        if let Some(problem) = problem {
            self.problems.push((self.rows, problem));
        }
        self.rows += 1;
    }

    /// Appends `other`'s rows after these (its values are copied once).
    pub(super) fn append_rows(&mut self, other: TypedRows<'_>) -> Result<()> {
        for (mine, theirs) in self.builders.iter_mut().zip(other.builders) {
            mine.append_builder(theirs)?;
        }
        let offset = self.rows;
        self.problems.extend(
            other
                .problems
                .into_iter()
                .map(|(row, problem)| (row + offset, problem)),
        );
        self.rows += other.rows;
        Ok(())
    }

    /// The typed columns and the rows (numbered from 0) that had a problem.
    pub(super) fn finish(self) -> Result<(Vec<ArrayRef>, Problems)> {
        let columns = self
            .builders
            .into_iter()
            .map(ColumnBuilder::finish)
            .collect::<Result<_>>()?;
        Ok((columns, self.problems))
    }
}

fn append_parsed<T: arrow::datatypes::ArrowPrimitiveType>(
    builder: &mut arrow::array::PrimitiveBuilder<T>,
    value: Option<T::Native>,
) -> bool {
    builder.append_option(value);
    value.is_some()
}

/// Why a value could not be typed; the value of a sensitive column is not repeated.
pub(super) fn unreadable_reason(column: &Column, value: &str) -> String {
    let target = column.column_type.arrow_type();
    if column.sensitive {
        format!(
            "column '{}': cannot read the value as {target} (sensitive: value not shown)",
            column.name
        )
    } else {
        format!(
            "column '{}': cannot read '{value}' as {target}",
            column.name
        )
    }
}

/// `YYYY-MM-DD`, a real calendar day from 0001-01-01 to 9999-12-31 (the
/// range every Iceberg and Parquet reader takes), as days since 1970-01-01.
fn parse_date(text: &str) -> Option<i32> {
    let bytes = text.as_bytes();
    let canonical = bytes.len() == 10
        && bytes.iter().enumerate().all(|(i, b)| match i {
            4 | 7 => *b == b'-',
            _ => b.is_ascii_digit(),
        });
    if !canonical {
        return None;
    }
    let number = |range: std::ops::Range<usize>| {
        bytes[range]
            .iter()
            .fold(0u32, |n, b| n * 10 + u32::from(b - b'0'))
    };
    let year = i32::try_from(number(0..4)).ok().filter(|y| *y >= 1)?;
    let date = NaiveDate::from_ymd_opt(year, number(5..7), number(8..10))?;
    Some(chrono::Datelike::num_days_from_ce(&date) - UNIX_EPOCH_FROM_CE)
}

/// An instant as microseconds since 1970-01-01T00:00:00Z: RFC 3339 (with
/// `Z` or an offset, brought to UTC), or `YYYY-MM-DD HH:MM:SS` / with a `T`
/// and no offset, read as UTC; at most microsecond fractions, years 0001 to
/// 9999.
fn parse_timestamp(text: &str) -> Option<i64> {
    let bytes = text.as_bytes();
    // Year, month and day must be written out in full, as for a date.
    if bytes.len() < 19 || parse_date(text.get(..10)?).is_none() {
        return None;
    }
    let utc = match chrono::DateTime::parse_from_rfc3339(text) {
        Ok(instant) => instant.naive_utc(),
        Err(_) => {
            let naive = |format: &str| NaiveDateTime::parse_from_str(text, format).ok();
            naive("%Y-%m-%d %H:%M:%S%.f").or_else(|| naive("%Y-%m-%dT%H:%M:%S%.f"))?
        }
    };
    let year = chrono::Datelike::year(&utc);
    let whole_micros = chrono::Timelike::nanosecond(&utc) % 1_000 == 0;
    ((1..=9999).contains(&year) && whole_micros).then(|| utc.and_utc().timestamp_micros())
}

/// An optional sign and plain digits, within the type's range.
fn parse_integer<T: std::str::FromStr>(text: &str) -> Option<T> {
    // `str::parse` for integers accepts exactly `[+-]?[0-9]+`.
    text.parse().ok()
}

/// `true`/`false` and the spellings Arrow's cast accepts, in any case.
fn parse_boolean(text: &str) -> Option<bool> {
    let is = |spellings: &[&str]| spellings.iter().any(|s| s.eq_ignore_ascii_case(text));
    if is(&["t", "true", "y", "yes", "on", "1"]) {
        Some(true)
    } else if is(&["f", "false", "n", "no", "off", "0"]) {
        Some(false)
    } else {
        None
    }
}

/// An optional sign, digits, and at most `scale` digits after a point, with
/// at most `precision` digits in all; unscaled.
fn parse_decimal(text: &str, precision: u8, scale: i8) -> Option<i128> {
    let scale = usize::try_from(scale).ok()?;
    let (negative, number) = match text.as_bytes().first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    let (whole, fraction) = match number.split_once('.') {
        Some((whole, fraction)) if !fraction.is_empty() => (whole, fraction),
        Some(_) => return None,
        None => (number, ""),
    };
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if whole.is_empty() || !digits(whole) || !digits(fraction) || fraction.len() > scale {
        return None;
    }
    let mut value: i128 = 0;
    for b in whole.bytes().chain(fraction.bytes()) {
        value = value.checked_mul(10)?.checked_add(i128::from(b - b'0'))?;
    }
    for _ in fraction.len()..scale {
        value = value.checked_mul(10)?;
    }
    let limit = 10i128.checked_pow(u32::from(precision))?;
    if value >= limit {
        return None;
    }
    Some(if negative { -value } else { value })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_must_be_canonical_calendar_days() {
        assert_eq!(parse_date("1970-01-02"), Some(1));
        assert_eq!(parse_date("2024-02-29"), Some(19_782));
        assert_eq!(parse_date("0001-01-01"), Some(1 - UNIX_EPOCH_FROM_CE));
        assert!(parse_date("9999-12-31").is_some());
        for bad in [
            "2026-02-30",
            "2026-03-3x",
            "2026-3-31",
            "20260331",
            "0000-01-01",
            "0000-12-31",
            "",
            " 2026-03-31",
        ] {
            assert_eq!(parse_date(bad), None, "{bad}");
        }
    }

    #[test]
    fn timestamps_read_rfc3339_and_plain_utc() {
        let noon = 1_769_860_800_000_000; // 2026-01-31T12:00:00Z
        for text in [
            "2026-01-31T12:00:00Z",
            "2026-01-31T14:00:00+02:00",
            "2026-01-31 12:00:00",
            "2026-01-31T12:00:00",
            "2026-01-31 12:00:00.000000",
        ] {
            assert_eq!(parse_timestamp(text), Some(noon), "{text}");
        }
        assert_eq!(
            parse_timestamp("2026-01-31 12:00:00.25"),
            Some(noon + 250_000)
        );
        for bad in [
            "2026-01-31",
            "2026-02-30 12:00:00",
            "2026-1-31 12:00:00",
            "2026-01-31 24:00:00",
            "2026-01-31 12:00:00.0000001",
            "0000-01-01 00:00:00",
            "2026-01-31 12:00",
            " 2026-01-31 12:00:00",
            "2026-01-31 12:00:00 UTC",
        ] {
            assert_eq!(parse_timestamp(bad), None, "{bad}");
        }
    }

    #[test]
    fn decimals_keep_scale_and_precision() {
        assert_eq!(parse_decimal("1.50", 18, 2), Some(150));
        assert_eq!(parse_decimal("-2", 18, 2), Some(-200));
        assert_eq!(parse_decimal("+0.5", 18, 2), Some(50));
        assert_eq!(
            parse_decimal("9999999999999999.99", 18, 2),
            Some(999_999_999_999_999_999)
        );
        for bad in [
            "1.005",
            "x1",
            "1.",
            ".5",
            "1e3",
            "",
            "-",
            "10000000000000000",
            "1,5",
        ] {
            assert_eq!(parse_decimal(bad, 18, 2), None, "{bad}");
        }
    }

    #[test]
    fn integers_take_a_sign_and_digits_only() {
        assert_eq!(parse_integer::<i32>("+7"), Some(7));
        assert_eq!(parse_integer::<i32>("-007"), Some(-7));
        for bad in ["1.0", " 1", "1e2", "", "2147483648"] {
            assert_eq!(parse_integer::<i32>(bad), None, "{bad}");
        }
        assert_eq!(parse_integer::<i64>("2147483648"), Some(2_147_483_648));
    }

    #[test]
    fn booleans_read_in_any_case() {
        assert_eq!(parse_boolean("TRUE"), Some(true));
        assert_eq!(parse_boolean("no"), Some(false));
        assert_eq!(parse_boolean("maybe"), None);
    }
}
