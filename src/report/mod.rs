//! The exception report: backlog, flow and run history as a static HTML page
//! that opens from disk (`silverline report --out <dir>`).

pub mod gather;
pub mod model;
pub mod text;
