//! The exception report: backlog, flow and run history as a static HTML page
//! that opens from disk (`silverline report --out <dir>`).

mod charts;
pub mod html;
pub mod model;
