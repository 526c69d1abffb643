//! A sample file read for `silverline init`: its columns with a type each
//! (inferred from the values of a CSV; from the schema of a Parquet file when
//! every value reads as it), whether blanks occur, and the first rows' values
//! as text for guessing the keys. Every value is judged by
//! [`crate::config::values`], the reader's own definition, so the types
//! inferred read the sample when it is run as a drop.

use std::path::Path;

use arrow::array::{Array, StringArray};
use arrow::datatypes::{DataType, Field};
use bytes::Bytes;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

use crate::config::contract::ColumnType;
use crate::config::values::{nested_kind, parse_decimal, reads_as, to_text};
use crate::error::{Error, Result};

/// How many of the sample's first rows are kept to guess keys from (types
/// are inferred from every row).
pub const GUESS_ROWS: usize = 10_000;

/// The delimiters a CSV header is sniffed for.
const DELIMITERS: [u8; 4] = [b',', b';', b'\t', b'|'];

/// A sample file's columns.
#[derive(Debug)]
pub struct Sample {
    /// The file's name, for comments and messages.
    pub file: String,
    /// The CSV field delimiter (`,` for Parquet).
    pub delimiter: u8,
    /// Rows read.
    pub rows: usize,
    /// Columns in file order.
    pub columns: Vec<SampleColumn>,
    /// Parquet columns left out of the contract, with why (nested values).
    pub left_out: Vec<(String, String)>,
}

/// One column of a sample.
#[derive(Debug)]
pub struct SampleColumn {
    /// Name, as in the header or schema.
    pub name: String,
    /// The type its values read as.
    pub column_type: ColumnType,
    /// Whether a blank (empty field, null) occurs.
    pub blanks: bool,
    /// The first [`GUESS_ROWS`] values, `None` for a blank.
    pub values: Vec<Option<String>>,
}

impl Sample {
    /// The column called `name`.
    pub fn column(&self, name: &str) -> Option<&SampleColumn> {
        self.columns.iter().find(|c| c.name == name)
    }
}

/// Reads the sample at `path`: Parquet when it starts with `PAR1`, else CSV
/// (a compressed file is refused: its bytes would read as a header of garbage).
pub fn read_sample(path: &Path) -> Result<Sample> {
    let bytes = std::fs::read(path)
        .map_err(|e| sample_error(path, format!("cannot read the file: {e}")))?;
    let file = path.file_name().map_or_else(
        || path.display().to_string(),
        |n| n.to_string_lossy().to_string(),
    );
    if bytes.starts_with(&[0x1f, 0x8b]) || bytes.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
        let reason = "a gzip or Zstandard stream: decompress the sample first".to_string();
        return Err(sample_error(path, reason));
    }
    let sample = if bytes.starts_with(b"PAR1") {
        read_parquet(Bytes::from(bytes), file).map_err(|reason| sample_error(path, reason))?
    } else {
        read_csv(&bytes, file).map_err(|reason| sample_error(path, reason))?
    };
    if sample.columns.is_empty() {
        return Err(sample_error(path, "no column to read".to_string()));
    }
    Ok(sample)
}

/// The error of a sample that cannot be used (exit 2: nothing was written).
fn sample_error(path: &Path, reason: String) -> Error {
    Error::Usage {
        arg: format!("--sample {}", path.display()),
        reason,
    }
}

fn read_csv(bytes: &[u8], file: String) -> std::result::Result<Sample, String> {
    let bytes = bytes.strip_prefix("\u{feff}".as_bytes()).unwrap_or(bytes);
    let delimiter = sniff_delimiter(bytes);
    let mut reader = csv::ReaderBuilder::new()
        .delimiter(delimiter)
        .from_reader(bytes);
    let header = reader
        .headers()
        .map_err(|e| format!("line 1: not a CSV header: {e}"))?
        .clone();
    let names = header_names(header.iter())?;
    let mut columns: Vec<Building> = names.into_iter().map(Building::new).collect();
    let mut rows = 0;
    for record in reader.records() {
        let record = record.map_err(|e| csv_problem(&e))?;
        for (column, value) in columns.iter_mut().zip(record.iter()) {
            column.observe(Some(value).filter(|v| !v.is_empty()), rows);
        }
        rows += 1;
    }
    Ok(Sample {
        file,
        delimiter,
        rows,
        columns: columns.into_iter().map(Building::finish).collect(),
        left_out: Vec::new(),
    })
}

