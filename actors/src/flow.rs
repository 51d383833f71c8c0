//! Campaign flows: a campaign's template sent to many identities by one FlowActor per live
//! flow (`root/flows/flow:<uid>`), every send through the [`crate::outbound::Outbox`] and so
//! through the channel's actor (its per-number limiter and pair spacing hold across flows and
//! conversations).
//!
//! - [`params`]: the template's parameters and the campaign's source expressions.
//! - [`FlowConfig`]: pacing, concurrency, retries and the delivery timeout.
//! - `registry`: the `flows` supervisor; [`Flows`] its handle (which also hears delivery
//!   reports of flow recipients' messages); `actor`: one flow's actor.
//! - `run`: the runner a flow's actor owns, `in_flight`: the sends it has under way, and
//!   `send`: one recipient's send.

mod actor;
mod commands;
mod config;
mod handle;
mod in_flight;
pub mod params;
mod person;
mod recover;
pub(crate) mod registry;
mod run;

/// The start of the reason of a flow paused by its workspace's quota: raising the quota resumes
/// the flows paused so ([`Flows::resume_over_quota`]).
pub const QUOTA_REASON: &str = "quota_exceeded";
mod send;
mod template;

use parley_persistence::flows;
use parley_persistence::{
    DatabaseConnection, EventType, FlowStatus, PersistenceError, RecipientStatus, clock,
};
use serde_json::json;
use uuid::Uuid;

pub use self::commands::FlowMoveError;
pub use self::config::FlowConfig;
pub(crate) use self::handle::FlowRegistryMsg;
pub use self::handle::Flows;
use crate::events::Events;
use crate::outbound::Outbox;
use crate::outbound::reports::{DeliveryWatcher, Watching};
use crate::whatsapp::status::StatusReport;

/// How a flow moves to an end state: by its runner (`finish`, from running) or by a user
/// (`transition` to cancelled, from the states a cancel leaves).
#[derive(Clone, Copy, Debug)]
pub enum Ending<'a> {
    /// The runner ends a running flow.
    Finish,
    /// A user moves it from one of these states.
    From(&'a [FlowStatus]),
}

/// Moves flow `flow` to `status` (with `reason`) as `ending` says, with its `flow.finished`
/// event in the same transaction when it moved; answers whether it moved. A move to a state
/// that does not end the flow (a pause, a resume) goes the same way, without an event.
///
/// # Errors
/// The database's.
pub async fn move_to(
    db: &DatabaseConnection,
    events: &Events,
    flow: &parley_persistence::entities::flow::Model,
    status: FlowStatus,
    reason: Option<String>,
    ending: Ending<'_>,
) -> Result<bool, PersistenceError> {
    let ends = !status.is_live() && status != FlowStatus::Draft;
    let event = ends
        .then(|| {
            events.event(flow.workspace_id, EventType::FlowFinished, || {
                json!({
                    "flow_id": flow.id,
                    "campaign_id": flow.campaign_id,
                    "status": status,
                    "reason": reason,
                })
            })
        })
        .flatten();
    let now = clock::now();
    let txn = parley_persistence::begin_write(db).await?;
    let moved = match ending {
        Ending::Finish => flows::finish(&txn, flow.id, status, reason, now).await?,
        Ending::From(from) => flows::transition(&txn, flow.id, from, status, now).await?,
    };
    if moved && let Some(event) = &event {
        event.write(&txn, now).await?;
    }
    txn.commit().await?;
    if moved && event.is_some() {
        events.wake();
    }
    Ok(moved)
}

/// What flow actors need.
#[derive(Clone, Debug)]
pub struct FlowDeps {
    /// Connection pool.
    pub db: DatabaseConnection,
    /// Sends each recipient's template (and lists the campaign's templates through its
    /// channels).
    pub outbox: Outbox,
    /// When this process started: a recipient claimed before it and left `sending` was caught
    /// by a stop, and its message says what became of it.
    pub started_at: chrono::DateTime<chrono::Utc>,
    /// Which flows this node owns; each recipient's claim carries its fence.
    pub placement: crate::cluster::Placement,
}

