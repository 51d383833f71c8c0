//! Campaign flows: a campaign's template sent to many identities by one FlowActor per live
//! flow (`root/flows/flow:<uid>`), every send through the [`crate::outbound::Outbox`] and so
//! through the channel's actor (its per-number limiter and pair spacing hold across flows and
//! conversations).
//!
//! - [`params`]: the template's parameters and the campaign's source expressions.
//! - [`FlowConfig`]: pacing, concurrency, retries and the delivery timeout.
//! - `registry`: the supervisor, the actor, and the [`Flows`] handle.
//! - `run`: the runner a flow's actor owns.

mod config;
pub mod params;
pub(crate) mod registry;
mod run;

use std::sync::Arc;
use std::time::Duration;

use parley_persistence::flows;
use parley_persistence::{PersistenceError, RecipientStatus, clock, deliveries, identities};
use uuid::Uuid;

pub use self::config::FlowConfig;
pub use self::registry::Flows;
use crate::runtime::Handles;
use crate::whatsapp::status::StatusReport;

/// Meta's code for a person who stopped marketing messages.
const STOPPED_MARKETING: i64 = 131_050;

/// How long after a report that named no message it is tried again: Meta can report on a
/// message before the send's answer (its id) is recorded.
const UNKNOWN_REPORT_RETRIES: [Duration; 4] = [
    Duration::from_millis(250),
    Duration::from_secs(1),
    Duration::from_secs(3),
    Duration::from_secs(10),
];

/// Applies one delivery report: the message, then the flow recipient it belongs to, if any.
/// A report naming no message of the channel is tried again a few times in the background
/// (for about 15 s), in case its send's answer is still being recorded; answers whether it
/// changed anything now.
///
/// # Errors
/// Fails on a database error.
pub(crate) async fn apply_report(
    handles: &Arc<Handles>,
    channel_id: Uuid,
    report: &StatusReport,
) -> Result<bool, PersistenceError> {
    if let Some(applied) = apply_known_report(handles, channel_id, report).await? {
        return Ok(applied);
    }
    let handles = handles.clone();
    let report = report.clone();
    tokio::spawn(async move {
        for wait in UNKNOWN_REPORT_RETRIES {
            tokio::time::sleep(wait).await;
            match apply_known_report(&handles, channel_id, &report).await {
                Ok(Some(_)) => return,
                Ok(None) => {}
                Err(error) => {
                    tracing::warn!(wamid = %report.wamid, %error, "a delivery report could not be applied");
                    return;
                }
            }
        }
        tracing::debug!(wamid = %report.wamid, "a delivery report named no message of the channel");
    });
    Ok(false)
}

/// Applies a report to the message it names and its flow recipient; `None` when no message
/// of the channel has its id.
async fn apply_known_report(
    handles: &Handles,
    channel_id: Uuid,
    report: &StatusReport,
) -> Result<Option<bool>, PersistenceError> {
    let db = &handles.db;
    let Some(applied) = deliveries::apply_status(
        db,
        channel_id,
        &report.wamid,
        report.status,
        report.error.clone(),
    )
    .await?
    else {
        return Ok(None);
    };
    reach_recipient(handles, report).await?;
    Ok(Some(applied))
}

/// Moves the flow recipient whose message `report` names to the report's status, when that is
/// forward, and tells its flow. A recipient not recorded with the message's id yet is left to
/// its sender, which reads the message again once it has recorded the recipient.
///
/// # Errors
/// Fails on a database error.
pub(crate) async fn reach_recipient(
    handles: &Handles,
    report: &StatusReport,
) -> Result<(), PersistenceError> {
    let db = &handles.db;
    let Some(status) = RecipientStatus::of_delivery(report.status) else {
        return Ok(());
    };
    let error = report.error.as_ref().map(|e| {
        let message = e["message"]
            .as_str()
            .or_else(|| e["title"].as_str())
            .unwrap_or("failed")
            .to_owned();
        (report.error_code(), message)
    });
    let now = clock::now();
    if let Some((flow_id, identity_id)) =
        flows::apply_delivery(db, &report.wamid, status, error, now).await?
    {
        crate::measure::flow_recipient(status.as_str());
        if report.error_code() == Some(STOPPED_MARKETING) {
            identities::opt_out(db, identity_id, now).await?;
        }
        if let Ok(flows) = handles.flows() {
            flows.reported(flow_id);
        }
    }
    Ok(())
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

/// Creates a flow with its recipients in one transaction and tells the flows supervisor, which
/// starts a queued flow at once. The one way to create a flow (the API and scheduled tasks).
pub(crate) async fn create(
    handles: &Handles,
    request: FlowRequest,
) -> Result<parley_persistence::entities::flow::Model, CreateFlowError> {
    use parley_persistence::{campaigns, channels};
    let db = &handles.db;
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
    match handles.flows() {
        Ok(flows) => flows.changed(created.id),
        // The flows supervisor reads every live flow when it starts again.
        Err(error) => {
            tracing::warn!(flow_id = %created.id, %error, "flow actors not told; their restart picks the flow up");
        }
    }
    Ok(created)
}
