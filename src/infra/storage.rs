//! Object storage: one [`Location`] per configured root (bronze, dq_error),
//! served by `object_store` (local files, memory, S3), all opened through one
//! [`Stores`] that also gives the Iceberg FileIO the same S3 settings and
//! identity. Every error names the operation, the object and the setting.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::TryStreamExt;
use object_store::aws::AmazonS3Builder;
use object_store::buffered::BufWriter;
use object_store::path::{Path, PathPart};
use object_store::{
    GetResultPayload, ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload, RetryConfig,
};
use url::Url;

use crate::config::plan::{S3Settings, StorageSpec};
use crate::core::parallel::Beside;
use crate::error::{Error, Result};
use crate::infra::aws::AwsChain;
use crate::infra::buckets::BucketSettings;

/// Where an object streamed by [`Location::stream_to`] goes.
pub(crate) trait ObjectSink {
    /// The object's size, before any piece.
    fn size(&mut self, size: u64);
    /// The next piece of its content.
    fn piece(&mut self, piece: &[u8]) -> Result<()>;
}

/// An object streamed to an unnamed file in a local folder (the scratch
/// folder): it is deleted once closed. Its pieces are gathered into writes
/// of at least [`FileSink::WRITE`] bytes (the last one less), written on a
/// thread of their own while the caller goes on (a drop's copy is written
/// while it is fingerprinted).
pub(crate) struct FileSink {
    pending: Vec<u8>,
    writer: Beside<Vec<u8>, std::fs::File>,
    dir: std::path::PathBuf,
}

impl FileSink {
    /// The size of each write; at most [`FileSink::WAITING`] of them wait.
    const WRITE: usize = 1 << 20;
    const WAITING: usize = 4;

    /// A new unnamed file in `dir`.
    pub(crate) fn new(dir: &std::path::Path) -> Result<FileSink> {
        let io = |source| Error::Io {
            path: dir.to_path_buf(),
            source,
        };
        let mut file = tempfile::tempfile_in(dir).map_err(io)?;
        let path = dir.to_path_buf();
        let writer = Beside::start(
            "writing a file to the scratch folder",
            Self::WAITING,
            move |pieces: std::sync::mpsc::Receiver<Vec<u8>>| {
                for piece in pieces {
                    std::io::Write::write_all(&mut file, &piece).map_err(|source| Error::Io {
                        path: path.clone(),
                        source,
                    })?;
                }
                Ok(file)
            },
        )?;
        Ok(FileSink {
            pending: Vec::with_capacity(Self::WRITE),
            writer,
            dir: dir.to_path_buf(),
        })
    }

    /// The file written, rewound to its start.
    pub(crate) fn into_file(mut self) -> Result<std::fs::File> {
        if !self.pending.is_empty() {
            self.writer.give(std::mem::take(&mut self.pending))?;
        }
        let mut file = self.writer.finish()?;
        std::io::Seek::rewind(&mut file).map_err(|source| Error::Io {
            path: self.dir.clone(),
            source,
        })?;
        Ok(file)
    }
}

impl ObjectSink for FileSink {
    fn size(&mut self, _size: u64) {}

    fn piece(&mut self, piece: &[u8]) -> Result<()> {
        self.pending.extend_from_slice(piece);
        if self.pending.len() < Self::WRITE {
            return Ok(());
        }
        let full = std::mem::replace(&mut self.pending, Vec::with_capacity(Self::WRITE));
        self.writer.give(full)
    }
}

/// The storage settings of a run, with the AWS chain loaded when anything lives on S3.
#[derive(Debug, Clone)]
pub struct Stores {
    s3: S3Settings,
    aws: Option<AwsChain>,
}

impl Stores {
    /// Prepares storage for `spec`; `warehouse` is the Iceberg warehouse, which may need S3 too.
    pub async fn new(spec: &StorageSpec, warehouse: &str) -> Result<Stores> {
        let uses_s3 = [spec.bronze.as_str(), spec.dq_error.as_str(), warehouse]
            .iter()
            .any(|url| url.starts_with("s3://") || url.starts_with("s3a://"));
        let aws = if uses_s3 {
            Some(AwsChain::load(&spec.s3).await?)
        } else {
            None
        };
        Ok(Stores {
            s3: spec.s3.clone(),
            aws,
        })
    }

