//! `silverline bench`: times one monthly run end to end on the embedded
//! default, against the floor of reading the drop's CSV and writing it as
//! Parquet, and shows how the run's time moves with history length (3, 12 and
//! 36 months) and with five times the rules. The compared runs are `--dry-run`
//! child processes (everything but the commit, so one drop can be measured
//! under several settings), timed from outside, with their peak RSS read from
//! `/proc` while they run; each compared figure, the floor's too, is the
//! median of three. Each workspace's history is appended directly (far
//! faster than run), then given what a backfill of it would have kept: its
//! months' metrics and the references' keys. One line measures the
//! 12-month drop with nothing kept (a first run); a last, real run of it
//! shows the commit.
//! Then, optionally, larger drops (`--large`, one dry run each) and a
//! backfill of monthly drops in one process (`--backfill-months`), in rows
//! per second.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow::array::Date32Array;
use arrow::record_batch::RecordBatch;

use chrono::NaiveDate;
use iceberg::transaction::{ApplyTransactionAction, Transaction};

use crate::config::Plan;
use crate::core::drop::DropFile;
use crate::demo::Workspace;
use crate::demo::generate::{Portfolio, Statement, csv_lines, month_end, months, to_csv};
use crate::error::{Error, Result};
use crate::infra::catalog::{connect, load_or_create_silver};
use crate::infra::datafile::write_silver_files;
use crate::infra::storage::Stores;
use crate::pipeline::evaluate::committed::{CommittedSources, start_committed_periods};
use crate::pipeline::evaluate::kept_keys::KeptKeys;
use crate::pipeline::evaluate::reference::{ReferenceSources, keep_loaded, load_known_keys};
use crate::pipeline::evaluate::references_read_by;
use crate::pipeline::read::read_drop;
use crate::stage::Stage;

const CONTRIBUTOR: &str = "BENCH_BANK";

/// One measured run.
#[derive(Debug, Clone)]
pub struct Measure {
    /// Wall time of the child process.
    pub wall: Duration,
    /// Its CPU time (user and system), as last seen while it ran.
    pub cpu: Duration,
    /// Its peak resident memory, bytes.
    pub peak_rss: u64,
    /// Its stage timings from the run summary, in ms.
    pub stages: Vec<(String, u64)>,
}

/// What the benchmark measures.
#[derive(Debug, Clone)]
pub struct Sizes {
    /// Accounts in the monthly drop.
    pub accounts: usize,
    /// Larger drops measured too (one dry run each, 3 months of history).
    pub large: Vec<usize>,
    /// Monthly drops a measured backfill runs (0: none).
    pub backfill_months: u32,
    /// Measure the backfill alone (no single runs, no larger drops).
    pub backfill_only: bool,
}

/// Runs the benchmark under `dir` and prints the figures.
pub async fn run_bench(sizes: &Sizes, dir: &Path) -> Result<()> {
    let accounts = sizes.accounts;
    println!(
        "silverline bench: {accounts} accounts, embedded default, under {}",
        dir.display()
    );
    if sizes.backfill_only && sizes.backfill_months == 0 {
        return Err(Error::Usage {
            arg: "--backfill-only".to_string(),
            reason: "measures the backfill alone: give --backfill-months too".to_string(),
        });
    }
    if !sizes.backfill_only {
        bench_runs(sizes, dir).await?;
    }
    if sizes.backfill_months > 0 {
        bench_backfills(accounts, sizes.backfill_months, dir).await?;
    }
    Ok(())
}

