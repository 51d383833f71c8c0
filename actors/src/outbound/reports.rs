//! Delivery reports: what Meta says became of a message Parley sent, applied where the message
//! went out. A report moves its message's status forward (sent < delivered < read; `failed`
//! keeps Meta's error), Meta's 131050 opts the person out, and whoever sent the message as
//! part of something larger (a flow's recipient) hears of it through its [`DeliveryWatcher`].
//!
//! Meta can report on a message before the send's answer (its id) is recorded. Such a report
//! waits in a bounded queue, tried again after 250 ms, 1 s, 3 s and 10 s, by one task; when
//! the queue is full the newest report naming nothing is dropped with a log line, never a task
//! spawned per report.

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use parley_persistence::{
    DatabaseConnection, GroupCommit, MessageStatus, PersistenceError, clock, deliveries,
};
use tokio::sync::mpsc;
use tokio::time::Instant;
use uuid::Uuid;

use crate::events::{Events, MessageTold};
use crate::whatsapp::error::STOPPED_MARKETING;
use crate::whatsapp::status::StatusReport;

/// How long after a report that named no message it is tried again, stage by stage.
const RETRY_AFTER: [Duration; 4] = [
    Duration::from_millis(250),
    Duration::from_secs(1),
    Duration::from_secs(3),
    Duration::from_secs(10),
];

/// Reports naming no message that wait to be tried again, at most.
pub const UNMATCHED_CAPACITY: usize = 4_096;

/// The future a watcher answers.
pub type Watching<'a> = Pin<Box<dyn Future<Output = Result<(), PersistenceError>> + Send + 'a>>;

/// Hears of every report applied to a message, to move what the message was sent for (a
/// flow's recipient). Runs inline with the report; must only write and tell, not wait.
pub trait DeliveryWatcher: Send + Sync {
    /// The message `report` names has moved.
    fn delivered<'a>(&'a self, report: &'a StatusReport) -> Watching<'a>;
}

/// The channel a report came through, in its workspace.
#[derive(Clone, Copy, Debug)]
pub struct ReportChannel {
    /// The channel's workspace, whose endpoints may take the report's event.
    pub workspace_id: i64,
    /// The channel.
    pub channel_id: Uuid,
}

/// Writes of one report that moved nothing, each followed by a read that found its message
/// behind it, before the report waits for its later tries.
const MOVE_TRIES: usize = 3;

/// Why a report's write moved nothing, from the read after it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Unmoved {
    /// No message of the channel has Meta's id yet.
    Unknown,
    /// The message is at or past the report (statuses only move forward).
    Settled,
    /// The message is behind the report: its send recorded Meta's id after the write looked.
    Recorded,
}

impl Unmoved {
    /// From the status of the message found (`None`: not found) and the report's.
    fn of(found: Option<MessageStatus>, reported: MessageStatus) -> Self {
        match found {
            None => Self::Unknown,
            Some(now) if reported.lower().contains(&now) => Self::Recorded,
            Some(_) => Self::Settled,
        }
    }
}

/// A report that named no message yet.
struct Unmatched {
    channel: ReportChannel,
    report: StatusReport,
}

/// Applies delivery reports; cheap to clone.
#[derive(Clone)]
pub struct Reports {
    db: DatabaseConnection,
    /// A report's writes (its message's status, the event) go through it as small writes: on
    /// SQLite they share the writer's commits (a campaign at Meta's 1,000 msg/s brings as many
    /// reports a second, each of which, committed alone, would contend with the writer for the
    /// one write lock); on PostgreSQL they run on the pool, in parallel.
    writer: GroupCommit,
    /// The events of what reports change (a message delivered, read or failed; an opt-out).
    events: Events,
    watcher: Arc<dyn DeliveryWatcher>,
    /// Where a moved status is announced (the console's open pages hear it).
    changes: crate::changes::Announcer,
    /// Bounded: a flood of reports naming nothing waits here, not in tasks.
    later: mpsc::Sender<Unmatched>,
}

impl std::fmt::Debug for Reports {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reports").finish_non_exhaustive()
    }
}

