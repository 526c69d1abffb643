//! Content addresses: SHA-256 over parts separated by a NUL byte, so that
//! `("ab", "c")` and `("a", "bc")` never share a digest.

use sha2::{Digest, Sha256};

/// The SHA-256 of `parts`, a NUL byte between each two, as lowercase hex.
pub fn nul_separated_hex<'a>(parts: impl IntoIterator<Item = &'a [u8]>) -> String {
    let mut hash = Sha256::new();
    for (i, part) in parts.into_iter().enumerate() {
        if i > 0 {
            hash.update([0]);
        }
        hash.update(part);
    }
    hex::encode(hash.finalize())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_are_kept_apart() {
        let of = |parts: [&str; 2]| nul_separated_hex(parts.map(str::as_bytes));
        assert_ne!(of(["ab", "c"]), of(["a", "bc"]));
        assert_eq!(of(["ab", "c"]), of(["ab", "c"]));
        assert_eq!(of(["ab", "c"]).len(), 64);
    }
}
