//! Parquet files: columns are matched by name. A column whose Parquet type
//! already is the contract's (a string, an integer or double of the same
//! width, a boolean, a date a text date could hold, a decimal of the same
//! scale within the contract's precision) is taken as it is: reading it
//! through text would accept exactly the same values. Any other column is
//! brought to the contract's type through text, so a Parquet drop meets
//! exactly the same parse checks as a CSV one. Only the contract's columns
//! are decoded, split across the cores. Row numbers (1-based) stand in for
//! line numbers.

use std::collections::BTreeMap;
use std::ops::Range;

use arrow::array::{Array, ArrayRef, AsArray, RecordBatchReader, StringArray, new_null_array};
use arrow::compute::{cast, concat_batches};
use arrow::datatypes::{DataType, Date32Type, Decimal128Type};
use bytes::Bytes;
use parquet::arrow::ProjectionMask;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

use super::typing::{Problems, TypedRows};
use super::{RawText, TypedTable, map_header};
use crate::config::contract::{Column, ColumnType, Contract};
use crate::config::values::{parse_date, to_text};
use crate::core::drop::DropFile;
use crate::core::parallel::{in_parallel, one_ahead};
use crate::error::{Error, Result};
use crate::pipeline::summary::SchemaDrift;

/// How many rows the file's footer says it holds.
pub(super) fn rows(file: &DropFile) -> Option<usize> {
    let builder = ParquetRecordBatchReaderBuilder::try_new(file.bytes.clone()).ok()?;
    usize::try_from(builder.metadata().file_metadata().num_rows()).ok()
}

/// Rows read at once, at least: row groups are read together until they
/// hold as many.
const CHUNK_ROWS: usize = 256 * 1024;

/// Reads one Parquet file into the contract's types, handing `chunk` the
/// rows of a few row groups at a time (the first chunk carries the drift).
pub(super) fn read(
    contract: &Contract,
    file: &DropFile,
    chunk: &mut dyn FnMut(TypedTable) -> Result<()>,
) -> Result<()> {
    read_in_chunks(contract, (file, CHUNK_ROWS), chunk)
}

/// [`read`], in chunks of at least `chunk_rows` rows.
fn read_in_chunks(
    contract: &Contract,
    (file, chunk_rows): (&DropFile, usize),
    chunk: &mut dyn FnMut(TypedTable) -> Result<()>,
) -> Result<()> {
    let builder = ParquetRecordBatchReaderBuilder::try_new(file.bytes.clone())
        .map_err(|e| bad(file, format!("not a readable Parquet file: {e}")))?;
    let header: Vec<String> = builder
        .schema()
        .fields()
        .iter()
        .map(|f| f.name().clone())
        .collect();
    let (positions, mut drift) = map_header(contract, (&file.name, &file.name), &header)?;
    let columns: Vec<(&Column, Option<usize>)> = contract
        .columns
        .iter()
        .zip(positions.iter().copied())
        .collect();
    // The next chunk is read while the caller takes this one (spreading it
    // over a drop's buckets, say).
    let chunks = chunks(builder.metadata().row_groups(), chunk_rows);
    let read = |give: &mut dyn FnMut(TypedTable) -> bool| {
        let mut first_row = 0u64;
        for groups in chunks {
            let table = read_groups(file, &columns, (&groups, first_row))?;
            // The row groups read go back to the system (a file copied to
            // local disk is never held whole); the table holds its values.
            file.release(0..file.bytes.len());
            first_row += table.lines.len() as u64;
            let table = TypedTable {
                drift: std::mem::take(&mut drift),
                ..table
            };
            if !give(table) {
                break;
            }
        }
        Ok(())
    };
    one_ahead("read: the Parquet reading thread", read, chunk)
}

/// The file's row groups, gathered into chunks of at least `chunk_rows`
/// rows (one chunk of none for a file without row groups).
fn chunks(groups: &[parquet::file::metadata::RowGroupMetaData], chunk_rows: usize) -> Vec<Chunk> {
    let mut chunks: Vec<Chunk> = Vec::new();
    for (i, group) in groups.iter().enumerate() {
        if chunks.last().is_none_or(|c| c.rows >= chunk_rows) {
            chunks.push(Chunk::default());
        }
        if let Some(current) = chunks.last_mut() {
            current.groups.push(i);
            current.rows += usize::try_from(group.num_rows()).unwrap_or(0);
        }
    }
    if chunks.is_empty() {
        chunks.push(Chunk::default());
    }
    chunks
}

