//! `silverline doctor`: the preflight a platform engineer runs before the
//! first schedule. A check runs whatever the others found (only the table
//! waits for a catalog that answered) and says one line: credentials
//! resolved (their source, never the secret), bronze listable, dq_error
//! writable (a probe object put and deleted), the catalog answering,
//! Silver's schema against the contract, and the versioning and default
//! encryption of the dq_error and warehouse buckets.
//!
//! In: a validated plan. Out: a [`Diagnosis`], one [`Check`] per line; it
//! writes nothing but the probe object, which it deletes, and creates no
//! catalog, namespace or table (the same view a dry run has).

use std::fmt;
use std::sync::Arc;

use iceberg::Catalog;

use crate::config::Plan;
use crate::config::plan::CatalogSpec;
use crate::error::{Error, Result, printable};
use crate::infra::buckets::{BucketSetting, BucketSettings, bucket_of};
use crate::infra::catalog::{
    CHECK_TIMEOUT, connect_for_dry_run, load_silver_if_any, sqlite_file, table_ident,
};
use crate::infra::storage::{Location, Stores};

/// The exit code of a preflight with at least one failed check.
pub const EXIT_PREFLIGHT_FAILED: u8 = 1;

/// How one check came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Passed.
    Ok,
    /// Works, but worth a look (a bucket setting off or not reported).
    Warn,
    /// A run would fail on it.
    Fail,
    /// Not checked: not applicable here, or what it needs failed already.
    Skip,
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Verdict::Ok => "ok",
            Verdict::Warn => "warn",
            Verdict::Fail => "FAIL",
            Verdict::Skip => "skip",
        })
    }
}

/// One check: what was checked, how it came out and why.
#[derive(Debug, Clone)]
pub struct Check {
    /// What was checked (`credentials`, `bronze`, `versioning s3://lake`...).
    pub name: String,
    /// How it came out.
    pub verdict: Verdict,
    /// What was found, or why it failed.
    pub detail: String,
}

impl Check {
    fn new(name: impl Into<String>, verdict: Verdict, detail: impl Into<String>) -> Check {
        Check {
            name: name.into(),
            verdict,
            detail: detail.into(),
        }
    }

    fn failed(name: impl Into<String>, error: &Error) -> Check {
        Check::new(name, Verdict::Fail, error.to_string())
    }
}

/// Every check of one preflight, in the order they ran.
#[derive(Debug, Clone)]
pub struct Diagnosis {
    /// The checks.
    pub checks: Vec<Check>,
}

impl Diagnosis {
    /// How many checks came out `verdict`.
    pub fn count(&self, verdict: Verdict) -> usize {
        self.checks.iter().filter(|c| c.verdict == verdict).count()
    }

    /// 0 when no check failed (warnings allowed), else [`EXIT_PREFLIGHT_FAILED`].
    pub fn exit_code(&self) -> u8 {
        if self.count(Verdict::Fail) == 0 {
            0
        } else {
            EXIT_PREFLIGHT_FAILED
        }
    }
}

impl fmt::Display for Diagnosis {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let width = self.checks.iter().map(|c| c.name.len()).max().unwrap_or(0);
        for check in &self.checks {
            let verdict = check.verdict.to_string();
            writeln!(
                f,
                "{verdict:<5} {:<width$} {}",
                printable(&check.name),
                printable(&check.detail)
            )?;
        }
        write!(
            f,
            "doctor: {} ok, {} warnings, {} failed, {} skipped",
            self.count(Verdict::Ok),
            self.count(Verdict::Warn),
            self.count(Verdict::Fail),
            self.count(Verdict::Skip)
        )
    }
}