/// The single runs (history lengths, floor, Parquet, rules, commit, a drop
/// set aside, the backlog) and the larger drops.
async fn bench_runs(sizes: &Sizes, dir: &Path) -> Result<()> {
    let accounts = sizes.accounts;
    let mut by_history = Vec::new();
    let mut later_months = Vec::new();
    for history in [3u32, 12, 36] {
        let ws = Workspace::create(&dir.join(format!("history-{history}"))).await?;
        let (drop_id, later) = load_history(&ws, accounts, history).await?;
        let measure = median_run(&ws, "credit_statements.toml", &drop_id)?;
        print_measure(
            &format!("run, {history} months of history"),
            accounts,
            &measure,
        );
        by_history.push((history, ws, drop_id, measure));
        later_months.push(later);
    }
    let (_, ws, drop_id, run12) = &by_history[1];
    let floor = median_floor(ws, drop_id)?;
    println!(
        "floor (CSV -> Parquet, arrow)       {:>8.2} s",
        floor.as_secs_f64()
    );
    let parquet_drop = put_parquet_drop(ws, drop_id)?;
    let parquet = median_run(ws, "credit_statements.toml", &parquet_drop)?;
    print_measure("run, 12 months, Parquet drop", accounts, &parquet);
    write_five_fold_rules(ws)?;
    let five = median_run(ws, "credit_statements_x5.toml", drop_id)?;
    print_measure("run, 12 months, 5x rules", accounts, &five);
    // A first run: nothing kept by runs before it (measured afresh by the
    // committed run after it, which keeps them again).
    forget_kept(ws).await?;
    let first = median_run(ws, "credit_statements.toml", drop_id)?;
    print_measure("run, 12 months, nothing kept", accounts, &first);
    let committed = measure_run(ws, "credit_statements.toml", drop_id, COMMIT)?;
    print_measure("run, 12 months, committed", accounts, &committed);
    // The month after: what a monthly run meets in production, the metrics
    // of the two older compared months kept by the committed run.
    let next_id = later_months.swap_remove(1).put(ws).await?;
    let steady = median_run(ws, "credit_statements.toml", &next_id)?;
    print_measure("run, 12 months, the month after", accounts, &steady);
    let ratio = |a: Duration, b: Duration| a.as_secs_f64() / b.as_secs_f64().max(1e-9);
    println!(
        "\nrun / floor                         {:>8.2}",
        ratio(run12.wall, floor)
    );
    println!(
        "36 months / 3 months of history     {:>8.2}",
        ratio(by_history[2].3.wall, by_history[0].3.wall)
    );
    println!(
        "5x rules / default rules            {:>8.2}",
        ratio(five.wall, run12.wall)
    );
    println!(
        "Parquet drop / CSV drop (read)      {:>8.2}",
        stage_ms(&parquet, "read") as f64 / stage_ms(run12, "read").max(1) as f64
    );
    println!(
        "peak RSS 36 months / 3 months       {:>8.2}",
        by_history[2].3.peak_rss as f64 / by_history[0].3.peak_rss.max(1) as f64
    );
    let (_, ws3, drop3, _) = &by_history[0];
    let broken = put_broken_drop(ws3, drop3)?;
    let set_aside = measure_run(ws3, "credit_statements.toml", &broken, COMMIT)?;
    print_measure("run, every row set aside, committed", accounts, &set_aside);
    let config = ws3.dir.join("config/credit_statements.toml");
    let backlog = measure_command(&config, &["backlog", "--json"])?;
    print_measure(
        &format!("backlog, {accounts} open exceptions"),
        accounts,
        &backlog,
    );
    let base = &by_history[0].3;
    for &large in &sizes.large {
        let ws = Workspace::create(&dir.join(format!("large-{large}"))).await?;
        let (drop_id, _) = load_history(&ws, large, 3).await?;
        let measure = measure_run(&ws, "credit_statements.toml", &drop_id, DRY_RUN)?;
        print_measure(&format!("run, {large} accounts, 3 months"), large, &measure);
        println!(
            "  time / {accounts} accounts' time       {:>8.2} (rows x{:.0})",
            ratio(measure.wall, base.wall),
            large as f64 / accounts as f64
        );
    }
    Ok(())
}

/// A backfill of `months` monthly drops of `accounts` accounts, as CSV
/// files, then as Parquet files, each in a workspace of its own.
async fn bench_backfills(accounts: usize, months: u32, dir: &Path) -> Result<()> {
    for format in [DropFormat::Csv, DropFormat::Parquet] {
        let ws = Workspace::create(&dir.join(format!("backfill-{}", format.name()))).await?;
        let (from, to) = put_monthly_drops(&ws, accounts, months, format).await?;
        let measure = measure_backfill(&ws, (&from, &to))?;
        let rows = accounts * months as usize;
        print_measure(
            &format!("backfill, {months} monthly {} drops", format.name()),
            rows,
            &measure,
        );
    }
    Ok(())
}

/// The file format of a benchmark's drops.
#[derive(Clone, Copy)]
enum DropFormat {
    Csv,
    Parquet,
}