impl Reports {
    /// Starts the task that tries unmatched reports again; it ends when every handle is gone.
    pub fn start(
        db: DatabaseConnection,
        writer: GroupCommit,
        watcher: Arc<dyn DeliveryWatcher>,
        events: Events,
        changes: crate::changes::Announcer,
    ) -> Self {
        let (later, queue) = mpsc::channel(UNMATCHED_CAPACITY);
        let reports = Self {
            db,
            writer,
            events,
            watcher,
            changes,
            later,
        };
        let again = reports.clone();
        tokio::spawn(retry_in_stages(queue, move |unmatched| {
            let reports = again.clone();
            async move { reports.try_again(unmatched).await }
        }));
        reports
    }

    /// Applies one report of `channel`; answers whether it moved a message now. A report
    /// naming no message of the channel yet is tried again later.
    ///
    /// # Errors
    /// Fails on a database error.
    pub async fn apply(
        &self,
        channel: ReportChannel,
        report: &StatusReport,
    ) -> Result<bool, PersistenceError> {
        if let Some(applied) = self.apply_known(channel, report).await? {
            return Ok(applied);
        }
        let unmatched = Unmatched {
            channel,
            report: report.clone(),
        };
        if self.later.try_send(unmatched).is_err() {
            tracing::warn!(wamid = %report.wamid, "a delivery report naming no message was dropped: too many wait already");
        }
        Ok(false)
    }

    /// Applies a report to the message it names, the person's opt-out, and the watcher;
    /// `None` when no message of the channel has its id.
    async fn apply_known(
        &self,
        channel: ReportChannel,
        report: &StatusReport,
    ) -> Result<Option<bool>, PersistenceError> {
        let error = report
            .error
            .as_ref()
            .map(crate::whatsapp::MetaError::to_json);
        let Some(applied) = self.apply_status(channel, report, error).await? else {
            return Ok(None);
        };
        if applied && report.error_code() == Some(STOPPED_MARKETING) {
            self.opt_out(channel, &report.wamid).await?;
        }
        self.watcher.delivered(report).await?;
        Ok(Some(applied))
    }

    /// Applies an unmatched report once more; answers it back while it still names nothing.
    async fn try_again(&self, unmatched: Unmatched) -> Option<Unmatched> {
        let report = &unmatched.report;
        match self.apply_known(unmatched.channel, report).await {
            Ok(Some(_)) => None,
            Ok(None) => {
                tracing::debug!(wamid = %report.wamid, "a delivery report still names no message of the channel");
                Some(unmatched)
            }
            Err(error) => {
                tracing::warn!(wamid = %report.wamid, %error, "a delivery report could not be applied");
                None
            }
        }
    }

    /// Moves the message the report names, with its event when it moved and an endpoint
    /// takes it; `None` when no message of the channel has the report's id.
    async fn apply_status(
        &self,
        channel: ReportChannel,
        report: &StatusReport,
        error: Option<serde_json::Value>,
    ) -> Result<Option<bool>, PersistenceError> {
        let (db, workspace_id, channel_id) = (&self.db, channel.workspace_id, channel.channel_id);
        let kind = crate::events::message_event(report.status);
        let wanted = kind.is_some_and(|kind| self.events.wanted(workspace_id, kind));
        if !wanted {
            return self.move_unwatched(channel, report, error).await;
        }
        let (status, wamid) = (report.status, report.wamid.clone());
        let Some(found) = deliveries::find_by_platform_id(db, channel_id, &wamid).await? else {
            return Ok(None);
        };
        // Statuses only move forward: a report of where the message already is, or behind it,
        // has nothing to write.
        if status.rank() <= found.status.rank() {
            return Ok(Some(false));
        }
        let identity_id = deliveries::recipient_of(db, channel_id, &report.wamid).await?;
        let told = MessageTold {
            workspace_id,
            message_id: found.id,
            channel_id,
            identity_id,
            platform_message_id: Some(&report.wamid),
            error: error.as_ref(),
            operator: None,
        };
        let event = self.events.message(status, told);
        let now = clock::now();
        let applied = self
            .writer
            .write_small_atomic(move |db| {
                let (wamid, error, event) = (wamid.clone(), error.clone(), event.clone());
                Box::pin(async move {
                    let applied =
                        deliveries::apply_status(db, channel_id, &wamid, status, error).await?;
                    if applied == Some(true)
                        && let Some(event) = &event
                    {
                        event.write(db, now).await?;
                    }
                    Ok(applied)
                })
            })
            .await?;
        if applied == Some(true) {
            self.events.wake();
            self.moved(workspace_id);
        }
        Ok(applied)
    }

