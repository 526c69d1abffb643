//! Read: schema-on-read of a drop's files with the dataset contract.
//!
//! In: the drop's files (bytes). Out: a [`Batch`]: typed rows carrying their
//! file and line, plus every record that could not be parsed as a
//! [`ParseReject`] with its file, line, raw text and reason. A record is never
//! skipped and never crashes the run: `received` counts every one of them
//! (DESIGN.md invariant 1).

mod csv_format;
mod parquet_format;

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, BooleanArray, Int64Array, StringArray};
use arrow::compute::{CastOptions, cast_with_options, filter_record_batch};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::record_batch::RecordBatch;

use crate::config::contract::{Column, ColumnType, Contract};
use crate::error::{Error, Result};
use crate::pipeline::claim::DropFile;
use crate::transient::{SOURCE_FILE, SOURCE_LINE};

/// The name of the parse rule, as it appears in dq_error files and summaries.
pub const PARSE_RULE: &str = "parse";

/// The drop, read.
#[derive(Debug)]
pub struct Batch {
    /// Typed rows: the contract's columns plus `_source_file` and `_source_line`.
    pub rows: RecordBatch,
    /// Records that could not be parsed.
    pub rejects: Vec<ParseReject>,
    /// Every record received, parsed or not.
    pub received: u64,
}

/// A record that could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseReject {
    /// File, relative to the drop.
    pub file: String,
    /// Line (CSV, 1-based, where the record starts) or row number (Parquet, 1-based).
    pub line: u64,
    /// The record as it was in the file.
    pub raw: String,
    /// Why it could not be parsed.
    pub reason: String,
}

/// One file's records as text, one column per contract column (`None` when the
/// file lacks a nullable column), before typing.
struct TextTable {
    file: String,
    columns: Vec<Option<StringArray>>,
    lines: Vec<u64>,
    raws: RawText,
    rejects: Vec<ParseReject>,
}

/// Where the raw text of a typed row comes from, materialised only for the
/// rows that turn out to be rejects (never for every row on the hot path).
enum RawText {
    /// Byte spans of each record in the file's bytes (CSV).
    Spans(bytes::Bytes, Vec<(u64, u64)>),
    /// The row's text columns joined with commas (Parquet).
    Columns,
}

impl TextTable {
    fn raw(&self, row: usize) -> String {
        match &self.raws {
            RawText::Spans(bytes, spans) => {
                let (start, end) = spans[row];
                csv_format::raw_text(bytes, start, end)
            }
            RawText::Columns => parquet_format::raw_row(&self.columns, row),
        }
    }
}

/// The schema of read rows: the contract plus the row's provenance.
pub fn batch_schema(contract: &Contract) -> SchemaRef {
    let mut fields = contract.arrow_fields();
    fields.push(Field::new(SOURCE_FILE, DataType::Utf8, true));
    fields.push(Field::new(SOURCE_LINE, DataType::Int64, true));
    Arc::new(Schema::new(fields))
}

/// Reads every file of the drop into one [`Batch`].
pub fn read_drop(contract: &Contract, files: &[DropFile]) -> Result<Batch> {
    let schema = batch_schema(contract);
    let mut parts = Vec::with_capacity(files.len());
    let mut rejects = Vec::new();
    let mut received = 0u64;
    for file in files {
        let table = read_text_table(contract, file)?;
        received += (table.lines.len() + table.rejects.len()) as u64;
        let (rows, file_rejects) = type_rows(contract, &schema, table)?;
        rejects.extend(file_rejects);
        parts.push(rows);
    }
    let rows = match parts.len() {
        1 => parts.remove(0),
        _ => arrow::compute::concat_batches(&schema, &parts).map_err(Error::arrow("read"))?,
    };
    rejects.sort_by(|a, b| (&a.file, a.line).cmp(&(&b.file, b.line)));
    Ok(Batch {
        rows,
        rejects,
        received,
    })
}

fn read_text_table(contract: &Contract, file: &DropFile) -> Result<TextTable> {
    let lower = file.name.to_ascii_lowercase();
    if lower.ends_with(".csv") {
        csv_format::read(contract, file)
    } else if lower.ends_with(".parquet") {
        parquet_format::read(contract, file)
    } else {
        Err(Error::BadDrop {
            location: file.name.clone(),
            reason: "unknown file format (expected .csv or .parquet)".to_string(),
        })
    }
}