/// Row groups read together.
#[derive(Debug, Default)]
struct Chunk {
    groups: Vec<usize>,
    rows: usize,
}

/// Reads the row groups of `chunk`, whose first row is the file's row
/// `first_row` (counted from 0).
fn read_groups(
    file: &DropFile,
    columns: &[(&Column, Option<usize>)],
    (chunk, first_row): (&Chunk, u64),
) -> Result<TypedTable> {
    let parts = in_parallel(
        "read: a Parquet reader thread",
        column_ranges(columns.len()),
        |range| read_part(file, &columns[range], chunk),
    )?;
    let mut typed = Vec::with_capacity(columns.len());
    let mut sources = Vec::with_capacity(columns.len());
    let mut first_problem: BTreeMap<usize, String> = BTreeMap::new();
    for part in parts {
        typed.extend(part.typed);
        sources.extend(part.sources);
        for (row, problem) in part.problems {
            first_problem.entry(row).or_insert(problem);
        }
    }
    Ok(TypedTable {
        file: file.name.clone(),
        columns: typed,
        lines: (first_row + 1..=first_row + chunk.rows as u64).collect(),
        problems: first_problem.into_iter().collect(),
        raws: RawText::Columns(sources),
        rejects: Vec::new(),
        drift: SchemaDrift::default(),
    })
}

fn bad(file: &DropFile, reason: String) -> Error {
    Error::BadDrop {
        location: file.name.clone(),
        reason,
    }
}

/// Contiguous ranges of `count` contract columns, one per core.
fn column_ranges(count: usize) -> Vec<Range<usize>> {
    let cores = crate::core::parallel::lanes();
    let size = count.div_ceil(cores.clamp(1, count.max(1))).max(1);
    (0..count)
        .step_by(size)
        .map(|start| start..(start + size).min(count))
        .collect()
}

/// Some contract columns of a file, typed, with the rows whose value did not read.
struct Part {
    typed: Vec<ArrayRef>,
    /// The file's column per contract column (`None` when absent), for raw text.
    sources: Vec<Option<ArrayRef>>,
    problems: Problems,
}

/// Decodes and types `columns` (each with its index in the file) of the
/// row groups of `chunk`.
fn read_part(file: &DropFile, columns: &[(&Column, Option<usize>)], chunk: &Chunk) -> Result<Part> {
    let rows = chunk.rows;
    let sources = decode(file.bytes.clone(), columns, chunk).map_err(|reason| bad(file, reason))?;
    let mut typed: Vec<Option<ArrayRef>> = columns
        .iter()
        .zip(&sources)
        .map(|((column, _), source)| match source {
            None => Some(new_null_array(&column.column_type.arrow_type(), rows)),
            Some(source) => as_contract_type(column, source),
        })
        .collect();
    let through_text: Vec<usize> = (0..columns.len()).filter(|i| typed[*i].is_none()).collect();
    let mut problems = Vec::new();
    if !through_text.is_empty() {
        let text_columns: Vec<Column> =
            through_text.iter().map(|i| columns[*i].0.clone()).collect();
        let texts = through_text
            .iter()
            .map(|i| {
                let source = sources[*i].as_ref().ok_or_else(|| {
                    Error::Internal("read: an absent Parquet column read as text".into())
                })?;
                to_text(source.as_ref())
                    .map_err(|reason| bad(file, column_problem(&columns[*i].0.name, &reason)))
            })
            .collect::<Result<Vec<StringArray>>>()?;
        let (arrays, found) = typed_from_text(&text_columns, &texts, rows)?;
        for (i, array) in through_text.iter().zip(arrays) {
            typed[*i] = Some(array);
        }
        problems = found;
    }
    let typed = typed
        .into_iter()
        .map(|t| t.ok_or_else(|| Error::Internal("read: a Parquet column left untyped".into())))
        .collect::<Result<Vec<ArrayRef>>>()?;
    Ok(Part {
        typed,
        sources,
        problems,
    })
}

