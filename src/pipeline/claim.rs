//! Claim: names the run and makes reruns safe.
//!
//! In: the drop reference. Out: the drop's files, its run key
//! (contributor + drop + content fingerprint) and a stable run id and run date
//! kept in a claim marker, so that a rerun after a crash writes to the same
//! dq_error paths instead of beside them. A run key already committed to
//! Silver means there is nothing to do (DESIGN.md invariant 5).

use iceberg::table::Table;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::error::{Error, Result};
use crate::infra::storage::Location;
use crate::pipeline::commit::RUN_KEY_PROPERTY;

/// A contributor's drop, by ids that were checked to be safe in paths.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DropRef {
    /// Contributor id.
    pub contributor: String,
    /// Drop id (the contributor's delivery name).
    pub drop_id: String,
}

impl DropRef {
    /// Checks both ids: 1 to 64 characters of `A-Z a-z 0-9 _ - .`, not starting with a dot.
    pub fn new(contributor: &str, drop_id: &str) -> Result<DropRef> {
        check_id("--contributor", contributor)?;
        check_id("--drop", drop_id)?;
        Ok(DropRef {
            contributor: contributor.to_string(),
            drop_id: drop_id.to_string(),
        })
    }

    /// The drop's folder under the bronze root.
    pub fn prefix(&self) -> String {
        format!("{}/{}", self.contributor, self.drop_id)
    }
}

fn check_id(arg: &str, value: &str) -> Result<()> {
    let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.');
    let ok =
        (1..=64).contains(&value.len()) && value.chars().all(allowed) && !value.starts_with('.');
    if ok {
        return Ok(());
    }
    Err(Error::Usage {
        arg: arg.to_string(),
        reason: format!(
            "'{value}' must be 1 to 64 characters of A-Z a-z 0-9 _ - . and not start with a dot"
        ),
    })
}

/// One file of a drop.
#[derive(Debug, Clone)]
pub struct DropFile {
    /// Name relative to the drop folder.
    pub name: String,
    /// Content.
    pub bytes: bytes::Bytes,
}

