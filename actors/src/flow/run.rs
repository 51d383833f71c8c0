//! The work of one flow, in a task its FlowActor owns: recipients in order, at most
//! `maxConcurrentMessages` in flight, paced, each claimed (`sending`) in the database before its
//! send; retries after `retryDelayMs`; then the wait for delivery reports and the end state.
//! Everything it knows is in the database, so a new runner continues where an old one stopped.

use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use parley_persistence::entities::flow_recipient;
use parley_persistence::flows::{self, Statistics};
use parley_persistence::{FlowStatus, PersistenceError, campaigns, channels, clock};
use tokio::sync::{Notify, watch};
use uuid::Uuid;

use parley_persistence::usage::Category;

use super::in_flight::{InFlight, drain, joined, make_room};
use super::person::people_of;
use super::send::{Prepared, Sender, Sent, send_one};
use super::template::{TemplateProblem, filling_of, template_of};
use super::{FlowConfig, FlowDeps, Flows, QUOTA_REASON, params};
use crate::quotas::QuotaError;
use crate::thread;

/// Recipients read per query.
const BATCH: u64 = 50;
/// Longest sleep between two looks at a flow that waits (for retries or delivery reports).
const LOOK_AGAIN: Duration = Duration::from_secs(1);

/// What a runner needs.
pub(super) struct Runner {
    pub(super) flow_id: Uuid,
    /// Reads and sends.
    pub(super) sender: Sender,
    /// The flow's status as its actor last heard it.
    pub(super) control: watch::Receiver<FlowStatus>,
    /// Woken when a delivery report moved one of the flow's recipients.
    pub(super) reports: Arc<Notify>,
    /// The runner started the flow, or found it running: the `Queued` its control holds until
    /// the actor hears otherwise is from before. (Without it, every claim of a flow started
    /// by its runner tried the start again and read the flow back: two statements per claim.)
    started: bool,
}

impl Runner {
    /// A runner for the flow, reading and sending through `deps`.
    pub(super) fn new(
        flow_id: Uuid,
        deps: FlowDeps,
        flows: Flows,
        control: watch::Receiver<FlowStatus>,
        reports: Arc<Notify>,
    ) -> Self {
        let sender = Sender {
            db: deps.db,
            outbox: deps.outbox,
            flows,
        };
        Self {
            flow_id,
            sender,
            control,
            reports,
            started: false,
        }
    }

    /// Runs the flow until it ends or is cancelled; errors are the database's.
    pub(super) async fn run(mut self) -> Result<(), PersistenceError> {
        let Some(prepared) = self.prepare().await? else {
            return Ok(());
        };
        let prepared = Arc::new(prepared);
        let mut in_flight = InFlight::new();
        loop {
            if !self.until_running().await? {
                return drain(in_flight).await;
            }
            let due =
                flows::due_recipients(&self.sender.db, self.flow_id, clock::now(), BATCH).await?;
            if due.is_empty() {
                if let Some(done) = in_flight.join_next().await {
                    if let Sent::Fatal(fatal) = joined(done)? {
                        drain(in_flight).await?;
                        return self.end(FlowStatus::Error, Some(fatal.0)).await;
                    }
                    continue;
                }
                if let Some(at) = flows::next_retry_at(&self.sender.db, self.flow_id).await? {
                    let wait = (at - Utc::now()).to_std().unwrap_or_default();
                    self.sleep(wait.min(LOOK_AGAIN)).await;
                    continue;
                }
                return self.await_reports(&prepared).await;
            }
            let mut due = due.into_iter();
            loop {
                if let Some(fatal) =
                    make_room(&mut in_flight, prepared.config.max_concurrent).await?
                {
                    drain(in_flight).await?;
                    return self.end(FlowStatus::Error, Some(fatal.0)).await;
                }
                let room = prepared.config.max_concurrent - in_flight.len();
                // Paced, one at a time; unpaced, every free slot with one claim.
                let take = if prepared.config.paced() { 1 } else { room };
                let batch: Vec<_> = due.by_ref().take(take).collect();
                if batch.is_empty() {
                    break;
                }
                if !self.until_running().await? {
                    return drain(in_flight).await;
                }
                if self.over_quota(&prepared).await? {
                    break;
                }
                let claimed = self.claim(batch).await?;
                let ids: Vec<Uuid> = claimed.iter().map(|r| r.identity_id).collect();
                let (db, ws) = (&self.sender.db, prepared.flow.workspace_id);
                let reaches = people_of(db, ws, &prepared.filling, &ids).await?;
                // Their conversations on the channel, read together too.
                let (channel_id, idle_after) =
                    (prepared.channel.id, self.sender.outbox.idle_after());
                let mut open =
                    thread::find_each(db, channel_id, &ids, idle_after, clock::now()).await?;
                for (recipient, reach) in claimed.into_iter().zip(reaches) {
                    let (sender, shared) = (self.sender.clone(), prepared.clone());
                    let found = open.take(recipient.identity_id);
                    in_flight.spawn(async move {
                        send_one(&sender, &shared, recipient, (reach, found)).await
                    });
                }
                self.sleep(prepared.config.pause()).await;
            }
        }
    }

