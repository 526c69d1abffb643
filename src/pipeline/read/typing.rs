//! Typing: text values into their contract columns' Arrow builders, a
//! column at a time (its type matched once for the column), each value read
//! as `config/values.rs` defines (stricter than Arrow's casts: dates
//! `YYYY-MM-DD`, integers an optional sign and plain digits, decimals at most
//! `scale` places and `precision` digits). A value that does not read is null
//! in the column and a problem of its row.

use std::sync::Arc;

use arrow::array::{
    ArrayRef, BooleanBuilder, Date32Builder, Decimal128Builder, Float64Builder, Int32Builder,
    Int64Builder, StringBuilder, TimestampMicrosecondBuilder,
};

use crate::config::contract::{Column, ColumnType};
use crate::config::values::{
    parse_boolean, parse_date, parse_decimal, parse_double, parse_integer, parse_timestamp,
};
use crate::error::{Error, Result};
use crate::stage::Stage;

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
                ColumnBuilder::Text(StringBuilder::with_capacity(capacity, capacity * 16))
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

    /// Appends `values` typed, `None` as a null; calls `unread` with the
    /// index (among `values`) and text of each value that does not read
    /// (a null is appended for it). One loop per column type: the type is
    /// matched once per column, not once per value.
    pub(super) fn append_values<'v>(
        &mut self,
        values: impl Iterator<Item = Option<&'v str>>,
        unread: &mut dyn FnMut(usize, &'v str),
    ) {
        match self {
            ColumnBuilder::Text(b) => values.for_each(|v| b.append_option(v)),
            ColumnBuilder::Date(b) => {
                append_typed(values, parse_date, |v| b.append_option(v), unread)
            }
            ColumnBuilder::Timestamp(b) => {
                append_typed(values, parse_timestamp, |v| b.append_option(v), unread)
            }
            ColumnBuilder::Int(b) => {
                append_typed(values, parse_integer, |v| b.append_option(v), unread)
            }
            ColumnBuilder::Long(b) => {
                append_typed(values, parse_integer, |v| b.append_option(v), unread)
            }
            ColumnBuilder::Double(b) => {
                append_typed(values, parse_double, |v| b.append_option(v), unread)
            }
            ColumnBuilder::Boolean(b) => {
                append_typed(values, parse_boolean, |v| b.append_option(v), unread);
            }
            ColumnBuilder::Decimal {
                builder,
                precision,
                scale,
            } => {
                let (precision, scale) = (*precision, *scale);
                append_typed(
                    values,
                    |text| parse_decimal(text, precision, scale),
                    |v| builder.append_option(v),
                    unread,
                );
            }
        }
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

/// One CSV piece's (or Parquet chunk's) rows being typed, one builder per
/// contract column, with the first problem of each row whose value did not
/// read.
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

    /// Appends `rows` records, column by column: `value(row, column)` is
    /// the text of contract column `column` in record `row` (0-based among
    /// these), `None` for a null. A record's problem is that of its first
    /// column (in the contract's order) whose value does not read.
    pub(super) fn append_by_column<'v>(
        &mut self,
        rows: usize,
        value: impl Fn(usize, usize) -> Option<&'v str>,
    ) {
        let mut problems: Vec<(usize, String)> = Vec::new();
        let mut has_problem: Vec<bool> = Vec::new();
        for (c, (builder, column)) in self.builders.iter_mut().zip(self.columns).enumerate() {
            builder.append_values((0..rows).map(|row| value(row, c)), &mut |row, text| {
                if has_problem.is_empty() {
                    has_problem = vec![false; rows];
                }
                if !std::mem::replace(&mut has_problem[row], true) {
                    problems.push((row, unreadable_reason(column, text)));
                }
            });
        }
        problems.sort_unstable_by_key(|(row, _)| *row);
        let offset = self.rows;
        self.problems
            .extend(problems.into_iter().map(|(row, why)| (row + offset, why)));
        self.rows += rows;
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

/// Hands `push` each of `values` parsed by `parse`, `None` for a null or a
/// value that does not read (see
/// [`ColumnBuilder::append_values`]).
fn append_typed<'v, T>(
    values: impl Iterator<Item = Option<&'v str>>,
    parse: impl Fn(&str) -> Option<T>,
    mut push: impl FnMut(Option<T>),
    unread: &mut dyn FnMut(usize, &'v str),
) {
    for (i, value) in values.enumerate() {
        let Some(text) = value else {
            push(None);
            continue;
        };
        let typed = parse(text);
        let read = typed.is_some();
        push(typed);
        if !read {
            unread(i, text);
        }
    }
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
