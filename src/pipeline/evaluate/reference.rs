//! Reference rules' data: for each reference table a rule reads, every row
//! gets `_ref_<name>`, true where its key (compared as text) is among the
//! reference's keys. This is a LEFT semi-join: a row without a match stays, to
//! be set aside as pending, and a key repeated in the reference can never
//! double a row. The reference's keys are loaded batch by batch into a set
//! of fingerprints while the drop is read ([`load_known_keys`]); flagging
//! the rows then adds one column without copying them ([`flag_references`]).

use std::collections::HashSet;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, BooleanArray};
use arrow::compute::cast;
use arrow::datatypes::{DataType, Field, Schema};
use arrow::record_batch::RecordBatch;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

use super::kept_keys::KeptKeys;
use crate::config::contract::Contract;
use crate::config::plan::{Reference, ReferenceFormat};
use crate::core::keys::KeySet;
use crate::error::{Error, Result};
use crate::infra::storage::{ListedObject, Location, Stores};
use crate::pipeline::baseline::Baselined;
use crate::stage::Stage;
use crate::transient::{REF_PREFIX, with_columns};
use futures::TryStreamExt;
use iceberg::table::Table;
use iceberg::{Catalog, NamespaceIdent, TableIdent};

/// One reference's keys, loaded, with what they were loaded from.
pub struct KnownKeys {
    reference: Reference,
    source: SourceVersion,
    keys: KeySet,
    /// Whether they are kept for later runs already (read back from there,
    /// or written there since): keys loaded from the reference are kept
    /// once a run succeeds ([`keep_loaded`]).
    kept: bool,
}

/// What a reference's keys were loaded from: its files as listed (path,
/// size, version) or its Iceberg table's metadata file. Keys loaded from the
/// same version serve the next run of the process (a backfill's months), as
/// do those of files all still listed unchanged, with the files added since.
#[derive(Debug, PartialEq, Eq)]
enum SourceVersion {
    Files(Vec<ListedObject>),
    Table(Option<String>),
}

impl SourceVersion {
    /// Whether keys loaded from `self` still stand for `now`: the same files,
    /// or the same metadata file of a table (a catalog that does not say
    /// which file it read never vouches for a table unchanged).
    fn still(&self, now: &SourceVersion) -> bool {
        match (self, now) {
            (SourceVersion::Table(None), _) | (_, SourceVersion::Table(None)) => false,
            (before, now) => before == now,
        }
    }

    /// The version as text, by which its keys are kept for later runs
    /// (`kept_keys`): each file's path, size and version, or the table's
    /// metadata file; none for a table whose catalog does not say it.
    fn describe(&self) -> Option<String> {
        match self {
            SourceVersion::Files(listed) => Some(listed.iter().map(file_line).collect()),
            SourceVersion::Table(file) => file.as_ref().map(|file| format!("table\0{file}")),
        }
    }

    /// The files listed now that were not at the version `before` (as
    /// [`Self::describe`] gave it), when every file listed then is listed
    /// now unchanged: keys of `before` and of these files are the keys now.
    fn added_since(&self, before: &str) -> Option<Vec<ListedObject>> {
        let SourceVersion::Files(listed) = self else {
            return None;
        };
        let now: HashSet<String> = listed.iter().map(file_line).collect();
        let then: HashSet<&str> = before.split_inclusive('\n').collect();
        let kept = !then.is_empty() && then.iter().all(|line| now.contains(*line));
        kept.then(|| {
            let added = listed
                .iter()
                .filter(|f| !then.contains(file_line(f).as_str()));
            added.cloned().collect()
        })
    }
}

/// A file's line of a version: its path, size and version.
fn file_line(file: &ListedObject) -> String {
    format!("{}\0{}\0{}\n", file.relative, file.size, file.version)
}

/// A reference opened for reading: its files, listed, or its table.
enum Opened {
    Files(Location, Vec<ListedObject>),
    Table(Box<Table>),
}

impl Opened {
    fn version(&self) -> SourceVersion {
        match self {
            Opened::Files(_, listed) => SourceVersion::Files(listed.clone()),
            Opened::Table(table) => {
                SourceVersion::Table(table.metadata_location().map(str::to_string))
            }
        }
    }
}

