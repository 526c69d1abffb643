//! CSV files: UTF-8 (a leading byte-order mark is tolerated), one header row,
//! `"` quoting, `\n` or `\r\n` line ends, empty field = null. A record with the
//! wrong number of fields or invalid UTF-8 is rejected with its raw text.
//!
//! A large file is cut into one piece per core at line ends outside quotes,
//! and the pieces are parsed and typed at once. A cut is only trusted when the
//! piece before it, read on past its end, finds a record starting exactly
//! there; otherwise that piece reads on to the next trusted cut, so a quote
//! the cut guessed wrong costs time, never a record.

use std::ops::Range;

use super::typing::TypedRows;
use super::{ParseReject, RawText, TypedTable, map_header};
use crate::config::contract::Contract;
use crate::core::drop::DropFile;
use crate::core::parallel::{in_parallel, one_ahead};
use crate::error::{Error, Result};
use crate::pipeline::summary::SchemaDrift;

const BOM: &[u8] = b"\xEF\xBB\xBF";

/// How a file is cut into pieces.
#[derive(Debug, Clone, Copy)]
struct Pieces {
    /// At most this many pieces.
    most: usize,
    /// Each at least this many bytes.
    min_bytes: usize,
    /// Pieces read at once (one per core).
    lanes: usize,
}

impl Pieces {
    /// Pieces of at least 16 MiB (so that a round of typed pieces stays
    /// small whatever the file's size), read one per core at once.
    fn per_core() -> Pieces {
        Pieces {
            most: usize::MAX,
            min_bytes: 16 << 20,
            // At most 8 at once: a round stays within 256 MiB of text
            // whatever the machine's cores.
            lanes: crate::core::parallel::lanes().min(8),
        }
    }
}

/// Reads one CSV file into typed columns, handing `chunk` the rows of one
/// piece at a time (the first chunk carries the file's drift).
pub(super) fn read(
    contract: &Contract,
    file: &DropFile,
    chunk: &mut dyn FnMut(TypedTable) -> Result<()>,
) -> Result<()> {
    read_in_pieces(contract, file, Pieces::per_core(), chunk)
}

fn read_in_pieces(
    contract: &Contract,
    file: &DropFile,
    pieces: Pieces,
    chunk: &mut dyn FnMut(TypedTable) -> Result<()>,
) -> Result<()> {
    let skipped = if file.bytes.starts_with(BOM) {
        BOM.len()
    } else {
        0
    };
    let bytes = file.bytes.slice(skipped..);
    let delimiter = contract.input.delimiter;
    let (header, body_start, header_line) = read_header(&bytes, &file.name, delimiter)?;
    let (positions, mut drift) = map_header(
        contract,
        (&file.name, &format!("{}:{header_line}", file.name)),
        &header,
    )?;
    let file_layout = Layout {
        contract,
        file: &file.name,
        bytes: &bytes,
        positions: &positions,
        fields: header.len(),
    };
    // The pages of a file copied to local disk go back to the system once
    // read: a file is never held whole.
    let release =
        |range: std::ops::Range<usize>| file.release(range.start + skipped..range.end + skipped);
    let (cuts, lines) = cuts(&bytes, body_start, pieces, &release);
    // The next round of pieces is parsed while the caller takes this one's
    // (spreading them over a drop's buckets, say).
    let parse = |give: &mut dyn FnMut((Vec<TypedTable>, Range<usize>)) -> bool| {
        let mut next = Some(0);
        while let Some(first) = next {
            let round = first..(first + pieces.lanes).min(cuts.len());
            let read: Vec<Piece<'_>> =
                in_parallel("read: a parsing thread", round.collect(), |i| {
                    file_layout.read_piece((cuts[i], lines[i]), &cuts[i + 1..])
                })?;
            let (chain, after) = trusted_pieces(first, read);
            next = after;
            let tables = chain
                .into_iter()
                .map(|piece| typed_table(&file.name, &bytes, piece, std::mem::take(&mut drift)))
                .collect::<Result<Vec<_>>>()?;
            tracing::debug!(file = %file.name, pieces = tables.len(), "parsed a round of pieces");
            if !give((tables, cuts[first]..next.map_or(bytes.len(), |n| cuts[n]))) {
                break;
            }
        }
        Ok(())
    };
    one_ahead("read: the parsing thread", parse, |(tables, parsed)| {
        tables.into_iter().try_for_each(&mut *chunk)?;
        release(parsed);
        Ok(())
    })
}

