//! Compressed CSV: `.csv.gz` (gzip) and `.csv.zst` (Zstandard) are
//! decompressed whole before parsing, so they read exactly as the plain file
//! would (same lines, same rejects). A file named `.csv` whose first bytes are
//! a gzip or Zstandard frame is decompressed too. A plain CSV is passed
//! through untouched: only its first four bytes are looked at.

use std::io::Read;

use crate::core::drop::DropFile;
use crate::error::{Error, Result};

const GZIP_MAGIC: &[u8] = &[0x1f, 0x8b];
const ZSTD_MAGIC: &[u8] = &[0x28, 0xb5, 0x2f, 0xfd];

/// How a CSV file is compressed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Codec {
    Gzip,
    Zstd,
}

impl Codec {
    fn name(self) -> &'static str {
        match self {
            Codec::Gzip => "gzip",
            Codec::Zstd => "zstd",
        }
    }
}

/// Whether a file named `lower` (lower case) is named as compressed.
pub(super) fn is_compressed(lower: &str) -> bool {
    lower.ends_with(".gz") || lower.ends_with(".zst")
}

/// Whether `lower` (a lower-case file name) is a CSV file, compressed or not.
pub(super) fn is_csv(lower: &str) -> bool {
    [".csv", ".csv.gz", ".csv.zst"]
        .iter()
        .any(|ext| lower.ends_with(ext))
}

/// The file decompressed, or `None` when it is plain CSV. `lower` is its
/// name in lower case.
pub(super) fn decompressed(lower: &str, file: &DropFile) -> Result<Option<DropFile>> {
    let by_magic = if file.bytes.starts_with(GZIP_MAGIC) {
        Some(Codec::Gzip)
    } else if file.bytes.starts_with(ZSTD_MAGIC) {
        Some(Codec::Zstd)
    } else {
        None
    };
    let by_name = if lower.ends_with(".gz") {
        Some(Codec::Gzip)
    } else if lower.ends_with(".zst") {
        Some(Codec::Zstd)
    } else {
        None
    };
    let codec = match (by_name, by_magic) {
        (None, None) => return Ok(None),
        (Some(named), Some(found)) if named != found => {
            return Err(bad(
                file,
                format!("named as {} but holds {} data", named.name(), found.name()),
            ));
        }
        (Some(named), None) => {
            return Err(bad(
                file,
                format!("named as {} but is not {} data", named.name(), named.name()),
            ));
        }
        (_, Some(found)) => found,
    };
    let mut plain = Vec::with_capacity(file.bytes.len().saturating_mul(4));
    let read = match codec {
        Codec::Gzip => flate2::read::MultiGzDecoder::new(&file.bytes[..]).read_to_end(&mut plain),
        Codec::Zstd => zstd::stream::read::Decoder::new(&file.bytes[..])
            .and_then(|mut decoder| decoder.read_to_end(&mut plain)),
    };
    read.map_err(|e| bad(file, format!("cannot decompress ({}): {e}", codec.name())))?;
    tracing::debug!(file = %file.name, codec = codec.name(), bytes = plain.len(), "decompressed");
    // The compressed file is read: its pages go back to the system.
    file.release(0..file.bytes.len());
    Ok(Some(DropFile::new(
        file.name.clone(),
        bytes::Bytes::from(plain),
    )))
}

fn bad(file: &DropFile, reason: String) -> Error {
    Error::BadDrop {
        location: file.name.clone(),
        reason,
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::super::read_drop;
    use super::super::tests::{contract, file};

    const CSV: &str = "id,day,amount\nA,2026-01-31,1.50\nB,2026-02-30,2\n";

    fn gzip(text: &[u8]) -> Vec<u8> {
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        encoder.write_all(text).unwrap();
        encoder.finish().unwrap()
    }

    #[test]
    fn gzip_and_zstd_files_read_as_the_plain_file() {
        let plain = read_drop(&contract(), &[file("a.csv", CSV.as_bytes())]).unwrap();
        let zst = zstd::encode_all(CSV.as_bytes(), 3).unwrap();
        for (name, bytes) in [
            ("a.csv.gz", gzip(CSV.as_bytes())),
            ("A.CSV.GZ", gzip(CSV.as_bytes())),
            ("a.csv.zst", zst.clone()),
            ("a.csv", zst),
        ] {
            let batch = read_drop(&contract(), &[file(name, &bytes)]).unwrap();
            assert_eq!(
                batch.rows.whole().unwrap().columns()[..4],
                plain.rows.whole().unwrap().columns()[..4],
                "{name}"
            );
            assert_eq!(batch.received, plain.received, "{name}");
            assert_eq!(batch.rejects.len(), 1, "{name}");
            assert_eq!(batch.rejects[0].line, 3, "{name}");
            assert_eq!(batch.rejects[0].raw, "B,2026-02-30,2", "{name}");
        }
    }

    #[test]
    fn a_file_whose_name_and_bytes_disagree_is_a_bad_drop() {
        for (name, bytes) in [
            ("a.csv.gz", CSV.as_bytes().to_vec()),
            ("a.csv.zst", gzip(CSV.as_bytes())),
            ("a.csv.gz", vec![0x1f, 0x8b, 1, 2, 3]),
        ] {
            let err = read_drop(&contract(), &[file(name, &bytes)]).unwrap_err();
            assert!(err.to_string().contains(name), "{err}");
        }
    }
}