/// A CSV error with its line, as the reader reports it.
fn csv_problem(error: &csv::Error) -> String {
    match error.position() {
        Some(at) => format!("line {}: {error}", at.line()),
        None => error.to_string(),
    }
}

/// The delimiter the header line holds most of (`,` on a tie).
fn sniff_delimiter(bytes: &[u8]) -> u8 {
    let line = bytes.split(|b| *b == b'\n').next().unwrap_or_default();
    let count = |d: u8| line.iter().filter(|b| **b == d).count();
    DELIMITERS
        .into_iter()
        .fold((b',', 0), |best, d| {
            let n = count(d);
            if n > best.1 { (d, n) } else { best }
        })
        .0
}

/// Header names, trimmed as the reader trims them; a blank or repeated name is refused.
fn header_names<'h>(
    header: impl Iterator<Item = &'h str>,
) -> std::result::Result<Vec<String>, String> {
    let mut names: Vec<String> = Vec::new();
    for (i, name) in header.enumerate() {
        let name = name.trim();
        if name.is_empty() {
            return Err(format!("line 1: column {} has no name", i + 1));
        }
        if name.chars().any(char::is_control) {
            return Err(format!(
                "line 1: column {} is named with a control character ('{}')",
                i + 1,
                crate::error::printable(name)
            ));
        }
        if names.iter().any(|n| n == name) {
            return Err(format!(
                "line 1: column '{}' is named twice",
                crate::error::printable(name)
            ));
        }
        names.push(name.to_string());
    }
    Ok(names)
}

fn read_parquet(bytes: Bytes, file: String) -> std::result::Result<Sample, String> {
    let unreadable = |e: &dyn std::fmt::Display| format!("not a readable Parquet file: {e}");
    let builder = ParquetRecordBatchReaderBuilder::try_new(bytes).map_err(|e| unreadable(&e))?;
    let schema = builder.schema().clone();
    let reader = builder.build().map_err(|e| unreadable(&e))?;
    let (kept, left_out): (Vec<&Field>, Vec<&Field>) = schema
        .fields()
        .iter()
        .map(|f| &**f)
        .partition(|f| nested_kind(f.data_type()).is_none());
    let names = header_names(kept.iter().map(|f| f.name().as_str()))?;
    let mut columns: Vec<Building> = names
        .into_iter()
        .zip(&kept)
        .map(|(name, field)| Building::declared(name, declared_type(field.data_type())))
        .collect();
    let mut rows = 0;
    for batch in reader {
        let batch = batch.map_err(|e| format!("cannot decode: {e}"))?;
        let texts = kept
            .iter()
            .map(|f| column_text(&batch, f.name()))
            .collect::<std::result::Result<Vec<StringArray>, String>>()?;
        for row in 0..batch.num_rows() {
            for (column, text) in columns.iter_mut().zip(&texts) {
                column.observe(text.is_valid(row).then(|| text.value(row)), rows + row);
            }
        }
        rows += batch.num_rows();
    }
    Ok(Sample {
        file,
        delimiter: b',',
        rows,
        columns: columns.into_iter().map(Building::finish).collect(),
        left_out: left_out
            .iter()
            .map(|f| {
                let kind = nested_kind(f.data_type()).unwrap_or("nested");
                (f.name().clone(), format!("holds {kind} values"))
            })
            .collect(),
    })
}

