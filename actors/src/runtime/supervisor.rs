//! A plain child supervisor of the root for a kind of work whose actors are still to come
//! (scheduled tasks): owns the live actors of one kind and logs their lifecycle.

use std::collections::HashMap;

use ractor::{Actor, ActorId, ActorProcessingErr, ActorRef, SupervisionEvent};

use super::ActorPath;

/// Behaviour of a child supervisor (`root/channels`, `root/conversations`, …).
pub(crate) struct Supervisor;

/// What a supervisor reports about itself.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SupervisorSnapshot {
    /// Actor path, e.g. `root/flows`.
    pub path: String,
    /// How many actors it supervises now.
    pub live_children: usize,
}

/// State of a child supervisor.
pub(crate) struct SupervisorState {
    /// Its own path; children are logged as `path/child-name`.
    path: ActorPath,
    /// Paths of the live children, by actor id: ractor's names are global to the process and
    /// would collide between runtimes in one process (tests), so paths are kept here instead.
    children: HashMap<ActorId, ActorPath>,
}

/// Messages a child supervisor handles; its children report through supervision events.
pub(crate) enum SupervisorMsg {
    /// Fail on purpose, so that tests can watch the root restart a supervisor.
    #[cfg(test)]
    Crash,
}

impl Actor for Supervisor {
    type Msg = SupervisorMsg;
    type State = SupervisorState;
    type Arguments = ActorPath;

    async fn pre_start(
        &self,
        _myself: ActorRef<Self::Msg>,
        path: ActorPath,
    ) -> Result<Self::State, ActorProcessingErr> {
        Ok(SupervisorState {
            path,
            children: HashMap::new(),
        })
    }

    async fn post_stop(
        &self,
        myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        myself
            .stop_children_and_wait(Some("parent stopping".to_owned()), None)
            .await;
        tracing::info!(actor = %state.path, children = state.children.len(), "actor stopped");
        Ok(())
    }

    #[allow(clippy::match_single_binding)]
    async fn handle(
        &self,
        _myself: ActorRef<Self::Msg>,
        message: Self::Msg,
        _state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            #[cfg(test)]
            SupervisorMsg::Crash => Err("crash requested".into()),
        }
    }

    async fn handle_supervisor_evt(
        &self,
        _myself: ActorRef<Self::Msg>,
        event: SupervisionEvent,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match event {
            SupervisionEvent::ActorStarted(cell) => {
                let name = cell.get_name().unwrap_or_else(|| cell.get_id().to_string());
                let path = state.path.child(&name);
                tracing::info!(actor = %path, "actor spawned");
                state.children.insert(cell.get_id(), path);
            }
            SupervisionEvent::ActorTerminated(cell, _, reason) => {
                if let Some(path) = state.children.remove(&cell.get_id()) {
                    tracing::info!(actor = %path, reason = reason.as_deref().unwrap_or("normal"), "actor stopped");
                }
            }
            SupervisionEvent::ActorFailed(cell, error) => {
                if let Some(path) = state.children.remove(&cell.get_id()) {
                    tracing::error!(actor = %path, error = %error, "actor failed");
                }
            }
            SupervisionEvent::ProcessGroupChanged(_) => {}
        }
        Ok(())
    }
}