/// Runs every check of the preflight for `plan`.
pub async fn diagnose(plan: &Plan) -> Diagnosis {
    let mut checks = Vec::new();
    let stores = match Stores::new(&plan.storage, plan.catalog.warehouse()).await {
        Ok(stores) => stores,
        // No credentials provider at all: nothing on S3 can be checked.
        Err(error) => {
            checks.push(Check::failed("credentials", &error));
            return Diagnosis { checks };
        }
    };
    checks.push(check_credentials(&stores).await);
    checks.push(check_bronze(&stores, plan).await);
    checks.push(check_dq_error(&stores, plan).await);
    let (catalog_check, catalog) = check_catalog(&stores, plan).await;
    checks.push(catalog_check);
    checks.push(check_table(catalog.as_deref(), plan).await);
    checks.extend(check_buckets(&stores, plan).await);
    Diagnosis { checks }
}

async fn check_credentials(stores: &Stores) -> Check {
    match stores.credential_source().await {
        None => Check::new(
            "credentials",
            Verdict::Skip,
            "not applicable: no location is on S3",
        ),
        Some(Ok(source)) => Check::new("credentials", Verdict::Ok, source),
        Some(Err(error)) => Check::failed("credentials", &error),
    }
}

/// Bronze can be listed (one listing request); on local files its folder must exist.
async fn check_bronze(stores: &Stores, plan: &Plan) -> Check {
    let name = "bronze";
    let bronze = match stores.open(&plan.storage.bronze, "storage.bronze") {
        Ok(bronze) => bronze,
        Err(error) => return Check::failed(name, &error),
    };
    let root = bronze.url_of("");
    if bronze.local_folder_exists("") == Some(false) {
        return Check::new(
            name,
            Verdict::Fail,
            format!("{root} (storage.bronze) is not a folder: create it or fix the setting"),
        );
    }
    match bronze.any_under("").await {
        Ok(true) => Check::new(name, Verdict::Ok, format!("{root} is listable")),
        Ok(false) => Check::new(
            name,
            Verdict::Ok,
            format!("{root} is listable (no drop in it yet)"),
        ),
        Err(error) => Check::failed(name, &error),
    }
}

/// dq_error takes a new object and lets it be deleted again.
async fn check_dq_error(stores: &Stores, plan: &Plan) -> Check {
    let name = "dq_error";
    match stores.open(&plan.storage.dq_error, "storage.dq_error") {
        Ok(dq_error) => match probe_write(&dq_error).await {
            Ok(probe) => Check::new(
                name,
                Verdict::Ok,
                format!("wrote and deleted {}", dq_error.url_of(&probe)),
            ),
            Err(error) => Check::failed(name, &error),
        },
        Err(error) => Check::failed(name, &error),
    }
}

/// Puts a probe object at the root of `location` and deletes it; returns its path.
async fn probe_write(location: &Location) -> Result<String> {
    let probe = format!("_silverline-doctor-{}", uuid::Uuid::new_v4().simple());
    location
        .put(&probe, b"silverline doctor probe\n".to_vec())
        .await?;
    location.delete(&probe).await?;
    Ok(probe)
}

/// The catalog answers (a SQLite catalog not created yet: its folder can be).
async fn check_catalog(stores: &Stores, plan: &Plan) -> (Check, Option<Arc<dyn Catalog>>) {
    let name = "catalog";
    if let Some(failed) = uncreatable_sqlite(&plan.catalog) {
        return (Check::new(name, Verdict::Fail, failed), None);
    }
    let answered = tokio::time::timeout(CHECK_TIMEOUT, async {
        let catalog = connect_for_dry_run(&plan.catalog, stores).await?;
        let namespaces = catalog
            .list_namespaces(None)
            .await
            .map_err(Error::catalog("list-namespaces", plan.catalog.to_string()))?;
        Ok::<_, Error>((catalog, namespaces.len()))
    })
    .await;
    match answered {
        Err(_) => (
            Check::new(
                name,
                Verdict::Fail,
                format!(
                    "no answer from the {} within {} s",
                    plan.catalog,
                    CHECK_TIMEOUT.as_secs()
                ),
            ),
            None,
        ),
        Ok(Err(error)) => (Check::failed(name, &error), None),
        Ok(Ok((catalog, namespaces))) => {
            let detail = catalog_detail(&plan.catalog, namespaces);
            (Check::new(name, Verdict::Ok, detail), Some(catalog))
        }
    }
}

