//! The tables silverline owns stay one table with one history, and keep no
//! personal data in their metadata: a catalog that lost Silver is not answered
//! with a new empty table at the same location (the run refuses, exit 2, and
//! `adopt-table` brings the table back with its history), and the manifests
//! hold no lower/upper bound of a column marked sensitive. Data files are
//! compressed as the table's Iceberg codec property says (zstd unless set).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use assert_cmd::Command;
use chrono::NaiveDate;
use iceberg::table::Table;
use silverline::core::drop::DropRef;
use silverline::demo::generate::{Portfolio, double_limits};
use silverline::demo::{DEFAULT_CONFIG, Workspace};
use silverline::infra::catalog::METRICS_COLUMN_PREFIX;
use silverline::pipeline::RunOptions;

fn silverline<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> assert_cmd::assert::Assert {
    Command::cargo_bin("silverline")
        .unwrap()
        .args(["--log-format", "text"])
        .args(args)
        .assert()
}

fn output(assert: &assert_cmd::assert::Assert) -> String {
    let out = assert.get_output();
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The arguments of `silverline run` of BANK_C's drop `drop_id` under `config`.
fn run_args<'a>(config: &'a str, drop_id: &'a str) -> [&'a str; 7] {
    [
        "run",
        "--config",
        config,
        "--contributor",
        "BANK_C",
        "--drop",
        drop_id,
    ]
}

fn month(m: u32) -> NaiveDate {
    NaiveDate::from_ymd_opt(2026, m, 1).unwrap()
}

/// Every file below `dir`, sorted.
fn files_below(dir: &Path) -> BTreeSet<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return BTreeSet::new();
    };
    entries
        .flat_map(|e| {
            let path = e.unwrap().path();
            if path.is_dir() {
                files_below(&path)
            } else {
                BTreeSet::from([path])
            }
        })
        .collect()
}

