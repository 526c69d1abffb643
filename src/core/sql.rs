//! The SQL toolbox every layer may use: the DataFusion session every query
//! of a run uses (DataFusion is the one evaluator: reading history, LAG,
//! rules), in-memory tables, and quoting. Strings stay plain `Utf8`, the type
//! the contract and the Iceberg writer use. Errors name the stage they serve.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow::datatypes::{Field, Schema, SchemaRef};
use arrow::record_batch::RecordBatch;
use datafusion::common::config::SpillCompression;
use datafusion::dataframe::DataFrame;
use datafusion::datasource::MemTable;
use datafusion::datasource::file_format::options::ArrowReadOptions;
use datafusion::execution::SendableRecordBatchStream;
use datafusion::execution::disk_manager::{
    DiskManagerBuilder, DiskManagerMode, RefCountedTempFile,
};
use datafusion::execution::runtime_env::{RuntimeEnv, RuntimeEnvBuilder};
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::stream::{RecordBatchReceiverStream, RecordBatchStreamAdapter};
use datafusion::prelude::{SessionConfig, SessionContext};
use futures::{StreamExt, TryStreamExt};
use tracing::Instrument;

use crate::core::pool::LendingSpillPool;
use crate::core::spill::{SPILL_EXTENSION, Spill, SpilledTable};
use crate::error::{Error, Result};
use crate::stage::Stage;

/// What a run's queries may hold in memory, and where they spill past it
/// (`[resources]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemoryBudget {
    /// The run's budget (`memory_limit`): the queries' operators (joins,
    /// aggregates, sorts) may reserve half of it.
    pub bytes: u64,
    /// Where they spill; `None`: the system's temporary folder.
    pub scratch_dir: Option<PathBuf>,
    /// The most rows judged (or of a committed month counted) at once;
    /// `None`: a drop that half of `bytes` holds whole, a larger one in
    /// buckets of an eighth of it.
    pub bucket_rows: Option<u64>,
}

impl MemoryBudget {
    /// The budget and scratch folder a run's spill folder
    /// ([`crate::core::spill::SpillDir::new`]) is made with.
    pub(crate) fn spilling(&self) -> (u64, Option<&Path>) {
        (self.bytes, self.scratch_dir.as_deref())
    }
}

/// The memory every session of one run shares: one spilling pool of half
/// the budget and one disk manager in its scratch folder, so that the run's
/// queries together, not each session, are held to their half.
#[derive(Clone)]
pub(crate) struct QueryMemory {
    runtime: Arc<RuntimeEnv>,
    /// What a spilling operator holds back to merge its spills.
    merge_reservation: usize,
    /// The pool's size.
    pool: usize,
}

impl QueryMemory {
    /// The run's pool and disk manager for `budget`. A scratch folder that
    /// cannot be created or written is a problem of `resources.scratch_dir`,
    /// named with the folder (no retry would help).
    pub(crate) fn new(budget: &MemoryBudget) -> std::result::Result<QueryMemory, String> {
        let disk = match &budget.scratch_dir {
            Some(dir) => {
                writable_folder(dir).map_err(|e| {
                    format!(
                        "resources.scratch_dir: cannot create or write {}: {e}",
                        dir.display()
                    )
                })?;
                DiskManagerMode::Directories(vec![dir.clone()])
            }
            None => DiskManagerMode::OsTmpDirectory,
        };
        // Half the budget: the other half holds what the run keeps beside
        // its queries (the bucket judged, the references' keys).
        let pool = usize::try_from(budget.bytes / 2).unwrap_or(usize::MAX);
        let runtime = RuntimeEnvBuilder::new()
            .with_memory_pool(Arc::new(LendingSpillPool::new(pool)))
            .with_disk_manager_builder(DiskManagerBuilder::default().with_mode(disk))
            .build_arc()
            .map_err(|e| format!("resources.scratch_dir: the spill folder cannot be made: {e}"))?;
        Ok(QueryMemory {
            runtime,
            // DataFusion's 10 MiB, or a sixteenth of a smaller budget: with
            // 10 MiB per core, a small budget could not merge what it spilled.
            merge_reservation: (pool / 16).min(SORT_SPILL_RESERVATION),
            pool,
        })
    }
}