/// Column `name` of `batch` as text, as the drop reader reads it.
fn column_text(
    batch: &arrow::record_batch::RecordBatch,
    name: &str,
) -> std::result::Result<StringArray, String> {
    let array = batch
        .column_by_name(name)
        .ok_or_else(|| format!("column '{name}' is missing from a row group"))?;
    to_text(array.as_ref()).map_err(|reason| format!("column '{name}' {reason}"))
}

/// The contract type a Parquet type declares, if it has one.
fn declared_type(data_type: &DataType) -> Option<ColumnType> {
    match data_type {
        DataType::Boolean => Some(ColumnType::Boolean),
        DataType::Int8 | DataType::Int16 | DataType::Int32 | DataType::UInt8 | DataType::UInt16 => {
            Some(ColumnType::Int)
        }
        DataType::Int64 | DataType::UInt32 => Some(ColumnType::Long),
        DataType::Float16 | DataType::Float32 | DataType::Float64 => Some(ColumnType::Double),
        DataType::Decimal32(p, s)
        | DataType::Decimal64(p, s)
        | DataType::Decimal128(p, s)
        | DataType::Decimal256(p, s) => ColumnType::decimal(*p, *s),
        DataType::Date32 => Some(ColumnType::Date),
        DataType::Timestamp(..) => Some(ColumnType::Timestamp),
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => Some(ColumnType::String),
        DataType::Dictionary(_, values) => declared_type(values),
        _ => None,
    }
}

/// The kinds of value a column may hold, in the order a type is chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Boolean,
    Int,
    Long,
    Decimal,
    Double,
    Date,
    Timestamp,
}

const KINDS: [Kind; 7] = [
    Kind::Boolean,
    Kind::Int,
    Kind::Long,
    Kind::Decimal,
    Kind::Double,
    Kind::Date,
    Kind::Timestamp,
];

/// A column being read: the kinds its values so far allow.
#[derive(Debug)]
struct Building {
    name: String,
    /// The Parquet schema's type, kept while every value reads as it.
    declared: Option<ColumnType>,
    open: Vec<Kind>,
    seen: usize,
    blanks: bool,
    /// Most digits before and after the point of a decimal value.
    whole_digits: usize,
    scale: usize,
    values: Vec<Option<String>>,
}

impl Building {
    fn new(name: String) -> Building {
        Building {
            name,
            declared: None,
            open: KINDS.to_vec(),
            seen: 0,
            blanks: false,
            whole_digits: 0,
            scale: 0,
            values: Vec::new(),
        }
    }

    fn declared(name: String, declared: Option<ColumnType>) -> Building {
        Building {
            declared,
            ..Building::new(name)
        }
    }

    /// Takes one value (`None`: blank) of row `row` (0-based).
    fn observe(&mut self, value: Option<&str>, row: usize) {
        if row < GUESS_ROWS {
            self.values.push(value.map(str::to_string));
        }
        let Some(text) = value else {
            self.blanks = true;
            return;
        };
        self.seen += 1;
        if self.declared.is_some_and(|t| !reads_as(t, text)) {
            self.declared = None;
        }
        let numeric = !has_leading_zero(text);
        let mut decimal = None;
        self.open.retain(|kind| match kind {
            Kind::Boolean => ["true", "false"]
                .iter()
                .any(|b| b.eq_ignore_ascii_case(text)),
            Kind::Int => numeric && reads_as(ColumnType::Int, text),
            Kind::Long => numeric && reads_as(ColumnType::Long, text),
            Kind::Decimal => {
                decimal = decimal_digits(text).filter(|_| numeric);
                decimal.is_some()
            }
            Kind::Double => {
                numeric
                    && text.bytes().any(|b| b.is_ascii_digit())
                    && reads_as(ColumnType::Double, text)
            }
            Kind::Date => reads_as(ColumnType::Date, text),
            Kind::Timestamp => reads_as(ColumnType::Timestamp, text),
        });
        if let Some((whole, scale)) = decimal {
            self.whole_digits = self.whole_digits.max(whole);
            self.scale = self.scale.max(scale);
        }
    }

