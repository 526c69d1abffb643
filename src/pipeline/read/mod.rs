//! Read: schema-on-read of a drop's files with the dataset contract.
//!
//! In: the drop's files (bytes). Out: a [`Batch`]: typed rows carrying their
//! file and line, plus every record that could not be parsed as a
//! [`ParseReject`] with its file, line, raw text and reason. A record is never
//! skipped and never crashes the run: `received` counts every one of them
//! (DESIGN.md invariant 1).

mod compression;
mod csv_format;
mod drop_rows;
mod parquet_format;
mod typing;

pub(crate) use drop_rows::reject_columns;
pub use drop_rows::{DropRows, DropRowsWriter};

use std::path::Path;
use std::sync::Arc;

use arrow::array::{ArrayRef, BooleanArray, Int64Array};
use arrow::compute::filter_record_batch;
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::record_batch::RecordBatch;

use crate::config::contract::{Contract, ExtraColumns, HeaderCase};
use crate::core::drop::DropFile;
use crate::core::keys::Buckets;
use crate::core::spill::SpillDir;
use crate::core::sql::MemoryBudget;
use crate::error::{Error, Result};
use crate::pipeline::summary::{SchemaDrift, Summary};
use crate::stage::Stage;
use crate::transient::{SOURCE_FILE, SOURCE_LINE};

/// The name of the parse rule, as it appears in dq_error files and summaries.
pub const PARSE_RULE: &str = "parse";

/// The drop, read.
#[derive(Debug)]
pub struct Batch {
    /// Typed rows: the contract's columns plus `_source_file` and
    /// `_source_line`, by bucket of entities, and the records that could
    /// not be parsed.
    pub rows: DropRows,
    /// Every record received, parsed or not.
    pub received: u64,
    /// Files whose columns differ from the contract's.
    pub drift: Vec<SchemaDrift>,
}

impl Batch {
    /// The drop's rows and what else the read found.
    pub fn of(rows: DropRows, tally: Tally) -> Batch {
        Batch {
            rows,
            received: tally.received,
            drift: tally.drift,
        }
    }