/// Checks that the file's columns cover the contract; returns, per contract
/// column, its index in the file (`None` for an absent nullable column).
fn map_header(contract: &Contract, file: &str, header: &[String]) -> Result<Vec<Option<usize>>> {
    let mut missing = Vec::new();
    let positions = contract
        .columns
        .iter()
        .map(|c| {
            let position = header.iter().position(|h| h.trim() == c.name);
            if position.is_none() && !c.nullable {
                missing.push(c.name.clone());
            }
            position
        })
        .collect();
    if missing.is_empty() {
        return Ok(positions);
    }
    Err(Error::BadDrop {
        location: file.to_string(),
        reason: format!(
            "required column(s) missing from the header: {}",
            missing.join(", ")
        ),
    })
}

/// Why a value could not be typed; the value of a sensitive column is not repeated.
fn unreadable_reason(column: &Column, value: &str, target: &DataType) -> String {
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

/// Casts the text columns to the contract's types. A value that does not cast
/// makes its whole record a parse reject naming the column and the value.
fn type_rows(
    contract: &Contract,
    schema: &SchemaRef,
    table: TextTable,
) -> Result<(RecordBatch, Vec<ParseReject>)> {
    let rows = table.lines.len();
    let mut reasons: Vec<Option<String>> = vec![None; rows];
    let mut columns: Vec<ArrayRef> = Vec::with_capacity(schema.fields().len());
    for (typed, problems) in type_columns(contract, &table)? {
        for (row, reason) in problems {
            reasons[row].get_or_insert(reason);
        }
        columns.push(typed);
    }
    columns.push(Arc::new(StringArray::from(vec![table.file.as_str(); rows])));
    columns.push(Arc::new(Int64Array::from_iter_values(
        table.lines.iter().map(|l| *l as i64),
    )));
    let all = RecordBatch::try_new(schema.clone(), columns).map_err(Error::arrow("read"))?;
    let good = if reasons.iter().all(Option::is_none) {
        all
    } else {
        let keep = BooleanArray::from(reasons.iter().map(|r| r.is_none()).collect::<Vec<_>>());
        filter_record_batch(&all, &keep).map_err(Error::arrow("read"))?
    };
    let mut rejects: Vec<ParseReject> = reasons
        .into_iter()
        .enumerate()
        .filter_map(|(row, reason)| {
            reason.map(|reason| ParseReject {
                file: table.file.clone(),
                line: table.lines[row],
                raw: table.raw(row),
                reason,
            })
        })
        .collect();
    rejects.extend(table.rejects);
    Ok((good, rejects))
}

/// `text` without its sign.
fn unsigned(text: &str) -> &str {
    text.strip_prefix(['+', '-']).unwrap_or(text)
}

/// One contract column, typed, with the rows whose value does not read.
type TypedColumn = (ArrayRef, Vec<(usize, String)>);

/// Types every column, spread over the machine's cores (columns are independent).
fn type_columns(contract: &Contract, table: &TextTable) -> Result<Vec<TypedColumn>> {
    let rows = table.lines.len();
    let jobs: Vec<(&Column, Option<&StringArray>)> = contract
        .columns
        .iter()
        .zip(table.columns.iter().map(Option::as_ref))
        .collect();
    let lanes = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .clamp(1, jobs.len().max(1));
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..lanes)
            .map(|lane| {
                let jobs = &jobs;
                scope.spawn(move || {
                    jobs.iter()
                        .enumerate()
                        .filter(|(i, _)| i % lanes == lane)
                        .map(|(i, (column, text))| Ok((i, type_column(column, *text, rows)?)))
                        .collect::<Result<Vec<_>>>()
                })
            })
            .collect();
        let mut typed = Vec::with_capacity(jobs.len());
        for handle in handles {
            let done = handle
                .join()
                .map_err(|_| Error::Internal("read: a typing thread panicked".to_string()))??;
            typed.extend(done);
        }
        typed.sort_by_key(|(i, _)| *i);
        Ok(typed.into_iter().map(|(_, column)| column).collect())
    })
}