/// Loads the keys of each of `references`, one batch of a reference at a
/// time (a reference is never held whole). A reference whose files or table
/// have not changed since `kept` was loaded keeps those keys; one whose
/// folder was only added to since reads only the files added.
pub async fn load_known_keys(
    references: Vec<Reference>,
    sources: ReferenceSources,
    mut kept: Vec<KnownKeys>,
) -> Result<Vec<KnownKeys>> {
    let mut known = Vec::with_capacity(references.len());
    for reference in references {
        let opened = open_reference(&reference, &sources).await?;
        let source = opened.version();
        let held = kept
            .iter()
            .position(|k| k.reference == reference)
            .map(|index| kept.swap_remove(index));
        let held = match held {
            Some(held) if held.source.still(&source) => {
                tracing::debug!(reference = %reference.name, "reference unchanged since the last run: its keys kept");
                known.push(held);
                continue;
            }
            held => held,
        };
        let (keys, kept) = keys_at(&reference, (opened, &source), held, &sources).await?;
        known.push(KnownKeys {
            reference,
            source,
            keys,
            kept,
        });
    }
    Ok(known)
}

/// The keys of `reference` at `source`, and whether they are kept for later
/// runs already: those `held` by this process at an earlier version whose
/// files are all still there, with the keys of the files added since
/// (`held` of no use is let go first); else read back where a run kept
/// them at this version; else those a run kept at such an earlier version,
/// with the files added since; else the reference read whole.
async fn keys_at(
    reference: &Reference,
    (opened, source): (Opened, &SourceVersion),
    held: Option<KnownKeys>,
    sources: &ReferenceSources,
) -> Result<(KeySet, bool)> {
    let added_since = |before: &str| source.added_since(before);
    let mut earlier = held.and_then(|h| Some((added_since(&h.source.describe()?)?, h.keys)));
    if earlier.is_none()
        && let (Some(kept_keys), Some(version)) = (&sources.kept, source.describe())
    {
        if let Some(keys) = kept_keys.read(reference, &version).await {
            return Ok((keys, true));
        }
        if matches!(source, SourceVersion::Files(_)) {
            earlier = kept_keys.read_earlier(reference, added_since).await;
        }
    }
    match (earlier, opened) {
        (Some((added, mut keys)), Opened::Files(location, _)) => {
            let mut sink = |batch: &RecordBatch| insert_keys(&mut keys, reference, batch);
            read_reference_files(reference, &location, &added, &mut sink).await?;
            keys.loaded()?;
            tracing::debug!(reference = %reference.name, files = added.len(), keys = keys.len(), "reference only added to: the files added read");
            Ok((keys, false))
        }
        (_, opened) => Ok((load_keys(reference, opened).await?, false)),
    }
}

/// Keeps for later runs, in `kept_keys`, the keys of `known` this process
/// loaded from the references themselves: a run that succeeded calls it,
/// so a failed run leaves nothing behind (nor does a dry run: it writes
/// nothing). Keys matched against a sensitive column of `contract` are
/// never kept: their fingerprints, unsalted, would let anyone who reads
/// dq_error test guesses of its values.
pub async fn keep_loaded(known: &mut [KnownKeys], kept_keys: &KeptKeys, contract: &Contract) {
    for keys in known.iter_mut().filter(|keys| !keys.kept) {
        if reads_sensitive(&keys.reference, contract) {
            continue;
        }
        if let Some(version) = keys.source.describe() {
            keys.kept = kept_keys.keep(&keys.reference, &version, &keys.keys).await;
        }
    }
}

/// Whether `reference` is matched against a column `contract` marks sensitive.
fn reads_sensitive(reference: &Reference, contract: &Contract) -> bool {
    reference
        .keys
        .iter()
        .any(|(column, _)| contract.column(column).is_some_and(|c| c.sensitive))
}

/// Reads the keys of `reference`, opened, batch by batch; none is an error.
async fn load_keys(reference: &Reference, opened: Opened) -> Result<KeySet> {
    let mut keys = KeySet::new(Stage::Reference);
    read_reference(reference, opened, &mut |batch| {
        insert_keys(&mut keys, reference, batch)
    })
    .await?;
    keys.loaded()?;
    if keys.len() == 0 {
        return Err(Error::Usage {
            arg: format!("references '{}'", reference.name),
            reason: format!("no rows found under {}", reference.location),
        });
    }
    tracing::debug!(reference = %reference.name, keys = keys.len(), "reference loaded");
    Ok(keys)
}

