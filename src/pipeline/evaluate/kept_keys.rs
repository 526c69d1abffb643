//! A reference's keys kept for later runs. Once a run has loaded them from
//! one version of the reference (its files as listed, or its table's
//! metadata file), their fingerprints are written to
//! `<dq_error>/reference-keys/<reference>/<version>.keys` (16 bytes a key);
//! a later run, on any machine, that finds the reference at the same
//! version reads them back instead of reading the reference again. The file
//! carries a BLAKE3 checksum: one that does not read back whole is logged
//! and the reference read again. Beside it, `<version>.files` names the
//! version (each file's path, size and version): a folder of files only
//! added to since reads back the keys of the earlier version and reads
//! only the files added. Only a reference's latest version is kept;
//! deleting the folder only costs time. A dry run reads them, never writes.

use bytes::Bytes;

use crate::config::plan::Reference;
use crate::core::keys::KeySet;
use crate::error::{Error, Result};
use crate::infra::storage::{Location, ObjectSink};
use crate::stage::Stage;

/// Where the references' keys are kept, and whether this run keeps them.
#[derive(Debug, Clone)]
pub struct KeptKeys {
    dq_error: Location,
    write: bool,
}

/// The folder of kept keys under dq_error.
const FOLDER: &str = "reference-keys";
/// How key fingerprints are computed (`core::keys::fingerprints`: XXH3-128
/// over the parts as text, length-prefixed): part of every reference's
/// folder name, so keys fingerprinted another way are never read back.
const SCHEME: &str = "xxh3-128 text length-prefixed v1";
/// What a keys file starts with: its format and version.
const MAGIC: &[u8; 8] = b"SLKEYS01";
/// Magic, key parts (u32) and key count (u64), little-endian.
const HEADER: usize = MAGIC.len() + 4 + 8;
/// The BLAKE3 checksum of everything before it, at the end.
const CHECKSUM: usize = 32;
/// Fingerprints written per piece of the upload (1 MiB).
const PIECE_KEYS: usize = 65_536;

impl KeptKeys {
    /// Keys kept under `dq_error`, written there only when `write`.
    pub fn new(dq_error: Location, write: bool) -> KeptKeys {
        KeptKeys { dq_error, write }
    }

    /// The keys of `reference` kept at `version` (what names the version of
    /// its files or table), if a run kept them and they read back whole
    /// (streamed: never held twice).
    pub(crate) async fn read(&self, reference: &Reference, version: &str) -> Option<KeySet> {
        let path = path_of(reference, version);
        let read = async {
            if !self.dq_error.exists(&path).await? {
                return Ok(None);
            }
            let mut reader = KeysReader::new(reference.keys.len(), self.dq_error.url_of(&path));
            self.dq_error.stream_to(&path, &mut reader).await?;
            reader.finish().map(Some)
        };
        match read.await {
            Ok(Some(keys)) => {
                tracing::debug!(reference = %reference.name, keys = keys.len(), "reference keys read back from where a run kept them");
                Some(keys)
            }
            Ok(None) => None,
            Err(error) => {
                tracing::warn!(reference = %reference.name, %error, "the reference's kept keys do not read back: reading the reference");
                None
            }
        }
    }

    /// The keys a run kept of `reference` at a version `usable` makes
    /// something of (an earlier version of files all still listed: the
    /// files added since), with what it made.
    pub(crate) async fn read_earlier<T>(
        &self,
        reference: &Reference,
        usable: impl Fn(&str) -> Option<T>,
    ) -> Option<(T, KeySet)> {
        let listed = match self.dq_error.list(&folder_of(reference)).await {
            Ok(listed) => listed,
            Err(error) => {
                tracing::warn!(reference = %reference.name, %error, "the reference's kept keys cannot be listed: reading the reference");
                return None;
            }
        };
        let versions = listed.iter().filter(|o| o.relative.ends_with(FILES));
        for named in versions {
            let version = match self.dq_error.get_opt(&named.relative).await {
                Ok(Some(text)) => String::from_utf8(text.to_vec()).ok(),
                Ok(None) => continue,
                Err(error) => {
                    tracing::warn!(reference = %reference.name, %error, "a version of the reference's kept keys cannot be read: passed over");
                    continue;
                }
            };
            let Some(version) = version else {
                tracing::warn!(reference = %reference.name, path = %named.relative, "a kept keys version file is not text silverline wrote: passed over");
                continue;
            };
            if let Some(made) = usable(&version)
                && let Some(keys) = self.read(reference, &version).await
            {
                return Some((made, keys));
            }
        }
        None
    }