/// One piece, as a table of typed rows (the file's drift given to its first).
fn typed_table(
    file: &str,
    bytes: &bytes::Bytes,
    piece: Piece<'_>,
    drift: SchemaDrift,
) -> Result<TypedTable> {
    let (columns, problems) = piece.typed.finish()?;
    Ok(TypedTable {
        file: file.to_string(),
        columns,
        lines: piece.lines,
        problems,
        raws: RawText::Spans(bytes.clone(), piece.spans),
        rejects: piece.rejects,
        drift,
    })
}

/// Where a file's pieces start: the first record, then a line end outside
/// quotes for each further piece.
///
/// Returns the cuts and the line each starts on.
fn cuts(
    bytes: &[u8],
    body_start: usize,
    pieces: Pieces,
    release: &dyn Fn(std::ops::Range<usize>),
) -> (Vec<usize>, Vec<u64>) {
    let body = bytes.len().saturating_sub(body_start);
    let pieces = pieces.most.min(body / pieces.min_bytes.max(1)).max(1);
    let mut cuts = vec![body_start];
    let mut quotes_before = 0usize;
    let mut scanned = body_start;
    for k in 1..pieces {
        let target = body_start + body * k / pieces;
        let from = target.max(scanned);
        quotes_before += count(&bytes[scanned..from], b'"');
        release(scanned..from);
        match line_start_outside_quotes(bytes, from, quotes_before % 2 == 1) {
            Some((cut, quotes)) if cut < bytes.len() => {
                quotes_before += quotes;
                scanned = cut;
                cuts.push(cut);
            }
            _ => break,
        }
    }
    let mut lines = Vec::with_capacity(cuts.len());
    let mut line = 1 + count(&bytes[..body_start], b'\n') as u64;
    let mut from = body_start;
    for cut in &cuts {
        line += count(&bytes[from..*cut], b'\n') as u64;
        release(from..*cut);
        lines.push(line);
        from = *cut;
    }
    (cuts, lines)
}

fn count(bytes: &[u8], byte: u8) -> usize {
    memchr::memchr_iter(byte, bytes).count()
}

/// The first byte after a run of line ends, at or after `from`, where the
/// quotes seen so far are balanced; with the quotes passed on the way.
fn line_start_outside_quotes(
    bytes: &[u8],
    from: usize,
    mut quoted: bool,
) -> Option<(usize, usize)> {
    let mut quotes = 0;
    let mut at = from;
    while at < bytes.len() {
        match bytes[at] {
            b'"' => {
                quoted = !quoted;
                quotes += 1;
            }
            b'\n' if !quoted => {
                let start = skip_line_ends(bytes, at as u64) as usize;
                return Some((start, quotes));
            }
            _ => {}
        }
        at += 1;
    }
    None
}

/// What every piece of one file shares.
struct Layout<'a> {
    contract: &'a Contract,
    file: &'a str,
    bytes: &'a [u8],
    positions: &'a [Option<usize>],
    fields: usize,
}

/// One piece of a file, parsed and typed.
struct Piece<'c> {
    /// The cut (index into the cuts) where this piece's reading stopped: a
    /// record starts exactly there. `None`: it read to the end of the file.
    stopped_at: Option<usize>,
    typed: TypedRows<'c>,
    lines: Vec<u64>,
    spans: Vec<(u64, u64)>,
    rejects: Vec<ParseReject>,
}