/// Adds `_ref_<name>` for every reference in `known` to the baselined rows.
pub async fn flag_references(mut baselined: Baselined, known: &[KnownKeys]) -> Result<Baselined> {
    if known.is_empty() {
        return Ok(baselined);
    }
    let mut rows = baselined.rows.clone();
    for keys in known {
        let flags = keys.flags(&rows)?;
        let field = Field::new(
            format!("{REF_PREFIX}{}", keys.reference.name),
            DataType::Boolean,
            true,
        );
        rows = with_columns(&rows, vec![(field, Arc::new(flags))], Stage::Reference)?;
    }
    baselined.replace_rows(rows).await?;
    Ok(baselined)
}

/// Adds the keys of one batch of `reference` to `keys`.
fn insert_keys(keys: &mut KeySet, reference: &Reference, batch: &RecordBatch) -> Result<()> {
    let columns: Vec<&String> = reference.keys.iter().map(|(_, other)| other).collect();
    keys.insert(&key_columns(batch, &columns, &reference.name)?)
}

impl KnownKeys {
    /// Whether each row's key is among the reference's keys (a null key part never matches).
    fn flags(&self, rows: &RecordBatch) -> Result<BooleanArray> {
        let columns: Vec<&String> = self.reference.keys.iter().map(|(row, _)| row).collect();
        let columns = key_columns(rows, &columns, &self.reference.name)?;
        let found = self.keys.contains(&columns)?;
        Ok((0..rows.num_rows())
            .map(|r| Some(found[r] && columns.iter().all(|c| c.is_valid(r))))
            .collect())
    }
}

/// The key columns of `batch`, as text.
fn key_columns(batch: &RecordBatch, names: &[&String], reference: &str) -> Result<Vec<ArrayRef>> {
    names
        .iter()
        .map(|name| {
            let column = batch.column_by_name(name).ok_or_else(|| Error::Usage {
                arg: format!("references '{reference}'"),
                reason: format!("no column '{name}'"),
            })?;
            cast(column, &DataType::Utf8).map_err(Error::arrow(Stage::Reference))
        })
        .collect()
}

/// Where reference tables are read from.
#[derive(Clone)]
pub struct ReferenceSources {
    /// Object storage, for CSV and Parquet references.
    pub stores: Stores,
    /// The catalog, for Iceberg references.
    pub catalog: Arc<dyn Catalog>,
    /// Where the keys of each version are kept for later runs, read back
    /// (none: always read from the reference).
    pub kept: Option<KeptKeys>,
}

/// What takes a reference's batches, one after the other.
type BatchSink<'a> = dyn FnMut(&RecordBatch) -> Result<()> + Send + 'a;

/// Opens a reference: lists its folder's files, or loads its Iceberg table
/// (named `<namespace>.<table>` by its location).
async fn open_reference(reference: &Reference, sources: &ReferenceSources) -> Result<Opened> {
    if reference.format != ReferenceFormat::Iceberg {
        let location = sources.stores.open(
            &reference.location,
            &format!("references '{}'", reference.name),
        )?;
        let listed = location.list("").await?;
        return Ok(Opened::Files(location, listed));
    }
    let target = reference.location.clone();
    let (namespace, table) = target.rsplit_once('.').unwrap_or(("", target.as_str()));
    let ident = TableIdent::new(
        NamespaceIdent::new(namespace.to_string()),
        table.to_string(),
    );
    let table = sources
        .catalog
        .load_table(&ident)
        .await
        .map_err(Error::catalog("load-reference", &target))?;
    Ok(Opened::Table(Box::new(table)))
}

/// Reads an opened reference, its table or every one of its files, handing
/// each batch to `sink`.
async fn read_reference(
    reference: &Reference,
    opened: Opened,
    sink: &mut BatchSink<'_>,
) -> Result<()> {
    match opened {
        Opened::Table(table) => read_reference_table(reference, &table, sink).await,
        Opened::Files(location, listed) => {
            read_reference_files(reference, &location, &listed, sink).await
        }
    }
}

/// Scans a reference's Iceberg table.
async fn read_reference_table(
    reference: &Reference,
    table: &Table,
    sink: &mut BatchSink<'_>,
) -> Result<()> {
    let target = &reference.location;
    if table.metadata().current_snapshot().is_none() {
        return Ok(());
    }
    let scan = table
        .scan()
        .build()
        .map_err(Error::catalog("scan-reference", target))?;
    let mut stream = scan
        .to_arrow()
        .await
        .map_err(Error::catalog("scan-reference", target))?;
    while let Some(batch) = stream
        .try_next()
        .await
        .map_err(Error::catalog("scan-reference", target))?
    {
        sink(&batch)?;
    }
    Ok(())
}

