//! The events waiting their turn, one queue per workspace, taken round-robin: one business's
//! burst waits behind itself, never in front of another's messages. Each queue is bounded on
//! its own, so a burst that overflows its workspace's queue leaves the rest in the database
//! without stopping the others' fresh events from being held.

use std::collections::{HashMap, HashSet, VecDeque};

use super::{Sender, Waiting};

/// Waiting events by workspace, with the order in which workspaces are served next.
#[derive(Default)]
pub(super) struct Queues {
    by_workspace: HashMap<i64, VecDeque<Waiting>>,
    /// Workspaces with waiting events, the next one to serve first.
    order: VecDeque<i64>,
    len: usize,
}

impl Queues {
    /// Events waiting, in all.
    pub(super) fn len(&self) -> usize {
        self.len
    }

    /// Whether none waits.
    pub(super) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Events of `workspace_id` waiting.
    pub(super) fn len_of(&self, workspace_id: i64) -> usize {
        self.by_workspace
            .get(&workspace_id)
            .map_or(0, VecDeque::len)
    }

    /// Queues `waiting` behind its workspace's others.
    pub(super) fn push(&mut self, waiting: Waiting) {
        let workspace_id = waiting.event.workspace_id;
        let queue = self.by_workspace.entry(workspace_id).or_default();
        if queue.is_empty() {
            self.order.push_back(workspace_id);
        }
        queue.push_back(waiting);
        self.len += 1;
    }

    /// The next event to start: the workspaces in turn, each's oldest event whose sender has
    /// none under way (a sender's later events keep their place); `None` when no event can
    /// start now.
    pub(super) fn next(&mut self, busy: &HashSet<Sender>) -> Option<Waiting> {
        for _ in 0..self.order.len() {
            let workspace_id = self.order.pop_front()?;
            let Some(queue) = self.by_workspace.get_mut(&workspace_id) else {
                continue;
            };
            let Some(index) = queue.iter().position(|w| !busy.contains(&w.sender)) else {
                self.order.push_back(workspace_id);
                continue;
            };
            let taken = queue.remove(index);
            if queue.is_empty() {
                self.by_workspace.remove(&workspace_id);
            } else {
                self.order.push_back(workspace_id);
            }
            self.len -= 1;
            return taken;
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use parley_persistence::entities::webhook_event;
    use uuid::Uuid;

    use super::*;
    use crate::whatsapp::payload::InboundMessage;

    fn waiting(workspace_id: i64, from: &str) -> Waiting {
        let now = parley_persistence::clock::now();
        let event = webhook_event::Model {
            id: Uuid::now_v7(),
            workspace_id,
            channel_id: Uuid::nil(),
            platform_message_id: format!("wamid.{from}"),
            payload: serde_json::Value::Null,
            status: parley_persistence::EventStatus::Pending,
            error: None,
            received_at: now,
            processed_at: None,
            attempts: 0,
            next_attempt_at: None,
        };
        let read = InboundMessage::from_stored(&event.payload);
        Waiting {
            event,
            read,
            sender: (Uuid::nil(), from.to_owned()),
            fresh: true,
        }
    }

    #[test]
    fn a_burst_of_one_workspace_waits_behind_itself() {
        let mut queues = Queues::default();
        for i in 0..100 {
            queues.push(waiting(1, &format!("a{i}")));
        }
        queues.push(waiting(2, "b"));
        let busy = HashSet::new();
        let first = queues.next(&busy).expect("one");
        let second = queues.next(&busy).expect("two");
        assert_eq!(first.event.workspace_id, 1);
        assert_eq!(
            second.event.workspace_id, 2,
            "the other workspace's message goes second"
        );
        assert_eq!(queues.len(), 99);
        assert_eq!(queues.len_of(2), 0);
    }

    #[test]
    fn a_busy_sender_keeps_its_place_and_others_go_first() {
        let mut queues = Queues::default();
        queues.push(waiting(1, "a"));
        queues.push(waiting(1, "b"));
        let busy: HashSet<Sender> = [(Uuid::nil(), "a".to_owned())].into();
        assert_eq!(queues.next(&busy).expect("b").sender.1, "b");
        assert!(queues.next(&busy).is_none());
        assert_eq!(queues.next(&HashSet::new()).expect("a").sender.1, "a");
        assert!(queues.is_empty());
    }
}