impl<'a> Layout<'a> {
    /// Parses from `start` (on line `line`) until a record starts exactly at
    /// one of the `later` cuts, or to the end of the file.
    fn read_piece(&self, (start, line): (usize, u64), later: &[usize]) -> Result<Piece<'a>> {
        let bytes = self.bytes;
        let guess_end = later.first().copied().unwrap_or(bytes.len());
        let rows = count(&bytes[start..guess_end], b'\n');
        let mut piece = Piece {
            stopped_at: None,
            typed: TypedRows::new(&self.contract.columns, rows),
            lines: Vec::with_capacity(rows),
            spans: Vec::with_capacity(rows),
            rejects: Vec::new(),
        };
        let mut records = Records::new(self.fields);
        let mut decoder = Decoder::new(self.contract.input.delimiter, &bytes[start..]);
        let mut pending = later.iter().enumerate().peekable();
        while let Some(decoded) = decoder.next(&mut records) {
            let (from, end) = (start + decoded.start, (start + decoded.end) as u64);
            let record_start = skip_line_ends(bytes, from as u64);
            while pending
                .next_if(|(_, cut)| (**cut as u64) < record_start)
                .is_some()
            {}
            if let Some(&(index, _)) = pending
                .peek()
                .filter(|(_, cut)| **cut as u64 == record_start)
            {
                piece.stopped_at = Some(index);
                records.drop_last();
                break;
            }
            let skipped = &bytes[from..usize::try_from(record_start).unwrap_or(bytes.len())];
            let line = line + decoded.lines_before + count(skipped, b'\n') as u64;
            match records.check_last() {
                Ok(()) => {
                    records.keep_last();
                    piece.lines.push(line);
                    piece.spans.push((record_start, end));
                }
                Err(reason) => {
                    records.drop_last();
                    piece.rejects.extend(rejects_for(
                        self.file,
                        line,
                        raw_text(bytes, record_start, end),
                        reason,
                    ));
                }
            }
            if records.rows == TYPED_AT_ONCE {
                self.type_records(&mut records, &mut piece.typed)?;
            }
        }
        self.type_records(&mut records, &mut piece.typed)?;
        Ok(piece)
    }

    /// Types the records kept so far, column by column, and clears them.
    fn type_records(&self, records: &mut Records, typed: &mut TypedRows<'_>) -> Result<()> {
        let text = records.text()?;
        typed.append_by_column(records.rows, |row, c| {
            self.positions[c]
                .map(|p| records.field(text, row, p))
                .filter(|v| !v.is_empty())
        });
        records.clear();
        Ok(())
    }
}

/// Records typed at once: few enough that their text stays in the core's
/// cache while each column is typed in turn.
const TYPED_AT_ONCE: usize = 4096;

/// A piece's CSV records as they are decoded: the unquoted bytes of their
/// fields one after the other and where each field ends. A record is
/// decoded last, then kept (counted in `rows`) or dropped; every kept
/// record has the header's number of fields, each valid UTF-8.
struct Records {
    /// The header's number of fields.
    fields: usize,
    /// Field bytes; `data_used` of them written.
    data: Vec<u8>,
    data_used: usize,
    /// Field ends in `data`; `ends_used` of them written.
    ends: Vec<usize>,
    ends_used: usize,
    /// Where the last decoded record starts in `data` and `ends`.
    last: (usize, usize),
    /// Records kept.
    rows: usize,
}

impl Records {
    /// No record yet, of `fields` fields each.
    fn new(fields: usize) -> Records {
        Records {
            fields,
            data: vec![0; 256 * TYPED_AT_ONCE],
            data_used: 0,
            ends: vec![0; fields.max(1) * TYPED_AT_ONCE],
            ends_used: 0,
            last: (0, 0),
            rows: 0,
        }
    }

    /// The last decoded record's field ends.
    fn last_ends(&self) -> &[usize] {
        &self.ends[self.last.1..self.ends_used]
    }

    /// Whether the last decoded record has the header's number of fields,
    /// each valid UTF-8 (the record is checked at once, and each field
    /// boundary must fall between characters); if not, why.
    fn check_last(&self) -> std::result::Result<(), String> {
        let ends = self.last_ends();
        if ends.len() != self.fields {
            return Err(format!(
                "expected {} fields, found {}",
                self.fields,
                ends.len()
            ));
        }
        let start = self.last.0;
        let record = &self.data[start..self.data_used];
        let text = std::str::from_utf8(record).ok();
        if text.is_some_and(|text| ends.iter().all(|end| text.is_char_boundary(end - start))) {
            return Ok(());
        }
        let mut from = start;
        let invalid = ends.iter().position(|&end| {
            let field = &self.data[from..end];
            from = end;
            std::str::from_utf8(field).is_err()
        });
        Err(format!(
            "field {} is not valid UTF-8",
            invalid.unwrap_or_default() + 1
        ))
    }

    /// Keeps the last decoded record.
    fn keep_last(&mut self) {
        self.rows += 1;
    }

    /// Forgets the last decoded record.
    fn drop_last(&mut self) {
        (self.data_used, self.ends_used) = self.last;
    }