/// Reads every listed file of the reference's folder, one file at a time.
async fn read_reference_files(
    reference: &Reference,
    location: &Location,
    listed: &[ListedObject],
    sink: &mut BatchSink<'_>,
) -> Result<()> {
    for object in listed {
        let bytes = location.get(&object.relative).await?;
        let bad = |reason: String| Error::BadDrop {
            location: location.url_of(&object.relative),
            reason,
        };
        match reference.format {
            ReferenceFormat::Iceberg => {
                return Err(Error::Internal(format!(
                    "reference '{}' is a table, not files",
                    reference.name
                )));
            }
            ReferenceFormat::Parquet => {
                let reader = ParquetRecordBatchReaderBuilder::try_new(bytes)
                    .and_then(|b| b.build())
                    .map_err(|e| bad(format!("not a readable Parquet file: {e}")))?;
                for batch in reader {
                    sink(&batch.map_err(|e| bad(e.to_string()))?)?;
                }
            }
            ReferenceFormat::Csv => {
                let keys: Vec<&str> = reference.keys.iter().map(|(_, k)| k.as_str()).collect();
                for batch in read_csv_keys(&bytes, &keys).map_err(bad)? {
                    sink(&batch.map_err(|e| bad(e.to_string()))?)?;
                }
            }
        }
    }
    Ok(())
}