#[cfg(test)]
impl QueryMemory {
    /// The smallest budget accepted (32 MiB: a pool of 16 MiB), spilling to `scratch`.
    pub(crate) fn smallest(scratch: &std::path::Path) -> QueryMemory {
        QueryMemory::new(&MemoryBudget {
            bytes: 32 * 1024 * 1024,
            scratch_dir: Some(scratch.to_path_buf()),
            bucket_rows: None,
        })
        .expect("a writable scratch folder")
    }
}

impl std::fmt::Debug for QueryMemory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QueryMemory")
            .field("pool", &self.pool)
            .field("merge_reservation", &self.merge_reservation)
            .finish_non_exhaustive()
    }
}

/// Creates `dir` if missing and checks that a folder can be made in it (as
/// the disk manager makes one per run).
fn writable_folder(dir: &std::path::Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    tempfile::Builder::new()
        .prefix("silverline-probe-")
        .tempdir_in(dir)?
        .close()
}

/// A session with silverline's settings, its queries held to the run's
/// `memory`: past it, the operators that can spill (aggregates, sorts)
/// spill to its scratch folder, and those that cannot stop with
/// "resources exhausted".
pub(crate) fn new_session(memory: &QueryMemory) -> SessionContext {
    let mut config = session_config();
    config.options_mut().execution.sort_spill_reservation_bytes = memory.merge_reservation;
    SessionContext::new_with_config_rt(config, memory.runtime.clone())
}

/// A session for one sort of more rows than `memory` may hold: one
/// partition (one sorter, not one per core, shares the pool) that holds
/// back at least a quarter of a small pool to merge what it spilled (a
/// sixteenth could not merge batches of the exception table's size at the
/// smallest budgets).
pub(crate) fn sort_session(memory: &QueryMemory) -> SessionContext {
    let mut config = session_config().with_target_partitions(1);
    config.options_mut().execution.sort_spill_reservation_bytes = memory
        .merge_reservation
        .max((memory.pool / 4).min(SORT_SPILL_RESERVATION));
    SessionContext::new_with_config_rt(config, memory.runtime.clone())
}

/// DataFusion's default reservation for merging spills.
const SORT_SPILL_RESERVATION: usize = 10 * 1024 * 1024;

/// A session for planning only (checking a rule's expression): no query
/// of it runs over rows.
pub(crate) fn planning_session() -> SessionContext {
    SessionContext::new_with_config(session_config())
}

fn session_config() -> SessionConfig {
    let mut config = SessionConfig::new();
    let options = config.options_mut();
    options.sql_parser.map_string_types_to_utf8view = false;
    options.execution.parquet.schema_force_view_types = false;
    // The files a session scans are the run's Arrow spill files. Split into
    // byte ranges, DataFusion's Arrow source reads every batch of a range at
    // once (828 MiB of a 20M-account month); whole, a file streams batch by
    // batch, and a folder of them is still spread over the partitions.
    options.optimizer.repartition_file_scans = false;
    // What an operator spills is LZ4 compressed, as the run's own spill
    // files are (crate::core::spill).
    options.execution.spill_compression = SpillCompression::Lz4Frame;
    config
}

/// Runs `frame`, returning its rows under one plain schema: every field
/// nullable and without metadata (the parts of a union may differ in both).
pub(crate) async fn collect(
    frame: DataFrame,
    stage: Stage,
) -> Result<(SchemaRef, Vec<RecordBatch>)> {
    let planned = Arc::new(frame.schema().as_arrow().clone());
    let batches = run_frame(frame).await.map_err(Error::query(stage))?;
    let found = batches.first().map_or(planned, RecordBatch::schema);
    let schema: SchemaRef = Arc::new(Schema::new(
        found
            .fields()
            .iter()
            .map(|f| Field::new(f.name(), f.data_type().clone(), true))
            .collect::<Vec<_>>(),
    ));
    let batches = batches
        .into_iter()
        .map(|b| RecordBatch::try_new(schema.clone(), b.columns().to_vec()))
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(Error::arrow(stage))?;
    Ok((schema, batches))
}

