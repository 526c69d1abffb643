//! Typing: one text value at a time into its contract column's Arrow builder,
//! each value read as `config/values.rs` defines (stricter than Arrow's casts:
//! dates `YYYY-MM-DD`, integers an optional sign and plain digits, decimals at
//! most `scale` places and `precision` digits). A value that does not read is
//! null in the column and a problem of its row.

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
            ColumnBuilder::Double(b) => append_parsed(b, parse_double(text)),
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
