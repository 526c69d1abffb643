//! The DataFusion session every query of a run uses (DataFusion is the one
//! evaluator: reading history, LAG, rules). Strings stay plain `Utf8`, the
//! type the contract and the Iceberg writer use.

use datafusion::prelude::{SessionConfig, SessionContext};

/// A session with silverline's settings.
pub fn new_session() -> SessionContext {
    let mut config = SessionConfig::new();
    let options = config.options_mut();
    options.sql_parser.map_string_types_to_utf8view = false;
    options.execution.parquet.schema_force_view_types = false;
    SessionContext::new_with_config(config)
}