impl DropFormat {
    fn name(self) -> &'static str {
        match self {
            DropFormat::Csv => "CSV",
            DropFormat::Parquet => "Parquet",
        }
    }
}

/// `months_count` monthly drops of `accounts` accounts put in bronze
/// (nothing committed); the first and last drop ids.
async fn put_monthly_drops(
    ws: &Workspace,
    accounts: usize,
    months_count: u32,
    format: DropFormat,
) -> Result<(String, String)> {
    let mut drops = MonthlyDrops {
        portfolio: Portfolio::new(CONTRIBUTOR, accounts, false, 7),
        month: NaiveDate::from_ymd_opt(2024, 1, 1).unwrap_or_default(),
    };
    let mut ids = Vec::new();
    for _ in 0..months_count.max(1) {
        let drop_id = drops.put(ws).await?;
        if let DropFormat::Parquet = format {
            to_parquet_drop(ws, &drop_id)?;
        }
        ids.push(drop_id);
    }
    let first = ids.first().cloned().unwrap_or_default();
    Ok((first, ids.pop().unwrap_or_default()))
}

/// Replaces the CSV file of drop `drop_id` with the same rows as a typed
/// Parquet file.
fn to_parquet_drop(ws: &Workspace, drop_id: &str) -> Result<()> {
    let folder = drop_folder(ws, drop_id);
    let csv = folder.join("statements.csv");
    csv_to_parquet(ws, &csv, &folder.join("statements.parquet"))?;
    std::fs::remove_file(&csv).map_err(|source| Error::Io { path: csv, source })
}

fn print_measure(label: &str, accounts: usize, measure: &Measure) {
    let stages: Vec<String> = measure
        .stages
        .iter()
        .map(|(s, ms)| format!("{s} {ms} ms"))
        .collect();
    println!(
        "{label:<36}{:>8.2} s  cpu {:>6.2} s  {:>9.0} rows/s  peak RSS {:>6} MiB  ({})",
        measure.wall.as_secs_f64(),
        measure.cpu.as_secs_f64(),
        accounts as f64 / measure.wall.as_secs_f64().max(1e-9),
        measure.peak_rss / (1 << 20),
        stages.join(", ")
    );
}

/// Months of history generated month by month from the portfolio; older
/// months are copies of the oldest generated one, moved to their dates. The
/// run reads at most its lookback window (3 months) and the aggregates' window
/// (3 months), so the copies only give the table its size and file count.
const GENERATED_MONTHS: usize = 4;

/// Commits `history` months straight to Silver (setup, not measured), writes the
/// next month as a drop and returns its drop id, and the months after it.
async fn load_history(
    ws: &Workspace,
    accounts: usize,
    history: u32,
) -> Result<(String, MonthlyDrops)> {
    let plan = &ws.plan;
    let stores = Stores::new(&plan.storage, plan.catalog.warehouse()).await?;
    let catalog = connect(&plan.catalog, &stores).await?;
    let mut portfolio = Portfolio::new(CONTRIBUTOR, accounts, false, 99);
    let first = NaiveDate::from_ymd_opt(2024, 1, 1).unwrap_or_default();
    let all = months(first, history + 1);
    let (drop_month, history_months) = all
        .split_last()
        .ok_or_else(|| Error::Internal("no months".into()))?;
    let copied = history_months.len().saturating_sub(GENERATED_MONTHS);
    // The first month, slice by slice, when older months copy it.
    let mut template = Vec::new();
    for (i, month) in history_months.iter().enumerate() {
        let silver = load_or_create_silver(catalog.as_ref(), plan).await?.table;
        let mut files = Vec::new();
        for (slice, positions) in slices(accounts) {
            let rows = match template.get(slice) {
                Some(template) if i < copied => redated(plan, template, *month)?,
                _ => {
                    let statements = portfolio.statements_of(*month, true, positions);
                    if i == 0 {
                        let holders = statements.iter().map(|r| r.holder.as_str());
                        ws.register_holders(&format!("bench-{slice}"), holders)
                            .await?;
                    }
                    let typed = typed_rows(plan, &statements)?;
                    if i < copied {
                        template.push(typed.clone());
                    }
                    typed
                }
            };
            let name = format!("history-{i}-{slice}");
            files.extend(write_silver_files(&silver, &[rows], &name).await?);
        }
        append_history_unjudged(catalog.as_ref(), &silver, files).await?;
    }
    let mut drops = MonthlyDrops {
        portfolio,
        month: *drop_month,
    };
    let drop_id = drops.put(ws).await?;
    if let Some(first) = history_months.first() {
        keep_as_a_backfill_would(ws, (*first, *drop_month), (stores, catalog)).await?;
    }
    Ok((drop_id, drops))
}