    /// Records what was read in the summary and the log.
    pub fn record(&self, summary: &mut Summary) {
        summary.counts.received = self.received;
        for drift in &self.drift {
            tracing::warn!(
                file = %drift.file,
                extra_columns = %drift.extra_columns.join(","),
                missing_columns = %drift.missing_columns.join(","),
                "schema drift: the file's columns differ from the contract's"
            );
        }
        summary.schema_drift = self.drift.clone();
        summary.column_nulls = Some(self.rows.column_nulls().clone());
        tracing::info!(
            received = self.received,
            parse_rejects = self.rows.rejected(),
            "read"
        );
    }
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

/// One file's records, typed: one column per contract column (all nulls
/// when the file lacks a nullable column), with the rows whose value did not
/// read.
struct TypedTable {
    file: String,
    columns: Vec<ArrayRef>,
    lines: Vec<u64>,
    /// Rows (by index) with a value that did not read, and why.
    problems: typing::Problems,
    raws: RawText,
    rejects: Vec<ParseReject>,
    /// How the file's columns differ from the contract's.
    drift: SchemaDrift,
}

/// Where the raw text of a typed row comes from, materialised only for the
/// rows that turn out to be rejects (never for every row on the hot path).
enum RawText {
    /// Byte spans of each record in the file's bytes (CSV).
    Spans(bytes::Bytes, Vec<(u64, u64)>),
    /// The file's column per contract column (Parquet): the row's values
    /// as text, joined with commas.
    Columns(Vec<Option<ArrayRef>>),
}

impl TypedTable {
    fn raw(&self, row: usize) -> String {
        match &self.raws {
            RawText::Spans(bytes, spans) => {
                let (start, end) = spans[row];
                csv_format::raw_text(bytes, start, end)
            }
            RawText::Columns(columns) => parquet_format::raw_row(columns, row),
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

/// Reads every file of the drop (as [`as_parsed`] made them), handing
/// `rows` its typed rows and its parse rejects a chunk at a time; returns
/// what was read besides them.
fn read_drop_into(
    contract: &Contract,
    files: &[DropFile],
    rows: &mut DropRowsWriter,
) -> Result<Tally> {
    let schema = batch_schema(contract);
    let mut tally = Tally::default();
    for file in files {
        read_typed_chunks(contract, file, &mut |mut table| {
            tally.received += (table.lines.len() + table.rejects.len()) as u64;
            if !table.drift.extra_columns.is_empty() || !table.drift.missing_columns.is_empty() {
                tally.drift.push(std::mem::take(&mut table.drift));
            }
            let (good, rejects) = keep_readable_rows(&schema, table)?;
            rows.reject(rejects)?;
            rows.add(&good)
        })?;
    }
    Ok(tally)
}

/// What a read found besides the rows and the rejects.
#[derive(Debug, Default)]
pub struct Tally {
    /// Every record received, parsed or not.
    pub received: u64,
    /// Files whose columns differ from the contract's.
    pub drift: Vec<SchemaDrift>,
}

/// Reads every file of the drop into one [`Batch`] held in memory, as one
/// bucket.
pub fn read_drop(contract: &Contract, files: &[DropFile]) -> Result<Batch> {
    let files = as_parsed(files, None)?;
    read_into(contract, &files, (Buckets::new(1), SpillDir::in_memory()))
}

/// Reads every file of the drop into a [`Batch`] split into as many buckets
/// of entities as `budget` needs (`[resources]`), spilled to its scratch
/// folder when there are several.
pub fn read_drop_in_buckets(
    contract: &Contract,
    files: &[DropFile],
    budget: &MemoryBudget,
) -> Result<Batch> {
    let scratch = budget.scratch_dir.as_deref();
    let files = as_parsed(files, scratch)?;
    let rows = files.iter().map(estimated_rows).sum();
    let buckets = Buckets::for_rows(rows, (budget.bytes, budget.bucket_rows))
        .hashing(contract.bucket_key_parts());
    if buckets.count() > 1 {
        tracing::info!(
            buckets = buckets.count(),
            estimated_rows = rows,
            "judging the drop in buckets of entities (resources.memory_limit, resources.bucket_rows)"
        );
    }
    let dir = SpillDir::new(buckets.count() > 1, budget.spilling())?;
    read_into(contract, &files, (buckets, dir))
}

/// The drop's files as they are parsed, by name (the order the rows set
/// aside are written in): a compressed CSV decompressed into `scratch` (the
/// system's temporary folder when `None`) under its own name, so that its
/// lines are counted like a plain file's; any other file as it is.
fn as_parsed(files: &[DropFile], scratch: Option<&Path>) -> Result<Vec<DropFile>> {
    let mut by_name: Vec<&DropFile> = files.iter().collect();
    by_name.sort_by(|a, b| a.name.cmp(&b.name));
    by_name
        .into_iter()
        .map(|file| {
            let lower = file.name.to_ascii_lowercase();
            if lower.ends_with(".parquet") || !compression::is_csv(&lower) {
                return Ok(file.clone());
            }
            let plain = compression::decompressed(&lower, file, scratch)?;
            Ok(plain.unwrap_or_else(|| file.clone()))
        })
        .collect()
}

fn read_into(
    contract: &Contract,
    files: &[DropFile],
    (buckets, dir): (Buckets, SpillDir),
) -> Result<Batch> {
    let mut rows = DropRows::writer(contract, buckets, dir)?;
    let tally = read_drop_into(contract, files, &mut rows)?;
    Ok(Batch::of(rows.finish()?, tally))
}

/// About how many records `file` (as parsed) holds: its lines (a CSV) or
/// its rows (Parquet).
fn estimated_rows(file: &DropFile) -> usize {
    let lower = file.name.to_ascii_lowercase();
    if lower.ends_with(".parquet") {
        return parquet_format::rows(file).unwrap_or(0);
    }
    let mut lines = 0;
    for start in (0..file.bytes.len()).step_by(COUNT_WINDOW) {
        let end = (start + COUNT_WINDOW).min(file.bytes.len());
        lines += memchr::memchr_iter(b'\n', &file.bytes[start..end]).count();
        file.release(start..end);
    }
    lines
}

/// Bytes of a file counted at once, then handed back to the system.
const COUNT_WINDOW: usize = 64 << 20;

/// Parses one file of the drop as [`as_parsed`] made it.
fn read_typed_chunks(
    contract: &Contract,
    file: &DropFile,
    chunk: &mut dyn FnMut(TypedTable) -> Result<()>,
) -> Result<()> {
    let lower = file.name.to_ascii_lowercase();
    if lower.ends_with(".parquet") {
        return parquet_format::read(contract, file, chunk);
    }
    if !compression::is_csv(&lower) {
        return Err(Error::BadDrop {
            location: file.name.clone(),
            reason: "unknown file format (expected .csv, .csv.gz, .csv.zst or .parquet)"
                .to_string(),
        });
    }
    csv_format::read(contract, file, chunk)
}

/// Checks that the file's columns cover the contract, each named once;
/// returns, per contract column, its index in the file (`None` for an absent
/// nullable column), with how the file's columns differ from the contract's.
/// `file` is the file, `location` the file (and line) of the header.
fn map_header(
    contract: &Contract,
    (file, location): (&str, &str),
    header: &[String],
) -> Result<(Vec<Option<usize>>, SchemaDrift)> {
    let input = contract.input;
    let names = |h: &str, name: &str| match input.header_case {
        HeaderCase::Exact => h.trim() == name,
        HeaderCase::Insensitive => h.trim().eq_ignore_ascii_case(name),
    };
    let mut missing = Vec::new();
    let mut repeated = Vec::new();
    let mut drift = SchemaDrift {
        file: file.to_string(),
        ..SchemaDrift::default()
    };
    let positions: Vec<Option<usize>> = contract
        .columns
        .iter()
        .map(|c| {
            let mut found = header.iter().enumerate().filter(|(_, h)| names(h, &c.name));
            let position = found.next().map(|(i, _)| i);
            if found.next().is_some() {
                repeated.push(c.name.clone());
            }
            if position.is_none() {
                match c.nullable {
                    true => drift.missing_columns.push(c.name.clone()),
                    false => missing.push(c.name.clone()),
                }
            }
            position
        })
        .collect();
    if input.on_extra_columns != ExtraColumns::Ignore {
        drift.extra_columns = header
            .iter()
            .enumerate()
            .filter(|(i, _)| !positions.contains(&Some(*i)))
            .filter(|(_, h)| !contract.columns.iter().any(|c| names(h, &c.name)))
            .map(|(_, h)| h.trim().to_string())
            .collect();
    }
    let mut problems = Vec::new();
    if !missing.is_empty() {
        let other_case = input.header_case == HeaderCase::Exact
            && missing
                .iter()
                .any(|m| header.iter().any(|h| h.trim().eq_ignore_ascii_case(m)));
        problems.push(format!(
            "required column(s) missing from the header: {}{}",
            missing.join(", "),
            if other_case {
                " (the header names some in another case: set dataset.header_case = \"insensitive\" to match them)"
            } else {
                ""
            }
        ));
    }
    if !repeated.is_empty() {
        problems.push(format!(
            "column(s) named more than once in the header (which copy holds the value is unknown): {}",
            repeated.join(", ")
        ));
    }
    if input.on_extra_columns == ExtraColumns::Fail && !drift.extra_columns.is_empty() {
        problems.push(format!(
            "column(s) not in the contract (dataset.on_extra_columns = \"fail\"): {}",
            drift.extra_columns.join(", ")
        ));
    }
    if problems.is_empty() {
        return Ok((positions, drift));
    }
    Err(Error::BadDrop {
        location: location.to_string(),
        reason: problems.join("; "),
    })
}

/// The table's rows that read, with their provenance; every row with a
/// problem becomes a parse reject naming the column and the value.
fn keep_readable_rows(
    schema: &SchemaRef,
    table: TypedTable,
) -> Result<(RecordBatch, Vec<ParseReject>)> {
    let rows = table.lines.len();
    let mut columns = table.columns.clone();
    columns.push(Arc::new(crate::transient::repeated_text(&table.file, rows)));
    columns.push(Arc::new(Int64Array::from_iter_values(
        table.lines.iter().map(|l| *l as i64),
    )));
    let all = RecordBatch::try_new(schema.clone(), columns).map_err(Error::arrow(Stage::Read))?;
    let good = if table.problems.is_empty() {
        all
    } else {
        let mut keep = vec![true; rows];
        for (row, _) in &table.problems {
            keep[*row] = false;
        }
        filter_record_batch(&all, &BooleanArray::from(keep)).map_err(Error::arrow(Stage::Read))?
    };
    let mut rejects: Vec<ParseReject> = table
        .problems
        .iter()
        .map(|(row, reason)| ParseReject {
            file: table.file.clone(),
            line: table.lines[*row],
            raw: table.raw(*row),
            reason: reason.clone(),
        })
        .collect();
    rejects.extend(table.rejects);
    Ok((good, rejects))
}

#[cfg(test)]
impl Batch {
    /// Every parse reject, in file order.
    pub(crate) fn rejects(&self) -> Vec<ParseReject> {
        use drop_rows::reject_columns::{FILE, LINE, RAW, REASON};
        let mut rejects = Vec::new();
        for batch in self.rows.rejects().unwrap() {
            let batch = batch.unwrap();
            let text = |i: usize| {
                batch
                    .column(i)
                    .as_any()
                    .downcast_ref::<arrow::array::StringArray>()
                    .unwrap()
                    .clone()
            };
            let lines = batch
                .column(LINE)
                .as_any()
                .downcast_ref::<Int64Array>()
                .unwrap()
                .clone();
            let (files, raws, reasons) = (text(FILE), text(RAW), text(REASON));
            for row in 0..batch.num_rows() {
                rejects.push(ParseReject {
                    file: files.value(row).to_string(),
                    line: lines.value(row) as u64,
                    raw: raws.value(row).to_string(),
                    reason: reasons.value(row).to_string(),
                });
            }
        }
        rejects.sort_by(|a, b| (&a.file, a.line).cmp(&(&b.file, b.line)));
        rejects
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::contract::{Column, ColumnType};

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
            input: Default::default(),
        }
    }

    pub(super) fn file(name: &str, bytes: &[u8]) -> DropFile {
        DropFile::new(name, bytes::Bytes::copy_from_slice(bytes))
    }

    #[test]
    fn a_value_that_does_not_cast_rejects_its_record_with_column_and_value() {
        let csv = "id,day,amount\nA,2026-01-31,1.50\nB,2026-02-30,2\nC,2026-03-31,x1\nD,2026-03-3x,1\nE,2026-03-31,1.005\n";
        let batch = read_drop(&contract(), &[file("a.csv", csv.as_bytes())]).unwrap();
        assert_eq!(batch.received, 5);
        assert_eq!(batch.rows.num_rows(), 1);
        let rejects = batch.rejects();
        let reasons: Vec<(u64, &str)> = rejects
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
        assert_eq!(batch.rejects()[0].raw, "B,2026-02-30,2");
    }

    #[test]
    fn a_column_named_twice_is_a_bad_drop_naming_file_line_and_column() {
        let csv = "id,day,amount,day\nA,2026-01-31,1,2026-02-28\n";
        let err = read_drop(&contract(), &[file("x.csv", csv.as_bytes())]).unwrap_err();
        let text = err.to_string();
        assert!(matches!(err, Error::BadDrop { .. }), "{text}");
        assert!(
            text.contains("x.csv:1") && text.contains("more than once") && text.contains("day"),
            "{text}"
        );
    }

    #[test]
    fn a_year_zero_date_is_a_parse_reject() {
        let csv = "id,day,amount\nA,0000-01-01,1\nB,0001-01-01,1\nC,9999-12-31,1\n";
        let batch = read_drop(&contract(), &[file("a.csv", csv.as_bytes())]).unwrap();
        assert_eq!((batch.received, batch.rows.num_rows()), (3, 2));
        assert_eq!(batch.rejects()[0].line, 2);
        assert!(batch.rejects()[0].reason.contains("column 'day'"));
    }

    #[test]
    fn a_missing_required_column_is_a_bad_drop_naming_file_and_column() {
        let csv = "id,amount\nA,1\n";
        let err = read_drop(&contract(), &[file("x.csv", csv.as_bytes())]).unwrap_err();
        let text = err.to_string();
        assert!(text.contains("x.csv") && text.contains("day"), "{text}");
    }
}