    /// Moves the message the report names when no endpoint takes its event: the write first,
    /// by Meta's id, since most reports move their message and then need no read. When it moved
    /// nothing, a read after it tells why ([`Unmoved`]); a message recorded with Meta's id just
    /// after the write looked (the send's answer and its report crossed) is written again.
    async fn move_unwatched(
        &self,
        channel: ReportChannel,
        report: &StatusReport,
        error: Option<serde_json::Value>,
    ) -> Result<Option<bool>, PersistenceError> {
        let ReportChannel {
            workspace_id,
            channel_id,
        } = channel;
        for _ in 0..MOVE_TRIES {
            let reported = deliveries::Reported {
                channel_id,
                platform_message_id: report.wamid.clone(),
                status: report.status,
                error: error.clone(),
            };
            if self.writer.write_merged(reported).await? {
                self.moved(workspace_id);
                return Ok(Some(true));
            }
            let found =
                deliveries::find_by_platform_id(&self.db, channel_id, &report.wamid).await?;
            match Unmoved::of(found.map(|message| message.status), report.status) {
                Unmoved::Unknown => return Ok(None),
                Unmoved::Settled => return Ok(Some(false)),
                Unmoved::Recorded => {}
            }
        }
        // Recorded after each write looked: the later tries move it.
        Ok(None)
    }

    /// Tells the workspace's open console pages that a status moved.
    fn moved(&self, workspace_id: i64) {
        self.changes
            .announce(&crate::changes::Change::Inbox { workspace_id });
    }

    /// The person who stopped marketing messages (131050) is opted out.
    async fn opt_out(&self, channel: ReportChannel, wamid: &str) -> Result<(), PersistenceError> {
        let db = &self.db;
        let (ws, events) = (channel.workspace_id, &self.events);
        if let Some(identity_id) = deliveries::recipient_of(db, channel.channel_id, wamid).await? {
            crate::people::opt_out(db, events, ws, identity_id, "stopped_marketing").await?;
        }
        Ok(())
    }
}