    /// The kept records' text (every kept record was checked to be UTF-8).
    fn text(&self) -> Result<&str> {
        std::str::from_utf8(&self.data[..self.data_used])
            .map_err(|e| Error::Internal(format!("read: a kept record is not UTF-8: {e}")))
    }

    /// Field `field` of kept record `row`, in `text` (as [`Records::text`] gives it).
    fn field<'t>(&self, text: &'t str, row: usize, field: usize) -> &'t str {
        let at = row * self.fields + field;
        let start = match at {
            0 => 0,
            _ => self.ends[at - 1],
        };
        text.get(start..self.ends[at]).unwrap_or_default()
    }

    /// Forgets every record.
    fn clear(&mut self) {
        (self.data_used, self.ends_used, self.rows) = (0, 0, 0);
        self.last = (0, 0);
    }
}

/// Where a decoded record was in the input.
struct Decoded {
    /// Where its decoding started (line ends before the record included)
    /// and ended, in the input.
    start: usize,
    end: usize,
    /// Line ends in the input before `start`.
    lines_before: u64,
}

/// Decodes CSV records from one input with `csv_core` (the csv crate's
/// parser: `"` quoting, doubled quotes, `\r`, `\n` or `\r\n` line ends,
/// blank lines skipped), straight from the input into [`Records`].
struct Decoder<'i> {
    core: csv_core::Reader,
    input: &'i [u8],
    at: usize,
}