    /// Storage for a test whose bronze and dq_error roots are the local
    /// `folder`, and that folder opened as a location.
    #[cfg(test)]
    pub(crate) async fn local_for_test(folder: &std::path::Path) -> (Stores, Location) {
        let url = format!("file://{}", folder.display());
        let spec = StorageSpec {
            bronze: url.clone(),
            dq_error: url.clone(),
            s3: Default::default(),
        };
        let stores = Stores::new(&spec, &url).await.expect("local stores");
        let location = stores.open(&url, "storage.bronze").expect("local folder");
        (stores, location)
    }

    /// Opens the location named by `url` (`file:///...`, `memory://`, `s3://bucket/prefix`);
    /// `setting` names the config key it came from, for error messages.
    pub(crate) fn open(&self, url: &str, setting: &str) -> Result<Location> {
        let parsed = Url::parse(url).map_err(|e| Error::Usage {
            arg: setting.to_string(),
            reason: format!("'{url}' is not a valid URL: {e}"),
        })?;
        let (store, root) = if parsed.scheme() == "s3" {
            self.open_s3(&parsed, setting)?
        } else {
            let (store, root) = object_store::parse_url(&parsed)
                .map_err(Error::storage("open", format!("{url} ({setting})")))?;
            (Arc::from(store), root)
        };
        Ok(Location {
            store,
            root,
            url: url.trim_end_matches('/').to_string(),
            setting: setting.to_string(),
            local_root: (parsed.scheme() == "file")
                .then(|| parsed.to_file_path().ok())
                .flatten(),
        })
    }

    fn open_s3(&self, url: &Url, setting: &str) -> Result<(Arc<dyn ObjectStore>, Path)> {
        let aws = self.aws.as_ref().ok_or_else(|| {
            Error::Internal("S3 location opened without the AWS chain".to_string())
        })?;
        let mut builder = AmazonS3Builder::new()
            .with_url(url.as_str())
            .with_region(&aws.region)
            .with_virtual_hosted_style_request(!self.s3.path_style)
            .with_credentials(aws.object_store_provider())
            .with_retry(RetryConfig {
                max_retries: 4,
                retry_timeout: Duration::from_secs(60),
                ..RetryConfig::default()
            });
        if let Some(endpoint) = &self.s3.endpoint {
            builder = builder
                .with_endpoint(endpoint)
                .with_allow_http(endpoint.starts_with("http://"));
        }
        let store = builder.build().map_err(|e| Error::Usage {
            arg: setting.to_string(),
            reason: format!("cannot use '{url}': {e}"),
        })?;
        let root = Path::parse(url.path()).map_err(|e| Error::Usage {
            arg: setting.to_string(),
            reason: format!("bad path in '{url}': {e}"),
        })?;
        Ok((Arc::new(store), root))
    }

    /// Where the AWS chain found its credentials (never the secret); `None`
    /// when nothing lives on S3.
    pub(crate) async fn credential_source(&self) -> Option<Result<String>> {
        Some(self.aws.as_ref()?.describe_source().await)
    }

    /// A reader of bucket settings with the run's identity; `None` when nothing lives on S3.
    pub(crate) fn bucket_settings(&self) -> Option<BucketSettings> {
        let aws = self.aws.as_ref()?;
        Some(BucketSettings::new(aws, &self.s3))
    }

