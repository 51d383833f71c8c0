//! Staged files a stopped process left behind: a download cut short by `kill -9` leaves its
//! staged parts (on a local disk, `staging/<id>#<n>` files `object_store` never lists), and a
//! staged file never kept stays in `staging/`. Nothing names them; once they are older than
//! any fetch in progress could leave them, they are deleted.

use std::time::{Duration, SystemTime};

use futures_util::StreamExt;
use object_store::ObjectStoreExt;
use object_store::path::Path;

use super::{MediaStore, StoreError};

impl MediaStore {
    /// Deletes what `staging/` holds that was last written more than `stale` ago; answers how
    /// many files it deleted.
    ///
    /// # Errors
    /// A store failure while listing (a file that cannot be deleted is logged and left).
    pub async fn sweep_staging(&self, stale: Duration) -> Result<usize, StoreError> {
        let before =
            chrono::Utc::now() - chrono::Duration::from_std(stale).unwrap_or(chrono::Duration::MAX);
        let mut listed = self.inner.list(Some(&Path::from("staging")));
        let mut stale_keys = Vec::new();
        while let Some(meta) = listed.next().await {
            let meta = meta?;
            if meta.last_modified < before {
                stale_keys.push(meta.location);
            }
        }
        let mut deleted = 0;
        for key in stale_keys {
            match self.inner.delete(&key).await {
                Ok(()) | Err(object_store::Error::NotFound { .. }) => deleted += 1,
                Err(error) => tracing::warn!(%error, %key, "could not delete a stale staged file"),
            }
        }
        if let Some(dir) = &self.local_dir {
            deleted += sweep_parts(&dir.join("staging"), stale).await;
        }
        Ok(deleted)
    }
}

/// The parts of cut-short writes on a local disk (`<id>#<n>`), older than `stale`.
async fn sweep_parts(dir: &std::path::Path, stale: Duration) -> usize {
    let Ok(mut entries) = tokio::fs::read_dir(dir).await else {
        return 0;
    };
    let mut deleted = 0;
    while let Ok(Some(entry)) = entries.next_entry().await {
        let is_part = entry.file_name().to_string_lossy().contains('#');
        let modified = entry.metadata().await.and_then(|m| m.modified());
        let old = modified.is_ok_and(|at| {
            SystemTime::now()
                .duration_since(at)
                .is_ok_and(|age| age > stale)
        });
        if is_part && old && tokio::fs::remove_file(entry.path()).await.is_ok() {
            deleted += 1;
        }
    }
    deleted
}
