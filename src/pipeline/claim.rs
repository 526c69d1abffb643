//! Claim: names the run and makes reruns safe.
//!
//! In: the drop reference. Out: the drop's files, its run key
//! (contributor + drop + content fingerprint) and a stable run id and run date
//! kept in a claim marker, so that a rerun after a crash writes to the same
//! dq_error paths instead of beside them. A run key already committed to
//! Silver means there is nothing to do (DESIGN.md invariant 5). A drop with
//! nothing under its folder has not arrived yet ([`Error::DropNotArrived`],
//! exit 5); one whose folder holds no data file is a bad drop (exit 1).
//!
//! The fingerprint is BLAKE3 (`b3-` and 32 hex digits) over each file's
//! name, a zero byte, its size and its content. Versions before it used
//! SHA-256 (32 hex digits, no prefix), four times slower: a drop whose run
//! under that fingerprint is committed or claimed keeps its run key
//! ([`claimed_before`]), so a rerun of it still does nothing, or resumes.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use tokio::time::Instant;

use super::background::Background;
use super::context::Context;
use super::hooks;
use super::options::RunOptions;
use super::summary::Summary;
use crate::config::Plan;
use crate::core::drop::{DropFile, DropRef};
use crate::core::place::RunPlace;
use crate::error::{Error, Result};
use crate::infra::ledger::{find_committed, run_keys};
use crate::infra::storage::{FileSink, ListedObject, Location, ObjectSink, Stores};

/// What the claim found.
#[derive(Debug)]
pub enum Claimed {
    /// Not committed yet: go on.
    Fresh(Claim),
    /// This exact drop content is already in Silver.
    AlreadyCommitted(AlreadyCommitted),
}

/// A drop whose content is already in Silver.
#[derive(Debug)]
pub struct AlreadyCommitted {
    /// The run key.
    pub run_key: String,
    /// The snapshot that committed it, while the table still has it.
    pub snapshot_id: Option<i64>,
    /// The committed run's id and date, from the ledger or its claim marker.
    pub run_place: Option<RunPlace>,
}

/// A claimed run.
#[derive(Debug)]
pub struct Claim {
    /// contributor/drop/fingerprint.
    pub run_key: String,
    /// Stable id of the run, derived from the run key.
    pub run_id: String,
    /// Date (UTC) of the first attempt, used in dq_error paths.
    pub run_date: String,
    /// The drop's files, sorted by name.
    pub files: Vec<DropFile>,
}

impl Claim {
    /// The run's id and date.
    pub fn place(&self) -> RunPlace {
        RunPlace {
            run_id: self.run_id.clone(),
            run_date: self.run_date.clone(),
        }
    }

    /// Where the run's summary goes, relative to the dq_error root.
    pub fn summary_path(&self) -> String {
        let contributor = self.run_key.split('/').next().unwrap_or_default();
        self.place().summary_path(contributor)
    }

    /// Names the run in the summary and in every later log line of its span.
    pub fn record(&self, summary: &mut Summary) {
        summary.run_id = Some(self.run_id.clone());
        summary.run_key = Some(self.run_key.clone());
        tracing::Span::current().record("run_id", self.run_id.as_str());
    }
}

#[derive(Debug, Serialize, Deserialize)]
struct ClaimMarker {
    run_key: String,
    run_id: String,
    run_date: String,
    claimed_at: String,
}

/// A drop's files, copied to local disk, its fingerprint, and its folder's
/// listing (path, size, version) taken before they were read.
pub(super) struct Fetched {
    files: Vec<DropFile>,
    fingerprint: String,
    listed: Vec<ListedObject>,
}

/// The fetch of a drop started before its run: a backfill fetches its next
/// month while this one runs.
pub(super) struct Prefetch {
    drop: DropRef,
    work: Background<Fetched>,
}

impl Prefetch {
    /// Starts fetching `drop` from the bronze root `context` reads; its
    /// log lines name that drop.
    pub(super) fn start(context: &Context<'_>, drop: DropRef) -> Prefetch {
        let bronze = context.bronze.clone();
        let scratch = context.plan.resources.scratch_dir.clone();
        let next = drop.clone();
        let span = tracing::info_span!(
            "fetch_ahead",
            contributor = %drop.contributor,
            drop_id = %drop.drop_id
        );
        let work = span.in_scope(|| {
            Background::spawn("fetching the drop ahead of its run", async move {
                fetch_drop(&bronze, &next, scratch.as_deref()).await
            })
        });
        Prefetch { drop, work }
    }

