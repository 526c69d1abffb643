//! The exception report: backlog, flow and run history as a static HTML page
//! that opens from disk (`silverline report --out <dir>`), and the same
//! figures as text for `silverline backlog`.

mod charts;
pub(crate) mod escape;
pub mod gather;
pub mod html;
pub mod model;
pub mod text;