    /// Iceberg FileIO properties: the same endpoint, region, addressing and identity.
    pub(crate) async fn fileio_properties(&self) -> Result<Vec<(String, String)>> {
        let Some(aws) = &self.aws else {
            return Ok(Vec::new());
        };
        let credentials = aws.credentials().await?;
        let mut props = vec![
            ("s3.region".to_string(), aws.region.clone()),
            (
                "s3.path-style-access".to_string(),
                self.s3.path_style.to_string(),
            ),
            (
                "s3.access-key-id".to_string(),
                credentials.access_key_id().to_string(),
            ),
            (
                "s3.secret-access-key".to_string(),
                credentials.secret_access_key().to_string(),
            ),
        ];
        if let Some(token) = credentials.session_token() {
            props.push(("s3.session-token".to_string(), token.to_string()));
        }
        if let Some(endpoint) = &self.s3.endpoint {
            props.push(("s3.endpoint".to_string(), endpoint.clone()));
        }
        Ok(props)
    }
}

/// An object store and the prefix under which one root lives.
#[derive(Debug, Clone)]
pub struct Location {
    store: Arc<dyn ObjectStore>,
    root: Path,
    url: String,
    setting: String,
    /// The folder, when the root is on the local filesystem.
    local_root: Option<std::path::PathBuf>,
}

/// The part size of an [`Upload`] (S3 needs 5 MiB at least).
const UPLOAD_PART: usize = 8 << 20;

/// An object being written ([`Location::upload`]).
pub(crate) struct Upload {
    writer: BufWriter,
    object: String,
}

impl Upload {
    /// Adds `bytes` to the object (after a failure, [`Upload::abort`] it).
    pub(crate) async fn write(&mut self, bytes: Bytes) -> Result<()> {
        self.writer
            .put(bytes)
            .await
            .map_err(Error::storage("put", self.object.clone()))
    }

    /// Completes the object: it is there, whole, once this returns. A
    /// multipart upload whose completion fails is aborted by the writer;
    /// one whose last parts fail is left to the store's lifecycle rules
    /// (nothing is visible under the object's name either way).
    pub(crate) async fn finish(mut self) -> Result<()> {
        std::future::poll_fn(|cx| {
            tokio::io::AsyncWrite::poll_shutdown(std::pin::Pin::new(&mut self.writer), cx)
        })
        .await
        .map_err(|source| {
            Error::storage("put", self.object.clone())(object_store::Error::Generic {
                store: "upload",
                source: Box::new(source),
            })
        })
    }

    /// Gives the upload up before [`Upload::finish`], its parts deleted (a
    /// failure to is logged: the store's lifecycle rules clear parts never
    /// completed).
    pub(crate) async fn abort(mut self) {
        if let Err(error) = self.writer.abort().await {
            tracing::warn!(object = %self.object, %error, "an unfinished upload could not be aborted");
        }
    }
}

/// An object found under a prefix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ListedObject {
    /// Path relative to the location's root.
    pub relative: String,
    /// Its size in bytes.
    pub size: u64,
    /// What changes when the object is written again: its entity tag where
    /// the store gives one, else its last modification time.
    pub version: String,
}

impl Location {
    /// The URL of `relative` under this root, for messages and summaries.
    pub(crate) fn url_of(&self, relative: &str) -> String {
        format!("{}/{}", self.url, relative)
    }

