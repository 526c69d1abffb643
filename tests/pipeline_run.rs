//! One run's guarantees on the embedded default (local files + SQLite
//! catalog): the shared suite of `common/suite.rs` (`suite_tests!`, as
//! `embedded::*`), and what only this backend checks.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{suite, workspace};
use silverline::core::drop::DropRef;
use silverline::demo::generate::mis_map_limits;
use silverline::pipeline::{Carry, RunOptions, run_carrying};

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
/// it runs; the next month runs on the files fetched then, unless its
/// folder lists other files by then (delivered again): those are fetched
/// afresh.
#[tokio::test]
async fn a_carried_run_takes_the_drop_fetched_ahead_unless_it_was_delivered_again() {
    let tw = workspace().await;
    let ws = &tw.ws;
    let mut bank = suite::bank_with_history(ws, 10).await;
    let months = [1, 2, 3]
        .map(|m| bank.statements(chrono::NaiveDate::from_ymd_opt(2026, m, 1).unwrap(), false));
    let drops = ["2026-01", "2026-02", "2026-03"].map(|id| DropRef::new("BANK_T", id).unwrap());
    for (drop, rows) in drops.iter().zip(&months) {
        ws.put_drop("BANK_T", &drop.drop_id, rows).await.unwrap();
    }
    let options = RunOptions::default();
    let mut carry = Carry::default();
    let mut committed = Vec::new();
    for (index, drop) in drops.iter().enumerate() {
        carry.fetch_ahead(drops.get(index + 1).cloned());
        let outcome = run_carrying(&ws.plan, drop, &options, &mut carry).await;
        committed.push(outcome.unwrap().summary.counts.committed);
        if index == 0 {
            // February again, one row's limits mis-mapped, after its fetch started.
            let mut again = months[1].clone();
            mis_map_limits(&mut again[..1]);
            ws.put_drop("BANK_T", "2026-02", &again).await.unwrap();
        }
    }
    assert_eq!(committed, [10, 9, 10]);
}
