//! The media store: where the files people send are kept, under content addresses
//! (`{workspace}/{sha256}`), never under a name a tenant chose. The local filesystem under the
//! data directory by default; any S3-compatible store by configuration; both through
//! `object_store`. A file is written in bounded parts while its SHA-256 is computed, to a
//! staging name first, and moved to its address only once it is whole and checked: a file
//! that fails half-way, or whose digest disagrees, never takes an address.

use std::ops::Range;
use std::path::Path as FsPath;
use std::sync::Arc;

use bytes::Bytes;
use futures_util::stream::{BoxStream, Stream, StreamExt};
use object_store::path::Path;
use object_store::{GetOptions, GetRange, ObjectStore, ObjectStoreExt, WriteMultipart};
use sha2::{Digest, Sha256};
use uuid::Uuid;

mod leftovers;

/// The media store could not do what it was asked.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The store itself failed (a disk, a bucket, a network).
    #[error("the media store failed: {0}")]
    Store(#[from] object_store::Error),
    /// No file is kept under that address.
    #[error("no file is kept under that address")]
    Missing,
    /// The store could not be opened as configured.
    #[error("the media store cannot be opened: {0}")]
    Config(String),
}

/// Why a file was not written.
#[derive(Debug, thiserror::Error)]
pub enum WriteError<E> {
    /// The file is larger than `limit` bytes (nothing of it is kept).
    #[error("the file is larger than {limit} bytes")]
    TooLarge {
        /// The limit it passed.
        limit: u64,
    },
    /// Its source failed half-way (nothing of it is kept).
    #[error("reading the file failed: {0}")]
    Source(E),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// A file written to staging, whole: its digest and size, to check before it takes its
/// address ([`MediaStore::keep`]) or is thrown away ([`MediaStore::discard`]).
#[derive(Debug)]
pub struct Staged {
    path: Path,
    /// Its SHA-256, lowercase hex.
    pub sha256: String,
    /// Its size in bytes.
    pub size: u64,
}

impl Staged {
    /// Where it is staged, to read it back before it is kept or thrown away.
    pub fn key(&self) -> &str {
        self.path.as_ref()
    }
}

/// A read of a kept file: its bytes (all of them, or the range asked for), the range they
/// are, and the file's whole size.
pub struct Read {
    /// The bytes, as the store streams them.
    pub bytes: BoxStream<'static, Result<Bytes, StoreError>>,
    /// Which bytes of the file they are.
    pub range: Range<u64>,
    /// The whole file's size.
    pub size: u64,
}

/// The media store; cheap to clone.
#[derive(Clone, Debug)]
pub struct MediaStore {
    inner: Arc<dyn ObjectStore>,
    /// Bytes per part written: small on a local disk (memory stays flat), S3's minimum part
    /// on a bucket.
    part: usize,
    /// `fs` or `s3`, for logs and the metrics.
    kind: &'static str,
    /// The directory of a local store, whose cut-short writes `object_store` does not list.
    local_dir: Option<std::path::PathBuf>,
}

/// Parts written at once per file.
const PARTS_IN_FLIGHT: usize = 2;

impl MediaStore {
    /// Files under `dir` on the local filesystem (created when missing).
    ///
    /// # Errors
    /// When the directory cannot be created or opened.
    pub fn local(dir: &FsPath) -> Result<Self, StoreError> {
        std::fs::create_dir_all(dir)
            .map_err(|e| StoreError::Config(format!("{}: {e}", dir.display())))?;
        let store = object_store::local::LocalFileSystem::new_with_prefix(dir)?
            .with_automatic_cleanup(true);
        Ok(Self {
            inner: Arc::new(store),
            part: 256 * 1024,
            kind: "fs",
            local_dir: Some(dir.to_path_buf()),
        })
    }

