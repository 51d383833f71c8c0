//! The media worker (`root/media`): fetches pending attachments, at most `concurrency` at a
//! time, of the channels this node owns. It looks at the table when woken (a media message was
//! stored here) and every `sweep` (retries, messages stored on other nodes, what a restart
//! left). Each fetch settles its own row; the worker only keeps which rows are in flight, so
//! that no sweep takes one twice.

use std::collections::HashSet;
use std::sync::Arc;

use parley_persistence::attachments::{self, RetentionScope};
use parley_persistence::entities::attachment;
use parley_persistence::{clock, workspaces};
use ractor::{Actor, ActorProcessingErr, ActorRef};
use uuid::Uuid;

use super::MediaDeps;
use super::fetch::{Fetched, fetch};

/// Behaviour of the media worker.
pub(crate) struct MediaWorker;

/// State of the media worker.
pub(crate) struct MediaState {
    deps: Arc<MediaDeps>,
    /// Attachments being fetched.
    running: HashSet<Uuid>,
    /// Hears the bell and wakes the worker; ends with it.
    listening: tokio::task::JoinHandle<()>,
    /// Whether a retention pass runs now (one at a time).
    retiring: bool,
}

/// Messages of the media worker.
pub(crate) enum MediaMsg {
    /// Media messages were stored: look now.
    Wake,
    /// Time to look for due fetches.
    Sweep,
    /// A fetch ended and settled its row.
    Done(Uuid),
    /// Time to delete the files past the retention.
    Retire,
    /// A retention pass ended.
    Retired,
}

/// Rings the media worker when media messages were stored, so that it fetches them now
/// rather than at its next sweep; cheap to clone. Built before the runtime (the conversations
/// that store media messages hold one), heard by whichever worker runs now.
#[derive(Clone, Debug, Default)]
pub struct MediaBell(Arc<tokio::sync::Notify>);

impl MediaBell {
    /// Rings: the worker looks at the table once, however often it rang meanwhile.
    pub fn ring(&self) {
        self.0.notify_one();
    }
}

/// How long a staged file may go unwritten before it is taken for a stopped process's: far
/// longer than any fetch in progress pauses.
const STALE_STAGING: std::time::Duration = std::time::Duration::from_secs(3600);

impl Actor for MediaWorker {
    type Msg = MediaMsg;
    type State = MediaState;
    type Arguments = Arc<MediaDeps>;

    async fn pre_start(
        &self,
        myself: ActorRef<Self::Msg>,
        deps: Arc<MediaDeps>,
    ) -> Result<Self::State, ActorProcessingErr> {
        myself.send_interval(deps.settings.sweep, || MediaMsg::Sweep);
        // A workspace may keep its files for a time of its own, so the pass always runs.
        myself.send_interval(deps.settings.retention_sweep, || MediaMsg::Retire);
        let _ = myself.send_message(MediaMsg::Sweep);
        // What a stopped process was writing is nobody's now (a fetch is retried whole).
        let store = deps.store.clone();
        tokio::spawn(async move {
            match store.sweep_staging(STALE_STAGING).await {
                Ok(0) => {}
                Ok(files) => tracing::info!(files, "stale staged media deleted"),
                Err(error) => tracing::warn!(%error, "could not sweep the media staging"),
            }
        });
        let (bell, worker) = (deps.bell.clone(), myself.clone());
        let listening = tokio::spawn(async move {
            loop {
                bell.0.notified().await;
                if worker.send_message(MediaMsg::Wake).is_err() {
                    return;
                }
            }
        });
        Ok(MediaState {
            deps,
            running: HashSet::new(),
            listening,
            retiring: false,
        })
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        // Fetches in flight finish on their own and settle their rows; one cut short by the
        // process ending stays pending and is taken again at the next start.
        state.listening.abort();
        Ok(())
    }

    #[tracing::instrument(name = "media", skip_all)]
    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        message: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            MediaMsg::Wake | MediaMsg::Sweep => {}
            MediaMsg::Done(id) => {
                state.running.remove(&id);
            }
            MediaMsg::Retire => {
                if !state.retiring {
                    state.retiring = true;
                    let (deps, myself) = (state.deps.clone(), myself.clone());
                    tokio::spawn(async move {
                        retire(&deps).await;
                        let _ = myself.send_message(MediaMsg::Retired);
                    });
                }
                return Ok(());
            }
            MediaMsg::Retired => {
                state.retiring = false;
                return Ok(());
            }
        }
        look(state, &myself).await;
        Ok(())
    }
}

/// Starts fetches for due attachments while there is room.
async fn look(state: &mut MediaState, myself: &ActorRef<MediaMsg>) {
    let room = state
        .deps
        .settings
        .concurrency
        .saturating_sub(state.running.len());
    if room == 0 {
        return;
    }
    let held: Vec<Uuid> = state.running.iter().copied().collect();
    let due = match attachments::due(&state.deps.db, clock::now(), room as u64 * 4, &held).await {
        Ok(due) => due,
        Err(error) => {
            tracing::warn!(%error, "could not read the media to fetch");
            return;
        }
    };
    let due = state.deps.placement.keep_owned(due, |row| row.channel_id);
    for row in due.into_iter().take(room) {
        state.running.insert(row.id);
        let (deps, myself) = (state.deps.clone(), myself.clone());
        tokio::spawn(async move {
            let id = row.id;
            settle(&deps, &row, fetch(&deps, &row).await).await;
            let _ = myself.send_message(MediaMsg::Done(id));
        });
    }
}