/// Keeps under the workspace's dq_error what a backfill of its history
/// months (`window`: the first month's first day, the drop month's) would
/// have kept, as the figures were measured: each month's metrics
/// (a committed run keeps its periods') and the references' keys (its last
/// run's). The history is appended directly, far faster than run.
async fn keep_as_a_backfill_would(
    ws: &Workspace,
    window: (NaiveDate, NaiveDate),
    (stores, catalog): (Stores, Arc<dyn iceberg::Catalog>),
) -> Result<()> {
    let plan = &ws.plan;
    let silver = load_or_create_silver(catalog.as_ref(), plan).await?.table;
    let dq_error = stores.open(&plan.storage.dq_error, "storage.dq_error")?;
    let (_, rules) = plan.rules_for(CONTRIBUTOR)?;
    let sources = CommittedSources {
        silver: &silver,
        dq_error: &dq_error,
        keep: true,
        missing: None,
        memory: plan.query_memory()?,
        carried: None,
    };
    if let Some(work) = start_committed_periods(plan, &rules, CONTRIBUTOR, Some(window), sources)? {
        work.join().await?;
    }
    let sources = ReferenceSources {
        stores,
        catalog,
        kept: None,
    };
    let references = references_read_by(plan, &rules);
    let mut known = load_known_keys(references, sources, Vec::new()).await?;
    keep_loaded(&mut known, &KeptKeys::new(dq_error, true), &plan.contract).await;
    Ok(())
}

/// Deletes what runs kept under the workspace's dq_error (metrics,
/// references' keys): the next run measures and reads everything afresh.
async fn forget_kept(ws: &Workspace) -> Result<()> {
    let plan = &ws.plan;
    let stores = Stores::new(&plan.storage, plan.catalog.warehouse()).await?;
    let dq_error = stores.open(&plan.storage.dq_error, "storage.dq_error")?;
    for folder in ["metrics/", "reference-keys/"] {
        for kept in dq_error.list(folder).await? {
            dq_error.delete(&kept.relative).await?;
        }
    }
    Ok(())
}

/// Accounts generated, read and written at once while the bench sets up:
/// a month of a large portfolio is never held whole.
const SLICE_ACCOUNTS: usize = 1_000_000;

/// The slices of `accounts` accounts, numbered, by position.
fn slices(accounts: usize) -> impl Iterator<Item = (usize, std::ops::Range<usize>)> {
    (0..accounts.div_ceil(SLICE_ACCOUNTS).max(1)).map(move |slice| {
        let start = slice * SLICE_ACCOUNTS;
        (slice, start..(start + SLICE_ACCOUNTS).min(accounts))
    })
}

/// One portfolio's monthly drops, put in bronze month after month.
struct MonthlyDrops {
    portfolio: Portfolio,
    /// The month the next drop is of.
    month: NaiveDate,
}

impl MonthlyDrops {
    /// Puts this month's drop in bronze, generated slice by slice, and its
    /// holders in the reference; moves to the next month and returns the
    /// drop id.
    async fn put(&mut self, ws: &Workspace) -> Result<String> {
        let drop_id = self.month.format("%Y-%m").to_string();
        let mut parts = vec![bytes::Bytes::from(to_csv(&[]))];
        for (slice, positions) in slices(self.portfolio.len()) {
            let statements = self.portfolio.statements_of(self.month, false, positions);
            parts.push(bytes::Bytes::from(csv_lines(&statements)));
            let holders = statements.iter().map(|r| r.holder.as_str());
            ws.register_holders(&format!("{CONTRIBUTOR}-{drop_id}-{slice}"), holders)
                .await?;
        }
        ws.put_file_parts(CONTRIBUTOR, &drop_id, "statements.csv", parts)
            .await?;
        self.month = self
            .month
            .checked_add_months(chrono::Months::new(1))
            .ok_or_else(|| Error::Internal(format!("bench: no month after {drop_id}")))?;
        Ok(drop_id)
    }
}