/// What the catalog line says: the catalog and how it answered, or that a
/// SQLite catalog is not created yet; for a REST catalog, the credential
/// variables that are set (never their values).
fn catalog_detail(spec: &CatalogSpec, namespaces: usize) -> String {
    match spec {
        CatalogSpec::Sql { uri, .. } if sqlite_file(uri).is_some_and(|f| !f.exists()) => {
            format!("{spec}: its database is not created yet: the first run creates it")
        }
        CatalogSpec::Sql { .. } => format!("{spec} answered ({namespaces} namespace(s))"),
        CatalogSpec::Rest {
            credential_env,
            token_env,
            ..
        } => {
            let set: Vec<&str> = [credential_env, token_env]
                .into_iter()
                .filter(|var| std::env::var_os(var).is_some())
                .map(String::as_str)
                .collect();
            let credential = if set.is_empty() {
                format!("no credential ({credential_env} and {token_env} unset)")
            } else {
                format!("credential from {}", set.join(", "))
            };
            format!("{spec} answered ({namespaces} namespace(s)); {credential}")
        }
    }
}

/// Why a SQLite catalog's database could not be created where the config
/// puts it: the nearest existing folder above it is not a folder.
fn uncreatable_sqlite(spec: &CatalogSpec) -> Option<String> {
    let CatalogSpec::Sql { uri, .. } = spec else {
        return None;
    };
    let file = sqlite_file(uri)?;
    if file.exists() {
        return None;
    }
    let blocking = file
        .ancestors()
        .skip(1)
        .find(|a| a.exists() && !a.as_os_str().is_empty())?;
    (!blocking.is_dir()).then(|| {
        format!(
            "catalog.uri {uri}: the database cannot be created: {} is not a folder",
            blocking.display()
        )
    })
}

/// Silver's schema against the contract, as the next run would find it.
async fn check_table(catalog: Option<&dyn Catalog>, plan: &Plan) -> Check {
    let name = table_ident(&plan.table).to_string();
    let Some(catalog) = catalog else {
        return Check::new(
            name,
            Verdict::Skip,
            "not compared with the contract: the catalog did not answer",
        );
    };
    let found = tokio::time::timeout(CHECK_TIMEOUT, load_silver_if_any(catalog, plan)).await;
    match found {
        Err(_) => Check::new(
            name,
            Verdict::Fail,
            format!("not loaded within {} s", CHECK_TIMEOUT.as_secs()),
        ),
        Ok(Err(error)) => Check::failed(name, &error),
        Ok(Ok(None)) => Check::new(
            name,
            Verdict::Ok,
            "not created yet: the first run creates it from the contract",
        ),
        Ok(Ok(Some(silver))) => match silver.evolution {
            None => Check::new(name, Verdict::Ok, "has the contract's schema"),
            Some(evolution) => {
                let changes: Vec<String> =
                    evolution.changes.iter().map(ToString::to_string).collect();
                Check::new(
                    name,
                    Verdict::Ok,
                    format!(
                        "the next run evolves its schema to the contract's: {}",
                        changes.join("; ")
                    ),
                )
            }
        },
    }
}

