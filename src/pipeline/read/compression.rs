//! Compressed CSV: `.csv.gz` (gzip) and `.csv.zst` (Zstandard) are
//! decompressed, as a stream, to an unnamed file in the scratch folder
//! (`[resources] scratch_dir`) before the drop's lines are counted, and
//! read through a mapping as a copied drop file is: they read exactly as
//! the plain file would (same lines, same rejects, the same buckets) and
//! the text is never held in memory whole.
//! A file named `.csv` whose first bytes are a gzip or Zstandard frame is
//! decompressed too. A plain CSV is passed through untouched: only its
//! first four bytes are looked at.

use std::io::Seek;
use std::path::Path;

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

/// Whether `lower` (a lower-case file name) is a CSV file, compressed or not.
pub(super) fn is_csv(lower: &str) -> bool {
    [".csv", ".csv.gz", ".csv.zst"]
        .iter()
        .any(|ext| lower.ends_with(ext))
}

/// The file decompressed to an unnamed file in `scratch` (the system's
/// temporary folder when `None`), or `None` when it is plain CSV. `lower`
/// is its name in lower case.
pub(super) fn decompressed(
    lower: &str,
    file: &DropFile,
    scratch: Option<&Path>,
) -> Result<Option<DropFile>> {
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
    let parent = crate::core::spill::scratch_folder(scratch);
    let io = |source| Error::Io {
        path: parent.clone(),
        source,
    };
    let mut plain = ScratchFile {
        file: tempfile::tempfile_in(&parent).map_err(io)?,
        failed: false,
    };
    let written = match codec {
        Codec::Gzip => std::io::copy(
            &mut flate2::read::MultiGzDecoder::new(&file.bytes[..]),
            &mut plain,
        ),
        Codec::Zstd => zstd::stream::read::Decoder::new(&file.bytes[..])
            .and_then(|mut decoder| std::io::copy(&mut decoder, &mut plain)),
    };
    let written = match written {
        Ok(written) => written,
        // The scratch folder's fault (it is full, say), not the file's.
        Err(source) if plain.failed => return Err(io(source)),
        Err(e) => {
            return Err(bad(
                file,
                format!("cannot decompress ({}): {e}", codec.name()),
            ));
        }
    };
    plain.file.rewind().map_err(io)?;
    tracing::debug!(file = %file.name, codec = codec.name(), bytes = written, "decompressed");
    // The compressed file is read: its pages go back to the system.
    file.release(0..file.bytes.len());
    DropFile::mapped(file.name.clone(), &plain.file)
        .map(Some)
        .map_err(io)
}

/// The unnamed file a compressed file is decompressed into, telling a
/// failure to write it from a failure to decompress.
struct ScratchFile {
    file: std::fs::File,
    failed: bool,
}

impl std::io::Write for ScratchFile {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        let written = self.file.write(bytes);
        self.failed |= written.is_err();
        written
    }

    fn flush(&mut self) -> std::io::Result<()> {
        let flushed = self.file.flush();
        self.failed |= flushed.is_err();
        flushed
    }
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
            assert_eq!(batch.rejects().len(), 1, "{name}");
            assert_eq!(batch.rejects()[0].line, 3, "{name}");
            assert_eq!(batch.rejects()[0].raw, "B,2026-02-30,2", "{name}");
        }
    }

    #[test]
    fn a_compressed_file_is_decompressed_into_the_scratch_folder() {
        let compressed = file("a.csv.gz", &gzip(CSV.as_bytes()));
        let scratch = tempfile::tempdir().unwrap();
        let gone = scratch.path().join("gone");
        let err = super::decompressed("a.csv.gz", &compressed, Some(&gone)).unwrap_err();
        assert!(err.to_string().contains("gone"), "{err}");
        let plain = super::decompressed("a.csv.gz", &compressed, Some(scratch.path()))
            .unwrap()
            .unwrap();
        assert_eq!(&plain.bytes[..], CSV.as_bytes());
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