/// Runs `frame` to its batches. What its operators spilled past the memory
/// budget is logged: the one trace a spill leaves.
pub(crate) async fn run_frame(frame: DataFrame) -> datafusion::error::Result<Vec<RecordBatch>> {
    let task = Arc::new(frame.task_ctx());
    let plan = frame.create_physical_plan().await?;
    let batches = datafusion::physical_plan::collect(plan.clone(), task).await?;
    log_spills(plan.as_ref());
    Ok(batches)
}

/// Runs `frame` as a stream of its batches, with the plan that yields them
/// (for [`log_spills`] once the stream is drained).
pub(crate) async fn stream_frame(
    frame: DataFrame,
) -> datafusion::error::Result<(Arc<dyn ExecutionPlan>, SendableRecordBatchStream)> {
    let task = Arc::new(frame.task_ctx());
    let plan = frame.create_physical_plan().await?;
    let stream = datafusion::physical_plan::execute_stream(plan.clone(), task)?;
    Ok((plan, stream))
}

/// Runs `frame` as a stream of its batches that, once drained, logs what
/// its operators spilled ([`log_spills`]); a reader that stops early (at
/// an error, say) logs nothing.
pub(crate) async fn logged_stream(
    frame: DataFrame,
) -> datafusion::error::Result<SendableRecordBatchStream> {
    let (plan, stream) = stream_frame(frame).await?;
    let schema = stream.schema();
    let drained = futures::stream::once(async move {
        log_spills(plan.as_ref());
        None
    });
    let logged = stream
        .map(Some)
        .chain(drained)
        .filter_map(futures::future::ready);
    Ok(Box::pin(RecordBatchStreamAdapter::new(schema, logged)))
}

/// `stream` read ahead by a task of its own, up to `batches` batches: its
/// batches are decoded while the reader works on the ones before (the
/// reader's work and the decoding would otherwise take turns). The task
/// runs on the current Tokio runtime, in the caller's span, and stops when
/// the stream is dropped.
pub(crate) fn read_ahead(
    stream: SendableRecordBatchStream,
    batches: usize,
) -> SendableRecordBatchStream {
    let mut ahead = RecordBatchReceiverStream::builder(stream.schema(), batches.max(1));
    let sender = ahead.tx();
    let task = async move {
        let mut stream = stream;
        while let Some(batch) = stream.next().await {
            if sender.send(batch).await.is_err() {
                break;
            }
        }
        Ok(())
    };
    ahead.spawn(task.in_current_span());
    ahead.build()
}

/// Logs what `plan`'s operators spilled past the memory budget, if they
/// did; how many times they spilled.
pub(crate) fn log_spills(plan: &dyn ExecutionPlan) -> usize {
    let (spills, spilled_bytes) = spilled(plan);
    if spills > 0 {
        tracing::info!(
            spills,
            spilled_bytes,
            "a query spilled to the scratch folder: an operator passed its share of [resources] memory_limit"
        );
    }
    spills
}

/// How many times `plan`'s operators spilled, and how many bytes.
fn spilled(plan: &dyn ExecutionPlan) -> (usize, usize) {
    let own = plan.metrics().map_or((0, 0), |m| {
        (m.spill_count().unwrap_or(0), m.spilled_bytes().unwrap_or(0))
    });
    plan.children()
        .into_iter()
        .map(|child| spilled(child.as_ref()))
        .fold(own, |(count, bytes), (c, b)| (count + c, bytes + b))
}