    /// Files in an S3-compatible bucket; credentials come from the environment
    /// (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, …) as the AWS tools read them.
    ///
    /// # Errors
    /// When the configuration is incomplete or unreadable.
    pub fn s3(bucket: &str, endpoint: Option<&str>, region: &str) -> Result<Self, StoreError> {
        crate::llm::install_crypto_provider();
        let mut builder = object_store::aws::AmazonS3Builder::from_env()
            .with_bucket_name(bucket)
            .with_region(region);
        if let Some(endpoint) = endpoint {
            builder = builder
                .with_endpoint(endpoint)
                .with_allow_http(endpoint.starts_with("http://"));
        }
        let store = builder.build()?;
        Ok(Self {
            inner: Arc::new(store),
            part: 5 * 1024 * 1024,
            kind: "s3",
            local_dir: None,
        })
    }

    /// `fs` or `s3`.
    pub fn kind(&self) -> &'static str {
        self.kind
    }

    /// The address of a file of `workspace_id` whose digest is `sha256`.
    pub fn key(workspace_id: i64, sha256: &str) -> String {
        format!("{workspace_id}/{sha256}")
    }

    /// Writes what `source` yields to a staging name of its own, in bounded parts, computing
    /// its digest; stops as soon as it passes `limit` bytes. Nothing is left behind when it
    /// fails.
    ///
    /// # Errors
    /// [`WriteError`]: too large, the source failed, or the store did.
    pub async fn stage<S, E>(&self, mut source: S, limit: u64) -> Result<Staged, WriteError<E>>
    where
        S: Stream<Item = Result<Bytes, E>> + Unpin + Send,
    {
        let path = Path::from(format!("staging/{}", Uuid::now_v7()));
        let upload = self
            .inner
            .put_multipart(&path)
            .await
            .map_err(StoreError::from)?;
        let mut writer = WriteMultipart::new_with_chunk_size(upload, self.part);
        let mut digest = Sha256::new();
        let mut size: u64 = 0;
        let failed = loop {
            let Some(chunk) = source.next().await else {
                break None;
            };
            let chunk = match chunk {
                Ok(chunk) => chunk,
                Err(error) => break Some(WriteError::Source(error)),
            };
            size += chunk.len() as u64;
            if size > limit {
                break Some(WriteError::TooLarge { limit });
            }
            digest.update(&chunk);
            if let Err(error) = writer.wait_for_capacity(PARTS_IN_FLIGHT).await {
                break Some(WriteError::Store(error.into()));
            }
            writer.put(chunk);
        };
        if let Some(error) = failed {
            let _ = writer.abort().await;
            return Err(error);
        }
        writer.finish().await.map_err(StoreError::from)?;
        Ok(Staged {
            path,
            sha256: hex::encode(digest.finalize()),
            size,
        })
    }

    /// Gives a staged file its address `key` (a file already there is the same bytes: its
    /// address is its digest).
    ///
    /// # Errors
    /// When the store fails; the staged file is thrown away then.
    pub async fn keep(&self, staged: Staged, key: &str) -> Result<(), StoreError> {
        let moved = self.inner.rename(&staged.path, &Path::from(key)).await;
        if moved.is_err() {
            self.discard(staged).await;
        }
        Ok(moved?)
    }

    /// Throws a staged file away.
    pub async fn discard(&self, staged: Staged) {
        if let Err(error) = self.inner.delete(&staged.path).await {
            tracing::warn!(%error, path = %staged.path, "could not delete a staged file");
        }
    }

    /// Reads the file at `key`, all of it or `range` of it.
    ///
    /// # Errors
    /// [`StoreError::Missing`] when there is no such file; a store failure.
    pub async fn read(&self, key: &str, range: Option<Range<u64>>) -> Result<Read, StoreError> {
        let options = GetOptions {
            range: range.map(GetRange::Bounded),
            ..GetOptions::default()
        };
        let got = match self.inner.get_opts(&Path::from(key), options).await {
            Ok(got) => got,
            Err(object_store::Error::NotFound { .. }) => return Err(StoreError::Missing),
            Err(error) => return Err(error.into()),
        };
        let (range, size) = (got.range.clone(), got.meta.size);
        Ok(Read {
            bytes: got
                .into_stream()
                .map(|r| r.map_err(StoreError::from))
                .boxed(),
            range,
            size,
        })
    }

