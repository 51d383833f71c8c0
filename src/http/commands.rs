//! What both front doors (the JSON API and the operator console) do to the live system: the
//! checks and moves behind a handler, taking values the caller already resolved in its
//! workspace, answering the changed rows. Each front door shows the answer its own way.

use std::time::Duration;

use parley_actors::outbound::Sent;
use parley_actors::thread::Thread;
use parley_persistence::entities::{channel, flow, scheduled_task};
use parley_persistence::{FlowStatus, TaskStatus, clock, flows, scheduled_tasks};

use crate::http::AppState;
use crate::http::error::{ApiError, Result};

/// Sends an operator's `text` to the person of `thread` on `channel`, the one way every message
/// goes. Past `send_timeout_secs` the caller hears 504 and the send still finishes and is
/// recorded.
pub(crate) async fn send_operator_reply(
    state: &AppState,
    channel: &channel::Model,
    thread: Thread,
    text: String,
) -> Result<Sent> {
    if !channel.active {
        return Err(ApiError::Conflict("The channel is not active".to_owned()));
    }
    let limit = Duration::from_secs(state.settings.server.send_timeout_secs);
    let outbox = state.actors.outbox();
    tokio::time::timeout(limit, outbox.send_operator_text(thread, text))
        .await
        .map_err(|_| ApiError::send_timed_out())?
        .map_err(ApiError::from)
}

/// Moves `found` to `to` as DESIGN's table of flow moves allows, tells its actor, and answers
/// the flow as it is now; 409 `invalid_transition` for a move the table does not have (a move
/// to the state the flow is in included).
pub(crate) async fn set_flow_status(
    state: &AppState,
    found: &flow::Model,
    to: FlowStatus,
) -> Result<flow::Model> {
    let from = found.status;
    if !move_flow(state, found, to).await? {
        let now = flows::find_in_any_workspace(&state.db, found.id)
            .await?
            .map_or(from, |f| f.status);
        return Err(ApiError::ConflictCode {
            code: "invalid_transition",
            message: format!(
                "A flow cannot move from {} to {}",
                now.as_str(),
                to.as_str()
            ),
        });
    }
    tracing::info!(flow_id = %found.id, from = from.as_str(), to = to.as_str(), "flow status set");
    state.actors.flows().changed(found.id);
    flows::find_in_any_workspace(&state.db, found.id)
        .await?
        .ok_or(ApiError::NotFound("Flow"))
}

/// Moves `flow` to `to` if its status allows it: a flow its actor moved meanwhile (a queued
/// one that started) is read again and moved from where it is now, if that allows it too.
async fn move_flow(state: &AppState, flow: &flow::Model, to: FlowStatus) -> Result<bool> {
    let events = state.actors.events();
    let mut from = flow.status;
    for _ in 0..3 {
        if !from.may_move_to(to) {
            return Ok(false);
        }
        let ending = parley_actors::flow::Ending::From(&[from]);
        if parley_actors::flow::move_to(&state.db, events, flow, to, None, ending).await? {
            return Ok(true);
        }
        match flows::find_in_any_workspace(&state.db, flow.id).await? {
            Some(now) if now.status != from => from = now.status,
            _ => return Ok(false),
        }
    }
    Ok(false)
}

/// A scheduled task's pause or resume: the status it needs and the one it sets.
#[derive(Clone, Copy, Debug)]
pub(crate) enum TaskMove {
    /// `scheduled` → `paused`.
    Pause,
    /// `paused` → `scheduled`.
    Resume,
}

impl TaskMove {
    fn statuses(self) -> (TaskStatus, TaskStatus) {
        match self {
            Self::Pause => (TaskStatus::Scheduled, TaskStatus::Paused),
            Self::Resume => (TaskStatus::Paused, TaskStatus::Scheduled),
        }
    }

    fn refusal(self) -> (&'static str, &'static str) {
        match self {
            Self::Pause => ("task_not_scheduled", "Only a scheduled task can be paused"),
            Self::Resume => ("task_not_paused", "Only a paused task can be resumed"),
        }
    }
}

/// Pauses or resumes `found` and tells the scheduler; a task in another status is a 409
/// naming the status it is in. Answers the task as it is now.
pub(crate) async fn move_task(
    state: &AppState,
    found: &scheduled_task::Model,
    how: TaskMove,
) -> Result<scheduled_task::Model> {
    let (from, to) = how.statuses();
    if !scheduled_tasks::set_status(&state.db, found.id, &[from], to, clock::now()).await? {
        let (code, sentence) = how.refusal();
        return Err(ApiError::ConflictCode {
            code,
            message: format!("{sentence}; this one is {}", found.status.as_str()),
        });
    }
    state.actors.scheduler().changed(found.id);
    scheduled_tasks::find(&state.db, found.workspace_id, found.id)
        .await?
        .ok_or(ApiError::NotFound("Scheduled task"))
}
