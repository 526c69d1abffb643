//! The `[resources]` settings, validated: how much memory a run's queries
//! may hold and where they spill past it.

use std::path::Path;

use bytesize::ByteSize;

use crate::config::raw::{ResourcesConfig, Size};
use crate::core::sql::MemoryBudget;

/// `resources.memory_limit` when it is not set.
pub const DEFAULT_MEMORY_LIMIT: &str = "1GiB";

/// The smallest `resources.memory_limit` accepted: the queries get half of
/// it, and below 16 MiB a query cannot hold even the batches it streams.
const MIN_MEMORY_LIMIT: ByteSize = ByteSize::mib(32);

/// The budget `raw` sets, or the problems of its settings, each naming the
/// setting. A relative `scratch_dir` resolves against `base` (the config
/// file's folder).
pub fn check(raw: &ResourcesConfig, base: &Path, problems: &mut Vec<String>) -> MemoryBudget {
    let size = match &raw.memory_limit {
        None => DEFAULT_MEMORY_LIMIT.parse::<ByteSize>(),
        Some(Size::Bytes(bytes)) => Ok(ByteSize::b(*bytes)),
        Some(Size::Text(text)) => text.trim().parse::<ByteSize>(),
    };
    let shown = || match &raw.memory_limit {
        Some(Size::Text(text)) => crate::error::printable(text.trim()),
        Some(Size::Bytes(bytes)) => bytes.to_string(),
        None => DEFAULT_MEMORY_LIMIT.to_string(),
    };
    let bytes = match size {
        Ok(size) if size < MIN_MEMORY_LIMIT => {
            problems.push(format!(
                "resources.memory_limit: '{}' is below the smallest budget, {MIN_MEMORY_LIMIT}",
                shown()
            ));
            MIN_MEMORY_LIMIT
        }
        Ok(size) => size,
        Err(_) => {
            problems.push(format!(
                "resources.memory_limit: '{}' is not a size (e.g. \"1GiB\", \"512MiB\", or bytes)",
                shown()
            ));
            MIN_MEMORY_LIMIT
        }
    };
    let scratch_dir = raw.scratch_dir.as_deref().map(str::trim).map(|dir| {
        if dir.is_empty() {
            problems.push("resources.scratch_dir: must not be empty".to_string());
        } else if dir.contains("://") {
            problems.push(format!(
                "resources.scratch_dir: '{}' is not a local folder (spills go to local disk)",
                crate::error::printable(dir)
            ));
        }
        base.join(dir)
    });
    if raw.bucket_rows == Some(0) {
        problems.push("resources.bucket_rows: must be at least 1".to_string());
    }
    MemoryBudget {
        bytes: bytes.as_u64(),
        scratch_dir,
        bucket_rows: raw.bucket_rows.filter(|rows| *rows > 0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn checked(
        memory_limit: Option<&str>,
        scratch_dir: Option<&str>,
    ) -> (MemoryBudget, Vec<String>) {
        let raw = ResourcesConfig {
            memory_limit: memory_limit.map(|text| Size::Text(text.to_string())),
            scratch_dir: scratch_dir.map(str::to_string),
            bucket_rows: None,
        };
        let mut problems = Vec::new();
        let budget = check(&raw, Path::new("/etc/silverline"), &mut problems);
        (budget, problems)
    }

    #[test]
    fn sizes_read_in_binary_and_decimal_units_and_default_to_one_gib() {
        assert_eq!(checked(None, None).0.bytes, 1 << 30);
        assert_eq!(checked(Some("512MiB"), None).0.bytes, 512 << 20);
        assert_eq!(checked(Some("2 GB"), None).0.bytes, 2_000_000_000);
        let (budget, problems) = checked(None, Some("spill"));
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(
            budget.scratch_dir.as_deref(),
            Some(Path::new("/etc/silverline/spill"))
        );
        assert_eq!(
            checked(None, Some("/scratch")).0.scratch_dir.as_deref(),
            Some(Path::new("/scratch"))
        );
    }

    #[test]
    fn a_bad_or_tiny_size_and_an_empty_folder_are_named() {
        let (_, problems) = checked(Some("lots"), None);
        assert!(
            problems[0].starts_with("resources.memory_limit: 'lots' is not a size"),
            "{problems:?}"
        );
        let (_, problems) = checked(Some("1MiB"), None);
        assert!(
            problems[0].contains("below the smallest budget"),
            "{problems:?}"
        );
        let (_, problems) = checked(None, Some(" "));
        assert_eq!(problems, ["resources.scratch_dir: must not be empty"]);
        let (_, problems) = checked(None, Some("s3://bucket/spill"));
        assert!(
            problems[0].contains("is not a local folder"),
            "{problems:?}"
        );
    }

    #[test]
    fn a_size_in_bytes_reads_as_bytes() {
        let raw = ResourcesConfig {
            memory_limit: Some(Size::Bytes(1 << 30)),
            scratch_dir: None,
            bucket_rows: None,
        };
        let mut problems = Vec::new();
        assert_eq!(check(&raw, Path::new("."), &mut problems).bytes, 1 << 30);
        assert!(problems.is_empty(), "{problems:?}");
    }

    #[test]
    fn bucket_rows_of_nought_is_refused_naming_the_setting() {
        for (rows, refused) in [(Some(0), true), (Some(1), false), (None, false)] {
            let raw = ResourcesConfig {
                bucket_rows: rows,
                ..ResourcesConfig::default()
            };
            let mut problems = Vec::new();
            let budget = check(&raw, Path::new("."), &mut problems);
            assert_eq!(!problems.is_empty(), refused, "{problems:?}");
            assert_eq!(budget.bucket_rows, rows.filter(|r| *r > 0));
            if refused {
                assert!(
                    problems[0].starts_with("resources.bucket_rows"),
                    "{problems:?}"
                );
            }
        }
    }
}
