//! CSV files: UTF-8 (a leading byte-order mark is tolerated), one header row,
//! `"` quoting, `\n` or `\r\n` line ends, empty field = null. A record with the
//! wrong number of fields or invalid UTF-8 is rejected with its raw text.

use arrow::array::StringBuilder;

use super::{ParseReject, RawText, TextTable, map_header};
use crate::config::contract::Contract;
use crate::error::{Error, Result};
use crate::pipeline::claim::DropFile;

const BOM: &[u8] = b"\xEF\xBB\xBF";

/// Reads one CSV file into text columns.
pub(super) fn read(contract: &Contract, file: &DropFile) -> Result<TextTable> {
    let bytes = file.bytes.strip_prefix(BOM).unwrap_or(&file.bytes);
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .from_reader(bytes);
    let mut record = csv::ByteRecord::new();
    let header = read_header(&mut reader, &mut record, &file.name)?;
    let positions = map_header(contract, &file.name, &header)?;
    let mut builders: Vec<StringBuilder> = positions.iter().map(|_| StringBuilder::new()).collect();
    let mut table = TextTable {
        file: file.name.clone(),
        columns: Vec::new(),
        lines: Vec::new(),
        raws: RawText::Columns,
        rejects: Vec::new(),
    };
    let mut starts = Vec::new();
    let mut spans = Vec::new();
    let mut lines = LineCounter::new(bytes);
    loop {
        let more = reader
            .read_byte_record(&mut record)
            .map_err(|e| Error::BadDrop {
                location: format!("{}:{}", file.name, reader.position().line()),
                reason: e.to_string(),
            })?;
        if !more {
            break;
        }
        if is_blank(&record) {
            continue;
        }
        let start = skip_line_ends(bytes, record.position().map_or(0, |p| p.byte()));
        let line = lines.line_at(start);
        let end = reader.position().byte();
        match record_fields(&record, header.len()) {
            Ok(fields) => {
                for (builder, position) in builders.iter_mut().zip(&positions) {
                    let value = position.map(|p| fields[p]).filter(|v| !v.is_empty());
                    builder.append_option(value);
                }
                starts.push(line);
                spans.push((start, end));
            }
            Err(reason) => table.rejects.extend(rejects_for(
                &file.name,
                line,
                raw_text(bytes, start, end),
                reason,
            )),
        }
    }
    table.lines = starts;
    table.raws = RawText::Spans(file.bytes.slice(file.bytes.len() - bytes.len()..), spans);
    table.columns = builders
        .into_iter()
        .zip(&positions)
        .map(|(mut b, p)| p.map(|_| b.finish()))
        .collect();
    Ok(table)
}

fn read_header(
    reader: &mut csv::Reader<&[u8]>,
    record: &mut csv::ByteRecord,
    file: &str,
) -> Result<Vec<String>> {
    let bad = |reason: String| Error::BadDrop {
        location: file.to_string(),
        reason,
    };
    let found = reader
        .read_byte_record(record)
        .map_err(|e| bad(format!("cannot read the header: {e}")))?;
    if !found {
        return Err(bad("the file is empty: no header row".to_string()));
    }
    record
        .iter()
        .map(|field| {
            std::str::from_utf8(field)
                .map(str::to_string)
                .map_err(|_| bad("the header is not valid UTF-8".to_string()))
        })
        .collect()
}

/// Physical line numbers from byte offsets (the csv crate's own count drifts
/// with `\r\n` line ends). Offsets must be asked for in increasing order.
struct LineCounter<'a> {
    bytes: &'a [u8],
    offset: usize,
    line: u64,
}

impl<'a> LineCounter<'a> {
    fn new(bytes: &'a [u8]) -> Self {
        LineCounter {
            bytes,
            offset: 0,
            line: 1,
        }
    }

    fn line_at(&mut self, byte: u64) -> u64 {
        let target = usize::try_from(byte)
            .unwrap_or(self.bytes.len())
            .min(self.bytes.len());
        if target > self.offset {
            self.line += self.bytes[self.offset..target]
                .iter()
                .filter(|b| **b == b'\n')
                .count() as u64;
            self.offset = target;
        }
        self.line
    }
}