/// A reference CSV's key columns, as text (keys are compared as text), batch
/// by batch; a key column missing from the header is named later, as for
/// any format.
fn read_csv_keys<'a>(
    bytes: &'a [u8],
    keys: &[&str],
) -> std::result::Result<arrow::csv::Reader<&'a [u8]>, String> {
    let mut header = csv::Reader::from_reader(bytes);
    let names = header
        .headers()
        .map_err(|e| format!("cannot read the header: {e}"))?
        .clone();
    let schema = Arc::new(Schema::new(
        names
            .iter()
            .map(|n| Field::new(n, DataType::Utf8, true))
            .collect::<Vec<_>>(),
    ));
    let projection: Vec<usize> = names
        .iter()
        .enumerate()
        .filter(|(_, n)| keys.contains(n))
        .map(|(i, _)| i)
        .collect();
    arrow::csv::ReaderBuilder::new(schema)
        .with_header(true)
        .with_batch_size(65_536)
        .with_projection(projection)
        .build(bytes)
        .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use arrow::array::{Int64Array, StringArray};

    use super::*;

    fn batch(columns: Vec<(&str, ArrayRef)>) -> RecordBatch {
        RecordBatch::try_from_iter(columns).unwrap()
    }

    #[test]
    fn rows_match_on_every_key_part_as_text_never_on_a_null_and_are_never_doubled() {
        let reference = Reference {
            name: "accounts".to_string(),
            location: "memory://".to_string(),
            format: ReferenceFormat::Csv,
            keys: vec![
                ("bank".to_string(), "bank_id".to_string()),
                ("number".to_string(), "account_no".to_string()),
            ],
        };
        let known = batch(vec![
            (
                "bank_id",
                Arc::new(StringArray::from(vec![
                    Some("A"),
                    Some("A"),
                    Some("B"),
                    None,
                ])) as ArrayRef,
            ),
            (
                "account_no",
                Arc::new(StringArray::from(vec![
                    Some("1"),
                    Some("1"),
                    Some("2"),
                    Some("3"),
                ])),
            ),
        ]);
        let rows = batch(vec![
            (
                "bank",
                Arc::new(StringArray::from(vec![
                    Some("A"),
                    Some("B"),
                    Some("A"),
                    None,
                    Some("B"),
                ])) as ArrayRef,
            ),
            (
                "number",
                Arc::new(Int64Array::from(vec![
                    Some(1),
                    Some(2),
                    Some(2),
                    Some(3),
                    None,
                ])),
            ),
        ]);
        let mut keys = KeySet::new(Stage::Reference);
        insert_keys(&mut keys, &reference, &known).unwrap();
        keys.loaded().unwrap();
        let source = SourceVersion::Files(Vec::new());
        let flags = KnownKeys {
            reference,
            source,
            keys,
            kept: false,
        }
        .flags(&rows)
        .unwrap();
        let flags: Vec<Option<bool>> = flags.iter().collect();
        assert_eq!(
            flags,
            vec![
                Some(true),
                Some(true),
                Some(false),
                Some(false),
                Some(false)
            ]
        );
    }

    /// The reference `holders` in CSV files under `folder`, and where it is read from.
    async fn holders_in(folder: &std::path::Path) -> (Reference, ReferenceSources) {
        let (stores, _) = Stores::local_for_test(folder).await;
        let reference = Reference {
            name: "holders".to_string(),
            location: format!("file://{}", folder.display()),
            format: ReferenceFormat::Csv,
            keys: vec![("holder".to_string(), "holder_id".to_string())],
        };
        let sources = ReferenceSources {
            stores,
            catalog: crate::infra::catalog::memory_catalog("test").await.unwrap(),
            kept: None,
        };
        (reference, sources)
    }

    /// Keys holding only `H9`, a holder no reference file names: found,
    /// they prove the keys were not read from the files.
    fn planted_keys() -> KeySet {
        let mut planted = KeySet::new(Stage::Reference);
        let column: ArrayRef = Arc::new(StringArray::from(vec!["H9"]));
        planted.insert(&[column]).unwrap();
        planted.loaded().unwrap();
        planted
    }

    /// Which of `holders` the loaded keys know.
    fn knows(known: &[KnownKeys], holders: &[&str]) -> Vec<bool> {
        let rows = batch(vec![(
            "holder",
            Arc::new(StringArray::from(holders.to_vec())) as ArrayRef,
        )]);
        known[0]
            .flags(&rows)
            .unwrap()
            .iter()
            .map(|f| f == Some(true))
            .collect()
    }

    #[tokio::test]
    async fn keys_loaded_from_files_that_have_not_changed_are_kept_and_reloaded_once_they_do() {
        let folder = tempfile::tempdir().unwrap();
        std::fs::write(folder.path().join("a.csv"), "holder_id,name\nH1,x\n").unwrap();
        let (reference, sources) = holders_in(folder.path()).await;
        let load = |kept| load_known_keys(vec![reference.clone()], sources.clone(), kept);
        let first = load(Vec::new()).await.unwrap();
        assert_eq!(knows(&first, &["H1", "H2"]), [true, false]);

        // Kept keys stand for the files as long as their listing is the
        // same: keys that are not in the files prove they were not re-read.
        let planted = |known: Vec<KnownKeys>| {
            vec![KnownKeys {
                keys: planted_keys(),
                ..known.into_iter().next().unwrap()
            }]
        };
        let again = load(planted(first)).await.unwrap();
        assert_eq!(knows(&again, &["H1", "H9"]), [false, true]);

        // Another reference (other key columns) never takes them.
        let mut other = reference.clone();
        other.keys = vec![("holder".to_string(), "name".to_string())];
        let renamed = load_known_keys(vec![other], sources.clone(), again)
            .await
            .unwrap();
        assert_eq!(knows(&renamed, &["x", "H9"]), [true, false]);

        // A file added reads only that file: the planted key stays.
        let before = planted(load(Vec::new()).await.unwrap());
        std::fs::write(folder.path().join("b.csv"), "holder_id,name\nH2,y\n").unwrap();
        let added = load(before).await.unwrap();
        assert_eq!(knows(&added, &["H1", "H2", "H9"]), [false, true, true]);
        assert!(!added[0].kept);
        // A file rewritten loads the reference again (each rewrite changes
        // the file's size: its version changes even within the file
        // system's time granularity), as does one removed.
        std::fs::write(folder.path().join("a.csv"), "holder_id,name\nH33,x\n").unwrap();
        let rewritten = load(added).await.unwrap();
        assert_eq!(
            knows(&rewritten, &["H1", "H2", "H33", "H9"]),
            [false, true, true, false]
        );
        std::fs::remove_file(folder.path().join("b.csv")).unwrap();
        let removed = load(rewritten).await.unwrap();
        assert_eq!(knows(&removed, &["H2", "H33"]), [false, true]);
    }

    #[tokio::test]
    async fn keys_kept_by_a_run_serve_the_next_process_until_the_files_change() {
        let folder = tempfile::tempdir().unwrap();
        let refs = folder.path().join("refs");
        std::fs::create_dir_all(&refs).unwrap();
        std::fs::write(refs.join("a.csv"), "holder_id,name\nH1,x\n").unwrap();
        let (reference, mut sources) = holders_in(&refs).await;
        let (_, dq_error) = Stores::local_for_test(&folder.path().join("dq")).await;
        let load = |sources: ReferenceSources| {
            load_known_keys(vec![reference.clone()], sources, Vec::new())
        };

        let column = |sensitive| crate::config::contract::Column {
            name: "holder".to_string(),
            column_type: crate::config::contract::ColumnType::String,
            nullable: false,
            sensitive,
        };
        let contract = |sensitive| Contract {
            name: "t".to_string(),
            columns: vec![column(sensitive)],
            entity_key: vec!["holder".to_string()],
            order_column: "holder".to_string(),
            contributor_column: "holder".to_string(),
            input: Default::default(),
        };
        let (plain, sensitive) = (contract(false), contract(true));

        // A dry run reads the reference and keeps nothing; nor does a run
        // whose rows' key column is sensitive.
        let dry = KeptKeys::new(dq_error.clone(), false);
        sources.kept = Some(dry.clone());
        let mut loaded = load(sources.clone()).await.unwrap();
        assert_eq!(knows(&loaded, &["H1"]), [true]);
        keep_loaded(&mut loaded, &dry, &plain).await;
        assert!(dq_error.list("reference-keys").await.unwrap().is_empty());
        let mut loaded = load(sources.clone()).await.unwrap();
        keep_loaded(
            &mut loaded,
            &KeptKeys::new(dq_error.clone(), true),
            &sensitive,
        )
        .await;
        assert!(dq_error.list("reference-keys").await.unwrap().is_empty());

        // A run keeps them once it succeeds; a later process (no keys in
        // memory) reads them back: keys planted there, not in the files,
        // prove it.
        let real = KeptKeys::new(dq_error.clone(), true);
        sources.kept = Some(real.clone());
        let mut loaded = load(sources.clone()).await.unwrap();
        assert!(dq_error.list("reference-keys").await.unwrap().is_empty());
        keep_loaded(&mut loaded, &real, &plain).await;
        // The keys file and the file naming its version.
        let kept = dq_error.list("reference-keys").await.unwrap();
        assert_eq!(kept.len(), 2, "{kept:?}");
        let planted = planted_keys();
        let listed = dq_error.list("").await.unwrap();
        let version = SourceVersion::Files(
            sources
                .stores
                .open(&reference.location, "test")
                .unwrap()
                .list("")
                .await
                .unwrap(),
        );
        real.keep(&reference, &version.describe().unwrap(), &planted)
            .await;
        assert_eq!(
            dq_error.list("").await.unwrap().len(),
            listed.len(),
            "replaced in place"
        );
        let again = load(sources.clone()).await.unwrap();
        assert_eq!(knows(&again, &["H1", "H9"]), [false, true]);

        // A file added: the kept keys read back and only that file read,
        // then kept in place of the old version.
        std::fs::write(refs.join("b.csv"), "holder_id,name\nH2,y\n").unwrap();
        let mut added = load(sources.clone()).await.unwrap();
        assert_eq!(knows(&added, &["H1", "H2", "H9"]), [false, true, true]);
        keep_loaded(&mut added, &real, &plain).await;
        let now = dq_error.list("reference-keys").await.unwrap();
        assert_eq!(now.len(), 2);
        assert_ne!(now, kept);
        let read_back = load(sources.clone()).await.unwrap();
        assert!(read_back[0].kept);
        assert_eq!(knows(&read_back, &["H2", "H9"]), [true, true]);

        // The files rewritten: read again, and kept in place of the old.
        std::fs::write(refs.join("a.csv"), "holder_id,name\nH22,x\n").unwrap();
        let mut rewritten = load(sources.clone()).await.unwrap();
        assert_eq!(knows(&rewritten, &["H22", "H2", "H9"]), [true, true, false]);
        keep_loaded(&mut rewritten, &real, &plain).await;
        let after = dq_error.list("reference-keys").await.unwrap();
        assert_eq!(after.len(), 2);
        assert_ne!(after, now);
    }

    #[test]
    fn a_table_is_unchanged_only_by_a_metadata_file_both_loads_named() {
        let table = |file: Option<&str>| SourceVersion::Table(file.map(str::to_string));
        assert!(table(Some("v1.json")).still(&table(Some("v1.json"))));
        assert!(!table(Some("v1.json")).still(&table(Some("v2.json"))));
        assert!(!table(None).still(&table(None)));
        assert!(!table(Some("v1.json")).still(&table(None)));
    }
}