/// Statements as rows of the contract, read the way a drop is.
fn typed_rows(plan: &Plan, statements: &[Statement]) -> Result<RecordBatch> {
    let file = DropFile::new("history.csv", bytes::Bytes::from(to_csv(statements)));
    let batch = read_drop(&plan.contract, &[file])?;
    let columns: Vec<usize> = (0..plan.contract.columns.len()).collect();
    batch
        .rows
        .whole()?
        .project(&columns)
        .map_err(Error::arrow(Stage::Bench))
}

/// `rows` with the order column moved to the last day of `month`.
fn redated(plan: &Plan, rows: &RecordBatch, month: NaiveDate) -> Result<RecordBatch> {
    let date = month_end(month);
    let days = (date - NaiveDate::default()).num_days() as i32;
    let index = rows
        .schema()
        .index_of(&plan.contract.order_column)
        .map_err(Error::arrow(Stage::Bench))?;
    let mut columns = rows.columns().to_vec();
    columns[index] = Arc::new(Date32Array::from(vec![days; rows.num_rows()]));
    RecordBatch::try_new(rows.schema(), columns).map_err(Error::arrow(Stage::Bench))
}

/// Bench setup only: appends one month of generated history (its data
/// `files`) to Silver directly, without judging it (the measured runs go
/// through the pipeline).
async fn append_history_unjudged(
    catalog: &dyn iceberg::Catalog,
    silver: &iceberg::table::Table,
    files: Vec<iceberg::spec::DataFile>,
) -> Result<()> {
    let tx = Transaction::new(silver);
    let tx = tx
        .fast_append()
        .add_data_files(files)
        .apply(tx)
        .map_err(Error::catalog("bench", "history"))?;
    tx.commit(catalog)
        .await
        .map_err(Error::catalog("bench", "history"))?;
    Ok(())
}

/// Measure a run without its commit.
const DRY_RUN: bool = true;
/// Measure a run with its commit.
const COMMIT: bool = false;

/// How many times each compared dry run is repeated; the median counts.
const REPEATS: usize = 3;

/// The median (by wall time) of [`REPEATS`] dry runs: one run on a shared
/// machine varies by about 10%, enough to blur a ratio.
fn median_run(ws: &Workspace, config: &str, drop_id: &str) -> Result<Measure> {
    let mut runs = (0..REPEATS)
        .map(|_| measure_run(ws, config, drop_id, DRY_RUN))
        .collect::<Result<Vec<_>>>()?;
    runs.sort_by_key(|m| m.wall);
    Ok(runs.swap_remove(REPEATS / 2))
}

/// Runs `silverline run` (with `--dry-run` if `dry_run`) as a child process and measures it.
fn measure_run(ws: &Workspace, config: &str, drop_id: &str, dry_run: bool) -> Result<Measure> {
    let mut args = vec!["run"];
    args.extend(dry_run.then_some("--dry-run"));
    args.extend(["--contributor", CONTRIBUTOR, "--drop", drop_id]);
    measure_command(&ws.dir.join("config").join(config), &args)
}

/// Runs `silverline backfill` of the drops from `from` to `to` as a child
/// process and measures it.
fn measure_backfill(ws: &Workspace, (from, to): (&str, &str)) -> Result<Measure> {
    let args = [
        "backfill",
        "--contributor",
        CONTRIBUTOR,
        "--from",
        from,
        "--to",
        to,
    ];
    measure_command(&ws.dir.join("config/credit_statements.toml"), &args)
}