    /// What was fetched, if this is the fetch of `drop`, it succeeded and
    /// the drop's folder still lists the same files (path, size, version):
    /// a drop delivered again meanwhile is fetched afresh, and so is one
    /// whose fetch failed (logged).
    async fn of(self, drop: &DropRef, bronze: &Location) -> Result<Option<Fetched>> {
        if self.drop != *drop {
            return Ok(None);
        }
        let fetched = match self.work.join().await {
            Ok(fetched) => fetched,
            Err(error) => {
                tracing::warn!(error = %error, "fetching the drop ahead of its run failed: fetching it again");
                return Ok(None);
            }
        };
        if bronze.list(&drop.prefix()).await? != fetched.listed {
            tracing::info!(
                "the drop changed since it was fetched ahead of its run: fetching it again"
            );
            return Ok(None);
        }
        Ok(Some(fetched))
    }
}

/// Reads the drop (or takes what `prefetch` read of it), fingerprints it
/// and claims its run. A dry run claims nothing: it takes the run's place
/// from an existing marker or makes one up, and writes no marker.
pub(super) async fn claim_run(
    context: &Context<'_>,
    options: &RunOptions,
    prefetch: Option<Prefetch>,
) -> Result<Claimed> {
    let dry_run = options.dry_run;
    let (dq_error, drop) = (&context.dq_error, context.drop);
    let prefetched = match prefetch {
        Some(prefetch) => prefetch.of(drop, &context.bronze).await?,
        None => None,
    };
    let Fetched {
        files, fingerprint, ..
    } = match prefetched {
        Some(fetched) => fetched,
        None => {
            let scratch = context.plan.resources.scratch_dir.as_deref();
            fetch_drop(&context.bronze, drop, scratch).await?
        }
    };
    let fingerprint = match hooks::claims_as_sha256(options) {
        true => sha256_fingerprint(&files),
        false => claimed_before(context, &files)
            .await?
            .unwrap_or(fingerprint),
    };
    let run_key = run_key_of(drop, &fingerprint);
    let path = marker_path(drop, &fingerprint);
    if let Some(record) = find_committed(&context.silver, &run_key)? {
        let run_place = match record.place {
            Some(place) => Some(place),
            None => read_marker(dq_error, &path, &run_key).await?,
        };
        return Ok(Claimed::AlreadyCommitted(AlreadyCommitted {
            run_key,
            snapshot_id: record.snapshot_id,
            run_place,
        }));
    }
    let place = match read_marker(dq_error, &path, &run_key).await? {
        Some(place) => place,
        None if dry_run => RunPlace::for_run(&run_key, chrono::Utc::now().date_naive()),
        None => claim_marker(dq_error, &path, &run_key).await?,
    };
    Ok(Claimed::Fresh(Claim {
        run_key,
        run_id: place.run_id,
        run_date: place.run_date,
        files,
    }))
}

/// The drop's files, each copied to an unnamed file in `scratch` (the
/// system's temporary folder when `None`) and read through a mapping, so
/// that the run holds in memory only the parts it reads; and the drop's
/// fingerprint, computed as they stream.
async fn fetch_drop(
    bronze: &Location,
    drop: &DropRef,
    scratch: Option<&std::path::Path>,
) -> Result<Fetched> {
    let prefix = drop.prefix();
    let listed = bronze.list(&prefix).await?;
    let listed_any = !listed.is_empty();
    let dir = crate::core::spill::scratch_folder(scratch);
    let mut hash = blake3::Hasher::new();
    let mut files = Vec::new();
    for object in &listed {
        let name = object
            .relative
            .strip_prefix(&prefix)
            .unwrap_or(&object.relative)
            .trim_start_matches('/');
        if is_marker(name) {
            tracing::info!(path = %bronze.url_of(&object.relative), "ignoring marker file");
            continue;
        }
        hash.update(name.as_bytes());
        hash.update(&[0]);
        let mut copy = FileCopy {
            hash: &mut hash,
            file: FileSink::new(&dir)?,
        };
        bronze.stream_to(&object.relative, &mut copy).await?;
        let file = copy.file.into_file()?;
        let mapped = DropFile::mapped(name, &file).map_err(|source| Error::Io {
            path: dir.clone(),
            source,
        })?;
        files.push(mapped);
    }
    if files.is_empty() {
        return Err(no_data_file(bronze, &prefix, listed_any));
    }
    Ok(Fetched {
        files,
        fingerprint: format!("{FINGERPRINT_PREFIX}{}", &hash.finalize().to_hex()[..32]),
        listed,
    })
}