    /// Claims `batch` (recipients due, in order) with one write; answers those taken, in
    /// order (one claimed meanwhile elsewhere, or by a stale lease, is left out).
    async fn claim(
        &self,
        batch: Vec<flow_recipient::Model>,
    ) -> Result<Vec<flow_recipient::Model>, PersistenceError> {
        let now = clock::now();
        let fence = self.sender.flows.placement().fence(self.flow_id);
        let ids: Vec<Uuid> = batch.iter().map(|recipient| recipient.id).collect();
        let claimed = flows::Claimed { ids, fence, now };
        let taken = self.sender.flows.writer().write_merged(claimed).await?;
        Ok(batch
            .into_iter()
            .filter(|recipient| taken.contains(&recipient.id))
            .collect())
    }

    /// Reads the flow, its campaign and its template; `None` when the flow ended instead
    /// (gone, cancelled, or its template cannot be had).
    async fn prepare(&mut self) -> Result<Option<Prepared>, PersistenceError> {
        let db = self.sender.db.clone();
        let db = &db;
        loop {
            let Some(flow) = flows::find_in_any_workspace(db, self.flow_id).await? else {
                return Ok(None);
            };
            let config = FlowConfig::from_stored(&flow.configuration);
            let campaign = campaigns::find_in_any_workspace(db, flow.campaign_id).await?;
            let channel = channels::find_in_any_workspace(db, flow.channel_id).await?;
            let (Some(campaign), Some(channel)) = (campaign, channel) else {
                self.end(
                    FlowStatus::Error,
                    Some("the campaign or the channel was deleted".into()),
                )
                .await?;
                return Ok(None);
            };
            if !self.until_running().await? {
                return Ok(None);
            }
            match template_of(self.sender.outbox.channels(), &campaign, &channel).await {
                Ok((template, definition)) => {
                    let needed = params::needed(&definition);
                    let filling = filling_of(&campaign);
                    return Ok(Some(Prepared {
                        flow,
                        config,
                        channel,
                        template,
                        definition,
                        needed,
                        filling,
                    }));
                }
                Err(TemplateProblem::Fatal(reason)) => {
                    self.end(FlowStatus::Error, Some(reason)).await?;
                    return Ok(None);
                }
                Err(TemplateProblem::Transient(error)) => {
                    tracing::warn!(flow_id = %self.flow_id, %error, "the campaign's template could not be read; trying again");
                    self.sleep(Duration::from_millis(config.retry_delay_ms).max(LOOK_AGAIN))
                        .await;
                }
            }
        }
    }

    /// Waits while the flow is paused and starts a queued one; `false` when it stopped being
    /// live (cancelled, or ended elsewhere).
    async fn until_running(&mut self) -> Result<bool, PersistenceError> {
        loop {
            let status = *self.control.borrow_and_update();
            match status {
                FlowStatus::Running => return Ok(true),
                FlowStatus::Queued if self.started => return Ok(true),
                FlowStatus::Queued => {
                    let db = &self.sender.db;
                    let now = clock::now();
                    if flows::transition(
                        db,
                        self.flow_id,
                        &[FlowStatus::Queued],
                        FlowStatus::Running,
                        now,
                    )
                    .await?
                    {
                        tracing::info!(flow_id = %self.flow_id, "flow started");
                        self.started = true;
                        return Ok(true);
                    }
                    // Paused or cancelled meanwhile: the actor hears of it; look again.
                    let current = flows::find_in_any_workspace(db, self.flow_id)
                        .await?
                        .map(|f| f.status);
                    match current {
                        Some(FlowStatus::Running) => {
                            self.started = true;
                            return Ok(true);
                        }
                        Some(FlowStatus::Paused) => {
                            if self.control.changed().await.is_err() {
                                return Ok(false);
                            }
                        }
                        _ => return Ok(false),
                    }
                }
                FlowStatus::Paused => {
                    if self.control.changed().await.is_err() {
                        return Ok(false);
                    }
                }
                _ => return Ok(false),
            }
        }
    }

    /// Whether the workspace's daily message quota stops the next send: the flow is paused
    /// with the quota as its reason (and resumed when the operator raises it), and the runner
    /// waits until it is told of the pause.
    async fn over_quota(&mut self, prepared: &Prepared) -> Result<bool, PersistenceError> {
        let category = prepared.definition["category"]
            .as_str()
            .and_then(Category::of_template)
            .unwrap_or(Category::Marketing);
        let quotas = self.sender.outbox.quotas();
        let exceeded = match quotas.messages(prepared.flow.workspace_id, category).await {
            Ok(()) => return Ok(false),
            Err(QuotaError::Storage(error)) => return Err(error),
            Err(QuotaError::Exceeded(exceeded)) => exceeded,
        };
        let reason = format!("{QUOTA_REASON}: {exceeded}");
        let db = &self.sender.db;
        if flows::pause_with(db, self.flow_id, reason, clock::now()).await? {
            tracing::info!(flow_id = %self.flow_id, quota = %exceeded.quota, "flow paused: its workspace reached a quota");
            self.sender.flows.changed(self.flow_id);
            // The actor's word that it is paused, before the runner looks again.
            let _ = tokio::time::timeout(LOOK_AGAIN, self.control.changed()).await;
        }
        Ok(true)
    }