/// The file's columns for `columns` (only those are decoded) in the row
/// groups of `chunk`, `None` for absent ones.
fn decode(
    bytes: Bytes,
    columns: &[(&Column, Option<usize>)],
    chunk: &Chunk,
) -> std::result::Result<Vec<Option<ArrayRef>>, String> {
    let rows = chunk.rows;
    let indices: Vec<usize> = columns.iter().filter_map(|(_, p)| *p).collect();
    if indices.is_empty() {
        return Ok(vec![None; columns.len()]);
    }
    let builder = ParquetRecordBatchReaderBuilder::try_new(bytes)
        .map_err(|e| format!("not a readable Parquet file: {e}"))?;
    let names: Vec<String> = builder
        .schema()
        .fields()
        .iter()
        .map(|f| f.name().clone())
        .collect();
    let mask = ProjectionMask::roots(builder.parquet_schema(), indices);
    let reader = builder
        .with_projection(mask)
        .with_row_groups(chunk.groups.clone())
        .with_batch_size(rows.max(1))
        .build()
        .map_err(|e| format!("not a readable Parquet file: {e}"))?;
    let schema = reader.schema();
    let batches = reader
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|e| format!("cannot decode: {e}"))?;
    let all = concat_batches(&schema, &batches).map_err(|e| format!("cannot decode: {e}"))?;
    Ok(columns
        .iter()
        .map(|(_, p)| p.and_then(|p| all.column_by_name(&names[p]).cloned()))
        .collect())
}

/// `source` as the contract column's type when its Parquet type already
/// holds exactly the values text would (`None`: read it through text).
fn as_contract_type(column: &Column, source: &ArrayRef) -> Option<ArrayRef> {
    match (column.column_type, source.data_type()) {
        (ColumnType::String, DataType::Utf8)
        | (ColumnType::Int, DataType::Int32)
        | (ColumnType::Long, DataType::Int64)
        | (ColumnType::Double, DataType::Float64)
        | (ColumnType::Boolean, DataType::Boolean) => Some(source.clone()),
        (ColumnType::String, DataType::LargeUtf8 | DataType::Utf8View) => {
            cast(source, &DataType::Utf8).ok()
        }
        (ColumnType::String, DataType::Dictionary(_, values)) if **values == DataType::Utf8 => {
            cast(source, &DataType::Utf8).ok()
        }
        (ColumnType::Date, DataType::Date32) => dates_text_could_hold(source),
        (ColumnType::Decimal { precision, scale }, DataType::Decimal128(p, s))
            if *s == scale && *p <= precision =>
        {
            let values = source.as_primitive::<Decimal128Type>();
            values.validate_decimal_precision(precision).ok()?;
            let values = values
                .clone()
                .with_precision_and_scale(precision, scale)
                .ok()?;
            Some(std::sync::Arc::new(values))
        }
        _ => None,
    }
}

/// `source` (dates) when every date is one a `YYYY-MM-DD` text could hold.
fn dates_text_could_hold(source: &ArrayRef) -> Option<ArrayRef> {
    let dates = source.as_primitive::<Date32Type>();
    let (first, last) = (parse_date("0001-01-01")?, parse_date("9999-12-31")?);
    let min = arrow::compute::min(dates);
    let max = arrow::compute::max(dates);
    let within = min.is_none_or(|d| d >= first) && max.is_none_or(|d| d <= last);
    within.then(|| source.clone())
}

/// `columns` typed from their text, with the rows whose value did not read.
fn typed_from_text(
    columns: &[Column],
    texts: &[StringArray],
    rows: usize,
) -> Result<(Vec<ArrayRef>, Problems)> {
    let mut typed = TypedRows::new(columns, rows);
    typed.append_by_column(rows, |row, c| {
        let text = &texts[c];
        text.is_valid(row).then(|| text.value(row))
    });
    typed.finish()
}

/// Why column `name` of a Parquet file is refused.
fn column_problem(name: &str, reason: &str) -> String {
    format!(
        "column '{name}' {reason}; the contract expects one scalar value per row: the file is refused"
    )
}