/// What starts the fingerprint a claim gives a drop (BLAKE3); a fingerprint
/// without it is SHA-256's, from a version before.
const FINGERPRINT_PREFIX: &str = "b3-";

/// The run key of `drop` with content `fingerprint`.
fn run_key_of(drop: &DropRef, fingerprint: &str) -> String {
    format!("{}/{}/{}", drop.contributor, drop.drop_id, fingerprint)
}

/// The SHA-256 fingerprint a version before BLAKE3 gave these `files` of
/// the context's drop, when a run under it is committed (in Silver's
/// ledger or snapshots) or claimed (its marker): that run's key is the
/// drop's. Computed only when the drop has such a run key or marker of any
/// content (a drop claimed since has none), from the local copies.
async fn claimed_before(context: &Context<'_>, files: &[DropFile]) -> Result<Option<String>> {
    let drop = context.drop;
    let of_drop = run_key_of(drop, "");
    let committed_before = run_keys(&context.silver)
        .filter_map(|key| key.strip_prefix(&of_drop))
        .any(is_sha256_fingerprint);
    let claimed = || async {
        let folder = format!("claims/{}/", drop.prefix());
        let markers = context.dq_error.list(&folder).await?;
        Ok::<_, Error>(markers.iter().any(|marker| {
            marker
                .relative
                .strip_prefix(&folder)
                .and_then(|name| name.strip_suffix(".json"))
                .is_some_and(is_sha256_fingerprint)
        }))
    };
    if !committed_before && !claimed().await? {
        return Ok(None);
    }
    // Seconds for a large drop: off the runtime's threads.
    let copies = files.to_vec();
    let legacy = tokio::task::spawn_blocking(move || sha256_fingerprint(&copies))
        .await
        .map_err(|error| {
            Error::Internal(format!("claim: the SHA-256 fingerprint failed: {error}"))
        })?;
    let run_key = run_key_of(drop, &legacy);
    let found = find_committed(&context.silver, &run_key)?.is_some()
        || read_marker(&context.dq_error, &marker_path(drop, &legacy), &run_key)
            .await?
            .is_some();
    if found {
        tracing::info!(%run_key, "this drop was claimed by a version that fingerprinted with SHA-256: its run key is kept");
    }
    Ok(found.then_some(legacy))
}

/// Whether `fingerprint` is SHA-256's: 32 lowercase hex digits.
fn is_sha256_fingerprint(fingerprint: &str) -> bool {
    fingerprint.len() == 32
        && fingerprint
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// The fingerprint versions before BLAKE3 gave a drop: SHA-256 over each
/// file's name, a zero byte, its size (u64, little-endian) and content.
fn sha256_fingerprint(files: &[DropFile]) -> String {
    const WINDOW: usize = 16 << 20;
    let mut hash = Sha256::new();
    for file in files {
        hash.update(file.name.as_bytes());
        hash.update([0]);
        hash.update((file.bytes.len() as u64).to_le_bytes());
        // A window at a time, its pages handed back once hashed.
        for start in (0..file.bytes.len()).step_by(WINDOW) {
            let window = start..(start + WINDOW).min(file.bytes.len());
            hash.update(&file.bytes[window.clone()]);
            file.release(window);
        }
    }
    hex::encode(hash.finalize())[..32].to_string()
}

/// A drop file streaming to its local copy, into the drop's fingerprint:
/// its name, a zero byte, its size (8 bytes, little-endian), its content.
struct FileCopy<'a> {
    hash: &'a mut blake3::Hasher,
    file: FileSink,
}

impl ObjectSink for FileCopy<'_> {
    fn size(&mut self, size: u64) {
        self.hash.update(&size.to_le_bytes());
    }

    fn piece(&mut self, piece: &[u8]) -> Result<()> {
        self.hash.update(piece);
        self.file.piece(piece)
    }
}

