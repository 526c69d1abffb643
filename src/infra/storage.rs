//! Object storage: one [`Location`] per configured root (bronze, dq_error),
//! served by `object_store` (local files, memory, S3). Every error names the
//! operation and the object at fault.

use std::sync::Arc;

use bytes::Bytes;
use futures::TryStreamExt;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload};
use url::Url;

use crate::error::{Error, Result};

/// An object store and the prefix under which one root lives.
#[derive(Debug, Clone)]
pub struct Location {
    store: Arc<dyn ObjectStore>,
    root: Path,
    url: String,
}

/// An object found under a prefix.
#[derive(Debug, Clone)]
pub struct ListedObject {
    /// Path relative to the location's root.
    pub relative: String,
    /// Size in bytes.
    pub size: u64,
}

impl Location {
    /// Opens the location named by `url` (`file:///...`, `memory://`, `s3://bucket/prefix`).
    pub fn open(url: &str, setting: &str) -> Result<Location> {
        let parsed = Url::parse(url).map_err(|e| Error::Usage {
            arg: setting.to_string(),
            reason: format!("'{url}' is not a valid URL: {e}"),
        })?;
        let (store, root) =
            object_store::parse_url_opts(&parsed, std::iter::empty::<(String, String)>())
                .map_err(|source| Error::storage("open", url)(source))?;
        Ok(Location {
            store: Arc::from(store),
            root,
            url: url.trim_end_matches('/').to_string(),
        })
    }

    /// The URL of `relative` under this root, for messages and summaries.
    pub fn url_of(&self, relative: &str) -> String {
        format!("{}/{}", self.url, relative)
    }

    fn path(&self, relative: &str) -> Path {
        let mut path = self.root.clone();
        for part in relative.split('/').filter(|p| !p.is_empty()) {
            path = path.join(part);
        }
        path
    }

    /// Writes `bytes` to `relative`, replacing what is there.
    pub async fn put(&self, relative: &str, bytes: Vec<u8>) -> Result<()> {
        self.store
            .put(&self.path(relative), PutPayload::from(bytes))
            .await
            .map_err(Error::storage("put", self.url_of(relative)))?;
        Ok(())
    }

    /// Writes `bytes` to `relative` only if nothing is there; returns false if something was.
    pub async fn put_if_absent(&self, relative: &str, bytes: Vec<u8>) -> Result<bool> {
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
            Err(source) => Err(Error::storage("put-if-absent", self.url_of(relative))(
                source,
            )),
        }
    }

    /// Reads the whole object at `relative`; `None` if it does not exist.
    pub async fn get_opt(&self, relative: &str) -> Result<Option<Bytes>> {
        match self.store.get(&self.path(relative)).await {
            Ok(result) => result
                .bytes()
                .await
                .map(Some)
                .map_err(Error::storage("get", self.url_of(relative))),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(source) => Err(Error::storage("get", self.url_of(relative))(source)),
        }
    }

    /// Reads the whole object at `relative`.
    pub async fn get(&self, relative: &str) -> Result<Bytes> {
        self.store
            .get(&self.path(relative))
            .await
            .map_err(Error::storage("get", self.url_of(relative)))?
            .bytes()
            .await
            .map_err(Error::storage("get", self.url_of(relative)))
    }

    /// Lists every object under `prefix`, sorted by path.
    pub async fn list(&self, prefix: &str) -> Result<Vec<ListedObject>> {
        let prefix_path = self.path(prefix);
        let metas: Vec<_> = self
            .store
            .list(Some(&prefix_path))
            .try_collect()
            .await
            .map_err(Error::storage("list", self.url_of(prefix)))?;
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
            })
            .collect();
        objects.sort_by(|a, b| a.relative.cmp(&b.relative));
        Ok(objects)
    }
}