/// What the claim found.
#[derive(Debug)]
pub enum Claimed {
    /// Not committed yet: go on.
    Fresh(Claim),
    /// This exact drop content is already in Silver.
    AlreadyCommitted {
        /// The run key.
        run_key: String,
        /// The snapshot that committed it.
        snapshot_id: i64,
        /// The committed run's id and date, from its claim marker, if it has one.
        run_place: Option<(String, String)>,
    },
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

#[derive(Debug, Serialize, Deserialize)]
struct ClaimMarker {
    run_key: String,
    run_id: String,
    run_date: String,
    claimed_at: String,
}

/// Reads the drop, fingerprints it and claims its run.
pub async fn claim_run(
    bronze: &Location,
    dq_error: &Location,
    drop: &DropRef,
    silver: &Table,
) -> Result<Claimed> {
    let files = fetch_drop(bronze, drop).await?;
    let fingerprint = fingerprint(&files);
    let run_key = format!("{}/{}/{}", drop.contributor, drop.drop_id, fingerprint);
    if let Some(snapshot_id) = committed_snapshot(silver, &run_key) {
        let marker = read_marker(dq_error, &marker_path(drop, &fingerprint)).await?;
        return Ok(Claimed::AlreadyCommitted {
            run_key,
            snapshot_id,
            run_place: marker.map(|m| (m.run_id, m.run_date)),
        });
    }
    let marker = claim_marker(dq_error, drop, &run_key, &fingerprint).await?;
    Ok(Claimed::Fresh(Claim {
        run_key,
        run_id: marker.run_id,
        run_date: marker.run_date,
        files,
    }))
}

/// The snapshot of `silver` whose properties carry `run_key`, if any.
pub fn committed_snapshot(silver: &Table, run_key: &str) -> Option<i64> {
    silver
        .metadata()
        .snapshots()
        .find(|s| {
            s.summary()
                .additional_properties
                .get(RUN_KEY_PROPERTY)
                .map(String::as_str)
                == Some(run_key)
        })
        .map(|s| s.snapshot_id())
}

async fn fetch_drop(bronze: &Location, drop: &DropRef) -> Result<Vec<DropFile>> {
    let prefix = drop.prefix();
    let listed = bronze.list(&prefix).await?;
    let mut files = Vec::new();
    for object in listed {
        let name = object
            .relative
            .strip_prefix(&prefix)
            .unwrap_or(&object.relative)
            .trim_start_matches('/');
        if is_marker(name) {
            tracing::info!(path = %bronze.url_of(&object.relative), "ignoring marker file");
            continue;
        }
        let bytes = bronze.get(&object.relative).await?;
        files.push(DropFile {
            name: name.to_string(),
            bytes,
        });
    }
    if files.is_empty() {
        return Err(Error::BadDrop {
            location: bronze.url_of(&prefix),
            reason: "the drop is missing or holds no data file".to_string(),
        });
    }
    Ok(files)
}

/// Files such as `_SUCCESS` or `.keep` mark a drop, they carry no records.
fn is_marker(name: &str) -> bool {
    let base = name.rsplit('/').next().unwrap_or(name);
    base.starts_with('_') || base.starts_with('.')
}

fn fingerprint(files: &[DropFile]) -> String {
    let mut hash = Sha256::new();
    for file in files {
        hash.update(file.name.as_bytes());
        hash.update([0]);
        hash.update((file.bytes.len() as u64).to_le_bytes());
        hash.update(&file.bytes);
    }
    hex::encode(hash.finalize())[..32].to_string()
}

fn marker_path(drop: &DropRef, fingerprint: &str) -> String {
    format!("claims/{}/{fingerprint}.json", drop.prefix())
}

async fn claim_marker(
    dq_error: &Location,
    drop: &DropRef,
    run_key: &str,
    fingerprint: &str,
) -> Result<ClaimMarker> {
    let path = marker_path(drop, fingerprint);
    if let Some(existing) = read_marker(dq_error, &path).await? {
        return Ok(existing);
    }
    let now = chrono::Utc::now();
    let marker = ClaimMarker {
        run_key: run_key.to_string(),
        run_id: hex::encode(Sha256::digest(run_key.as_bytes()))[..16].to_string(),
        run_date: now.format("%Y-%m-%d").to_string(),
        claimed_at: now.to_rfc3339(),
    };
    let body = serde_json::to_vec_pretty(&marker).map_err(|source| Error::Encode {
        what: "claim marker",
        source,
    })?;
    if dq_error.put_if_absent(&path, body).await? {
        return Ok(marker);
    }
    // Another attempt wrote it first: follow its run id and date.
    read_marker(dq_error, &path)
        .await?
        .ok_or_else(|| Error::BadDrop {
            location: dq_error.url_of(&path),
            reason: "claim marker vanished while being read".to_string(),
        })
}

async fn read_marker(dq_error: &Location, path: &str) -> Result<Option<ClaimMarker>> {
    let Some(bytes) = dq_error.get_opt(path).await? else {
        return Ok(None);
    };
    serde_json::from_slice(&bytes)
        .map(Some)
        .map_err(|e| Error::BadDrop {
            location: dq_error.url_of(path),
            reason: format!("unreadable claim marker: {e}"),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_that_could_escape_a_path_are_refused() {
        for bad in ["../x", "a/b", "", ".hidden", "a b", "x\u{0}"] {
            assert!(DropRef::new(bad, "2026-11").is_err(), "{bad:?}");
            assert!(DropRef::new("BANK_A", bad).is_err(), "{bad:?}");
        }
        assert!(DropRef::new("BANK_A", "backfill-2026-01-2026-03").is_ok());
    }

    #[test]
    fn the_fingerprint_changes_with_content_and_names() {
        let file = |name: &str, body: &str| DropFile {
            name: name.to_string(),
            bytes: bytes::Bytes::from(body.to_string()),
        };
        let a = fingerprint(&[file("a.csv", "x")]);
        assert_eq!(a, fingerprint(&[file("a.csv", "x")]));
        assert_ne!(a, fingerprint(&[file("a.csv", "y")]));
        assert_ne!(a, fingerprint(&[file("b.csv", "x")]));
    }
}