/// The rejects of a record that did not parse. A quote that never closes
/// swallows every line after it into one "record": each of those lines is a
/// record the contributor sent, so each becomes its own reject (and counts in
/// `received`), rather than one reject that hides them.
fn rejects_for(file: &str, line: u64, raw: String, reason: String) -> Vec<ParseReject> {
    let unterminated = raw.contains('\n') && raw.matches('"').count() % 2 == 1;
    if !unterminated {
        return vec![ParseReject {
            file: file.to_string(),
            line,
            raw,
            reason,
        }];
    }
    raw.split('\n')
        .enumerate()
        .map(|(i, text)| ParseReject {
            file: file.to_string(),
            line: line + i as u64,
            raw: text.trim_end_matches('\r').to_string(),
            reason: if i == 0 {
                "unterminated quote: the quote opened on this line never closes".to_string()
            } else {
                format!("inside the unterminated quote opened on line {line}")
            },
        })
        .collect()
}

/// With `\r\n` line ends the csv crate starts a record at the `\n` that ends
/// the previous one: move past it to the record's first byte.
fn skip_line_ends(bytes: &[u8], start: u64) -> u64 {
    let from = usize::try_from(start)
        .unwrap_or(bytes.len())
        .min(bytes.len());
    let skipped = bytes[from..]
        .iter()
        .take_while(|b| matches!(b, b'\r' | b'\n'))
        .count();
    start + skipped as u64
}

/// A line with nothing on it (such as trailing blank lines) is not a record.
fn is_blank(record: &csv::ByteRecord) -> bool {
    record.len() == 1 && record.get(0).is_some_and(|f| f.is_empty())
}

fn record_fields(
    record: &csv::ByteRecord,
    expected: usize,
) -> std::result::Result<Vec<&str>, String> {
    if record.len() != expected {
        return Err(format!(
            "expected {expected} fields, found {}",
            record.len()
        ));
    }
    record
        .iter()
        .enumerate()
        .map(|(i, field)| {
            std::str::from_utf8(field).map_err(|_| format!("field {} is not valid UTF-8", i + 1))
        })
        .collect()
}

/// The record between byte offsets `start` and `end`, without its line end.
pub(super) fn raw_text(bytes: &[u8], start: u64, end: u64) -> String {
    let start = usize::try_from(start)
        .unwrap_or(bytes.len())
        .min(bytes.len());
    let end = usize::try_from(end)
        .unwrap_or(bytes.len())
        .clamp(start, bytes.len());
    String::from_utf8_lossy(&bytes[start..end])
        .trim_end_matches(['\r', '\n'])
        .to_string()
}

#[cfg(test)]
mod tests {
    use arrow::array::Array;

    use super::super::read_drop;
    use super::super::tests::{contract, file};

    #[test]
    fn bom_crlf_quotes_blank_lines_and_free_column_order_are_read() {
        let csv = "\u{FEFF}note,amount,day,id\r\n\"a, \"\"quoted\"\"\nnote\",1.25,2026-01-31,A\r\n,2,2026-02-28,B\r\n\r\n\r\n";
        let batch = read_drop(&contract(), &[file("a.csv", csv.as_bytes())]).unwrap();
        assert!(batch.rejects.is_empty(), "{:?}", batch.rejects);
        assert_eq!(batch.received, 2);
        let notes = batch
            .rows
            .column(3)
            .as_any()
            .downcast_ref::<arrow::array::StringArray>()
            .unwrap();
        assert_eq!(notes.value(0), "a, \"quoted\"\nnote");
        assert!(notes.is_null(1));
        let lines = batch
            .rows
            .column(5)
            .as_any()
            .downcast_ref::<arrow::array::Int64Array>()
            .unwrap();
        assert_eq!(lines.values().to_vec(), vec![2, 4]);
    }