impl<'i> Decoder<'i> {
    /// A decoder of `input`, fields separated by `delimiter`.
    fn new(delimiter: u8, input: &'i [u8]) -> Decoder<'i> {
        Decoder {
            core: csv_core::ReaderBuilder::new().delimiter(delimiter).build(),
            input,
            at: 0,
        }
    }

    /// Decodes the next record after those in `records` (it becomes their
    /// last); `None` at the end of the input.
    fn next(&mut self, records: &mut Records) -> Option<Decoded> {
        let (start, lines_before) = (self.at, self.core.line() - 1);
        records.last = (records.data_used, records.ends_used);
        loop {
            let (result, read, written, ended) = self.core.read_record(
                &self.input[self.at..],
                &mut records.data[records.data_used..],
                &mut records.ends[records.ends_used..],
            );
            self.at += read;
            records.data_used += written;
            records.ends_used += ended;
            match result {
                csv_core::ReadRecordResult::InputEmpty => {}
                csv_core::ReadRecordResult::OutputFull => {
                    records.data.resize(records.data.len() * 2, 0);
                }
                csv_core::ReadRecordResult::OutputEndsFull => {
                    records.ends.resize(records.ends.len() * 2, 0);
                }
                csv_core::ReadRecordResult::Record => {
                    // csv_core counts a record's ends from its first byte.
                    let (data_start, ends_start) = records.last;
                    records.ends[ends_start..records.ends_used]
                        .iter_mut()
                        .for_each(|end| *end += data_start);
                    return Some(Decoded {
                        start,
                        end: self.at,
                        lines_before,
                    });
                }
                csv_core::ReadRecordResult::End => return None,
            }
        }
    }
}

/// The pieces (the first being piece `first`) on the chain of trusted cuts:
/// each piece is followed by the one starting where it stopped. Returns
/// them and the piece the chain goes on with after these (`None`: the
/// chain reached the end of the file).
fn trusted_pieces(first: usize, pieces: Vec<Piece<'_>>) -> (Vec<Piece<'_>>, Option<usize>) {
    let mut next = Some(first);
    let mut chain = Vec::with_capacity(pieces.len());
    for (i, piece) in (first..).zip(pieces) {
        if next != Some(i) {
            continue;
        }
        next = piece.stopped_at.map(|later| i + 1 + later);
        chain.push(piece);
    }
    (chain, next)
}

/// The header's field names, the byte where the first record starts and
/// the header's line.
fn read_header(bytes: &[u8], file: &str, delimiter: u8) -> Result<(Vec<String>, usize, u64)> {
    let bad = |reason: String| Error::BadDrop {
        location: file.to_string(),
        reason,
    };
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .delimiter(delimiter)
        .from_reader(bytes);
    let mut record = csv::ByteRecord::new();
    let found = reader
        .read_byte_record(&mut record)
        .map_err(|e| bad(format!("cannot read the header: {e}")))?;
    if !found {
        return Err(bad("the file is empty: no header row".to_string()));
    }
    let header = record
        .iter()
        .map(|field| {
            std::str::from_utf8(field)
                .map(str::to_string)
                .map_err(|_| bad("the header is not valid UTF-8".to_string()))
        })
        .collect::<Result<_>>()?;
    let body_start = usize::try_from(reader.position().byte()).unwrap_or(bytes.len());
    let line = record.position().map_or(1, csv::Position::line);
    Ok((header, body_start.min(bytes.len()), line))
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

/// With `\r\n` line ends `csv_core` starts a record at the `\n` that ends
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
pub(super) mod tests {
    use arrow::array::Array;

    use super::super::read_drop;
    use super::super::tests::{contract, file};

    #[test]
    fn bom_crlf_quotes_blank_lines_and_free_column_order_are_read() {
        let csv = "\u{FEFF}note,amount,day,id\r\n\"a, \"\"quoted\"\"\nnote\",1.25,2026-01-31,A\r\n,2,2026-02-28,B\r\n\r\n\r\n";
        let batch = read_drop(&contract(), &[file("a.csv", csv.as_bytes())]).unwrap();
        assert!(batch.rejects().is_empty(), "{:?}", batch.rejects());
        assert_eq!(batch.received, 2);
        let rows = batch.rows.whole().unwrap();
        let notes = rows
            .column(3)
            .as_any()
            .downcast_ref::<arrow::array::StringArray>()
            .unwrap();
        assert_eq!(notes.value(0), "a, \"quoted\"\nnote");
        assert!(notes.is_null(1));
        let lines = rows
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
        // Each half of a two-byte character alone, in two fields: the record
        // as a whole would be valid UTF-8, its fields are not.
        csv.extend_from_slice(b"E\xC3,\xA92026-01-31,1\n");
        let batch = read_drop(&contract(), &[file("b.csv", &csv)]).unwrap();
        assert_eq!(batch.received, 5);
        assert_eq!(batch.rows.num_rows(), 1);
        let rejects = batch.rejects();
        let got: Vec<(u64, &str, &str)> = rejects
            .iter()
            .map(|r| (r.line, r.raw.as_str(), r.reason.as_str()))
            .collect();
        assert_eq!(
            got,
            vec![
                (2, "A,2026-01-31", "expected 3 fields, found 2"),
                (3, "B,2026-01-31,1,9", "expected 3 fields, found 4"),
                (4, "C\u{FFFD},2026-01-31,1", "field 1 is not valid UTF-8"),
                (
                    6,
                    "E\u{FFFD},\u{FFFD}2026-01-31,1",
                    "field 1 is not valid UTF-8"
                ),
            ]
        );
    }

    #[test]
    fn records_typed_a_block_at_a_time_keep_their_lines_values_and_first_problem() {
        let rows = 3 * super::TYPED_AT_ONCE + 7;
        let mut text = String::from("id,day,amount,note\n");
        let (mut line, mut good, mut rejects) = (2u64, Vec::new(), Vec::new());
        for i in 0..rows {
            if i % 1300 == 1299 {
                text.push_str("short,row\n");
                rejects.push((line, "expected 4 fields, found 2".to_string()));
                line += 1;
            }
            // Two bad values in one record: the first column's problem is its reason.
            let (day, amount) = match i % 1000 {
                999 => ("2026-02-30", "x"),
                500 => ("2026-01-31", "1.005"),
                _ => ("2026-01-31", "1.50"),
            };
            let note = if i % 700 == 0 { "two\nlines" } else { "n" };
            text.push_str(&format!("A{i},{day},{amount},\"{note}\"\n"));
            match i % 1000 {
                999 => rejects.push((
                    line,
                    "column 'day': cannot read '2026-02-30' as Date32".to_string(),
                )),
                500 => rejects.push((
                    line,
                    "column 'amount': cannot read '1.005' as Decimal128(18, 2)".to_string(),
                )),
                _ => good.push((format!("A{i}"), line, note)),
            }
            line += 1 + note.matches('\n').count() as u64;
        }
        let batch = read_drop(&contract(), &[file("t.csv", text.as_bytes())]).unwrap();
        let mut got: Vec<(u64, String)> = batch
            .rejects()
            .iter()
            .map(|r| (r.line, r.reason.clone()))
            .collect();
        got.sort();
        assert_eq!(got, rejects);
        assert_eq!(batch.received, (good.len() + rejects.len()) as u64);
        let read = batch.rows.whole().unwrap();
        use arrow::array::AsArray;
        use arrow::datatypes::{Decimal128Type, Int64Type};
        let (ids, notes) = (
            read.column(0).as_string::<i32>(),
            read.column(3).as_string::<i32>(),
        );
        let amounts = read.column(2).as_primitive::<Decimal128Type>();
        let lines = read.column(5).as_primitive::<Int64Type>();
        let read: Vec<(String, u64, &str)> = (0..read.num_rows())
            .map(|r| {
                (
                    ids.value(r).to_string(),
                    lines.value(r) as u64,
                    notes.value(r),
                )
            })
            .collect();
        assert_eq!(read, good);
        assert!(amounts.iter().all(|a| a == Some(150)));
    }

    #[test]
    fn a_line_of_only_an_empty_quoted_field_is_a_reject_not_skipped() {
        let csv = "id,day,amount\nA,2026-01-31,1\n\"\"\n\nB,2026-01-31,2\n";
        let batch = read_drop(&contract(), &[file("e.csv", csv.as_bytes())]).unwrap();
        assert_eq!((batch.received, batch.rows.num_rows()), (3, 2));
        let rejects = batch.rejects();
        let got: Vec<(u64, &str, &str)> = rejects
            .iter()
            .map(|r| (r.line, r.raw.as_str(), r.reason.as_str()))
            .collect();
        assert_eq!(got, vec![(3, "\"\"", "expected 3 fields, found 1")]);
    }

    #[test]
    fn an_unterminated_quote_rejects_every_line_it_swallows() {
        let csv =
            "id,day,amount\nA,2026-01-31,1\nB,\"2026-01-31,2\nC,2026-01-31,3\nD,2026-01-31,4\n";
        let batch = read_drop(&contract(), &[file("q.csv", csv.as_bytes())]).unwrap();
        assert_eq!(batch.rows.num_rows(), 1);
        assert_eq!(batch.received, 4);
        let rejects = batch.rejects();
        let got: Vec<(u64, &str)> = rejects.iter().map(|r| (r.line, r.raw.as_str())).collect();
        assert_eq!(
            got,
            vec![
                (3, "B,\"2026-01-31,2"),
                (4, "C,2026-01-31,3"),
                (5, "D,2026-01-31,4")
            ]
        );
        assert!(batch.rejects()[0].reason.contains("unterminated quote"));
        assert!(batch.rejects()[2].reason.contains("line 3"));
    }

    /// A file's chunks as one: columns, lines, problems (rows counted
    /// from the file's first), rejects and spans.
    pub(super) type Joined = (
        Vec<arrow::array::ArrayRef>,
        Vec<u64>,
        Vec<(usize, String)>,
        Vec<super::ParseReject>,
        Vec<(u64, u64)>,
    );

    fn joined(tables: Vec<super::TypedTable>) -> Joined {
        let mut joined: Joined = Default::default();
        let mut parts: Vec<Vec<arrow::array::ArrayRef>> = Vec::new();
        for table in tables {
            let offset = joined.1.len();
            joined.2.extend(
                table
                    .problems
                    .iter()
                    .map(|(row, why)| (row + offset, why.clone())),
            );
            joined.1.extend(&table.lines);
            joined.3.extend(table.rejects.iter().cloned());
            if let super::RawText::Spans(_, spans) = &table.raws {
                joined.4.extend(spans);
            }
            parts.push(table.columns);
        }
        let width = parts.first().map_or(0, Vec::len);
        joined.0 = (0..width)
            .map(|c| {
                let column: Vec<&dyn arrow::array::Array> =
                    parts.iter().map(|p| p[c].as_ref()).collect();
                arrow::compute::concat(&column).unwrap()
            })
            .collect();
        joined
    }

    /// Reads `text` whole and in up to `pieces` pieces of at least
    /// `min_bytes`, `lanes` at a time, each piece a chunk.
    pub(super) fn whole_and_in_pieces(
        text: &[u8],
        (pieces, min_bytes, lanes): (usize, usize, usize),
    ) -> (Joined, Joined) {
        let contract = contract();
        let file = file("p.csv", text);
        let read = |pieces: super::Pieces| {
            let mut tables = Vec::new();
            super::read_in_pieces(&contract, &file, pieces, &mut |t| {
                tables.push(t);
                Ok(())
            })
            .unwrap();
            tables
        };
        let whole = read(super::Pieces {
            most: 1,
            min_bytes: 1,
            lanes: 1,
        });
        assert_eq!(whole.len(), 1);
        let cut = read(super::Pieces {
            most: pieces,
            min_bytes,
            lanes,
        });
        (joined(whole), joined(cut))
    }

    #[test]
    fn a_file_read_in_pieces_reads_as_it_does_whole() {
        let mut text = String::from("id,day,amount,note\r\n");
        for i in 0..200 {
            let note = match i % 7 {
                0 => "\"two\nlines\"".to_string(),
                1 => "ab\"c".to_string(),
                2 => "\"a, \"\"quoted\"\"\"".to_string(),
                3 => String::new(),
                _ => format!("n{i}"),
            };
            text.push_str(&format!("A{i},2026-01-{:02},{i}.5,{note}\r\n", 1 + i % 28));
            if i % 50 == 0 {
                text.push_str("\r\n");
            }
        }
        for (pieces, lanes) in [(2, 2), (3, 1), (8, 2), (8, 3), (8, 8)] {
            let (cuts, lines) = super::cuts(
                text.as_bytes(),
                20,
                super::Pieces {
                    most: pieces,
                    min_bytes: 64,
                    lanes,
                },
                &|_| {},
            );
            assert_eq!(cuts.len(), pieces, "the file is cut");
            assert_eq!(lines[0], 2, "the first record is on line 2");
            let (whole, cut) = whole_and_in_pieces(text.as_bytes(), (pieces, 64, lanes));
            assert_eq!(whole.1.len(), 200);
            assert_eq!(whole, cut, "{pieces} pieces, {lanes} at once");
        }
    }

    #[test]
    fn a_cut_inside_an_unterminated_quote_loses_no_line() {
        let mut text = String::from("id,day,amount\nA,2026-01-31,1\nB,\"2026-01-31,2\n");
        for i in 0..100 {
            text.push_str(&format!("C{i},2026-01-31,3\n"));
        }
        for lanes in [1, 2, 4] {
            let (whole, cut) = whole_and_in_pieces(text.as_bytes(), (4, 32, lanes));
            assert_eq!(whole.1.len() + whole.3.len(), 102);
            assert_eq!(whole, cut, "{lanes} at once");
        }
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
            prop_assert_eq!(batch.received, batch.rows.num_rows() as u64 + batch.rejects().len() as u64);
        }

        /// Whatever the bytes, a file read in pieces reads exactly as it does whole.
        #[test]
        fn any_file_reads_the_same_in_pieces(body in proptest::collection::vec(prop_oneof![Just(b'"'), Just(b','), Just(b'\n'), Just(b'\r'), Just(b'a'), Just(b'1')], 0..600), pieces in 2usize..6, lanes in 1usize..4) {
            let mut bytes = b"id,day,amount,note\n".to_vec();
            bytes.extend_from_slice(&body);
            let (whole, cut) = super::tests::whole_and_in_pieces(&bytes, (pieces, 16, lanes));
            prop_assert_eq!(whole, cut);
        }

        /// Well-formed rows with any text in the free column are read back as they were.
        #[test]
        fn quoted_text_round_trips(notes in proptest::collection::vec("[^\u{0}]{0,20}", 1..20)) {
            let mut text = String::from("id,day,amount,note\n");
            for (i, note) in notes.iter().enumerate() {
                text.push_str(&format!("A{i},2026-01-31,1.00,\"{}\"\n", note.replace('"', "\"\"")));
            }
            let batch = read_drop(&contract(), &[file("p.csv", text.as_bytes())]).unwrap();
            prop_assert!(batch.rejects().is_empty(), "{:?}", batch.rejects());
            let rows = batch.rows.whole().unwrap();
            let column = rows.column(3).as_any().downcast_ref::<arrow::array::StringArray>().unwrap();
            for (i, note) in notes.iter().enumerate() {
                let read = if column.is_null(i) { "" } else { column.value(i) };
                prop_assert_eq!(read, note.as_str());
            }
        }
    }
}