    /// Keeps `keys`, loaded from `reference` at `version`, for later runs
    /// (the keys file, then the `.files` file naming the version) and
    /// deletes the reference's other versions; whether they are kept
    /// (never in a dry run; a failure is logged and the run goes on).
    pub(crate) async fn keep(&self, reference: &Reference, version: &str, keys: &KeySet) -> bool {
        if !self.write {
            return false;
        }
        match self.write_keys(reference, version, keys).await {
            Ok(()) => true,
            Err(error) => {
                tracing::warn!(reference = %reference.name, %error, "the reference's keys could not be kept for later runs");
                false
            }
        }
    }

    async fn write_keys(&self, reference: &Reference, version: &str, keys: &KeySet) -> Result<()> {
        let path = path_of(reference, version);
        let mut upload = self.dq_error.upload(&path);
        let written = write_pieces(keys, reference.keys.len(), &mut upload).await;
        match written {
            Ok(()) => upload.finish().await?,
            Err(error) => {
                upload.abort().await;
                return Err(error);
            }
        }
        let named = version_path_of(reference, version);
        self.dq_error
            .put(&named, version.as_bytes().to_vec())
            .await?;
        for other in self.dq_error.list(&folder_of(reference)).await? {
            if other.relative != path && other.relative != named {
                self.dq_error.delete(&other.relative).await?;
            }
        }
        Ok(())
    }
}

/// Writes the keys file of `keys` (keys of `width` parts) to `upload`, a
/// piece at a time.
async fn write_pieces(
    keys: &KeySet,
    width: usize,
    upload: &mut crate::infra::storage::Upload,
) -> Result<()> {
    let prints = keys.prints();
    let width = u32::try_from(width)
        .map_err(|_| Error::Internal("reference keys of too many parts".to_string()))?;
    let mut head = Vec::with_capacity(HEADER);
    head.extend_from_slice(MAGIC);
    head.extend_from_slice(&width.to_le_bytes());
    head.extend_from_slice(&(prints.len() as u64).to_le_bytes());
    let mut hash = blake3::Hasher::new();
    hash.update(&head);
    upload.write(Bytes::from(head)).await?;
    for chunk in prints.chunks(PIECE_KEYS) {
        let piece: Vec<u8> = chunk.iter().flat_map(|print| print.to_le_bytes()).collect();
        hash.update(&piece);
        upload.write(Bytes::from(piece)).await?;
    }
    upload
        .write(Bytes::copy_from_slice(hash.finalize().as_bytes()))
        .await
}

/// A keys file read piece by piece ([`ObjectSink`]): its header, then its
/// fingerprints, hashed as they come, then its checksum; its format, key
/// parts, length and checksum checked.
struct KeysReader {
    /// The reference's key parts.
    width: usize,
    /// The file's URL, for errors.
    url: String,
    size: u64,
    head: Vec<u8>,
    count: usize,
    prints: Vec<u128>,
    /// The bytes of a fingerprint cut between two pieces.
    partial: Vec<u8>,
    tail: Vec<u8>,
    hash: blake3::Hasher,
}

impl KeysReader {
    fn new(width: usize, url: String) -> KeysReader {
        KeysReader {
            width,
            url,
            size: 0,
            head: Vec::with_capacity(HEADER),
            count: 0,
            prints: Vec::new(),
            partial: Vec::with_capacity(16),
            tail: Vec::with_capacity(CHECKSUM),
            hash: blake3::Hasher::new(),
        }
    }

    fn bad(&self, reason: impl Into<String>) -> Error {
        Error::BadRecord {
            location: format!("kept reference keys {}", self.url),
            reason: reason.into(),
        }
    }

    /// The header read: checks it against the reference and the file's size
    /// before the fingerprints' room is taken.
    fn start(&mut self) -> Result<()> {
        let (magic, counts) = self.head.split_at(MAGIC.len());
        if magic != MAGIC {
            return Err(self.bad("it is not a keys file silverline wrote"));
        }
        let mut width = [0u8; 4];
        width.copy_from_slice(&counts[..4]);
        let mut count = [0u8; 8];
        count.copy_from_slice(&counts[4..]);
        let (width, count) = (u32::from_le_bytes(width), u64::from_le_bytes(count));
        if usize::try_from(width).ok() != Some(self.width) {
            let reason = format!(
                "it holds keys of {width} parts, the reference's have {}",
                self.width
            );
            return Err(self.bad(reason));
        }
        let expected = count
            .checked_mul(16)
            .and_then(|body| body.checked_add((HEADER + CHECKSUM) as u64));
        self.count = match (expected == Some(self.size), usize::try_from(count)) {
            (true, Ok(count)) => count,
            _ => return Err(self.bad("its length does not match its key count")),
        };
        self.hash.update(&self.head);
        self.prints.reserve_exact(self.count);
        Ok(())
    }

