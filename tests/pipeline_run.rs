//! One run's guarantees on the embedded default (local files + SQLite
//! catalog): the shared suite of `common/suite.rs` (`suite_tests!`, as
//! `embedded::*`), and what only this backend checks.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{suite, workspace};

suite_tests!(embedded, workspace);

/// iceberg-rust re-applies a transaction on a reloaded table; a commit pinned
/// to the state silverline checked for its run key is refused instead, so a
/// run can never append on top of a concurrent run's snapshot.
#[tokio::test]
async fn a_commit_pinned_to_the_checked_state_is_refused_once_the_table_moved() {
    use iceberg::ErrorKind;
    use iceberg::transaction::{ApplyTransactionAction, Transaction};
    use silverline::core::drop::DropFile;
    use silverline::demo::generate::to_csv;
    use silverline::infra::catalog::{connect, load_silver};
    use silverline::infra::datafile::write_silver_files;
    use silverline::infra::pinned::PinnedCatalog;
    use silverline::infra::storage::Stores;
    use silverline::pipeline::RunOptions;
    use silverline::pipeline::read::read_drop;

    let tw = workspace().await;
    let ws = &tw.ws;
    let mut bank = suite::bank_with_history(ws, 10).await;
    let stores = Stores::new(&ws.plan.storage, ws.plan.catalog.warehouse())
        .await
        .unwrap();
    let catalog = connect(&ws.plan.catalog, &stores).await.unwrap();
    let checked = load_silver(catalog.as_ref(), &ws.plan).await.unwrap();

    let january = bank.statements(chrono::NaiveDate::from_ymd_opt(2026, 1, 1).unwrap(), false);
    ws.put_drop("BANK_T", "2026-01", &january).await.unwrap();
    ws.run_drop("BANK_T", "2026-01", &RunOptions::default())
        .await
        .unwrap();

    let february = bank.statements(chrono::NaiveDate::from_ymd_opt(2026, 2, 1).unwrap(), false);
    let file = DropFile::new("february.csv", bytes::Bytes::from(to_csv(&february)));
    let read = read_drop(&ws.plan.contract, &[file]).unwrap();
    let columns: Vec<usize> = (0..ws.plan.contract.columns.len()).collect();
    let rows = read.rows.whole().unwrap().project(&columns).unwrap();
    let files = write_silver_files(&checked, &[rows], "pinned")
        .await
        .unwrap();
    let append = |table| {
        let tx = Transaction::new(table);
        let action = tx.fast_append().add_data_files(files.clone());
        action.apply(tx).unwrap()
    };

    let pinned = PinnedCatalog::on(catalog.as_ref(), &checked);
    let refused = append(&checked).commit(&pinned).await.unwrap_err();
    assert_eq!(
        refused.kind(),
        ErrorKind::CatalogCommitConflicts,
        "{refused}"
    );
    let before = common::snapshot_count(ws).await;

    let rebased = append(&checked).commit(catalog.as_ref()).await;
    assert!(
        rebased.is_ok(),
        "without the pin, iceberg re-bases the append"
    );
    assert_eq!(common::snapshot_count(ws).await, before + 1);
}

/// A backfill fetches and fingerprints its next drop while the month before
/// it runs: the next month runs on the files fetched then, and a run not
/// carried from the one before fetches for itself.
#[tokio::test]
async fn a_carried_run_fetches_the_next_drop_while_the_one_before_runs() {
    use silverline::core::drop::DropRef;
    use silverline::error::Error;
    use silverline::pipeline::{Carry, RunOptions, run, run_carrying};

    let tw = workspace().await;
    let ws = &tw.ws;
    let mut bank = suite::bank_with_history(ws, 10).await;
    let [january, february] = [1, 2]
        .map(|m| bank.statements(chrono::NaiveDate::from_ymd_opt(2026, m, 1).unwrap(), false));
    ws.put_drop("BANK_T", "2026-01", &january).await.unwrap();
    ws.put_drop("BANK_T", "2026-02", &february).await.unwrap();
    let [first, second] =
        ["2026-01", "2026-02"].map(|drop_id| DropRef::new("BANK_T", drop_id).unwrap());
    let options = RunOptions::default();

    let mut carry = Carry::default();
    carry.then(Some(second.clone()));
    let outcome = run_carrying(&ws.plan, &first, &options, &mut carry).await;
    assert_eq!(outcome.unwrap().summary.counts.committed, 10);

    let bronze = ws.plan.storage.bronze.strip_prefix("file://").unwrap();
    std::fs::remove_dir_all(std::path::Path::new(bronze).join("BANK_T/2026-02")).unwrap();
    let alone = run(&ws.plan, &second, &options).await.unwrap_err();
    assert!(matches!(alone, Error::DropNotArrived { .. }), "{alone}");
    let outcome = run_carrying(&ws.plan, &second, &options, &mut carry).await;
    assert_eq!(outcome.unwrap().summary.counts.committed, 10);
}
