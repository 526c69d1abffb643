//! Configuration: the TOML file ([`raw`]), the dataset contract ([`contract`])
//! and how text reads as its types ([`values`]), rules ([`rules`]), the
//! validated [`Plan`] a run follows, and the starting configuration that
//! `silverline init` writes from a sample ([`starter`]).
//!
//! `silverline check-config` and every run go through [`load_plan`]: a bad
//! setting or rule exits 2 before any data is read.

pub mod alerts;
pub mod checks;
pub mod contract;
pub mod engine;
pub mod lineage;
pub mod locations;
pub mod metrics_push;
pub mod plan;
pub mod raw;
pub mod resources;
pub mod rules;
pub mod sources;
pub mod starter;
pub mod values;

use std::path::Path;

pub use plan::Plan;

use crate::error::{Error, Result};

/// Prefix of environment variables that override settings: `SILVERLINE__STORAGE__ENDPOINT`
/// sets `storage.endpoint`, `SILVERLINE__TABLE__NAMESPACE` sets `table.namespace`.
pub const ENV_OVERRIDE_PREFIX: &str = "SILVERLINE__";

/// Reads and validates the configuration file at `path`, with the environment's overrides.
pub fn load_plan(path: &Path) -> Result<Plan> {
    let text = std::fs::read_to_string(path).map_err(|source| Error::ConfigRead {
        path: path.to_path_buf(),
        source,
    })?;
    parse_plan(&text, path, &env_overrides())
}

/// Settings overridden by `SILVERLINE__SECTION__KEY=value` environment variables, as (`section.key`, value).
pub fn env_overrides() -> Vec<(String, String)> {
    let mut overrides: Vec<(String, String)> = std::env::vars()
        .filter_map(|(name, value)| {
            let key = name.strip_prefix(ENV_OVERRIDE_PREFIX)?;
            Some((key.to_ascii_lowercase().replace("__", "."), value))
        })
        .collect();
    overrides.sort();
    overrides
}

/// Validates configuration `text` as if read from `path`, after applying `overrides`
/// (dotted keys; values read as TOML when they parse, else as strings).
pub fn parse_plan(text: &str, path: &Path, overrides: &[(String, String)]) -> Result<Plan> {
    let invalid = |problems: Vec<String>| Error::ConfigInvalid {
        path: path.to_path_buf(),
        problems,
    };
    let mut document: toml::Table =
        toml::from_str(text).map_err(|e| invalid(vec![toml_problem(&e)]))?;
    for (key, value) in overrides {
        apply_override(&mut document, key, value).map_err(|p| invalid(vec![p]))?;
    }
    let raw: raw::SilverlineConfig = document
        .try_into()
        .map_err(|e| invalid(vec![toml_problem(&e)]))?;
    Plan::from_config(raw, path).map_err(invalid)
}

fn toml_problem(error: &impl std::fmt::Display) -> String {
    error.to_string().trim().replace('\n', "\n    ")
}

/// Sets dotted `key` to `value` in `document`; a numeric part indexes an array
/// of tables (`references.0.location`).
fn apply_override(
    document: &mut toml::Table,
    key: &str,
    value: &str,
) -> std::result::Result<(), String> {
    let parsed = toml::from_str::<toml::Table>(&format!("v = {value}"))
        .ok()
        .and_then(|mut t| t.remove("v"))
        .unwrap_or_else(|| toml::Value::String(value.to_string()));
    let parts: Vec<&str> = key.split('.').collect();
    let Some((last, path)) = parts.split_last() else {
        return Err(format!("override '{key}': empty key"));
    };
    let mut table = document;
    let mut path = path.iter();
    while let Some(part) = path.next() {
        let entry = table
            .entry(part.to_string())
            .or_insert_with(|| toml::Value::Table(toml::Table::new()));
        table = match entry {
            toml::Value::Table(inner) => inner,
            toml::Value::Array(items) => {
                let index = path.next().and_then(|i| i.parse::<usize>().ok());
                let item = index.and_then(|i| items.get_mut(i));
                item.and_then(toml::Value::as_table_mut).ok_or_else(|| {
                    format!("override '{key}': '{part}' needs the index of an existing entry")
                })?
            }
            _ => return Err(format!("override '{key}': '{part}' is not a table")),
        };
    }
    table.insert(last.to_string(), parsed);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINIMAL: &str = r#"
        [dataset]
        name = "d"
        entity_key = ["id"]
        order_column = "day"
        contributor_column = "id"
        columns = [{ name = "id", type = "string" }, { name = "day", type = "date" }]
        [[rules]]
        name = "r"
        expression = "id IS NOT NULL"
        severity = "critical"
        [table]
        name = "t"
        [storage]
        bronze = "/b"
        dq_error = "/q"
        [catalog]
        type = "sql"
        uri = "sqlite:///c.db"
        warehouse = "/w"
    "#;

    #[test]
    fn overrides_set_nested_keys_with_typed_values() {
        let overrides = vec![
            (
                "storage.endpoint".to_string(),
                "http://127.0.0.1:9".to_string(),
            ),
            ("storage.path_style".to_string(), "true".to_string()),
            ("baseline.lookback_months".to_string(), "6".to_string()),
            ("table.namespace".to_string(), "t_1".to_string()),
            ("rules.0.severity".to_string(), "warn".to_string()),
        ];
        let plan = parse_plan(MINIMAL, Path::new("/x/c.toml"), &overrides).unwrap();
        assert_eq!(
            plan.storage.s3.endpoint.as_deref(),
            Some("http://127.0.0.1:9")
        );
        assert!(plan.storage.s3.path_style);
        assert_eq!(plan.lookback_months, 6);
        assert_eq!(plan.table.namespace, "t_1");
        assert_eq!(plan.rules[0].severity, crate::config::rules::Severity::Warn);
    }

    #[test]
    fn an_override_of_an_unknown_key_is_refused() {
        let overrides = vec![("storage.endpont".to_string(), "x".to_string())];
        let err = parse_plan(MINIMAL, Path::new("/x/c.toml"), &overrides).unwrap_err();
        assert!(err.to_string().contains("endpont"), "{err}");
    }
}