/// Records what became of a fetch on its row.
#[tracing::instrument(name = "media_fetch", level = "debug", skip_all, fields(attachment_id = %row.id))]
async fn settle(deps: &MediaDeps, row: &attachment::Model, fetched: Fetched) {
    let now = clock::now();
    let attempts = row.attempts.saturating_add(1);
    let recorded = match fetched {
        Fetched::Stored(file) => {
            let size = u64::try_from(file.size).unwrap_or(0);
            crate::measure::media_fetch("stored", size);
            mark_stored(deps, row, file, now).await
        }
        Fetched::Retry(why) => {
            crate::measure::media_fetch("retried", 0);
            tracing::info!(attachment_id = %row.id, attempts, %why, "media fetch will be tried again");
            let wait = backoff(&deps.settings, attempts);
            let at = now + chrono::Duration::from_std(wait).unwrap_or(chrono::Duration::MAX);
            attachments::retry_later(&deps.db, row.id, attempts, at, why).await
        }
        Fetched::Failed(why) => {
            crate::measure::media_fetch("failed", 0);
            tracing::warn!(attachment_id = %row.id, %why, "media not kept");
            attachments::failed(&deps.db, row.id, attempts, why, now).await
        }
    };
    if let Err(error) = recorded {
        // The row stays as it was: the next sweep fetches it again.
        tracing::warn!(attachment_id = %row.id, %error, "could not record a media fetch");
    }
}

/// Marks the attachment `id` stored. On SQLite through the group-commit writer, which holds
/// the one write lock (a write of its own would wait for it); on PostgreSQL by itself, which
/// writers share, so that a batch of merged message inserts stays one statement instead of
/// becoming a transaction (`media_fetch`'s figures in benches/README.md).
async fn mark_stored(
    deps: &MediaDeps,
    row: &attachment::Model,
    file: attachments::StoredFile,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<(), parley_persistence::PersistenceError> {
    if deps.db.get_database_backend() != parley_persistence::DbBackend::Sqlite {
        // The mark and the bytes it counts: one transaction.
        let txn = parley_persistence::begin_write(&deps.db).await?;
        attachments::stored(&txn, row, file, now).await?;
        return Ok(txn.commit().await?);
    }
    let row = row.clone();
    deps.writer
        .write(move |db| {
            let (row, file) = (row.clone(), file.clone());
            Box::pin(async move { attachments::stored(db, &row, file, now).await })
        })
        .await
        .map(|_| ())
}

/// Deletes the files past their retention: a workspace's with a retention of its own after
/// its days (0: kept), every other's after the installation's `media.retention_days`.
async fn retire(deps: &MediaDeps) {
    let own = match workspaces::media_retentions(&deps.db).await {
        Ok(own) => own,
        Err(error) => {
            tracing::warn!(%error, "could not read the workspaces' media retention");
            return;
        }
    };
    for (workspace, days) in &own {
        if *days > 0 {
            let keep = chrono::Duration::days(i64::from(*days));
            retire_scope(deps, &RetentionScope::Workspace(*workspace), keep).await;
        }
    }
    if let Some(keep) = deps.settings.retention {
        let others = RetentionScope::Others(own.iter().map(|(id, _)| *id).collect());
        retire_scope(deps, &others, keep).await;
    }
}

/// Deletes the files of `scope`'s messages older than `keep`, a batch at a time: their rows
/// are marked first, then the files no row names any more are deleted. On a cluster every node
/// may run it; a file two nodes delete is deleted once.
async fn retire_scope(deps: &MediaDeps, scope: &RetentionScope, keep: chrono::Duration) {
    const BATCH: u64 = 500;
    loop {
        let now = clock::now();
        let due = match attachments::past_retention(&deps.db, scope, now - keep, BATCH).await {
            Ok(due) => due,
            Err(error) => {
                tracing::warn!(%error, "could not read the files past their retention");
                return;
            }
        };
        if due.is_empty() {
            return;
        }
        let (ids, mut keys): (Vec<Uuid>, Vec<String>) = due.into_iter().unzip();
        if let Err(error) = attachments::retire(&deps.db, &ids, now).await {
            tracing::warn!(%error, "could not retire the files past their retention");
            return;
        }
        keys.sort_unstable();
        keys.dedup();
        super::delete_files(&deps.db, &deps.store, &keys).await;
        tracing::info!(files = ids.len(), "media past its retention deleted");
        if (ids.len() as u64) < BATCH {
            return;
        }
    }
}

/// The wait before attempt `attempts + 1`: doubling from the base, capped.
fn backoff(settings: &super::MediaSettings, attempts: i32) -> std::time::Duration {
    let doublings = u32::try_from(attempts.saturating_sub(1).clamp(0, 20)).unwrap_or(20);
    settings
        .retry_base
        .saturating_mul(2u32.saturating_pow(doublings))
        .min(settings.retry_max)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn the_wait_doubles_and_is_capped() {
        let settings = super::super::MediaSettings {
            retry_base: Duration::from_secs(2),
            retry_max: Duration::from_secs(60),
            ..Default::default()
        };
        let waits: Vec<u64> = (1..=7).map(|a| backoff(&settings, a).as_secs()).collect();
        assert_eq!(waits, [2, 4, 8, 16, 32, 60, 60]);
    }
}