    /// The size of the file at `key`.
    ///
    /// # Errors
    /// [`StoreError::Missing`] when there is no such file; a store failure.
    pub async fn size(&self, key: &str) -> Result<u64, StoreError> {
        match self.inner.head(&Path::from(key)).await {
            Ok(meta) => Ok(meta.size),
            Err(object_store::Error::NotFound { .. }) => Err(StoreError::Missing),
            Err(error) => Err(error.into()),
        }
    }

    /// Deletes the file at `key` (nothing when there is none).
    ///
    /// # Errors
    /// A store failure.
    pub async fn delete(&self, key: &str) -> Result<(), StoreError> {
        match self.inner.delete(&Path::from(key)).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(error) => Err(error.into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunks(parts: &[&'static [u8]]) -> impl Stream<Item = Result<Bytes, String>> + Unpin {
        futures_util::stream::iter(
            parts
                .iter()
                .map(|p| Ok(Bytes::from_static(p)))
                .collect::<Vec<_>>(),
        )
    }

    async fn read_all(store: &MediaStore, key: &str, range: Option<Range<u64>>) -> Vec<u8> {
        let mut read = store.read(key, range).await.expect("read");
        let mut all = Vec::new();
        while let Some(chunk) = read.bytes.next().await {
            all.extend_from_slice(&chunk.expect("chunk"));
        }
        all
    }

    #[tokio::test]
    async fn a_file_is_staged_digested_and_kept_at_its_address() {
        let dir = tempfile::tempdir().expect("dir");
        let store = MediaStore::local(dir.path()).expect("store");
        let staged = store
            .stage(chunks(&[b"hello ", b"world"]), 100)
            .await
            .expect("staged");
        assert_eq!(staged.size, 11);
        assert_eq!(
            staged.sha256,
            "b94d27b9934d3e08a52e52d7da7dabfac484efe37a5380ee9088f7ace2efcde9"
        );
        let key = MediaStore::key(7, &staged.sha256);
        store.keep(staged, &key).await.expect("kept");
        assert_eq!(read_all(&store, &key, None).await, b"hello world");
        assert_eq!(read_all(&store, &key, Some(6..11)).await, b"world");
        // Nothing is left in staging.
        assert!(
            std::fs::read_dir(dir.path().join("staging")).map_or(true, |mut d| d.next().is_none())
        );
        store.delete(&key).await.expect("deleted");
        assert!(matches!(
            store.read(&key, None).await,
            Err(StoreError::Missing)
        ));
    }

    #[tokio::test]
    async fn a_file_past_its_limit_or_whose_source_fails_leaves_nothing() {
        let dir = tempfile::tempdir().expect("dir");
        let store = MediaStore::local(dir.path()).expect("store");
        let too_large = store.stage(chunks(&[b"12345", b"67890"]), 8).await;
        assert!(matches!(too_large, Err(WriteError::TooLarge { limit: 8 })));
        let broken = futures_util::stream::iter(vec![
            Ok(Bytes::from_static(b"abc")),
            Err("connection reset".to_owned()),
        ]);
        let failed = store.stage(broken, 100).await;
        assert!(matches!(failed, Err(WriteError::Source(ref e)) if e == "connection reset"));
        let left = walk(dir.path());
        assert!(left.is_empty(), "left behind: {left:?}");
    }

    fn walk(dir: &FsPath) -> Vec<std::path::PathBuf> {
        let mut files = Vec::new();
        for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                files.extend(walk(&path));
            } else {
                files.push(path);
            }
        }
        files
    }
}