/// Versioning and default encryption of the dq_error and warehouse buckets.
async fn check_buckets(stores: &Stores, plan: &Plan) -> Vec<Check> {
    let mut buckets: Vec<(String, Vec<&str>)> = Vec::new();
    for (url, setting) in [
        (plan.storage.dq_error.as_str(), "storage.dq_error"),
        (plan.catalog.warehouse(), "catalog.warehouse"),
    ] {
        let Some(bucket) = bucket_of(url) else {
            continue;
        };
        match buckets.iter_mut().find(|(b, _)| *b == bucket) {
            Some((_, settings)) => settings.push(setting),
            None => buckets.push((bucket, vec![setting])),
        }
    }
    let Some(reader) = stores.bucket_settings().filter(|_| !buckets.is_empty()) else {
        return vec![Check::new(
            "bucket settings",
            Verdict::Skip,
            "not applicable: dq_error and the warehouse are not on S3",
        )];
    };
    let mut checks = Vec::new();
    for (bucket, settings) in buckets {
        checks.extend(check_bucket(&reader, &bucket, &settings.join(", ")).await);
    }
    checks
}

async fn check_bucket(reader: &BucketSettings, bucket: &str, settings: &str) -> [Check; 2] {
    let versioning = reader.versioning(bucket).await;
    let encryption = reader.encryption(bucket).await;
    [
        bucket_check("versioning", bucket, settings, versioning),
        bucket_check("encryption", bucket, settings, encryption),
    ]
}

/// One bucket setting as a check: on is ok; off, not reported or unreadable
/// a warning (a run works without it); no bucket at all a failure.
fn bucket_check(what: &str, bucket: &str, settings: &str, found: BucketSetting) -> Check {
    let verdict = match &found {
        BucketSetting::On(_) => Verdict::Ok,
        BucketSetting::NoSuchBucket => Verdict::Fail,
        BucketSetting::Off(_) | BucketSetting::NotReported | BucketSetting::Unreadable(_) => {
            Verdict::Warn
        }
    };
    Check::new(
        format!("{what} s3://{bucket}"),
        verdict,
        format!("{found} ({settings})"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warnings_pass_and_one_failure_fails() {
        let check = |verdict| Check::new("x", verdict, "y");
        let passing = Diagnosis {
            checks: vec![
                check(Verdict::Ok),
                check(Verdict::Warn),
                check(Verdict::Skip),
            ],
        };
        assert_eq!(passing.exit_code(), 0);
        let failing = Diagnosis {
            checks: vec![check(Verdict::Ok), check(Verdict::Fail)],
        };
        assert_eq!(failing.exit_code(), EXIT_PREFLIGHT_FAILED);
        assert!(
            failing
                .to_string()
                .ends_with("1 ok, 0 warnings, 1 failed, 0 skipped")
        );
    }

    #[test]
    fn a_bucket_setting_off_or_not_reported_warns_and_a_missing_bucket_fails() {
        let verdict = |found| bucket_check("encryption", "lake", "storage.dq_error", found).verdict;
        assert_eq!(verdict(BucketSetting::On("AES256".into())), Verdict::Ok);
        assert_eq!(verdict(BucketSetting::Off("none".into())), Verdict::Warn);
        assert_eq!(verdict(BucketSetting::NotReported), Verdict::Warn);
        assert_eq!(verdict(BucketSetting::NoSuchBucket), Verdict::Fail);
        let line = bucket_check(
            "encryption",
            "lake",
            "storage.dq_error",
            BucketSetting::NotReported,
        )
        .detail;
        assert!(line.contains("not reported by the server"), "{line}");
    }

    #[test]
    fn a_sqlite_catalog_under_a_file_cannot_be_created() {
        let tmp = tempfile::tempdir().unwrap();
        let file = tmp.path().join("a-file");
        std::fs::write(&file, b"x").unwrap();
        let spec = |path: std::path::PathBuf| CatalogSpec::Sql {
            uri: format!("sqlite://{}", path.display()),
            warehouse: "file:///w".into(),
            name: "silverline".into(),
        };
        let blocked = uncreatable_sqlite(&spec(file.join("sub/catalog.db"))).unwrap();
        assert!(blocked.contains("is not a folder"), "{blocked}");
        assert_eq!(
            uncreatable_sqlite(&spec(tmp.path().join("new/catalog.db"))),
            None
        );
    }
}
