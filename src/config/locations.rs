//! Where things are: locations and the SQLite catalog's file resolved
//! against the configuration file's folder.

use std::path::{Path, PathBuf};

use crate::config::plan::CatalogSpec;
use crate::config::raw::CatalogConfig;

/// The catalog the raw settings name, with paths resolved against `base`.
pub fn catalog_spec(raw: &CatalogConfig, base: &Path) -> CatalogSpec {
    match raw {
        CatalogConfig::Sql {
            uri,
            warehouse,
            name,
        } => CatalogSpec::Sql {
            uri: resolve_sqlite_uri(uri, base),
            warehouse: resolve_location(warehouse, base),
            name: name.clone(),
        },
        CatalogConfig::Rest {
            uri,
            warehouse,
            credential_env,
            token_env,
            properties,
            name,
        } => CatalogSpec::Rest {
            uri: uri.clone(),
            warehouse: warehouse.clone(),
            credential_env: credential_env.clone(),
            token_env: token_env.clone(),
            properties: properties
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            name: name.clone(),
        },
    }
}

/// Turns a relative local path into an absolute `file://` URL; leaves URLs alone.
pub fn resolve_location(location: &str, base: &Path) -> String {
    if location.contains("://") {
        return location.to_string();
    }
    let path = Path::new(location);
    let absolute = if path.is_absolute() {
        path.to_path_buf()
    } else {
        base.join(path)
    };
    format!("file://{}", normalize(&absolute).display())
}

fn resolve_sqlite_uri(uri: &str, base: &Path) -> String {
    let Some(rest) = uri.strip_prefix("sqlite://") else {
        return uri.to_string();
    };
    let (path, query) = rest.split_once('?').unwrap_or((rest, ""));
    let path = Path::new(path);
    let absolute = if path.is_absolute() {
        path.to_path_buf()
    } else {
        base.join(path)
    };
    let query = if query.is_empty() { "mode=rwc" } else { query };
    format!("sqlite://{}?{query}", normalize(&absolute).display())
}

fn normalize(path: &Path) -> PathBuf {
    let absolute = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir().unwrap_or_default().join(path)
    };
    let mut out = PathBuf::new();
    for part in absolute.components() {
        match part {
            std::path::Component::CurDir => {}
            std::path::Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}
