//! `[media]`: where the files people send are kept, and how they are fetched.

use std::path::{Path, PathBuf};
use std::time::Duration;

use parley_actors::media::{MediaLimits, MediaSettings, MediaStore, store::StoreError};
use serde::{Deserialize, Serialize};

/// Which media store keeps files.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MediaStoreKind {
    /// The local filesystem, under `media.dir` (default: `media` in the data directory).
    #[default]
    Fs,
    /// An S3-compatible bucket; credentials from the environment (`AWS_ACCESS_KEY_ID`,
    /// `AWS_SECRET_ACCESS_KEY`).
    S3,
}

/// `[media]`.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(default)]
pub struct MediaConfig {
    /// `PARLEY_MEDIA_STORE`: `fs` (default) or `s3`.
    pub store: MediaStoreKind,
    /// `PARLEY_MEDIA_DIR`: the directory of the `fs` store; default `media` in the data
    /// directory.
    pub dir: Option<PathBuf>,
    /// `PARLEY_MEDIA_BUCKET`: the bucket of the `s3` store.
    pub bucket: Option<String>,
    /// `PARLEY_MEDIA_ENDPOINT`: an S3-compatible endpoint (default: AWS's).
    pub endpoint: Option<String>,
    /// `PARLEY_MEDIA_REGION`: the bucket's region.
    pub region: String,
    /// `PARLEY_MEDIA_CONCURRENCY`: fetches at once per node.
    pub concurrency: usize,
    /// `PARLEY_MEDIA_SWEEP_MS`: how often pending fetches are looked for.
    pub sweep_ms: u64,
    /// `PARLEY_MEDIA_RETRY_BASE_MS`: first wait before a failed fetch is tried again.
    pub retry_base_ms: u64,
    /// `PARLEY_MEDIA_RETRY_MAX_SECS`: longest wait between attempts.
    pub retry_max_secs: u64,
    /// `PARLEY_MEDIA_RETENTION_DAYS`: files are deleted this many days after their message
    /// (0: kept for ever).
    pub retention_days: u32,
    /// `PARLEY_MEDIA_RETENTION_SWEEP_SECS`: how often files past the retention are looked for.
    pub retention_sweep_secs: u64,
    /// Largest image kept, in bytes (Meta's limit by default).
    pub image_max_bytes: u64,
    /// Largest audio kept, in bytes.
    pub audio_max_bytes: u64,
    /// Largest video kept, in bytes.
    pub video_max_bytes: u64,
    /// Largest document kept, in bytes.
    pub document_max_bytes: u64,
    /// Largest sticker kept, in bytes.
    pub sticker_max_bytes: u64,
}

impl Default for MediaConfig {
    fn default() -> Self {
        let limits = MediaLimits::default();
        let settings = MediaSettings::default();
        Self {
            store: MediaStoreKind::Fs,
            dir: None,
            bucket: None,
            endpoint: None,
            region: "us-east-1".to_owned(),
            concurrency: settings.concurrency,
            sweep_ms: u64::try_from(settings.sweep.as_millis()).unwrap_or(2_000),
            retry_base_ms: u64::try_from(settings.retry_base.as_millis()).unwrap_or(2_000),
            retry_max_secs: settings.retry_max.as_secs(),
            retention_days: 0,
            retention_sweep_secs: settings.retention_sweep.as_secs(),
            image_max_bytes: limits.image,
            audio_max_bytes: limits.audio,
            video_max_bytes: limits.video,
            document_max_bytes: limits.document,
            sticker_max_bytes: limits.sticker,
        }
    }
}

impl MediaConfig {
    /// The store configured; `data_dir` holds the `fs` store by default.
    ///
    /// # Errors
    /// When the store cannot be opened as configured (an `s3` store without a bucket, a
    /// directory that cannot be created).
    pub fn open(&self, data_dir: &Path) -> Result<MediaStore, StoreError> {
        match self.store {
            MediaStoreKind::Fs => {
                let dir = self.dir.clone().unwrap_or_else(|| data_dir.join("media"));
                MediaStore::local(&dir)
            }
            MediaStoreKind::S3 => {
                let bucket = self.bucket.as_deref().ok_or_else(|| {
                    StoreError::Config("media.store = s3 needs media.bucket".to_owned())
                })?;
                MediaStore::s3(bucket, self.endpoint.as_deref(), &self.region)
            }
        }
    }

    /// How the media worker works.
    pub fn settings(&self) -> MediaSettings {
        MediaSettings {
            concurrency: self.concurrency.max(1),
            sweep: Duration::from_millis(self.sweep_ms.max(10)),
            retry_base: Duration::from_millis(self.retry_base_ms.max(1)),
            retry_max: Duration::from_secs(self.retry_max_secs.max(1)),
            retention: (self.retention_days > 0)
                .then(|| chrono::Duration::days(i64::from(self.retention_days))),
            retention_sweep: Duration::from_secs(self.retention_sweep_secs.max(1)),
            limits: MediaLimits {
                image: self.image_max_bytes,
                audio: self.audio_max_bytes,
                video: self.video_max_bytes,
                document: self.document_max_bytes,
                sticker: self.sticker_max_bytes,
            },
        }
    }
}
