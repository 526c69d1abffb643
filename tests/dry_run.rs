//! A dry run leaves no trace (issue 15, point 6): the warehouse, the catalog
//! database and the dq_error tree are byte-identical before and after it, on
//! a fresh project (no catalog created) and on one with committed history;
//! it still says what it would commit and set aside.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod harness;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use harness::{month, output, project, put_drop, run_args, silverline, walk};
use silverline::demo::generate::Portfolio;

/// Every file and folder a run could touch (warehouse, catalog database and
/// its journals, dq_error), each file with its bytes, each folder empty.
fn trees(root: &Path) -> BTreeMap<PathBuf, Option<Vec<u8>>> {
    let data = root.join("data");
    let mut seen = BTreeMap::new();
    for tree in ["warehouse", "dq_error"] {
        let top = data.join(tree);
        for folder in folders(&top) {
            seen.insert(folder, None);
        }
        for file in walk(&top) {
            let bytes = std::fs::read(&file).unwrap();
            seen.insert(file, Some(bytes));
        }
    }
    for entry in std::fs::read_dir(&data).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        if name.starts_with("catalog.db") {
            seen.insert(path.clone(), Some(std::fs::read(&path).unwrap()));
        }
    }
    seen
}

/// `dir` and every folder below it, if it exists.
fn folders(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut found = vec![dir.to_path_buf()];
    for entry in entries {
        let path = entry.unwrap().path();
        if path.is_dir() {
            found.extend(folders(&path));
        }
    }
    found
}

/// Puts a drop of `size` good rows and one malformed record (set aside by
/// `parse`) for `contributor`.
fn put_drop_with_a_bad_record(root: &Path, bank: &mut Portfolio, contributor: &str, drop: &str) {
    let (y, m) = drop.split_once('-').unwrap();
    let rows = bank.statements(month(y.parse().unwrap(), m.parse().unwrap()), false);
    put_drop(root, contributor, drop, &rows);
    let file = root
        .join("data/bronze")
        .join(contributor)
        .join(drop)
        .join("statements.csv");
    let mut text = std::fs::read_to_string(&file).unwrap();
    text.push_str(&format!(
        "{contributor},X1,{drop}-28,A,H1,123456789012,,,CARD,ACTIVE,abc,100.00,0.00,5.00,1.00,0.00,0\n"
    ));
    std::fs::write(&file, text).unwrap();
}

fn dry_run(config: &Path, contributor: &str, drop: &str) -> String {
    let mut args = run_args(config.to_str().unwrap(), contributor, drop).to_vec();
    args.push("--dry-run".to_string());
    output(&silverline(&args).success())
}

/// The rows committed (or that would be) and the counts after them, from a
/// run's first line: `... commit[ted] N rows ... (received .., quarantined .., ...)`.
fn counts(text: &str) -> (String, String) {
    let line = text.lines().next().unwrap();
    let rows = line
        .split(" rows")
        .next()
        .unwrap()
        .rsplit(' ')
        .next()
        .unwrap();
    let books = line.rsplit('(').next().unwrap();
    (rows.to_string(), books.to_string())
}

fn assert_untouched(
    before: &BTreeMap<PathBuf, Option<Vec<u8>>>,
    after: &BTreeMap<PathBuf, Option<Vec<u8>>>,
) {
    let changed: Vec<_> = before
        .keys()
        .chain(after.keys())
        .filter(|path| before.get(*path) != after.get(*path))
        .collect();
    assert!(changed.is_empty(), "a dry run changed {changed:?}");
}

#[test]
fn a_dry_run_on_a_fresh_project_creates_no_catalog_table_or_file() {
    let (tmp, config) = project(|t| t);
    let mut bank = Portfolio::new("BANK_D", 20, false, 5);
    put_drop_with_a_bad_record(tmp.path(), &mut bank, "BANK_D", "2026-01");
    let before = trees(tmp.path());
    assert!(before.is_empty(), "a fresh project: {before:?}");

    let text = dry_run(&config, "BANK_D", "2026-01");
    assert!(text.contains("dry run: would commit 20 rows"), "{text}");
    assert!(text.contains("quarantined 1"), "{text}");
    assert_untouched(&before, &trees(tmp.path()));
    assert!(!tmp.path().join("data/catalog.db").exists());

    // The real run that follows creates the table and commits what the dry
    // run said it would.
    let real =
        output(&silverline(&run_args(config.to_str().unwrap(), "BANK_D", "2026-01")).success());
    assert!(real.contains("committed 20 rows"), "{real}");
    assert!(real.contains("quarantined 1"), "{real}");
}

#[test]
fn a_dry_run_on_committed_history_leaves_warehouse_catalog_and_dq_error_byte_identical() {
    let (tmp, config) = project(|t| t);
    let mut bank = Portfolio::new("BANK_D", 20, false, 5);
    put_drop_with_a_bad_record(tmp.path(), &mut bank, "BANK_D", "2026-01");
    let first =
        output(&silverline(&run_args(config.to_str().unwrap(), "BANK_D", "2026-01")).success());
    assert!(first.contains("committed 20 rows"), "{first}");
    put_drop_with_a_bad_record(tmp.path(), &mut bank, "BANK_D", "2026-02");
    let before = trees(tmp.path());
    assert!(before.keys().any(|p| p.ends_with("catalog.db")));
    assert!(
        before
            .keys()
            .any(|p| p.extension().is_some_and(|e| e == "parquet"))
    );

    let text = dry_run(&config, "BANK_D", "2026-02");
    assert!(text.contains("dry run: would commit"), "{text}");
    assert_untouched(&before, &trees(tmp.path()));

    // What it said it would commit and set aside is what the real run does.
    let real =
        output(&silverline(&run_args(config.to_str().unwrap(), "BANK_D", "2026-02")).success());
    assert_eq!(counts(&text), counts(&real), "{text}\n---\n{real}");
}