    fn finish(self) -> SampleColumn {
        let column_type = match self.declared {
            Some(declared) => declared,
            None if self.seen == 0 => ColumnType::String,
            None => self.inferred(),
        };
        SampleColumn {
            name: self.name,
            column_type,
            blanks: self.blanks,
            values: self.values,
        }
    }

    /// The first kind every value allowed, as a type; text when none did.
    fn inferred(&self) -> ColumnType {
        self.open
            .iter()
            .find_map(|kind| match kind {
                Kind::Boolean => Some(ColumnType::Boolean),
                Kind::Int => Some(ColumnType::Int),
                Kind::Long => Some(ColumnType::Long),
                Kind::Decimal => decimal_type(self.whole_digits, self.scale),
                Kind::Double => Some(ColumnType::Double),
                Kind::Date => Some(ColumnType::Date),
                Kind::Timestamp => Some(ColumnType::Timestamp),
            })
            .unwrap_or(ColumnType::String)
    }
}

/// `0` followed by more digits (`007`, `-01.5`): an identifier or a code
/// whose zeros matter, kept as text.
fn has_leading_zero(text: &str) -> bool {
    let digits = text.trim_start_matches(['-', '+']).as_bytes();
    matches!(digits, [b'0', next, ..] if next.is_ascii_digit())
}

/// Digits before and after the point of a value that reads as a decimal.
fn decimal_digits(text: &str) -> Option<(usize, usize)> {
    let unsigned = text.trim_start_matches(['-', '+']);
    let (whole, fraction) = unsigned.split_once('.').unwrap_or((unsigned, ""));
    let scale = i8::try_from(fraction.len()).ok()?;
    parse_decimal(text, 38, scale).map(|_| (whole.len(), fraction.len()))
}

/// `decimal(18,s)` when the digits fit it, else `decimal(38,s)`; none past 38 digits.
fn decimal_type(whole_digits: usize, scale: usize) -> Option<ColumnType> {
    let digits = whole_digits + scale;
    let precision = if digits <= 18 { 18 } else { 38 };
    let scale = i8::try_from(scale).ok()?;
    (digits <= 38).then(|| ColumnType::decimal(precision, scale))?
}

#[cfg(test)]
mod tests {
    use super::*;

    fn csv(text: &str) -> Sample {
        read_csv(text.as_bytes(), "sample.csv".to_string()).unwrap()
    }

    fn types(sample: &Sample) -> Vec<(String, ColumnType, bool)> {
        sample
            .columns
            .iter()
            .map(|c| (c.name.clone(), c.column_type, c.blanks))
            .collect()
    }

    #[test]
    fn csv_types_are_inferred_from_every_value() {
        let sample = csv("\u{feff}id,n,big,amount,rate,flag,day,at,code,note,empty\n\
             A1,1,3000000000,10.5,1e3,true,2026-01-31,2026-01-31 12:00:00,007,x,\n\
             A2,-2,4,1200.25,0.5,FALSE,2026-02-28,2026-02-28T00:00:00Z,120,,\n");
        let decimal = ColumnType::Decimal {
            precision: 18,
            scale: 2,
        };
        let expected = [
            ("id", ColumnType::String, false),
            ("n", ColumnType::Int, false),
            ("big", ColumnType::Long, false),
            ("amount", decimal, false),
            ("rate", ColumnType::Double, false),
            ("flag", ColumnType::Boolean, false),
            ("day", ColumnType::Date, false),
            ("at", ColumnType::Timestamp, false),
            ("code", ColumnType::String, false),
            ("note", ColumnType::String, true),
            ("empty", ColumnType::String, true),
        ];
        let expected: Vec<_> = expected
            .iter()
            .map(|(n, t, b)| (n.to_string(), *t, *b))
            .collect();
        assert_eq!(types(&sample), expected);
        assert_eq!(sample.rows, 2);
        assert_eq!(
            sample.columns[0].values,
            [Some("A1".into()), Some("A2".into())]
        );
    }