/// Registers `batches` as the in-memory table `name`, spread over the
/// session's partitions (replacing a table of that name).
pub(crate) fn register_table(
    ctx: &SessionContext,
    name: &str,
    (schema, batches): (SchemaRef, Vec<RecordBatch>),
    stage: Stage,
) -> Result<()> {
    let lanes = ctx.state().config().target_partitions().max(1);
    let mut partitions = vec![Vec::new(); lanes];
    for (i, batch) in batches.into_iter().enumerate() {
        partitions[i % lanes].push(batch);
    }
    let table = MemTable::try_new(schema, partitions).map_err(Error::query(stage))?;
    ctx.deregister_table(name).map_err(Error::query(stage))?;
    ctx.register_table(name, Arc::new(table))
        .map_err(Error::query(stage))?;
    Ok(())
}

/// Registers `rows` as the table `name`: their folder of Arrow files when
/// they were spilled (a query streams them), else their batches in memory.
pub(crate) async fn register_spilled(
    ctx: &SessionContext,
    name: &str,
    rows: SpilledTable,
    stage: Stage,
) -> Result<()> {
    let Some(folder) = &rows.folder else {
        let batches = rows
            .spills
            .iter()
            .map(Spill::read)
            .collect::<Result<Vec<_>>>()?;
        let batches = batches.into_iter().flatten().collect();
        return register_table(ctx, name, (rows.schema, batches), stage);
    };
    let options = ArrowReadOptions {
        schema: Some(rows.schema.as_ref()),
        file_extension: SPILL_EXTENSION,
        ..Default::default()
    };
    ctx.deregister_table(name).map_err(Error::query(stage))?;
    ctx.register_arrow(name, &folder.to_string_lossy(), options)
        .await
        .map_err(Error::query(stage))
}

/// Runs `frame` and registers its rows as the table `name`, kept in an
/// Arrow file in the run's scratch folder (not in memory: a committed
/// month's rows are as many as a drop's); the file, returned, must outlive
/// the table's queries.
pub(crate) async fn register_frame_on_disk(
    ctx: &SessionContext,
    name: &str,
    frame: DataFrame,
    stage: Stage,
) -> Result<RefCountedTempFile> {
    let query = |source| Error::query(stage)(source);
    let file = ctx
        .runtime_env()
        .disk_manager
        .create_tmp_file(name)
        .map_err(query)?;
    let path = file.path().to_path_buf();
    let io = |source| Error::Io {
        path: path.clone(),
        source,
    };
    let schema = Arc::new(frame.schema().as_arrow().clone());
    let mut stream = frame.execute_stream().await.map_err(query)?;
    let out = std::io::BufWriter::new(std::fs::File::create(&path).map_err(io)?);
    let mut writer =
        arrow::ipc::writer::FileWriter::try_new(out, &schema).map_err(Error::arrow(stage))?;
    while let Some(batch) = stream.try_next().await.map_err(query)? {
        writer.write(&batch).map_err(Error::arrow(stage))?;
    }
    writer.finish().map_err(Error::arrow(stage))?;
    let options = ArrowReadOptions {
        schema: Some(schema.as_ref()),
        file_extension: "",
        ..Default::default()
    };
    ctx.deregister_table(name).map_err(query)?;
    ctx.register_arrow(name, &path.to_string_lossy(), options)
        .await
        .map_err(query)?;
    Ok(file)
}

