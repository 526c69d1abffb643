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

/// The workspace's catalog and Silver as it is now.
async fn catalog_and_silver(
    ws: &silverline::demo::Workspace,
) -> (std::sync::Arc<dyn iceberg::Catalog>, iceberg::table::Table) {
    use silverline::infra::catalog::{connect, load_silver};
    use silverline::infra::storage::Stores;
    let stores = Stores::new(&ws.plan.storage, ws.plan.catalog.warehouse())
        .await
        .unwrap();
    let catalog = connect(&ws.plan.catalog, &stores).await.unwrap();
    let silver = load_silver(catalog.as_ref(), &ws.plan).await.unwrap();
    (catalog, silver)
}

/// `rows` typed as a drop's and written as Silver data files (not committed).
async fn silver_files_of(
    ws: &silverline::demo::Workspace,
    silver: &iceberg::table::Table,
    rows: &[silverline::demo::generate::Statement],
    name: &str,
) -> Vec<iceberg::spec::DataFile> {
    use silverline::core::drop::DropFile;
    use silverline::demo::generate::to_csv;
    use silverline::infra::datafile::write_silver_files;
    use silverline::pipeline::read::read_drop;
    let file = DropFile::new("rows.csv", bytes::Bytes::from(to_csv(rows)));
    let read = read_drop(&ws.plan.contract, &[file]).unwrap();
    let columns: Vec<usize> = (0..ws.plan.contract.columns.len()).collect();
    let typed = read.rows.whole().unwrap().project(&columns).unwrap();
    write_silver_files(silver, &[typed], name).await.unwrap()
}