/// Runs `silverline <args> --config <config>` as a child process and measures it.
fn measure_command(config: &Path, args: &[&str]) -> Result<Measure> {
    let exe = std::env::current_exe().map_err(|source| Error::Io {
        path: PathBuf::from("current_exe"),
        source,
    })?;
    let started = Instant::now();
    let mut child = std::process::Command::new(exe)
        .args(["--log-format", "json"])
        .args(args)
        .arg("--config")
        .arg(config)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .map_err(|source| Error::Io {
            path: config.to_path_buf(),
            source,
        })?;
    let status_path = format!("/proc/{}/status", child.id());
    let stat_path = format!("/proc/{}/stat", child.id());
    let (mut peak_rss, mut cpu) = (0, Duration::ZERO);
    loop {
        if let Some(rss) = read_peak_rss(&status_path) {
            peak_rss = peak_rss.max(rss);
        }
        if let Some(seen) = read_cpu_time(&stat_path) {
            cpu = cpu.max(seen);
        }
        match child.try_wait().map_err(|source| Error::Io {
            path: config.to_path_buf(),
            source,
        })? {
            Some(_) => break,
            None => std::thread::sleep(Duration::from_millis(10)),
        }
    }
    let wall = started.elapsed();
    let output = child.wait_with_output().map_err(|source| Error::Io {
        path: config.to_path_buf(),
        source,
    })?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    if !output.status.success() {
        return Err(Error::Internal(format!("bench run failed: {stdout}")));
    }
    Ok(Measure {
        wall,
        cpu,
        peak_rss,
        stages: stage_timings(&stdout),
    })
}

fn read_peak_rss(status_path: &str) -> Option<u64> {
    let status = std::fs::read_to_string(status_path).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// Clock ticks per second of `/proc/<pid>/stat` times (USER_HZ: 100 on Linux).
const USER_HZ: u64 = 100;

/// User plus system time of a running process, from `/proc/<pid>/stat`.
fn read_cpu_time(stat_path: &str) -> Option<Duration> {
    let stat = std::fs::read_to_string(stat_path).ok()?;
    // Fields after the command name (which may hold spaces), from field 3.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks = |i: usize| fields.get(i)?.parse::<u64>().ok();
    let total = ticks(11)? + ticks(12)?;
    Some(Duration::from_millis(total * 1000 / USER_HZ))
}

fn stage_timings(stdout: &str) -> Vec<(String, u64)> {
    // A backfill prints one line per drop: each stage's times are summed.
    let mut stages: Vec<(String, u64)> = Vec::new();
    let timings = stdout.lines().filter_map(|l| l.strip_prefix("timings: "));
    for part in timings.flat_map(str::split_whitespace) {
        let Some((stage, ms)) = part.split_once('=') else {
            continue;
        };
        let Some(ms) = ms.strip_suffix("ms").and_then(|ms| ms.parse::<u64>().ok()) else {
            continue;
        };
        match stages.iter_mut().find(|(s, _)| s == stage) {
            Some((_, total)) => *total += ms,
            None => stages.push((stage.to_string(), ms)),
        }
    }
    stages
}

/// The median of [`REPEATS`] floor measurements, as for the runs it is compared with.
fn median_floor(ws: &Workspace, drop_id: &str) -> Result<Duration> {
    let mut floors = (0..REPEATS)
        .map(|_| measure_floor(ws, drop_id))
        .collect::<Result<Vec<_>>>()?;
    floors.sort();
    Ok(floors.swap_remove(REPEATS / 2))
}

/// The bench contributor's drop folder `drop_id` in the workspace's bronze.
fn drop_folder(ws: &Workspace, drop_id: &str) -> PathBuf {
    ws.dir.join("data/bronze").join(CONTRIBUTOR).join(drop_id)
}

/// The floor: read the drop CSV with the contract's types and write it as Parquet, nothing else.
fn measure_floor(ws: &Workspace, drop_id: &str) -> Result<Duration> {
    let csv = drop_folder(ws, drop_id).join("statements.csv");
    let started = Instant::now();
    csv_to_parquet(ws, &csv, &ws.dir.join("floor.parquet"))?;
    Ok(started.elapsed())
}

/// Reads the CSV file `csv` with the contract's types and writes it as the
/// Parquet file `out_path` (zstd, as Silver's), with arrow alone.
fn csv_to_parquet(ws: &Workspace, csv: &Path, out_path: &Path) -> Result<()> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| Error::Io { path, source }
    };
    let file = std::fs::File::open(csv).map_err(io(csv))?;
    let reader = arrow::csv::ReaderBuilder::new(ws.plan.contract.arrow_schema())
        .with_header(true)
        .with_batch_size(65_536)
        .build(file)
        .map_err(Error::arrow(Stage::Bench))?;
    let out = std::fs::File::create(out_path).map_err(io(out_path))?;
    let failed = |e: parquet::errors::ParquetError| {
        Error::Internal(format!("bench: {}: {e}", out_path.display()))
    };
    // Compressed as Silver's data files are when the table names no codec.
    let props = parquet::file::properties::WriterProperties::builder()
        .set_compression(crate::infra::catalog::default_compression())
        .build();
    let mut writer =
        parquet::arrow::ArrowWriter::try_new(out, ws.plan.contract.arrow_schema(), Some(props))
            .map_err(failed)?;
    for batch in reader {
        let batch = batch.map_err(Error::arrow(Stage::Bench))?;
        writer.write(&batch).map_err(failed)?;
    }
    writer.close().map_err(failed)?;
    Ok(())
}