/// Snapshot ids of Silver, oldest first.
fn snapshot_ids(table: &Table) -> Vec<i64> {
    let mut snapshots: Vec<_> = table.metadata().snapshots().collect();
    snapshots.sort_by_key(|s| s.sequence_number());
    snapshots.iter().map(|s| s.snapshot_id()).collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_lost_catalog_is_refused_not_forked_and_adopt_table_brings_the_history_back() {
    let tmp = tempfile::tempdir().unwrap();
    let ws = Workspace::create(&tmp.path().join("ws")).await.unwrap();
    let config = ws.dir.join("config/credit_statements.toml");
    let config = config.to_str().unwrap();
    let mut rows = Portfolio::new("BANK_C", 12, false, 3).statements(month(1), false);
    double_limits(&mut rows, 4); // some rows quarantined: the exception store is used too
    ws.put_drop("BANK_C", "2026-01", &rows).await.unwrap();
    let run = run_args(config, "2026-01");
    let first = output(&silverline(&run).success());
    assert!(first.contains("committed"), "{first}");
    let history = snapshot_ids(&common::silver_table(&ws).await);
    assert!(!history.is_empty());

    let data = ws.dir.join("data");
    std::fs::remove_file(data.join("catalog.db")).unwrap();
    let warehouse_before = files_below(&data.join("warehouse"));

    let refused = output(&silverline(&run).code(2));
    let location = data.join("warehouse/silver/credit_statements");
    for needed in [
        "catalog.uri",
        data.join("catalog.db").to_str().unwrap(),
        location.to_str().unwrap(),
        "adopt-table",
    ] {
        assert!(refused.contains(needed), "missing {needed:?} in: {refused}");
    }
    assert!(!refused.contains("committed 12"), "{refused}");
    assert_eq!(
        files_below(&data.join("warehouse")),
        warehouse_before,
        "the refused run wrote into the warehouse"
    );

    let adopted = output(&silverline(&["adopt-table", "--config", config]).success());
    assert!(
        adopted.contains("silver.credit_statements: adopted from"),
        "{adopted}"
    );
    assert!(adopted.contains("exceptions: adopted from"), "{adopted}");
    assert_eq!(snapshot_ids(&common::silver_table(&ws).await), history);

    let rerun = output(&silverline(&run).success());
    assert!(rerun.contains("already committed"), "{rerun}");
    assert_eq!(snapshot_ids(&common::silver_table(&ws).await), history);
    let again = output(&silverline(&["adopt-table", "--config", config]).success());
    assert!(again.contains("already in the catalog"), "{again}");
}

#[tokio::test(flavor = "multi_thread")]
async fn first_runs_started_together_create_the_tables_once_and_all_commit() {
    let tmp = tempfile::tempdir().unwrap();
    let ws = Workspace::create(&tmp.path().join("ws")).await.unwrap();
    let config = ws.dir.join("config/credit_statements.toml");
    let contributors = ["BANK_A", "BANK_B", "BANK_C", "BANK_D"];
    for (seed, contributor) in (1..).zip(contributors) {
        let mut rows = Portfolio::new(contributor, 10, false, seed).statements(month(1), false);
        double_limits(&mut rows, 5);
        ws.put_drop(contributor, "2026-01", &rows).await.unwrap();
    }
    let runs: Vec<_> = contributors
        .iter()
        .map(|contributor| {
            let mut command =
                std::process::Command::new(assert_cmd::cargo::cargo_bin("silverline"));
            command.args(["--log-format", "text", "run", "--config"]);
            command.arg(&config);
            command.args(["--contributor", contributor, "--drop", "2026-01"]);
            command.stdout(Stdio::piped()).stderr(Stdio::piped());
            command.spawn().unwrap()
        })
        .collect();
    for run in runs {
        let out = run.wait_with_output().unwrap();
        let text = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{text}");
    }
    let table = common::silver_table(&ws).await;
    assert_eq!(snapshot_ids(&table).len(), contributors.len());
}

#[tokio::test(flavor = "multi_thread")]
async fn adopt_table_with_nothing_to_adopt_exits_2() {
    let tmp = tempfile::tempdir().unwrap();
    let ws = Workspace::create(&tmp.path().join("ws")).await.unwrap();
    let config = ws.dir.join("config/credit_statements.toml");
    let text = output(&silverline(&["adopt-table", "--config", config.to_str().unwrap()]).code(2));
    assert!(text.contains("nothing to adopt"), "{text}");
}

/// Field ids of `columns` in Silver's schema.
fn field_ids(table: &Table, columns: &[&str]) -> Vec<i32> {
    let schema = table.metadata().current_schema();
    columns
        .iter()
        .map(|c| schema.field_by_name(c).unwrap().id)
        .collect()
}

/// Every data file in Silver's manifests, with the snapshot that added it.
async fn data_files(table: &Table) -> Vec<(i64, iceberg::spec::DataFile)> {
    let snapshot = table.metadata().current_snapshot().unwrap();
    let list = table.manifest_list_reader(snapshot).load().await.unwrap();
    let mut files = Vec::new();
    for manifest_file in list.entries() {
        let manifest = manifest_file.load_manifest(table.file_io()).await.unwrap();
        for entry in manifest.entries() {
            files.push((entry.snapshot_id().unwrap(), entry.data_file().clone()));
        }
    }
    assert!(!files.is_empty());
    files
}

/// (snapshot that added it, field ids with a lower bound, with an upper bound)
/// for every data file in Silver's manifests.
async fn bounds_of_data_files(table: &Table) -> Vec<(i64, BTreeSet<i32>, BTreeSet<i32>)> {
    let files = data_files(table).await.into_iter();
    files
        .map(|(snapshot, file)| {
            (
                snapshot,
                file.lower_bounds().keys().copied().collect(),
                file.upper_bounds().keys().copied().collect(),
            )
        })
        .collect()
}

const SENSITIVE: [&str; 3] = ["new_ic", "old_ic", "passport_no"];

#[tokio::test(flavor = "multi_thread")]
async fn manifests_hold_no_bounds_of_sensitive_columns() {
    let test = common::workspace().await;
    let ws = &test.ws;
    let mut bank = Portfolio::new("BANK_C", 40, false, 5);
    ws.put_drop("BANK_C", "2026-01", &bank.statements(month(1), false))
        .await
        .unwrap();
    ws.run_drop("BANK_C", "2026-01", &RunOptions::default())
        .await
        .unwrap();
    let table = common::silver_table(ws).await;
    for column in SENSITIVE {
        let key = format!("{METRICS_COLUMN_PREFIX}{column}");
        assert_eq!(
            table.metadata().properties().get(&key).map(String::as_str),
            Some("none")
        );
    }
    let sensitive = field_ids(&table, &SENSITIVE);
    let kept = field_ids(&table, &["statement_date", "account_id", "credit_limit"]);
    for (_, lower, upper) in bounds_of_data_files(&table).await {
        for id in &sensitive {
            assert!(!lower.contains(id) && !upper.contains(id), "bound of {id}");
        }
        for id in &kept {
            assert!(lower.contains(id) && upper.contains(id), "no bound of {id}");
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_column_marked_sensitive_later_loses_its_bounds_from_the_next_commit() {
    let tmp = tempfile::tempdir().unwrap();
    let plain = DEFAULT_CONFIG.replace(
        r#"{ name = "new_ic",              type = "string", sensitive = true },"#,
        r#"{ name = "new_ic",              type = "string" },"#,
    );
    assert_ne!(plain, DEFAULT_CONFIG);
    let ws = Workspace::create_with(&tmp.path().join("ws"), &plain, &[])
        .await
        .unwrap();
    let mut bank = Portfolio::new("BANK_C", 40, false, 5);
    for m in [1, 2] {
        let drop_id = format!("2026-{m:02}");
        ws.put_drop("BANK_C", &drop_id, &bank.statements(month(m), false))
            .await
            .unwrap();
    }
    ws.run_drop("BANK_C", "2026-01", &RunOptions::default())
        .await
        .unwrap();
    let before = common::silver_table(&ws).await;
    let key = format!("{METRICS_COLUMN_PREFIX}new_ic");
    assert_eq!(before.metadata().properties().get(&key), None);
    let first = snapshot_ids(&before);

    let mut plan = ws.plan.clone();
    let column = plan.contract.columns.iter_mut();
    column
        .filter(|c| c.name == "new_ic")
        .for_each(|c| c.sensitive = true);
    let drop = DropRef::new("BANK_C", "2026-02").unwrap();
    silverline::pipeline::run(&plan, &drop, &RunOptions::default())
        .await
        .unwrap();

    let after = common::silver_table(&ws).await;
    assert_eq!(
        after.metadata().properties().get(&key).map(String::as_str),
        Some("none")
    );
    let new_ic = field_ids(&after, &["new_ic"])[0];
    let files = bounds_of_data_files(&after).await;
    let (old, new): (Vec<_>, Vec<_>) = files.iter().partition(|(s, ..)| first.contains(s));
    assert!(!old.is_empty() && !new.is_empty());
    assert!(old.iter().all(|(_, lower, _)| lower.contains(&new_ic)));
    assert!(
        new.iter()
            .all(|(_, lower, upper)| !lower.contains(&new_ic) && !upper.contains(&new_ic))
    );
}

/// The codec property of Iceberg's Parquet data files.
const CODEC: &str = "write.parquet.compression-codec";

/// Sets the codec of `table` (Silver's when `None`) to `value`, as another
/// engine would; the catalog.
async fn set_codec(
    ws: &Workspace,
    table: Option<iceberg::TableIdent>,
    value: &str,
) -> std::sync::Arc<dyn iceberg::Catalog> {
    use iceberg::transaction::{ApplyTransactionAction, Transaction};
    let stores =
        silverline::infra::storage::Stores::new(&ws.plan.storage, ws.plan.catalog.warehouse())
            .await
            .unwrap();
    let catalog = silverline::infra::catalog::connect(&ws.plan.catalog, &stores)
        .await
        .unwrap();
    let table = match table {
        Some(ident) => catalog.load_table(&ident).await.unwrap(),
        None => common::silver_table(ws).await,
    };
    let tx = Transaction::new(&table);
    let update = tx.update_table_properties();
    let tx = update.set(CODEC.to_string(), value.to_string()).apply(tx);
    tx.unwrap().commit(catalog.as_ref()).await.unwrap();
    catalog
}

/// The codec of every column chunk of the data files each snapshot added.
async fn codecs_by_snapshot(table: &Table) -> Vec<(i64, BTreeSet<String>)> {
    use parquet::file::reader::{FileReader, SerializedFileReader};
    let files = data_files(table).await.into_iter();
    files
        .map(|(snapshot, file)| {
            let path = file.file_path().trim_start_matches("file://");
            let reader = SerializedFileReader::new(std::fs::File::open(path).unwrap()).unwrap();
            let chunks = reader.metadata().row_groups().iter();
            let names = chunks
                .flat_map(|group| group.columns().iter())
                .map(|chunk| format!("{:?}", chunk.compression()))
                .collect();
            (snapshot, names)
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn data_files_are_zstd_unless_the_table_names_another_codec_and_one_it_cannot_write_stops_the_run()
 {
    let test = common::workspace().await;
    let ws = &test.ws;
    let config = ws.dir.join("config/credit_statements.toml");
    let config = config.to_str().unwrap();
    let mut bank = Portfolio::new("BANK_C", 40, false, 5);
    for m in [1, 2, 3] {
        let drop_id = format!("2026-{m:02}");
        ws.put_drop("BANK_C", &drop_id, &bank.statements(month(m), false))
            .await
            .unwrap();
    }
    let run = |drop_id| run_args(config, drop_id);
    silverline(&run("2026-01")).success();
    let first = snapshot_ids(&common::silver_table(ws).await);
    set_codec(ws, None, "snappy").await;
    silverline(&run("2026-02")).success();
    let table = common::silver_table(ws).await;
    let codecs = codecs_by_snapshot(&table).await;
    let (january, february): (Vec<_>, Vec<_>) = codecs.iter().partition(|(s, _)| first.contains(s));
    assert!(!january.is_empty() && !february.is_empty());
    for (_, names) in &january {
        assert!(names.iter().all(|n| n.starts_with("ZSTD")), "{names:?}");
    }
    for (_, names) in &february {
        assert_eq!(names, &BTreeSet::from(["SNAPPY".to_string()]));
    }

    // Refused before the drop is read, by the run and by check-config.
    let catalog = set_codec(ws, None, "lzo").await;
    let refused = output(&silverline(&run("2026-03")).code(2));
    let named = "table silver.credit_statements: property write.parquet.compression-codec = lzo";
    assert!(refused.contains(named), "{refused}");
    assert!(refused.contains("zstd"), "{refused}");
    let check = output(&silverline(&["check-config", "--config", config]).code(2));
    assert!(check.contains(named), "{check}");

    // The exception store, written after Silver's commit, is checked first too.
    set_codec(ws, None, "zstd").await;
    let exceptions =
        iceberg::TableIdent::from_strs(["silver", "credit_statements_exceptions"]).unwrap();
    set_codec(ws, Some(exceptions.clone()), "lzo").await;
    let refused = output(&silverline(&run("2026-03")).code(2));
    let named = format!("table {exceptions}: property {CODEC} = lzo");
    assert!(refused.contains(&named), "{refused}");
    let after = catalog.load_table(table.identifier()).await.unwrap();
    assert_eq!(snapshot_ids(&after), snapshot_ids(&table));
}