/// iceberg-rust re-applies a transaction on a reloaded table; a commit pinned
/// to the state silverline checked for its run key is refused instead, so a
/// run can never append on top of a concurrent run's snapshot.
#[tokio::test]
async fn a_commit_pinned_to_the_checked_state_is_refused_once_the_table_moved() {
    use iceberg::ErrorKind;
    use iceberg::transaction::{ApplyTransactionAction, Transaction};
    use silverline::infra::pinned::PinnedCatalog;

    let tw = workspace().await;
    let ws = &tw.ws;
    let mut bank = suite::bank_with_history(ws, 10).await;
    let (catalog, checked) = catalog_and_silver(ws).await;

    let january = bank.statements(chrono::NaiveDate::from_ymd_opt(2026, 1, 1).unwrap(), false);
    ws.put_drop("BANK_T", "2026-01", &january).await.unwrap();
    ws.run_drop("BANK_T", "2026-01", &RunOptions::default())
        .await
        .unwrap();

    let february = bank.statements(chrono::NaiveDate::from_ymd_opt(2026, 2, 1).unwrap(), false);
    let files = silver_files_of(ws, &checked, &february, "pinned").await;
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

fn month(m: u32) -> chrono::NaiveDate {
    chrono::NaiveDate::from_ymd_opt(2026, m, 1).unwrap()
}

/// What a run's judgement shows: its counts, every rule's outcome, the
/// periods' metrics (the committed ones compared with included), the
/// missing entities and how many rows found a baseline.
fn judged(summary: &silverline::pipeline::summary::Summary) -> String {
    let outcomes = serde_json::to_string(&summary.rules).unwrap();
    let aggregates = serde_json::to_string(&summary.aggregates).unwrap();
    let counts = serde_json::to_string(&summary.counts).unwrap();
    let missing = serde_json::to_string(&summary.missing_entities).unwrap();
    format!(
        "{counts} {outcomes} {aggregates} {missing} with baseline {} without {}",
        summary.baseline.rows_with_baseline, summary.baseline.rows_without_baseline
    )
}

/// January to March of a bank of 30 accounts, February's limits of 3
/// accounts changed silently, put as three drops.
async fn three_months(ws: &silverline::demo::Workspace) -> [DropRef; 3] {
    let mut bank = suite::bank_with_history(ws, 30).await;
    let mut months = Vec::new();
    for m in 1..=3 {
        if m == 2 {
            bank.change_limits_silently(3);
        }
        months.push(bank.statements(month(m), false));
    }
    let drops = ["2026-01", "2026-02", "2026-03"].map(|id| DropRef::new("BANK_T", id).unwrap());
    for (drop, rows) in drops.iter().zip(&months) {
        ws.put_drop("BANK_T", &drop.drop_id, rows).await.unwrap();
    }
    drops
}

/// A backfill's month reads the month before from the rows its run
/// committed, not from Silver, and judges exactly as runs alone do.
#[tokio::test]
async fn a_backfill_month_reads_the_month_before_from_its_run_and_judges_as_a_run_alone() {
    let alone = workspace().await;
    let mut expected = Vec::new();
    for drop in three_months(&alone.ws).await {
        let outcome = alone
            .ws
            .run_drop("BANK_T", &drop.drop_id, &RunOptions::default())
            .await
            .unwrap();
        expected.push(judged(&outcome.summary));
    }

    let carried = workspace().await;
    let ws = &carried.ws;
    let drops = three_months(ws).await;
    let mut carry = Carry::default();
    let mut seen = Vec::new();
    let mut previous_accounts = Vec::new();
    for (index, drop) in drops.iter().enumerate() {
        carry.fetch_ahead(drops.get(index + 1).cloned());
        let outcome = run_carrying(&ws.plan, drop, &RunOptions::default(), &mut carry).await;
        let summary = outcome.unwrap().summary;
        seen.push(judged(&summary));
        previous_accounts.push(summary.aggregates[0].previous["accounts"]);
        let kept = carry.committed_rows() as u64;
        match index {
            2 => assert_eq!(kept, 0, "no run follows March: nothing kept"),
            _ => assert_eq!(kept, summary.counts.committed, "{}", drop.drop_id),
        }
        assert_eq!(carry.read_kept_month(), index > 0, "{}", drop.drop_id);
    }
    assert_eq!(seen, expected);
    assert!(expected[1].contains("\"failed\":3"), "{}", expected[1]);
    // February committed 27 of its 30 rows: March compares with those.
    assert_eq!(previous_accounts, [Some(30.0), Some(30.0), Some(27.0)]);
}

/// Appends `rows` to Silver as another writer would: no run, no run key.
async fn append_as_another_writer(
    ws: &silverline::demo::Workspace,
    rows: &[silverline::demo::generate::Statement],
) {
    use iceberg::transaction::{ApplyTransactionAction, Transaction};

    let (catalog, silver) = catalog_and_silver(ws).await;
    let files = silver_files_of(ws, &silver, rows, "another-writer").await;
    let tx = Transaction::new(&silver);
    let tx = tx.fast_append().add_data_files(files).apply(tx).unwrap();
    tx.commit(catalog.as_ref()).await.unwrap();
}

/// Five accounts' January appended to Silver by another writer, between
/// January and February of a backfill (the kept January is no longer all
/// of Silver's) or before it (January held rows before its run: nothing
/// kept). Either way February finds the five accounts' January in Silver.
#[tokio::test]
async fn a_kept_month_gives_way_to_silver_once_more_of_it_is_committed() {
    for before_the_backfill in [false, true] {
        let tw = workspace().await;
        let ws = &tw.ws;
        let mut bank = suite::bank_with_history(ws, 200).await;
        let mut late = silverline::demo::generate::Portfolio::new("BANK_T", 5, false, 9);
        let rename = |rows: &mut Vec<silverline::demo::generate::Statement>| {
            for (i, row) in rows.iter_mut().enumerate() {
                row.account = format!("BANK_T-LATE-{i}");
            }
        };
        let mut late_january = late.statements(month(1), false);
        rename(&mut late_january);
        let january = bank.statements(month(1), false);
        let mut february = bank.statements(month(2), false);
        let mut late_february = late.statements(month(2), false);
        rename(&mut late_february);
        february.extend(late_february);
        ws.put_drop("BANK_T", "2026-01", &january).await.unwrap();
        ws.put_drop("BANK_T", "2026-02", &february).await.unwrap();

        let options = RunOptions::default();
        let mut carry = Carry::default();
        let [january, february] =
            ["2026-01", "2026-02"].map(|id| DropRef::new("BANK_T", id).unwrap());
        if before_the_backfill {
            append_as_another_writer(ws, &late_january).await;
        }
        carry.fetch_ahead(Some(february.clone()));
        let outcome = run_carrying(&ws.plan, &january, &options, &mut carry).await;
        assert_eq!(outcome.unwrap().summary.counts.committed, 200);
        match before_the_backfill {
            true => assert_eq!(carry.committed_rows(), 0, "January held rows before"),
            false => {
                assert_eq!(carry.committed_rows(), 200);
                append_as_another_writer(ws, &late_january).await;
            }
        }
        let summary = run_carrying(&ws.plan, &february, &options, &mut carry)
            .await
            .unwrap()
            .summary;
        assert!(!carry.read_kept_month(), "February read Silver");
        assert_eq!(summary.counts.committed, 205);
        assert_eq!(
            (
                summary.baseline.rows_with_baseline,
                summary.baseline.rows_without_baseline
            ),
            (205, 0),
            "appended before the backfill: {before_the_backfill}"
        );
        let accounts = summary.aggregates[0].previous.get("accounts").copied();
        assert_eq!(accounts, Some(Some(205.0)));
    }
}