    /// Sleeps `wait`, waking early when the flow's status changes.
    async fn sleep(&mut self, wait: Duration) {
        if wait.is_zero() {
            return;
        }
        tokio::select! {
            () = tokio::time::sleep(wait) => {}
            _ = self.control.changed() => {}
        }
    }

    /// Every recipient has been tried: waits up to `timeoutMs` for the delivery reports of
    /// templates Meta accepted, then ends the flow as its recipients say.
    async fn await_reports(&mut self, prepared: &Prepared) -> Result<(), PersistenceError> {
        let db = &self.sender.db;
        let since = flows::mark_sends_done(db, self.flow_id, clock::now()).await?;
        let deadline = since
            + chrono::Duration::milliseconds(
                i64::try_from(prepared.config.timeout_ms).unwrap_or(i64::MAX),
            );
        loop {
            let stats = flows::statistics(db, self.flow_id).await?;
            let now = Utc::now();
            if stats.awaiting == 0 || now >= deadline {
                let (status, reason) = outcome(&stats);
                return self.end(status, reason).await;
            }
            let wait = (deadline - now)
                .to_std()
                .unwrap_or_default()
                .min(LOOK_AGAIN);
            tokio::select! {
                () = self.reports.notified() => {}
                () = tokio::time::sleep(wait) => {}
                changed = self.control.changed() => {
                    let live = changed.is_ok() && self.control.borrow().is_live();
                    if !live {
                        return Ok(());
                    }
                }
            }
        }
    }

    /// Ends the flow in `status` unless it was paused or cancelled meanwhile (then the user's
    /// move stands; a paused flow ends when resumed).
    async fn end(
        &mut self,
        status: FlowStatus,
        reason: Option<String>,
    ) -> Result<(), PersistenceError> {
        loop {
            let db = &self.sender.db;
            let Some(flow) = flows::find_in_any_workspace(db, self.flow_id).await? else {
                return Ok(());
            };
            let events = self.sender.outbox.events();
            let ending = super::Ending::Finish;
            if super::move_to(db, events, &flow, status, reason.clone(), ending).await? {
                tracing::info!(flow_id = %self.flow_id, status = status.as_str(), reason = reason.as_deref().unwrap_or(""), "flow ended");
                return Ok(());
            }
            let current = flows::find_in_any_workspace(&self.sender.db, self.flow_id)
                .await?
                .map(|f| f.status);
            match current {
                Some(FlowStatus::Paused | FlowStatus::Queued) => {
                    if !self.until_running().await? {
                        return Ok(());
                    }
                }
                _ => return Ok(()),
            }
        }
    }
}

/// The end state the recipients' counts call for (DESIGN §5 "Flows").
fn outcome(stats: &Statistics) -> (FlowStatus, Option<String>) {
    // `delivered` counts the read ones too.
    let confirmed = stats.delivered;
    if stats.total > 0 && confirmed == stats.total {
        (FlowStatus::Completed, None)
    } else if confirmed > 0 {
        (FlowStatus::PartialCompleted, None)
    } else if stats.awaiting > 0 {
        (
            FlowStatus::Timeout,
            Some("no delivery was confirmed within timeoutMs".to_owned()),
        )
    } else {
        (
            FlowStatus::Failed,
            Some("no recipient received the template".to_owned()),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The funnel of recipients standing at sent (awaiting a report), delivered, read,
    /// failed and skipped.
    fn stats(awaiting: u64, delivered: u64, read: u64, failed: u64, skipped: u64) -> Statistics {
        Statistics {
            total: awaiting + delivered + read + failed + skipped,
            sent: awaiting + delivered + read,
            delivered: delivered + read,
            read,
            awaiting,
            failed,
            skipped,
            ..Statistics::default()
        }
    }

    #[test]
    fn the_end_state_follows_the_recipients() {
        assert_eq!(outcome(&stats(0, 2, 1, 0, 0)).0, FlowStatus::Completed);
        assert_eq!(
            outcome(&stats(1, 2, 0, 0, 0)).0,
            FlowStatus::PartialCompleted
        );
        assert_eq!(
            outcome(&stats(0, 1, 0, 1, 1)).0,
            FlowStatus::PartialCompleted
        );
        assert_eq!(outcome(&stats(3, 0, 0, 1, 0)).0, FlowStatus::Timeout);
        assert_eq!(outcome(&stats(0, 0, 0, 2, 1)).0, FlowStatus::Failed);
    }
}