/// Casts one text column to its contract type; a value that does not cast, or
/// is not written canonically, is a problem of its row.
fn type_column(column: &Column, text: Option<&StringArray>, rows: usize) -> Result<TypedColumn> {
    let target = column.column_type.arrow_type();
    let Some(text) = text else {
        return Ok((arrow::array::new_null_array(&target, rows), Vec::new()));
    };
    let options = CastOptions {
        safe: true,
        ..CastOptions::default()
    };
    let typed = cast_with_options(text, &target, &options).map_err(Error::arrow("read"))?;
    if column.column_type == ColumnType::String {
        return Ok((typed, Vec::new()));
    }
    let problems = (0..rows)
        .filter(|row| {
            text.is_valid(*row)
                && (typed.is_null(*row) || !is_canonical(column.column_type, text.value(*row)))
        })
        .map(|row| (row, unreadable_reason(column, text.value(row), &target)))
        .collect();
    Ok((typed, problems))
}

/// Arrow's casts are lenient (a date like `2026-10-3x` reads as the 3rd, a
/// decimal with too many places is rounded); the contract is not. Dates must be
/// `YYYY-MM-DD`, integers plain digits, decimals at most `scale` places.
fn is_canonical(column_type: ColumnType, text: &str) -> bool {
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    match column_type {
        ColumnType::Date => {
            let bytes = text.as_bytes();
            bytes.len() == 10
                && bytes.iter().enumerate().all(|(i, b)| match i {
                    4 | 7 => *b == b'-',
                    _ => b.is_ascii_digit(),
                })
        }
        ColumnType::Int | ColumnType::Long => digits(unsigned(text)),
        ColumnType::Decimal { scale, .. } => {
            let number = unsigned(text);
            match number.split_once('.') {
                None => digits(number),
                Some((whole, fraction)) => {
                    digits(whole) && digits(fraction) && fraction.len() <= scale as usize
                }
            }
        }
        ColumnType::String | ColumnType::Double | ColumnType::Boolean => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(super) fn contract() -> Contract {
        let column = |name: &str, column_type, nullable| Column {
            name: name.to_string(),
            column_type,
            nullable,
            sensitive: false,
        };
        Contract {
            name: "t".to_string(),
            columns: vec![
                column("id", ColumnType::String, false),
                column("day", ColumnType::Date, false),
                column(
                    "amount",
                    ColumnType::Decimal {
                        precision: 18,
                        scale: 2,
                    },
                    false,
                ),
                column("note", ColumnType::String, true),
            ],
            entity_key: vec!["id".to_string()],
            order_column: "day".to_string(),
            contributor_column: "id".to_string(),
        }
    }

    pub(super) fn file(name: &str, bytes: &[u8]) -> DropFile {
        DropFile {
            name: name.to_string(),
            bytes: bytes::Bytes::copy_from_slice(bytes),
        }
    }

    #[test]
    fn a_value_that_does_not_cast_rejects_its_record_with_column_and_value() {
        let csv = "id,day,amount\nA,2026-01-31,1.50\nB,2026-02-30,2\nC,2026-03-31,x1\nD,2026-03-3x,1\nE,2026-03-31,1.005\n";
        let batch = read_drop(&contract(), &[file("a.csv", csv.as_bytes())]).unwrap();
        assert_eq!(batch.received, 5);
        assert_eq!(batch.rows.num_rows(), 1);
        let reasons: Vec<(u64, &str)> = batch
            .rejects
            .iter()
            .map(|r| (r.line, r.reason.as_str()))
            .collect();
        assert_eq!(
            reasons,
            vec![
                (3, "column 'day': cannot read '2026-02-30' as Date32"),
                (4, "column 'amount': cannot read 'x1' as Decimal128(18, 2)"),
                (5, "column 'day': cannot read '2026-03-3x' as Date32"),
                (
                    6,
                    "column 'amount': cannot read '1.005' as Decimal128(18, 2)"
                ),
            ]
        );
        assert_eq!(batch.rejects[0].raw, "B,2026-02-30,2");
    }

    #[test]
    fn a_missing_required_column_is_a_bad_drop_naming_file_and_column() {
        let csv = "id,amount\nA,1\n";
        let err = read_drop(&contract(), &[file("x.csv", csv.as_bytes())]).unwrap_err();
        let text = err.to_string();
        assert!(text.contains("x.csv") && text.contains("day"), "{text}");
    }
}