    /// Takes fingerprints from `body`, hashed, a cut one completed first.
    fn fingerprints(&mut self, mut body: &[u8]) {
        self.hash.update(body);
        if !self.partial.is_empty() {
            let taken = (16 - self.partial.len()).min(body.len());
            self.partial.extend_from_slice(&body[..taken]);
            body = &body[taken..];
            if self.partial.len() == 16 {
                self.prints.push(print_of(&self.partial));
                self.partial.clear();
            }
        }
        let whole = body.chunks_exact(16);
        self.partial.extend_from_slice(whole.remainder());
        self.prints.extend(whole.map(print_of));
    }

    /// The keys, once every byte came and the checksum matches.
    fn finish(self) -> Result<KeySet> {
        if self.head.len() < HEADER
            || self.prints.len() != self.count
            || self.tail.len() != CHECKSUM
        {
            return Err(self.bad("it is cut short"));
        }
        if self.hash.finalize().as_bytes()[..] != self.tail[..] {
            return Err(self.bad("its checksum does not match its content"));
        }
        KeySet::from_prints(self.prints, self.width, Stage::Reference)
    }
}

impl ObjectSink for KeysReader {
    fn size(&mut self, size: u64) {
        self.size = size;
    }

    fn piece(&mut self, mut piece: &[u8]) -> Result<()> {
        if self.head.len() < HEADER {
            let taken = (HEADER - self.head.len()).min(piece.len());
            self.head.extend_from_slice(&piece[..taken]);
            piece = &piece[taken..];
            if self.head.len() < HEADER {
                return Ok(());
            }
            self.start()?;
        }
        let body_left = 16 * (self.count - self.prints.len()) - self.partial.len();
        let (body, tail) = piece.split_at(body_left.min(piece.len()));
        self.fingerprints(body);
        self.tail.extend_from_slice(tail);
        if self.tail.len() > CHECKSUM {
            return Err(self.bad("it runs past its checksum"));
        }
        Ok(())
    }
}

/// A fingerprint from its 16 bytes, little-endian.
fn print_of(bytes: &[u8]) -> u128 {
    let mut print = [0u8; 16];
    print.copy_from_slice(bytes);
    u128::from_le_bytes(print)
}

/// The folder of `reference`'s kept keys: named by a hash of what defines
/// it (name, location, format, key columns), whatever characters they use.
fn folder_of(reference: &Reference) -> String {
    let mut hash = blake3::Hasher::new();
    for part in [
        SCHEME,
        reference.name.as_str(),
        reference.location.as_str(),
        &format!("{:?}", reference.format),
    ] {
        hash.update(part.as_bytes());
        hash.update(&[0]);
    }
    for (column, other) in &reference.keys {
        hash.update(column.as_bytes());
        hash.update(&[0]);
        hash.update(other.as_bytes());
        hash.update(&[0]);
    }
    format!("{FOLDER}/{}", &hash.finalize().to_hex()[..16])
}

/// The keys file of `reference` at `version`.
fn path_of(reference: &Reference, version: &str) -> String {
    format!("{}.keys", stem_of(reference, version))
}

/// What ends the file naming the version of the keys file beside it.
const FILES: &str = ".files";

/// The file naming `version`, beside `reference`'s keys file at it.
fn version_path_of(reference: &Reference, version: &str) -> String {
    format!("{}{FILES}", stem_of(reference, version))
}