/// Why a drop with no data file cannot run: not arrived when nothing is
/// there (no object; on local files, no folder either), else a bad drop.
fn no_data_file(bronze: &Location, prefix: &str, listed_any: bool) -> Error {
    let folder = bronze.local_folder_exists(prefix);
    let reason = match (listed_any, folder) {
        (true, _) => "the drop holds no data file, only marker files (names starting with _ or .)",
        (false, Some(true)) => "the drop's folder is empty",
        (false, _) => {
            return Error::DropNotArrived {
                location: bronze.url_of(prefix),
                setting: bronze.setting().to_string(),
            };
        }
    };
    Error::BadDrop {
        location: bronze.url_of(prefix),
        reason: reason.to_string(),
    }
}

/// Waits up to `wait` for `drop` to arrive in bronze (an object under its
/// folder, or on local files the folder itself: an empty one has arrived and
/// is refused by the run, not waited for), looking every [`poll_interval`];
/// returns whether it did. Reads nothing but listings.
pub async fn wait_for_drop(plan: &Plan, drop: &DropRef, wait: Duration) -> Result<bool> {
    let stores = Stores::new(&plan.storage, plan.catalog.warehouse()).await?;
    let bronze = stores.open(&plan.storage.bronze, "storage.bronze")?;
    let deadline = Instant::now() + wait;
    let interval = poll_interval(wait);
    loop {
        let prefix = drop.prefix();
        if bronze.local_folder_exists(&prefix) == Some(true) || bronze.any_under(&prefix).await? {
            return Ok(true);
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            tracing::warn!(path = %bronze.url_of(&drop.prefix()), waited_s = wait.as_secs(), "the drop has not arrived");
            return Ok(false);
        }
        tracing::info!(path = %bronze.url_of(&drop.prefix()), left_s = left.as_secs(), "waiting for the drop to arrive");
        tokio::time::sleep(interval.min(left)).await;
    }
}

/// How often [`wait_for_drop`] looks: a twentieth of the wait, from 1 to 30 seconds.
fn poll_interval(wait: Duration) -> Duration {
    (wait / 20).clamp(Duration::from_secs(1), Duration::from_secs(30))
}

/// Files such as `_SUCCESS` or `.keep` mark a drop, they carry no records.
fn is_marker(name: &str) -> bool {
    let base = name.rsplit('/').next().unwrap_or(name);
    base.starts_with('_') || base.starts_with('.')
}

/// Where a run stages, beside its claim marker, the summary it writes just
/// before its commit: a rerun completes it if the run dies after committing.
/// It never lies where summaries are listed.
pub fn staged_summary_path(run_key: &str) -> String {
    format!("claims/{run_key}.summary.json")
}

/// The place the claim marker of `run_key` holds, if it has one (a run key is
/// `contributor/drop/fingerprint`, the marker's path under `claims/`).
pub async fn marker_place(dq_error: &Location, run_key: &str) -> Result<Option<RunPlace>> {
    read_marker(dq_error, &format!("claims/{run_key}.json"), run_key).await
}

fn marker_path(drop: &DropRef, fingerprint: &str) -> String {
    format!("claims/{}/{fingerprint}.json", drop.prefix())
}

/// Writes the run's claim marker, or follows the one another attempt wrote first.
async fn claim_marker(dq_error: &Location, path: &str, run_key: &str) -> Result<RunPlace> {
    let now = chrono::Utc::now();
    let place = RunPlace::for_run(run_key, now.date_naive());
    let marker = ClaimMarker {
        run_key: run_key.to_string(),
        run_id: place.run_id.clone(),
        run_date: place.run_date.clone(),
        claimed_at: now.to_rfc3339(),
    };
    let body = serde_json::to_vec_pretty(&marker).map_err(|source| Error::Encode {
        what: "claim marker",
        source,
    })?;
    if dq_error.put_if_absent(path, body).await? {
        return Ok(place);
    }
    // Another attempt wrote it first: follow its run id and date.
    read_marker(dq_error, path, run_key)
        .await?
        .ok_or_else(|| Error::BadRecord {
            location: format!("claim marker {}", dq_error.url_of(path)),
            reason: "it vanished while being read: run the drop again".to_string(),
        })
}