    /// The path of `url` relative to this root, if it lies under it.
    pub(crate) fn relative_path<'a>(&self, url: &'a str) -> Option<&'a str> {
        url.strip_prefix(&self.url)?.strip_prefix('/')
    }

    /// The URL of `relative` and the setting it comes from, for error messages.
    fn describe(&self, relative: &str) -> String {
        format!("{} ({})", self.url_of(relative), self.setting)
    }

    /// The object key of `relative`, segment by segment as it is: stores list
    /// keys raw, and `#`, `%`, `?`, spaces or non-ASCII letters are valid in a
    /// key, so a listed name must not be percent-encoded on its way back. Only
    /// a segment no key may hold (`.`, `..`, control characters) is encoded.
    fn path(&self, relative: &str) -> Path {
        let parts = relative
            .split('/')
            .filter(|p| !p.is_empty())
            .map(|p| PathPart::parse(p).unwrap_or_else(|_| PathPart::from(p)));
        self.root.parts().chain(parts).collect()
    }

    /// Writes `bytes` to `relative`, replacing what is there.
    pub(crate) async fn put(&self, relative: &str, bytes: Vec<u8>) -> Result<()> {
        self.put_parts(relative, vec![Bytes::from(bytes)]).await
    }

    /// Writes `parts`, one after the other, to `relative`, replacing what
    /// is there (a large file built in parts, never copied into one buffer).
    pub(crate) async fn put_parts(&self, relative: &str, parts: Vec<Bytes>) -> Result<()> {
        self.store
            .put(&self.path(relative), PutPayload::from_iter(parts))
            .await
            .map_err(Error::storage("put", self.describe(relative)))?;
        Ok(())
    }

    /// A writer of the object at `relative`, fed piece by piece: one
    /// request for a small object, a multipart upload past
    /// [`UPLOAD_PART`] (at most two parts in flight), so a large file is
    /// never held whole. Nothing is there until [`Upload::finish`].
    pub(crate) fn upload(&self, relative: &str) -> Upload {
        let writer = BufWriter::with_capacity(self.store.clone(), self.path(relative), UPLOAD_PART)
            .with_max_concurrency(2);
        Upload {
            writer,
            object: self.describe(relative),
        }
    }

    /// Writes `bytes` to `relative` only if nothing is there; returns false if something was.
    pub(crate) async fn put_if_absent(&self, relative: &str, bytes: Vec<u8>) -> Result<bool> {
        let options = PutOptions {
            mode: PutMode::Create,
            ..PutOptions::default()
        };
        match self
            .store
            .put_opts(&self.path(relative), PutPayload::from(bytes), options)
            .await
        {
            Ok(_) => Ok(true),
            Err(object_store::Error::AlreadyExists { .. }) => Ok(false),
            Err(source) => Err(Error::storage("put-if-absent", self.describe(relative))(
                source,
            )),
        }
    }

    /// Deletes the object at `relative`; nothing there is fine.
    pub(crate) async fn delete(&self, relative: &str) -> Result<()> {
        match self.store.delete(&self.path(relative)).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(source) => Err(Error::storage("delete", self.describe(relative))(source)),
        }
    }

    /// Whether an object is at `relative`.
    pub(crate) async fn exists(&self, relative: &str) -> Result<bool> {
        match self.store.head(&self.path(relative)).await {
            Ok(_) => Ok(true),
            Err(object_store::Error::NotFound { .. }) => Ok(false),
            Err(source) => Err(Error::storage("head", self.describe(relative))(source)),
        }
    }

    /// Reads the whole object at `relative`; `None` if it does not exist.
    pub(crate) async fn get_opt(&self, relative: &str) -> Result<Option<Bytes>> {
        match self.store.get(&self.path(relative)).await {
            Ok(result) => result
                .bytes()
                .await
                .map(Some)
                .map_err(Error::storage("get", self.describe(relative))),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(source) => Err(Error::storage("get", self.describe(relative))(source)),
        }
    }

    /// Reads the whole object at `relative`.
    pub(crate) async fn get(&self, relative: &str) -> Result<Bytes> {
        self.store
            .get(&self.path(relative))
            .await
            .map_err(Error::storage("get", self.describe(relative)))?
            .bytes()
            .await
            .map_err(Error::storage("get", self.describe(relative)))
    }

    /// Streams the object at `relative` to `sink`: its size, then its
    /// content piece by piece (a local file read a MiB at a time). Returns
    /// how many bytes came; an object whose content does not match the size
    /// its store announced (it changed while read) is a storage error
    /// naming it.
    pub(crate) async fn stream_to(
        &self,
        relative: &str,
        sink: &mut (dyn ObjectSink + Send),
    ) -> Result<u64> {
        let failed = |source| Error::storage("get", self.describe(relative))(source);
        let result = self.store.get(&self.path(relative)).await.map_err(failed)?;
        let size = result.meta.size;
        sink.size(size);
        let mut read = 0u64;
        match result.payload {
            GetResultPayload::File(mut file, path) => {
                let mut buffer = vec![0u8; 1 << 20];
                loop {
                    let n = std::io::Read::read(&mut file, &mut buffer).map_err(|source| {
                        Error::Io {
                            path: path.clone(),
                            source,
                        }
                    })?;
                    if n == 0 {
                        break;
                    }
                    read += n as u64;
                    sink.piece(&buffer[..n])?;
                }
            }
            GetResultPayload::Stream(mut stream) => {
                while let Some(bytes) = stream.try_next().await.map_err(failed)? {
                    read += bytes.len() as u64;
                    sink.piece(&bytes)?;
                }
            }
        }
        if read != size {
            return Err(failed(object_store::Error::Generic {
                store: "storage",
                source: format!(
                    "the object changed while it was read: {size} bytes listed, {read} read"
                )
                .into(),
            }));
        }
        Ok(read)
    }

    /// Copies the object at `relative` to an unnamed file in `dir` (the
    /// system's temporary folder when `None`); returns it, to be read from
    /// its start.
    pub(crate) async fn copy_to_file(
        &self,
        relative: &str,
        dir: Option<&std::path::Path>,
    ) -> Result<std::fs::File> {
        let dir = crate::core::spill::scratch_folder(dir);
        let mut sink = FileSink::new(&dir)?;
        self.stream_to(relative, &mut sink).await?;
        sink.into_file()
    }

    /// Lists every object under `prefix`, sorted by path.
    pub(crate) async fn list(&self, prefix: &str) -> Result<Vec<ListedObject>> {
        let prefix_path = self.path(prefix);
        let metas: Vec<_> = self
            .store
            .list(Some(&prefix_path))
            .try_collect()
            .await
            .map_err(Error::storage("list", self.describe(prefix)))?;
        let root = self.root.as_ref();
        let mut objects: Vec<ListedObject> = metas
            .into_iter()
            .map(|meta| ListedObject {
                relative: meta
                    .location
                    .as_ref()
                    .strip_prefix(root)
                    .unwrap_or(meta.location.as_ref())
                    .trim_start_matches('/')
                    .to_string(),
                size: meta.size,
                version: meta
                    .e_tag
                    .clone()
                    .unwrap_or_else(|| meta.last_modified.to_rfc3339()),
            })
            .collect();
        objects.sort_by(|a, b| a.relative.cmp(&b.relative));
        if let Some(folder) = &self.local_root {
            self.refuse_links_out_of(folder, &objects)?;
        }
        Ok(objects)
    }

    /// Whether any object lies under `prefix` (relative to this root): one
    /// listing request, whatever the prefix holds.
    pub(crate) async fn any_under(&self, prefix: &str) -> Result<bool> {
        let mut listing = self.store.list(Some(&self.path(prefix)));
        let first = listing
            .try_next()
            .await
            .map_err(Error::storage("list", self.describe(prefix)))?;
        Ok(first.is_some())
    }

    /// Whether `relative` is a folder on the local filesystem: `None` where
    /// the root is an object store, which has objects but no folders.
    pub(crate) fn local_folder_exists(&self, relative: &str) -> Option<bool> {
        let folder = self.local_root.as_ref()?;
        Some(folder.join(relative).is_dir())
    }

    /// The setting this root comes from (`storage.bronze`...).
    pub(crate) fn setting(&self) -> &str {
        &self.setting
    }

    /// Refuses a listed file that is a symbolic link (or lies under one)
    /// leading outside the local `folder` of this root: the root is the
    /// boundary of what a run may read.
    fn refuse_links_out_of(
        &self,
        folder: &std::path::Path,
        objects: &[ListedObject],
    ) -> Result<()> {
        let Ok(boundary) = std::fs::canonicalize(folder) else {
            return Ok(());
        };
        for object in objects {
            match std::fs::canonicalize(folder.join(&object.relative)) {
                Ok(target) if !target.starts_with(&boundary) => {
                    return Err(Error::BadDrop {
                        location: self.url_of(&object.relative),
                        reason: format!(
                            "a symbolic link to a file outside {} ({}): refused",
                            self.url, self.setting
                        ),
                    });
                }
                _ => {}
            }
        }
        Ok(())
    }
}