/// A Parquet row as text: its contract columns joined with commas.
pub(super) fn raw_row(columns: &[Option<ArrayRef>], row: usize) -> String {
    columns
        .iter()
        .map(|c| match c {
            Some(c) if c.is_valid(row) => to_text(c.slice(row, 1).as_ref())
                .map(|text| text.value(0).to_string())
                .unwrap_or_default(),
            _ => String::new(),
        })
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{Int64Array, RecordBatch, StringArray};
    use arrow::datatypes::{DataType, Field, Schema};
    use parquet::arrow::ArrowWriter;

    use super::super::read_drop;
    use super::super::tests::{contract, file};

    #[test]
    fn parquet_columns_are_matched_by_name_and_checked_like_csv() {
        let schema = Arc::new(Schema::new(vec![
            Field::new("amount", DataType::Int64, true),
            Field::new("id", DataType::Utf8, true),
            Field::new("day", DataType::Utf8, true),
        ]));
        let batch = RecordBatch::try_new(
            schema.clone(),
            vec![
                Arc::new(Int64Array::from(vec![5, 6])),
                Arc::new(StringArray::from(vec!["A", "B"])),
                Arc::new(StringArray::from(vec!["2026-01-31", "not a date"])),
            ],
        )
        .unwrap();
        let mut bytes = Vec::new();
        let mut writer = ArrowWriter::try_new(&mut bytes, schema, None).unwrap();
        writer.write(&batch).unwrap();
        writer.close().unwrap();
        let read = read_drop(&contract(), &[file("p.parquet", &bytes)]).unwrap();
        assert_eq!(read.received, 2);
        assert_eq!(read.rows.num_rows(), 1);
        assert_eq!(read.rejects().len(), 1);
        assert_eq!(read.rejects()[0].line, 2);
        assert_eq!(read.rejects()[0].raw, "B,not a date,6,");
    }

    /// A file of several row groups reads in chunks of whole groups, with
    /// every row, line number and reject it reads in one chunk.
    #[test]
    fn row_groups_read_in_chunks_as_the_file_reads_whole() {
        let ids: Vec<String> = (0..10).map(|i| format!("A{i}")).collect();
        let days: Vec<&str> = (0..10)
            .map(|i| if i % 4 == 1 { "bad" } else { "2026-01-31" })
            .collect();
        let batch = RecordBatch::try_from_iter([
            (
                "id",
                Arc::new(StringArray::from(ids)) as arrow::array::ArrayRef,
            ),
            ("day", Arc::new(StringArray::from(days))),
            ("amount", Arc::new(Int64Array::from_iter_values(0..10))),
        ])
        .unwrap();
        let props = parquet::file::properties::WriterProperties::builder()
            .set_max_row_group_row_count(Some(3))
            .build();
        let mut bytes = Vec::new();
        let mut writer = ArrowWriter::try_new(&mut bytes, batch.schema(), Some(props)).unwrap();
        writer.write(&batch).unwrap();
        writer.close().unwrap();
        let file = file("g.parquet", &bytes);
        let read = |chunk_rows: usize| {
            let mut tables = Vec::new();
            super::read_in_chunks(&contract(), (&file, chunk_rows), &mut |t| {
                tables.push(t);
                Ok(())
            })
            .unwrap();
            tables
        };
        let whole = read(usize::MAX);
        let chunked = read(2);
        assert_eq!((whole.len(), chunked.len()), (1, 4));
        let lines: Vec<u64> = chunked.iter().flat_map(|t| t.lines.clone()).collect();
        assert_eq!(lines, whole[0].lines);
        assert_eq!(lines, (1..=10).collect::<Vec<u64>>());
        let problem_lines = |tables: &[super::TypedTable]| -> Vec<u64> {
            tables
                .iter()
                .flat_map(|t| t.problems.iter().map(|(row, _)| t.lines[*row]))
                .collect()
        };
        assert_eq!(problem_lines(&chunked), vec![2, 6, 10]);
        assert_eq!(problem_lines(&chunked), problem_lines(&whole));
    }

    fn parquet_of(columns: Vec<(&str, arrow::array::ArrayRef)>) -> Vec<u8> {
        let batch = RecordBatch::try_from_iter(columns).unwrap();
        let mut bytes = Vec::new();
        let mut writer = ArrowWriter::try_new(&mut bytes, batch.schema(), None).unwrap();
        writer.write(&batch).unwrap();
        writer.close().unwrap();
        bytes
    }

    /// Columns already of the contract's types are taken as they are and
    /// give exactly the rows the same values give as CSV text.
    #[test]
    fn typed_parquet_columns_read_as_their_csv_text_does() {
        use arrow::array::{Date32Array, Decimal128Array, LargeStringArray};
        let day = crate::config::values::parse_date("2026-01-31").unwrap();
        let bytes = parquet_of(vec![
            (
                "note",
                Arc::new(LargeStringArray::from(vec![Some("n"), None])),
            ),
            ("id", Arc::new(StringArray::from(vec!["A", "B"]))),
            ("day", Arc::new(Date32Array::from(vec![day, day + 1]))),
            (
                "amount",
                Arc::new(
                    Decimal128Array::from(vec![1234, -5])
                        .with_precision_and_scale(10, 2)
                        .unwrap(),
                ),
            ),
        ]);
        let csv = b"id,day,amount,note\nA,2026-01-31,12.34,n\nB,2026-02-01,-0.05,\n";
        let from_parquet = read_drop(&contract(), &[file("p.parquet", &bytes)]).unwrap();
        let from_csv = read_drop(&contract(), &[file("p.csv", csv)]).unwrap();
        assert!(
            from_parquet.rejects().is_empty(),
            "{:?}",
            from_parquet.rejects()
        );
        let contract_columns = contract().columns.len();
        for i in 0..contract_columns {
            assert_eq!(
                from_parquet.rows.whole().unwrap().column(i).as_ref(),
                from_csv.rows.whole().unwrap().column(i).as_ref(),
                "column {i}"
            );
        }
    }

    /// A typed value text could not hold (a decimal beyond the contract's
    /// precision, a date past year 9999) goes through text and is a reject
    /// naming its column, as in a CSV.
    #[test]
    fn typed_parquet_values_text_could_not_hold_are_rejects() {
        use arrow::array::{Date32Array, Decimal128Array};
        let day = crate::config::values::parse_date("2026-01-31").unwrap();
        let far = crate::config::values::parse_date("9999-12-31").unwrap() + 1;
        let bytes = parquet_of(vec![
            ("id", Arc::new(StringArray::from(vec!["A", "B", "C"]))),
            ("day", Arc::new(Date32Array::from(vec![day, far, day]))),
            (
                "amount",
                Arc::new(
                    Decimal128Array::from(vec![1, 2, 10_i128.pow(19)])
                        .with_precision_and_scale(22, 2)
                        .unwrap(),
                ),
            ),
        ]);
        let read = read_drop(&contract(), &[file("p.parquet", &bytes)]).unwrap();
        assert_eq!(read.rows.num_rows(), 1);
        let rejects = read.rejects();
        let reasons: Vec<(u64, &str)> = rejects
            .iter()
            .map(|r| (r.line, r.reason.as_str()))
            .collect();
        assert_eq!(reasons.len(), 2, "{reasons:?}");
        assert_eq!(reasons[0].0, 2);
        assert!(reasons[0].1.contains("column 'day'"), "{reasons:?}");
        assert_eq!(reasons[1].0, 3);
        assert!(reasons[1].1.contains("column 'amount'"), "{reasons:?}");
    }

    fn parquet_with(extra: Field, values: arrow::array::ArrayRef) -> Vec<u8> {
        let schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Utf8, true),
            Field::new("day", DataType::Utf8, true),
            Field::new("amount", DataType::Int64, true),
            extra,
        ]));
        let batch = RecordBatch::try_new(
            schema.clone(),
            vec![
                Arc::new(StringArray::from(vec!["A"])),
                Arc::new(StringArray::from(vec!["2026-01-31"])),
                Arc::new(Int64Array::from(vec![5])),
                values,
            ],
        )
        .unwrap();
        let mut bytes = Vec::new();
        let mut writer = ArrowWriter::try_new(&mut bytes, schema, None).unwrap();
        writer.write(&batch).unwrap();
        writer.close().unwrap();
        bytes
    }

    #[test]
    fn a_parquet_file_reports_its_schema_drift() {
        let bytes = parquet_with(
            Field::new("branch", DataType::Utf8, true),
            Arc::new(StringArray::from(vec!["B1"])),
        );
        let read = read_drop(&contract(), &[file("p.parquet", &bytes)]).unwrap();
        assert_eq!(read.rows.num_rows(), 1);
        assert_eq!(
            read.drift,
            vec![crate::pipeline::summary::SchemaDrift {
                file: "p.parquet".to_string(),
                extra_columns: vec!["branch".to_string()],
                missing_columns: vec!["note".to_string()],
            }]
        );
    }

    #[test]
    fn a_nested_column_where_the_contract_expects_a_value_is_refused() {
        use arrow::array::{ListBuilder, StringBuilder, StructArray};
        let mut list = ListBuilder::new(StringBuilder::new());
        list.values().append_value("ACC-1");
        list.append(true);
        let list = Arc::new(list.finish());
        let inner = Arc::new(Field::new("x", DataType::Utf8, true));
        let structure = Arc::new(StructArray::from(vec![(
            inner,
            Arc::new(StringArray::from(vec!["v"])) as arrow::array::ArrayRef,
        )]));
        for (values, kind) in [
            (list as arrow::array::ArrayRef, "list"),
            (structure as arrow::array::ArrayRef, "struct"),
        ] {
            let field = Field::new("note", values.data_type().clone(), true);
            let bytes = parquet_with(field, values);
            let err = read_drop(&contract(), &[file("n.parquet", &bytes)]).unwrap_err();
            let text = err.to_string();
            assert!(matches!(err, crate::error::Error::BadDrop { .. }), "{text}");
            assert!(
                text.contains("n.parquet") && text.contains("'note'") && text.contains(kind),
                "{text}"
            );
        }
    }
}
