//! Configuration: the TOML file ([`raw`]), the dataset contract ([`contract`]),
//! rules ([`rules`]) and the validated [`Plan`] a run follows.
//!
//! `silverline check-config` and every run go through [`load_plan`]: a bad
//! setting or rule exits 2 before any data is read.

pub mod contract;
pub mod plan;
pub mod raw;
pub mod rules;

use std::path::Path;

pub use plan::Plan;

use crate::error::{Error, Result};

/// Reads and validates the configuration file at `path`.
pub fn load_plan(path: &Path) -> Result<Plan> {
    let text = std::fs::read_to_string(path).map_err(|source| Error::ConfigRead {
        path: path.to_path_buf(),
        source,
    })?;
    parse_plan(&text, path)
}

/// Validates configuration `text` as if read from `path`.
pub fn parse_plan(text: &str, path: &Path) -> Result<Plan> {
    let raw: raw::SilverlineConfig = toml::from_str(text).map_err(|e| Error::ConfigInvalid {
        path: path.to_path_buf(),
        problems: vec![e.to_string().trim().replace('\n', "\n    ")],
    })?;
    Plan::from_config(raw, path).map_err(|problems| Error::ConfigInvalid {
        path: path.to_path_buf(),
        problems,
    })
}