/// The place a claim marker holds, checked like user input: a marker that is
/// not the one silverline writes for `run_key` steers no path.
async fn read_marker(dq_error: &Location, path: &str, run_key: &str) -> Result<Option<RunPlace>> {
    let Some(bytes) = dq_error.get_opt(path).await? else {
        return Ok(None);
    };
    let location = format!("claim marker {}", dq_error.url_of(path));
    let way_out = "it is not a marker silverline wrote for this drop: delete it and run the drop again (the run then claims the drop afresh, or finds it committed)";
    let marker: ClaimMarker = serde_json::from_slice(&bytes).map_err(|_| Error::BadRecord {
        location: location.clone(),
        reason: way_out.to_string(),
    })?;
    if marker.run_key != run_key {
        return Err(Error::BadRecord {
            location,
            reason: way_out.to_string(),
        });
    }
    let place = RunPlace {
        run_id: marker.run_id,
        run_date: marker.run_date,
    };
    place
        .checked(run_key, &location)
        .map(Some)
        .map_err(|_| Error::BadRecord {
            location: location.clone(),
            reason: way_out.to_string(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_drop_is_looked_for_every_twentieth_of_the_wait_from_1_to_30_seconds() {
        let secs = |s| poll_interval(Duration::from_secs(s)).as_secs();
        assert_eq!(secs(2), 1);
        assert_eq!(secs(200), 10);
        assert_eq!(secs(7200), 30);
    }

    /// A drop of `files` (name, content) under a local bronze root:
    /// what the claim fetches of it, and its fingerprint.
    async fn fetched(files: &[(&str, &[u8])]) -> (Vec<DropFile>, String) {
        let root = tempfile::tempdir().unwrap();
        let drop = DropRef::new("BANK_A", "2026-01").unwrap();
        let folder = root.path().join(drop.prefix());
        std::fs::create_dir_all(&folder).unwrap();
        for (name, content) in files {
            std::fs::write(folder.join(name), content).unwrap();
        }
        let (_, bronze) = Stores::local_for_test(root.path()).await;
        let fetched = fetch_drop(&bronze, &drop, None).await.unwrap();
        (fetched.files, fetched.fingerprint)
    }

    /// The fingerprint as claims compute it, over each file's name, a zero
    /// byte, its size (u64, little-endian) and content: BLAKE3, or SHA-256
    /// as versions before did.
    fn fingerprint_of(files: &[(&str, &[u8])], sha256: bool) -> String {
        let mut parts = Vec::new();
        for (name, content) in files {
            parts.extend_from_slice(name.as_bytes());
            parts.push(0);
            parts.extend_from_slice(&(content.len() as u64).to_le_bytes());
            parts.extend_from_slice(content);
        }
        match sha256 {
            true => hex::encode(Sha256::digest(&parts))[..32].to_string(),
            false => format!("b3-{}", &blake3::hash(&parts).to_hex()[..32]),
        }
    }

    #[tokio::test]
    async fn a_drop_copied_to_local_disk_reads_and_fingerprints_with_blake3_and_as_it_did_with_sha256()
     {
        let big: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();
        let drop: [(&str, &[u8]); 3] = [("a.csv", b"id\n1\n"), ("b.csv", &big), ("c.csv", b"")];
        let (files, fingerprint) = fetched(&drop).await;
        assert_eq!(fingerprint, fingerprint_of(&drop, false));
        // Drops claimed before BLAKE3 are recognised by this fingerprint.
        let legacy = sha256_fingerprint(&files);
        assert_eq!(legacy, fingerprint_of(&drop, true));
        assert!(is_sha256_fingerprint(&legacy));
        assert!(!is_sha256_fingerprint(&fingerprint));
        for (file, (name, content)) in files.iter().zip(drop) {
            assert_eq!((file.name.as_str(), &file.bytes[..]), (name, content));
            // Pages handed back read again the same.
            file.release(0..file.bytes.len());
            assert_eq!(&file.bytes[..], content);
        }
        let changed: [(&str, &[u8]); 1] = [("a.csv", b"id\n2\n")];
        assert_ne!(fetched(&changed).await.1, fingerprint);
        let renamed: [(&str, &[u8]); 1] = [("z.csv", b"id\n1\n")];
        assert_ne!(fetched(&renamed).await.1, fetched(&drop[..1]).await.1);
    }
}