    #[test]
    fn a_decimal_wider_than_18_digits_gets_38_and_one_past_38_is_text() {
        let wide = format!("v\n{}.5\n", "9".repeat(20));
        assert_eq!(
            csv(&wide).columns[0].column_type,
            ColumnType::Decimal {
                precision: 38,
                scale: 1
            }
        );
        let too_wide = format!("v\n{}.5\n", "9".repeat(40));
        assert_eq!(csv(&too_wide).columns[0].column_type, ColumnType::Double);
    }

    #[test]
    fn the_delimiter_is_sniffed_from_the_header() {
        let sample = csv("a;b;c\n1;2;3\n");
        assert_eq!(sample.delimiter, b';');
        assert_eq!(sample.columns.len(), 3);
        assert_eq!(csv("a,b\n1,2\n").delimiter, b',');
    }

    #[test]
    fn a_header_naming_a_column_twice_or_none_is_refused() {
        let err = read_csv(b"a, a\n1,2\n", "s.csv".into()).unwrap_err();
        assert!(err.contains("'a' is named twice"), "{err}");
        let err = read_csv(b"a,,b\n1,2,3\n", "s.csv".into()).unwrap_err();
        assert!(err.contains("column 2 has no name"), "{err}");
        let err = read_csv(b"a,b\n1,2\n1\n", "s.csv".into()).unwrap_err();
        assert!(err.contains("line 3"), "{err}");
    }

    #[test]
    fn parquet_types_come_from_the_schema_when_every_value_reads_as_it() {
        use std::sync::Arc;

        use arrow::array::{Date64Array, Decimal128Array, Int64Array, ListArray, RecordBatch};
        use arrow::datatypes::{Int32Type, Schema};
        use parquet::arrow::ArrowWriter;

        let amounts = Decimal128Array::from(vec![Some(150), None])
            .with_precision_and_scale(10, 2)
            .unwrap();
        let list = ListArray::from_iter_primitive::<Int32Type, _, _>(vec![
            Some(vec![Some(1)]),
            Some(vec![Some(2)]),
        ]);
        let columns: Vec<Arc<dyn Array>> = vec![
            Arc::new(Int64Array::from(vec![1, 2])),
            Arc::new(amounts),
            Arc::new(Date64Array::from(vec![0, 86_400_000])),
            Arc::new(list),
        ];
        let schema = Schema::new(vec![
            Field::new("n", DataType::Int64, false),
            Field::new("amount", DataType::Decimal128(10, 2), true),
            Field::new("day", DataType::Date64, false),
            Field::new("tags", columns[3].data_type().clone(), false),
        ]);
        let batch = RecordBatch::try_new(Arc::new(schema), columns).unwrap();
        let mut bytes = Vec::new();
        let mut writer = ArrowWriter::try_new(&mut bytes, batch.schema(), None).unwrap();
        writer.write(&batch).unwrap();
        writer.close().unwrap();

        let sample = read_parquet(Bytes::from(bytes), "s.parquet".into()).unwrap();
        let found: Vec<(String, ColumnType, bool)> = types(&sample);
        assert_eq!(found[0], ("n".to_string(), ColumnType::Long, false));
        assert_eq!(
            found[1],
            (
                "amount".to_string(),
                ColumnType::Decimal {
                    precision: 10,
                    scale: 2
                },
                true
            )
        );
        // A Date64 reads as a date and time in text: inferred from the values.
        assert_eq!(found[2].1, ColumnType::Timestamp);
        assert_eq!(found.len(), 3);
        assert_eq!(
            sample.left_out,
            [("tags".to_string(), "holds list values".to_string())]
        );
    }
}
