//! Content addresses: SHA-256 over parts each ended by a NUL byte, so that
//! `("ab", "c")` and `("a", "bc")` never share a digest.

use sha2::{Digest, Sha256};

/// The SHA-256 of `parts`, each followed by a NUL byte, as lowercase hex
/// (64 characters; callers keep the prefix they need).
pub(crate) fn nul_terminated_hex<'a>(parts: impl IntoIterator<Item = &'a [u8]>) -> String {
    let mut hash = Sha256::new();
    for part in parts {
        hash.update(part);
        hash.update([0]);
    }
    hex::encode(hash.finalize())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_are_kept_apart() {
        let of = |parts: [&str; 2]| nul_terminated_hex(parts.map(str::as_bytes));
        assert_ne!(of(["ab", "c"]), of(["a", "bc"]));
        assert_eq!(of(["ab", "c"]), of(["ab", "c"]));
        assert_eq!(of(["ab", "c"]).len(), 64);
    }

    #[test]
    fn digests_already_stored_do_not_change() {
        // The rule fingerprint of earlier summaries and snapshots was built
        // byte for byte like this: the helper must keep giving it.
        let mut hash = Sha256::new();
        for part in ["volume", "aggregate"] {
            hash.update(part.as_bytes());
            hash.update([0]);
        }
        let written_out = hex::encode(hash.finalize());
        assert_eq!(
            nul_terminated_hex(["volume", "aggregate"].map(str::as_bytes)),
            written_out
        );
    }
}