    #[test]
    fn wrong_field_count_and_invalid_utf8_are_rejected_with_raw_text() {
        let mut csv = b"id,day,amount\nA,2026-01-31\nB,2026-01-31,1,9\n".to_vec();
        csv.extend_from_slice(b"C\xff,2026-01-31,1\nD,2026-01-31,1\n");
        let batch = read_drop(&contract(), &[file("b.csv", &csv)]).unwrap();
        assert_eq!(batch.received, 4);
        assert_eq!(batch.rows.num_rows(), 1);
        let got: Vec<(u64, &str, &str)> = batch
            .rejects
            .iter()
            .map(|r| (r.line, r.raw.as_str(), r.reason.as_str()))
            .collect();
        assert_eq!(
            got,
            vec![
                (2, "A,2026-01-31", "expected 3 fields, found 2"),
                (3, "B,2026-01-31,1,9", "expected 3 fields, found 4"),
                (4, "C\u{FFFD},2026-01-31,1", "field 1 is not valid UTF-8"),
            ]
        );
    }

    #[test]
    fn an_unterminated_quote_rejects_every_line_it_swallows() {
        let csv =
            "id,day,amount\nA,2026-01-31,1\nB,\"2026-01-31,2\nC,2026-01-31,3\nD,2026-01-31,4\n";
        let batch = read_drop(&contract(), &[file("q.csv", csv.as_bytes())]).unwrap();
        assert_eq!(batch.rows.num_rows(), 1);
        assert_eq!(batch.received, 4);
        let got: Vec<(u64, &str)> = batch
            .rejects
            .iter()
            .map(|r| (r.line, r.raw.as_str()))
            .collect();
        assert_eq!(
            got,
            vec![
                (3, "B,\"2026-01-31,2"),
                (4, "C,2026-01-31,3"),
                (5, "D,2026-01-31,4")
            ]
        );
        assert!(batch.rejects[0].reason.contains("unterminated quote"));
        assert!(batch.rejects[2].reason.contains("line 3"));
    }

    #[test]
    fn an_empty_file_is_a_bad_drop() {
        let err = read_drop(&contract(), &[file("empty.csv", b"")]).unwrap_err();
        assert!(err.to_string().contains("empty.csv"), "{err}");
    }
}

#[cfg(test)]
mod properties {
    use arrow::array::Array;
    use proptest::prelude::*;

    use super::super::read_drop;
    use super::super::tests::{contract, file};

    proptest! {
        /// Whatever bytes follow a valid header, the reader neither panics nor
        /// loses a record: every row read or rejected counts in `received`.
        #[test]
        fn arbitrary_bodies_never_panic_and_every_record_is_accounted(body in proptest::collection::vec(any::<u8>(), 0..400)) {
            let mut bytes = b"id,day,amount,note\n".to_vec();
            bytes.extend_from_slice(&body);
            let batch = read_drop(&contract(), &[file("p.csv", &bytes)]).unwrap();
            prop_assert_eq!(batch.received, batch.rows.num_rows() as u64 + batch.rejects.len() as u64);
        }

        /// Well-formed rows with any text in the free column are read back as they were.
        #[test]
        fn quoted_text_round_trips(notes in proptest::collection::vec("[^\u{0}]{0,20}", 1..20)) {
            let mut text = String::from("id,day,amount,note\n");
            for (i, note) in notes.iter().enumerate() {
                text.push_str(&format!("A{i},2026-01-31,1.00,\"{}\"\n", note.replace('"', "\"\"")));
            }
            let batch = read_drop(&contract(), &[file("p.csv", text.as_bytes())]).unwrap();
            prop_assert!(batch.rejects.is_empty(), "{:?}", batch.rejects);
            let column = batch.rows.column(3).as_any().downcast_ref::<arrow::array::StringArray>().unwrap();
            for (i, note) in notes.iter().enumerate() {
                let read = if column.is_null(i) { "" } else { column.value(i) };
                prop_assert_eq!(read, note.as_str());
            }
        }
    }
}
