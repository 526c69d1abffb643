//! The SQL toolbox every layer may use: the DataFusion session every query
//! of a run uses (DataFusion is the one evaluator: reading history, LAG,
//! rules), in-memory tables, and quoting. Strings stay plain `Utf8`, the type
//! the contract and the Iceberg writer use. Errors name the stage they serve.

use std::sync::Arc;

use arrow::datatypes::{Field, Schema, SchemaRef};
use arrow::record_batch::RecordBatch;
use datafusion::dataframe::DataFrame;
use datafusion::datasource::MemTable;
use datafusion::prelude::{SessionConfig, SessionContext};

use crate::error::{Error, Result};
use crate::stage::Stage;

/// A session with silverline's settings.
pub(crate) fn new_session() -> SessionContext {
    let mut config = SessionConfig::new();
    let options = config.options_mut();
    options.sql_parser.map_string_types_to_utf8view = false;
    options.execution.parquet.schema_force_view_types = false;
    SessionContext::new_with_config(config)
}

/// Runs `frame`, returning its rows under one plain schema: every field
/// nullable and without metadata (the parts of a union may differ in both).
pub(crate) async fn collect(
    frame: DataFrame,
    stage: Stage,
) -> Result<(SchemaRef, Vec<RecordBatch>)> {
    let planned = Arc::new(frame.schema().as_arrow().clone());
    let batches = frame.collect().await.map_err(Error::query(stage))?;
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

/// Runs `frame` and registers its rows as the in-memory table `name`.
pub(crate) async fn register_frame(
    ctx: &SessionContext,
    name: &str,
    frame: DataFrame,
    stage: Stage,
) -> Result<()> {
    let collected = collect(frame, stage).await?;
    register_table(ctx, name, collected, stage)
}

/// Quotes an SQL identifier.
pub(crate) fn quote(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// Quotes an SQL string literal.
pub(crate) fn sql_string(value: &str) -> String {
    format!("'{}'", value.replace('\'', "''"))
}
