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

use parley_persistence::flows;
use parley_persistence::{PersistenceError, RecipientStatus, clock, deliveries, identities};
use uuid::Uuid;

pub use self::config::FlowConfig;
pub use self::registry::Flows;
use crate::runtime::Handles;
use crate::whatsapp::status::StatusReport;

/// Meta's code for a person who stopped marketing messages.
const STOPPED_MARKETING: i64 = 131_050;

/// Applies one delivery report: the message, then the flow recipient it belongs to, if any.
pub(crate) async fn apply_report(
    handles: &Handles,
    channel_id: Uuid,
    report: &StatusReport,
) -> Result<bool, PersistenceError> {
    let db = &handles.db;
    let applied = deliveries::apply_status(
        db,
        channel_id,
        &report.wamid,
        report.status,
        report.error.clone(),
    )
    .await?;
    let Some(status) = RecipientStatus::of_delivery(report.status) else {
        return Ok(applied);
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
        if report.error_code() == Some(STOPPED_MARKETING) {
            identities::opt_out(db, identity_id, now).await?;
        }
        if let Ok(flows) = handles.flows() {
            flows.reported(flow_id);
        }
    }
    Ok(applied)
}