/// A stage's time in a measure, ms (0 when absent).
fn stage_ms(measure: &Measure, stage: &str) -> u64 {
    measure
        .stages
        .iter()
        .find(|(s, _)| s == stage)
        .map_or(0, |(_, ms)| *ms)
}

/// The drop as a typed Parquet file (the floor's output) in a drop of its
/// own next to the CSV one; returns its drop id.
fn put_parquet_drop(ws: &Workspace, drop_id: &str) -> Result<String> {
    let parquet_id = format!("{drop_id}-parquet");
    let folder = drop_folder(ws, &parquet_id);
    let target = folder.join("statements.parquet");
    std::fs::create_dir_all(&folder)
        .and_then(|()| std::fs::copy(ws.dir.join("floor.parquet"), &target))
        .map_err(|source| Error::Io {
            path: target.clone(),
            source,
        })?;
    Ok(parquet_id)
}

/// A copy of the CSV drop `drop_id` in a drop of its own, every row's
/// `month_in_arrears` (its last field) out of range: every row is set
/// aside, with an exception each. Returns its drop id.
fn put_broken_drop(ws: &Workspace, drop_id: &str) -> Result<String> {
    use std::io::{BufRead, Write};
    let broken_id = format!("{drop_id}-broken");
    let (source, target) = (
        drop_folder(ws, drop_id).join("statements.csv"),
        drop_folder(ws, &broken_id).join("statements.csv"),
    );
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| Error::Io { path, source }
    };
    std::fs::create_dir_all(drop_folder(ws, &broken_id)).map_err(io(&target))?;
    let input = std::io::BufReader::new(std::fs::File::open(&source).map_err(io(&source))?);
    let mut out = std::io::BufWriter::new(std::fs::File::create(&target).map_err(io(&target))?);
    for (index, line) in input.lines().enumerate() {
        let line = line.map_err(io(&source))?;
        let line = match (index, line.rsplit_once(',')) {
            (0, _) | (_, None) => line,
            (_, Some((head, _))) => format!("{head},40"),
        };
        writeln!(out, "{line}").map_err(io(&target))?;
    }
    out.flush().map_err(io(&target))?;
    Ok(broken_id)
}

/// A config whose rule set is the default one plus four renamed copies of it.
fn write_five_fold_rules(ws: &Workspace) -> Result<()> {
    let config_dir = ws.dir.join("config");
    let original = config_dir.join("rules/credit_rules.csv");
    let text = std::fs::read_to_string(&original).map_err(|source| Error::Io {
        path: original.clone(),
        source,
    })?;
    let mut lines = text.lines();
    let header = lines.next().unwrap_or_default();
    let rows: Vec<&str> = lines.collect();
    let mut copies = format!("{header}\n");
    for copy in 2..=5 {
        for row in &rows {
            let (name, rest) = row.split_once(',').unwrap_or((row, ""));
            copies.push_str(&format!("{name}_x{copy},{rest}\n"));
        }
    }
    let copies_path = config_dir.join("rules/credit_rules_x4.csv");
    std::fs::write(&copies_path, copies).map_err(|source| Error::Io {
        path: copies_path,
        source,
    })?;
    let config_path = config_dir.join("credit_statements.toml");
    let config = std::fs::read_to_string(&config_path).map_err(|source| Error::Io {
        path: config_path.clone(),
        source,
    })?;
    let five = config.replace(
        "rule_files = [{ path = \"rules/credit_rules.csv\" }]",
        "rule_files = [{ path = \"rules/credit_rules.csv\" }, { path = \"rules/credit_rules_x4.csv\" }]",
    );
    let five_path = config_dir.join("credit_statements_x5.toml");
    std::fs::write(&five_path, five).map_err(|source| Error::Io {
        path: five_path,
        source,
    })
}