/// Quotes an SQL identifier.
pub(crate) fn quote(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// Quotes an SQL string literal.
pub(crate) fn sql_string(value: &str) -> String {
    format!("'{}'", value.replace('\'', "''"))
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use arrow::array::{ArrayRef, Int64Array};

    use super::*;

    /// A log writer into a shared buffer.
    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Captured {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// Sends this thread's log lines to `log` until the guard drops.
    ///
    /// `tracing` caches each log line's interest for the whole process,
    /// from the subscriber of the thread that reaches it first. With one
    /// subscriber alive, another test thread (which has none) can cache
    /// "never" and this thread's lines are lost. A second subscriber kept
    /// alive makes the cache ask every live one, and the rebuild clears what
    /// was cached before.
    fn capture_on_this_thread(
        log: &Captured,
    ) -> (tracing::Dispatch, tracing::subscriber::DefaultGuard) {
        let subscriber = |log: Captured| {
            tracing_subscriber::fmt()
                .with_writer(move || log.clone())
                .finish()
        };
        let anchor = tracing::Dispatch::new(subscriber(Captured::default()));
        let guard = tracing::subscriber::set_default(subscriber(log.clone()));
        tracing::callsite::rebuild_interest_cache();
        (anchor, guard)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_stream_read_ahead_gives_every_batch_in_order_then_its_error() {
        let schema = Arc::new(Schema::new(vec![Field::new(
            "n",
            arrow::datatypes::DataType::Int64,
            false,
        )]));
        let of = schema.clone();
        let batch = move |n: i64| {
            let column: ArrayRef = Arc::new(Int64Array::from(vec![n, n + 1]));
            RecordBatch::try_new(of.clone(), vec![column]).unwrap()
        };
        let items = (0..20).map(move |n| Ok(batch(n * 2))).chain([Err(
            datafusion::error::DataFusionError::Execution("the twenty-first batch".to_string()),
        )]);
        let stream = RecordBatchStreamAdapter::new(schema.clone(), futures::stream::iter(items));
        let read: Vec<_> = read_ahead(Box::pin(stream), 3).collect().await;
        assert_eq!(read.len(), 21);
        for (n, batch) in read.iter().take(20).enumerate() {
            let values = batch.as_ref().unwrap().column(0).clone();
            let values = values.as_any().downcast_ref::<Int64Array>().unwrap();
            assert_eq!(values.values(), &[n as i64 * 2, n as i64 * 2 + 1]);
        }
        let error = read[20].as_ref().unwrap_err().to_string();
        assert!(error.contains("the twenty-first batch"), "{error}");
        // A reader that stops early leaves nothing behind.
        let zeros = RecordBatch::try_new(
            schema.clone(),
            vec![Arc::new(Int64Array::from(vec![0, 1])) as ArrayRef],
        )
        .unwrap();
        let alive = Arc::new(());
        let held = alive.clone();
        let endless = futures::stream::repeat_with(move || {
            let _held = &held;
            Ok(zeros.clone())
        });
        let endless = RecordBatchStreamAdapter::new(schema.clone(), endless);
        let first: Vec<_> = read_ahead(Box::pin(endless), 2).take(5).collect().await;
        assert_eq!(first.len(), 5);
        // The task and the stream it read are dropped soon after.
        for _ in 0..1000 {
            if Arc::strong_count(&alive) == 1 {
                break;
            }
            tokio::task::yield_now().await;
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        assert_eq!(
            Arc::strong_count(&alive),
            1,
            "the read-ahead task still runs"
        );
    }

    #[tokio::test]
    async fn a_streamed_query_logs_what_it_spilled_once_drained() {
        // The smallest budget accepted: a pool of 16 MiB, below the 24 MB
        // sorted by one sorter (whatever the cores).
        let scratch = tempfile::tempdir().unwrap();
        let memory = QueryMemory::smallest(scratch.path());
        let ctx = sort_session(&memory);
        let batches: Vec<RecordBatch> = (0..3_000_000i64)
            .step_by(8192)
            .map(|start| {
                let values: ArrayRef = Arc::new(Int64Array::from_iter_values(
                    (start..(start + 8192).min(3_000_000)).rev(),
                ));
                RecordBatch::try_from_iter([("v", values)]).unwrap()
            })
            .collect();
        let schema = batches[0].schema();
        register_table(&ctx, "numbers", (schema, batches), Stage::Baseline).unwrap();
        let frame = ctx.sql("SELECT v FROM numbers ORDER BY v").await.unwrap();

        let log = Captured::default();
        let _guard = capture_on_this_thread(&log);
        let stream = logged_stream(frame).await.unwrap();
        let rows: usize = stream
            .try_collect::<Vec<_>>()
            .await
            .unwrap()
            .iter()
            .map(RecordBatch::num_rows)
            .sum();
        assert_eq!(rows, 3_000_000);
        let log = String::from_utf8(log.0.lock().unwrap().clone()).unwrap();
        assert!(
            log.contains("a query spilled to the scratch folder"),
            "{log}"
        );
    }
}
