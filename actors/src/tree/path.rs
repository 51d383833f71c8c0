//! Actor paths: where an actor sits in the tree, as operators read it in the logs
//! (`root/conversations/identity:<uuid>`). Every log line about an actor's life carries one,
//! and this is the only place that spells them.

use std::fmt;

use uuid::Uuid;

use super::SupervisorKind;

/// The path of an actor in the tree.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ActorPath(String);

impl ActorPath {
    /// The root of the tree.
    pub fn root() -> Self {
        Self("root".to_owned())
    }

    /// A supervisor under the root (`root/channels`).
    pub fn supervisor(kind: SupervisorKind) -> Self {
        Self(format!("root/{}", kind.name()))
    }

    /// The conversation actor of an identity.
    pub fn conversation(identity_id: Uuid) -> Self {
        Self(format!(
            "root/{}/identity:{identity_id}",
            SupervisorKind::Conversations.name()
        ))
    }

    /// The actor of a channel.
    pub fn channel(channel_id: Uuid) -> Self {
        Self(format!(
            "root/{}/channel:{channel_id}",
            SupervisorKind::Channels.name()
        ))
    }

    /// The actor of a flow.
    pub fn flow(flow_id: Uuid) -> Self {
        Self(format!(
            "root/{}/flow:{flow_id}",
            SupervisorKind::Flows.name()
        ))
    }

    /// The actor of a scheduled task.
    pub fn task(task_id: Uuid) -> Self {
        Self(format!(
            "root/{}/task:{task_id}",
            SupervisorKind::Scheduler.name()
        ))
    }

    /// A child of this path named `name`.
    pub fn child(&self, name: &str) -> Self {
        Self(format!("{}/{name}", self.0))
    }

    /// The path as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// What kind of actor sits here (`conversation`, `channel`, `flow`, `task`, a supervisor's
    /// name, or `root`): a bounded label for metrics.
    pub fn kind(&self) -> &'static str {
        let last = self.0.rsplit('/').next().unwrap_or_default();
        match last.split_once(':') {
            Some(("identity", _)) => "conversation",
            Some(("channel", _)) => "channel",
            Some(("flow", _)) => "flow",
            Some(("task", _)) => "task",
            _ => SupervisorKind::ALL
                .into_iter()
                .find(|k| k.name() == last)
                .map_or("root", SupervisorKind::name),
        }
    }
}

impl fmt::Display for ActorPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_name_the_supervisor_and_the_key() {
        let id = Uuid::nil();
        assert_eq!(
            ActorPath::conversation(id).as_str(),
            "root/conversations/identity:00000000-0000-0000-0000-000000000000"
        );
        assert_eq!(
            ActorPath::supervisor(SupervisorKind::Flows).to_string(),
            "root/flows"
        );
        assert_eq!(
            ActorPath::root().child("channels").as_str(),
            "root/channels"
        );
    }
}