/// Tries each item `queue` hands over again after 250 ms, 1 s, 3 s and 10 s, until `attempt`
/// is done with it (answers `None`) or its last stage passed. One queue per stage: a stage's
/// wait is the same for all, so each queue is in due order, and one task serves them all.
async fn retry_in_stages<T, F, Fut>(mut queue: mpsc::Receiver<T>, attempt: F)
where
    F: Fn(T) -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let mut stages: [VecDeque<(Instant, T)>; RETRY_AFTER.len()] = Default::default();
    loop {
        let next_due = stages
            .iter()
            .filter_map(|stage| stage.front().map(|(due, _)| *due))
            .min();
        let arrived = match next_due {
            Some(due) => tokio::select! {
                arrived = queue.recv() => arrived.map(Some),
                () = tokio::time::sleep_until(due) => Some(None),
            },
            None => queue.recv().await.map(Some),
        };
        match arrived {
            None => return,
            Some(Some(item)) => stages[0].push_back((Instant::now() + RETRY_AFTER[0], item)),
            Some(None) => {
                let now = Instant::now();
                for stage in 0..stages.len() {
                    while stages[stage].front().is_some_and(|(due, _)| *due <= now) {
                        let Some((_, item)) = stages[stage].pop_front() else {
                            break;
                        };
                        if let Some(item) = attempt(item).await
                            && let Some(wait) = RETRY_AFTER.get(stage + 1)
                        {
                            stages[stage + 1].push_back((now + *wait, item));
                        }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;

    #[derive(Default)]
    struct Heard(Mutex<Vec<String>>);

    impl DeliveryWatcher for Heard {
        fn delivered<'a>(&'a self, report: &'a StatusReport) -> Watching<'a> {
            Box::pin(async move {
                if let Ok(mut heard) = self.0.lock() {
                    heard.push(report.wamid.clone());
                }
                Ok(())
            })
        }
    }

    #[tokio::test(start_paused = true)]
    async fn an_unmatched_item_is_tried_at_each_stage_then_dropped() {
        let (later, queue) = mpsc::channel(4);
        let tried = Arc::new(Mutex::new(Vec::new()));
        let start = Instant::now();
        let log = tried.clone();
        let retries = tokio::spawn(retry_in_stages(queue, move |item: u32| {
            let log = log.clone();
            async move {
                log.lock().expect("log").push(start.elapsed());
                Some(item)
            }
        }));
        later.send(7).await.expect("queued");

        tokio::time::sleep(Duration::from_secs(60)).await;

        let expected: Vec<Duration> = [250, 1_250, 4_250, 14_250]
            .into_iter()
            .map(Duration::from_millis)
            .collect();
        assert_eq!(*tried.lock().expect("log"), expected);
        drop(later);
        retries
            .await
            .expect("the retries end when the queue closes");
    }

    #[tokio::test(start_paused = true)]
    async fn an_item_done_at_its_first_retry_is_not_tried_again() {
        let (later, queue) = mpsc::channel(4);
        let tried = Arc::new(Mutex::new(0));
        let count = tried.clone();
        tokio::spawn(retry_in_stages(queue, move |_: u32| {
            let count = count.clone();
            async move {
                *count.lock().expect("count") += 1;
                None
            }
        }));
        later.send(1).await.expect("queued");
        tokio::time::sleep(Duration::from_secs(60)).await;
        assert_eq!(*tried.lock().expect("count"), 1);
    }

    #[test]
    fn a_write_that_moved_nothing_is_told_apart_by_the_read_after_it() {
        use MessageStatus::{Delivered, Failed, Pending, Read, Received, Sent};
        assert_eq!(Unmoved::of(None, Delivered), Unmoved::Unknown);
        for (now, reported) in [(Delivered, Delivered), (Read, Delivered), (Failed, Read)] {
            assert_eq!(
                Unmoved::of(Some(now), reported),
                Unmoved::Settled,
                "{now:?}"
            );
        }
        // A report never moves a received message, whatever its rank.
        assert_eq!(Unmoved::of(Some(Received), Delivered), Unmoved::Settled);
        // Behind the report: the send recorded Meta's id after the write looked.
        for (now, reported) in [(Sent, Delivered), (Pending, Sent), (Delivered, Failed)] {
            assert_eq!(
                Unmoved::of(Some(now), reported),
                Unmoved::Recorded,
                "{now:?}"
            );
        }
    }

    #[tokio::test]
    async fn a_report_that_overtakes_its_send_is_applied_once_the_send_is_recorded() {
        let (deps, _dir, _model) = crate::test_support::deps().await;
        let (ws, channel_id, identity_id, _) = crate::test_support::world(&deps.db).await;
        let heard = Arc::new(Heard::default());
        let reports = Reports::start(
            deps.db.clone(),
            deps.writer.clone(),
            heard.clone(),
            Events::default(),
            crate::changes::Announcer::default(),
        );
        let report = StatusReport {
            wamid: "wamid.late".to_owned(),
            status: MessageStatus::Delivered,
            error: None,
        };

        let channel = ReportChannel {
            workspace_id: ws,
            channel_id,
        };
        assert!(!reports.apply(channel, &report).await.expect("applied"));
        crate::test_support::sent_message(&deps.db, ws, channel_id, identity_id, "wamid.late")
            .await;

        let deadline = Instant::now() + Duration::from_secs(5);
        while heard.0.lock().expect("heard").is_empty() {
            assert!(
                Instant::now() < deadline,
                "the report was not applied again"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(*heard.0.lock().expect("heard"), vec!["wamid.late"]);
    }
}
