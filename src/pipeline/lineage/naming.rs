//! Datasets named as the OpenLineage naming spec says: a local file is
//! namespace `file` and its absolute path; an object store is namespace
//! `scheme://bucket` and the object's path in it; the Iceberg table is named
//! by its location under the warehouse, or, where the warehouse is a REST
//! catalog's name rather than a URL, by `<namespace>.<table>` in the
//! catalog's namespace (its URI).

use url::Url;

use super::event::DatasetName;
use crate::config::Plan;
use crate::config::plan::CatalogSpec;
use crate::core::drop::DropRef;

/// The drop's folder in bronze.
pub fn drop_dataset(plan: &Plan, drop: &DropRef) -> DatasetName {
    let url = format!(
        "{}/{}/{}",
        plan.storage.bronze.trim_end_matches('/'),
        drop.contributor,
        drop.drop_id
    );
    location_dataset(&url).unwrap_or_else(|| DatasetName {
        namespace: plan.storage.bronze.clone(),
        name: format!("{}/{}", drop.contributor, drop.drop_id),
    })
}

/// The Silver table.
pub fn table_dataset(plan: &Plan) -> DatasetName {
    let warehouse = plan.catalog.warehouse().trim_end_matches('/');
    let (namespace, table) = (&plan.table.namespace, &plan.table.name);
    let located = location_dataset(&format!("{warehouse}/{namespace}/{table}"));
    located.unwrap_or_else(|| DatasetName {
        namespace: catalog_namespace(&plan.catalog),
        name: format!("{namespace}.{table}"),
    })
}

/// The catalog as a datasource: a REST catalog's URI, else its warehouse.
fn catalog_namespace(catalog: &CatalogSpec) -> String {
    match catalog {
        CatalogSpec::Rest { uri, .. } => uri.trim_end_matches('/').to_string(),
        CatalogSpec::Sql { warehouse, .. } => warehouse.clone(),
    }
}

/// A location URL as a dataset (`None` for text that is no URL with a path).
fn location_dataset(text: &str) -> Option<DatasetName> {
    let url = Url::parse(text).ok()?;
    if url.scheme() == "file" {
        let path = url.to_file_path().ok()?;
        return Some(DatasetName {
            namespace: "file".to_string(),
            name: path.display().to_string(),
        });
    }
    let host = url.host_str().filter(|h| !h.is_empty())?;
    let authority = match url.port() {
        Some(port) => format!("{host}:{port}"),
        None => host.to_string(),
    };
    Some(DatasetName {
        namespace: format!("{}://{authority}", url.scheme()),
        name: url.path().trim_start_matches('/').to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn named(text: &str) -> Option<(String, String)> {
        location_dataset(text).map(|d| (d.namespace, d.name))
    }

    #[test]
    fn local_files_are_namespace_file_and_their_absolute_path() {
        assert_eq!(
            named("file:///srv/data/bronze/BANK_A/2026-01"),
            Some(("file".into(), "/srv/data/bronze/BANK_A/2026-01".into()))
        );
    }

    #[test]
    fn object_stores_are_the_bucket_and_the_path_in_it() {
        assert_eq!(
            named("s3://bronze-bucket/landing/BANK_A/2026-01"),
            Some(("s3://bronze-bucket".into(), "landing/BANK_A/2026-01".into()))
        );
    }

    #[test]
    fn a_name_that_is_no_url_is_not_a_location() {
        assert_eq!(named("silverline/silver/credit_statements"), None);
    }
}
