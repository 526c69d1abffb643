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