/// The name of `reference`'s files at `version`, without their ending.
fn stem_of(reference: &Reference, version: &str) -> String {
    let version = blake3::hash(version.as_bytes());
    format!("{}/{}", folder_of(reference), &version.to_hex()[..32])
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{ArrayRef, StringArray};

    use super::*;
    use crate::config::plan::ReferenceFormat;
    use crate::infra::storage::Stores;

    fn holders() -> Reference {
        Reference {
            name: "holders".to_string(),
            location: "file:///refs/holders".to_string(),
            format: ReferenceFormat::Csv,
            keys: vec![("holder".to_string(), "holder_id".to_string())],
        }
    }

    fn keys_of(values: &[&str]) -> KeySet {
        let mut keys = KeySet::new(Stage::Reference);
        let column: ArrayRef = Arc::new(StringArray::from(values.to_vec()));
        keys.insert(&[column]).unwrap();
        keys.loaded().unwrap();
        keys
    }

    fn knows(keys: &KeySet, values: &[&str]) -> Vec<bool> {
        let column: ArrayRef = Arc::new(StringArray::from(values.to_vec()));
        keys.contains(&[column]).unwrap()
    }

    #[tokio::test]
    async fn keys_kept_read_back_at_their_version_only_and_a_damaged_file_is_not_read() {
        let folder = tempfile::tempdir().unwrap();
        let (_, dq_error) = Stores::local_for_test(folder.path()).await;
        let kept = KeptKeys::new(dq_error.clone(), true);
        let reference = holders();
        let many: Vec<String> = (0..70_000).map(|i| format!("H{i}")).collect();
        let many: Vec<&str> = many.iter().map(String::as_str).collect();
        assert!(kept.keep(&reference, "v1", &keys_of(&many)).await);

        let read = kept.read(&reference, "v1").await.unwrap();
        assert_eq!(read.len(), 70_000, "more than one piece");
        assert_eq!(
            knows(&read, &["H0", "H69999", "H70000"]),
            [true, true, false]
        );
        assert!(kept.read(&reference, "v2").await.is_none());
        let mut other = holders();
        other.keys[0].1 = "name".to_string();
        assert!(kept.read(&other, "v1").await.is_none());

        // A byte changed anywhere, or the file cut short: read again.
        let file = folder.path().join(path_of(&reference, "v1"));
        let whole = std::fs::read(&file).unwrap();
        for damaged in [
            [&whole[..100], &[whole[100] ^ 1], &whole[101..]].concat(),
            whole[..whole.len() - 1].to_vec(),
            [whole.as_slice(), &[0]].concat(),
            b"SLKEYS01".to_vec(),
            // A count no file of this length holds: refused before any room
            // is taken for it.
            [&whole[..12], &(1u64 << 40).to_le_bytes(), &[0; 32]].concat(),
        ] {
            std::fs::write(&file, &damaged).unwrap();
            assert!(kept.read(&reference, "v1").await.is_none());
        }

        // A new version replaces the old; a dry run writes nothing.
        assert!(kept.keep(&reference, "v2", &keys_of(&["H1"])).await);
        assert!(kept.read(&reference, "v1").await.is_none());
        assert_eq!(
            knows(&kept.read(&reference, "v2").await.unwrap(), &["H1"]),
            [true]
        );
        let dry = KeptKeys::new(dq_error.clone(), false);
        assert!(!dry.keep(&reference, "v3", &keys_of(&["H3"])).await);
        assert!(kept.read(&reference, "v3").await.is_none());
        let listed = dq_error.list(FOLDER).await.unwrap();
        let names: Vec<&str> = listed.iter().map(|o| o.relative.as_str()).collect();
        let v2 = [path_of(&reference, "v2"), version_path_of(&reference, "v2")];
        assert_eq!(names.len(), 2, "{names:?}");
        assert!(v2.iter().all(|name| names.contains(&name.as_str())));

        // The version kept is found by what names it, when it is of use.
        let earlier = kept.read_earlier(&reference, |v| (v == "v2").then_some(7));
        let (made, keys) = earlier.await.unwrap();
        assert_eq!((made, knows(&keys, &["H1"])), (7, vec![true]));
        let unusable = kept.read_earlier(&reference, |_| None::<()>).await;
        assert!(unusable.is_none());

        // A version named without its keys file reads nothing.
        std::fs::remove_file(folder.path().join(path_of(&reference, "v2"))).unwrap();
        let named_only = kept.read_earlier(&reference, |_| Some(()));
        assert!(named_only.await.is_none());
    }

    #[tokio::test]
    async fn a_keys_file_reads_the_same_in_pieces_of_any_size() {
        let folder = tempfile::tempdir().unwrap();
        let (_, dq_error) = Stores::local_for_test(folder.path()).await;
        let reference = holders();
        let kept = KeptKeys::new(dq_error, true);
        assert!(
            kept.keep(&reference, "v1", &keys_of(&["H1", "H2", "H3"]))
                .await
        );
        let whole = std::fs::read(folder.path().join(path_of(&reference, "v1"))).unwrap();
        for size in [1, 7, 16, 17, whole.len()] {
            let mut reader = KeysReader::new(1, "test".to_string());
            reader.size(whole.len() as u64);
            for piece in whole.chunks(size) {
                reader.piece(piece).unwrap();
            }
            let keys = reader.finish().unwrap();
            assert_eq!(
                knows(&keys, &["H1", "H3", "H4"]),
                [true, true, false],
                "{size}"
            );
        }
    }

    #[test]
    fn kept_fingerprints_must_be_sorted_and_distinct() {
        assert!(KeySet::from_prints(vec![1, 2, 3], 1, Stage::Reference).is_ok());
        assert!(KeySet::from_prints(vec![1, 1], 1, Stage::Reference).is_err());
        assert!(KeySet::from_prints(vec![2, 1], 1, Stage::Reference).is_err());
    }
}