/// Moves the flow recipient whose message `report` names to the report's status, when that is
/// forward, and tells its flow. A recipient not recorded with the message's id yet is left to
/// its sender, which reads the message again once it has recorded the recipient.
///
/// # Errors
/// Fails on a database error.
pub(crate) async fn reach_recipient(
    flows: &Flows,
    report: &StatusReport,
) -> Result<(), PersistenceError> {
    let Some(status) = RecipientStatus::of_delivery(report.status) else {
        return Ok(());
    };
    let error = report.error.as_ref().map(|e| (e.code, e.message.clone()));
    let reached = flows::Reached {
        platform_message_id: report.wamid.clone(),
        status,
        error,
        now: clock::now(),
    };
    let moved = flows.writer().write_merged(reached).await?;
    if let Some((flow_id, _)) = moved {
        crate::measure::flow_recipient(status.as_str());
        flows.reported(flow_id);
    }
    Ok(())
}

impl DeliveryWatcher for Flows {
    /// A report on a flow recipient's message moves the recipient and wakes its flow; any
    /// other message is not a flow's, and nothing happens.
    fn delivered<'a>(&'a self, report: &'a StatusReport) -> Watching<'a> {
        Box::pin(async move { reach_recipient(self, report).await })
    }
}

/// A flow to create (its contacts already resolved to identities of the workspace).
#[derive(Clone, Debug)]
pub struct FlowRequest {
    /// The workspace.
    pub workspace_id: i64,
    /// The campaign, of the workspace.
    pub campaign_id: Uuid,
    /// The channel, of the workspace.
    pub channel_id: Uuid,
    /// The recipients, duplicates collapsed, in order.
    pub recipients: Vec<flows::NewRecipient>,
    /// Free text.
    pub description: Option<String>,
    /// `Queued` or `Draft`.
    pub status: parley_persistence::FlowStatus,
    /// Pacing, concurrency, retries, timeout.
    pub configuration: FlowConfig,
}

/// Why a flow was not created.
#[derive(Clone, Debug, thiserror::Error)]
pub enum CreateFlowError {
    /// The campaign does not exist in the workspace.
    #[error("the campaign does not exist")]
    CampaignNotFound,
    /// The channel does not exist in the workspace.
    #[error("the channel does not exist")]
    ChannelNotFound,
    /// The flow's channel is not the campaign's.
    #[error("the flow's channel must be the campaign's channel")]
    ChannelMismatch,
    /// Only ACTIVE and DEPRECATED campaigns start flows.
    #[error("the campaign is {0}; only ACTIVE and DEPRECATED campaigns start flows")]
    CampaignNotUsable(&'static str),
    /// The channel is inactive.
    #[error("the channel is not active; give it credentials first")]
    ChannelInactive,
    /// The database failed.
    #[error("storage failed: {0}")]
    Storage(String),
}

impl From<PersistenceError> for CreateFlowError {
    fn from(error: PersistenceError) -> Self {
        Self::Storage(error.to_string())
    }
}

impl Flows {
    /// Creates a flow with its recipients in one transaction and starts a queued one at once.
    /// The one way to create a flow (the API and scheduled tasks).
    ///
    /// # Errors
    /// Why it was not created.
    pub async fn create(
        &self,
        request: FlowRequest,
    ) -> Result<parley_persistence::entities::flow::Model, CreateFlowError> {
        use parley_persistence::{campaigns, channels};
        let db = self.db();
        let campaign = campaigns::find(db, request.workspace_id, request.campaign_id)
            .await?
            .ok_or(CreateFlowError::CampaignNotFound)?;
        let channel = channels::find(db, request.workspace_id, request.channel_id)
            .await?
            .ok_or(CreateFlowError::ChannelNotFound)?;
        if campaign.channel_id != channel.id {
            return Err(CreateFlowError::ChannelMismatch);
        }
        if !campaign.status.is_usable() {
            return Err(CreateFlowError::CampaignNotUsable(campaign.status.as_str()));
        }
        if !channel.active {
            return Err(CreateFlowError::ChannelInactive);
        }
        let new = flows::NewFlow {
            workspace_id: request.workspace_id,
            campaign_id: campaign.id,
            channel_id: channel.id,
            description: request.description,
            status: request.status,
            configuration: request.configuration.to_json(),
        };
        let txn = parley_persistence::begin_write(db).await?;
        let created = flows::create(&txn, new, request.recipients, clock::now()).await?;
        txn.commit().await.map_err(PersistenceError::from)?;
        tracing::info!(flow_id = %created.id, total = created.total, status = created.status.as_str(), "flow created");
        // A supervisor restarting meanwhile reads every live flow when it starts again.
        self.changed(created.id);
        Ok(created)
    }
}
