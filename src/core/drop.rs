//! The drop's identity: a contributor's delivery, by ids that are safe in
//! paths, and the files it holds.

use crate::error::{Error, Result};

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
    pub(crate) fn prefix(&self) -> String {
        format!("{}/{}", self.contributor, self.drop_id)
    }
}

/// The name of a replay drop (`replay-<hash>`) and of its data file (`replay.csv`).
pub const REPLAY: &str = "replay";

/// The name of an accept drop (`accept-<hash>`) and of its data file (`accept.csv`).
pub const ACCEPT: &str = "accept";

/// Whether `drop_id` names a drop silverline made of exceptions (a replay or
/// an accept drop, `<name>-<hash>`) rather than a contributor's delivery.
pub fn is_made_of_exceptions(drop_id: &str) -> bool {
    [REPLAY, ACCEPT].iter().any(|name| {
        drop_id
            .strip_prefix(name)
            .is_some_and(|hash| hash.starts_with('-'))
    })
}

/// Checks a `--contributor` argument like [`DropRef::new`] does.
pub(crate) fn check_contributor(contributor: &str) -> Result<()> {
    check_id("--contributor", contributor)
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
            "'{}' must be 1 to 64 characters of A-Z a-z 0-9 _ - . and not start with a dot",
            crate::error::printable(value)
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
    /// The mapping `bytes` reads when the file was copied to local disk:
    /// the pages read can be handed back to the system.
    mapped: Option<std::sync::Arc<memmap2::Mmap>>,
}

/// A mapping as the bytes of a file.
struct Mapped(std::sync::Arc<memmap2::Mmap>);

impl AsRef<[u8]> for Mapped {
    fn as_ref(&self) -> &[u8] {
        &self.0[..]
    }
}

impl DropFile {
    /// A file held in memory.
    pub fn new(name: impl Into<String>, bytes: bytes::Bytes) -> DropFile {
        DropFile {
            name: name.into(),
            bytes,
            mapped: None,
        }
    }

    /// A file copied to `file` on local disk (a file no one else writes:
    /// an unnamed temporary file), read through a mapping.
    pub fn mapped(name: impl Into<String>, file: &std::fs::File) -> std::io::Result<DropFile> {
        if file.metadata()?.len() == 0 {
            return Ok(DropFile::new(name, bytes::Bytes::new()));
        }
        // SAFETY: the file is this run's unnamed copy; nothing else can
        // change or truncate it while it is mapped.
        let map = std::sync::Arc::new(unsafe { memmap2::Mmap::map(file)? });
        Ok(DropFile {
            name: name.into(),
            bytes: bytes::Bytes::from_owner(Mapped(map.clone())),
            mapped: Some(map),
        })
    }

    /// Hands the pages wholly inside `range` (of `bytes`) back to the
    /// system: read again, they come back from its disk cache. A file held
    /// in memory keeps them.
    pub fn release(&self, range: std::ops::Range<usize>) {
        let Some(map) = &self.mapped else {
            return;
        };
        let page = page_size();
        let start = range.start.div_ceil(page) * page;
        let end = (range.end.min(map.len()) / page) * page;
        if end > start {
            // SAFETY: a read-only mapping of a file: pages dropped are read
            // again from the file, unchanged.
            let released = unsafe {
                map.unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, start, end - start)
            };
            if let Err(error) = released {
                tracing::debug!(file = %self.name, %error, "pages read could not be released");
            }
        }
    }
}

/// The system's memory page size, which releases are aligned to.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn page_size() -> usize {
    // SAFETY: sysconf reads a constant of the system.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(size)
        .ok()
        .filter(|s| *s > 0)
        .unwrap_or(4096)
}

/// The memory page size releases are aligned to where the system is not
/// asked: 4 KiB (on larger pages a misaligned release is refused and
/// changes nothing).
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn page_size() -> usize {
    4096
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
    fn replay_and_accept_drops_are_told_from_deliveries() {
        assert!(is_made_of_exceptions("replay-0123456789abcdef"));
        assert!(is_made_of_exceptions("accept-0123456789abcdef"));
        for delivery in ["2026-01", "replay", "replays-1", "accepted-2026"] {
            assert!(!is_made_of_exceptions(delivery), "{delivery}");
        }
    }
}
