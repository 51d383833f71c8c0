//! Which enabled endpoints of each workspace take which event types, as last read.
//!
//! Reads of the routes race: an endpoint written through the API is read again at once, and
//! again when its change is heard (here and on every other node), each read a task of its own.
//! A read that began before a write may finish after the read that began after it; applied
//! last, it would put the endpoint's older picture back, and no fact written afterwards would
//! reach an endpoint just created until the next change. So each read is numbered when it
//! begins, and a workspace's routes are replaced only by a read that began after the one they
//! come from.

use std::collections::HashMap;

use parley_persistence::EventType;
use parley_persistence::entities::event_webhook;
use serde_json::Value;
use uuid::Uuid;

/// One endpoint and the event types it takes.
#[derive(Clone, Debug)]
pub(super) struct Route {
    pub(super) endpoint_id: Uuid,
    /// `None`: every type.
    types: Option<Vec<String>>,
}

impl Route {
    /// `endpoint`'s route.
    pub(super) fn of(endpoint: &event_webhook::Model) -> Self {
        let types = endpoint.events.as_array().and_then(|list| {
            let types: Vec<String> = list
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect();
            (!types.iter().any(|t| t == "*")).then_some(types)
        });
        Self {
            endpoint_id: endpoint.id,
            types,
        }
    }

    /// Whether the endpoint takes events of `kind`.
    pub(super) fn takes(&self, kind: EventType) -> bool {
        self.types
            .as_ref()
            .is_none_or(|types| types.iter().any(|t| t == kind.as_str()))
    }
}

/// The routes of every workspace that has any, and which read each comes from.
#[derive(Debug, Default)]
pub(super) struct Routes {
    by_workspace: HashMap<i64, Vec<Route>>,
    /// The number of the read a workspace's routes come from, when a read of that workspace
    /// alone was the last applied to it.
    read: HashMap<i64, u64>,
    /// The number of the last read of every workspace applied.
    all_read: u64,
}

impl Routes {
    /// The routes of `workspace_id`.
    pub(super) fn of(&self, workspace_id: i64) -> Option<&[Route]> {
        self.by_workspace.get(&workspace_id).map(Vec::as_slice)
    }

    /// Applies what read number `read` of `workspace_id` (of every workspace for `None`)
    /// found, `endpoints` (enabled ones), to every workspace whose routes come from a read
    /// that began before it. Answers whether it changed anything.
    pub(super) fn apply(
        &mut self,
        read: u64,
        workspace_id: Option<i64>,
        endpoints: &[event_webhook::Model],
    ) -> bool {
        let mut fresh: HashMap<i64, Vec<Route>> = HashMap::new();
        for endpoint in endpoints {
            let route = Route::of(endpoint);
            fresh.entry(endpoint.workspace_id).or_default().push(route);
        }
        match workspace_id {
            Some(workspace_id) => {
                if self.read_of(workspace_id) >= read {
                    return false;
                }
                self.read.insert(workspace_id, read);
                self.replace(workspace_id, fresh.remove(&workspace_id));
            }
            None => {
                if self.all_read >= read {
                    return false;
                }
                let mut workspaces: Vec<i64> = self.by_workspace.keys().copied().collect();
                workspaces.extend(fresh.keys().copied());
                workspaces.sort_unstable();
                workspaces.dedup();
                for workspace_id in workspaces {
                    if self.read_of(workspace_id) < read {
                        self.replace(workspace_id, fresh.remove(&workspace_id));
                    }
                }
                self.all_read = read;
                self.read.retain(|_, at| *at > read);
            }
        }
        true
    }

    /// The number of the read `workspace_id`'s routes come from.
    fn read_of(&self, workspace_id: i64) -> u64 {
        self.read
            .get(&workspace_id)
            .copied()
            .unwrap_or(0)
            .max(self.all_read)
    }

    fn replace(&mut self, workspace_id: i64, routes: Option<Vec<Route>>) {
        match routes {
            Some(routes) => self.by_workspace.insert(workspace_id, routes),
            None => self.by_workspace.remove(&workspace_id),
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn endpoint(workspace_id: i64, n: u128) -> event_webhook::Model {
        let now = chrono::Utc::now();
        event_webhook::Model {
            id: Uuid::from_u128(n),
            workspace_id,
            url: format!("http://example.com/{n}"),
            description: None,
            events: serde_json::json!(["message.received"]),
            secret: String::new(),
            previous_secret: None,
            previous_secret_until: None,
            enabled: true,
            disabled_reason: None,
            failing_since: None,
            created_at: now,
            updated_at: now,
        }
    }

    fn ids(routes: &Routes, workspace_id: i64) -> Vec<u128> {
        routes
            .of(workspace_id)
            .unwrap_or_default()
            .iter()
            .map(|route| route.endpoint_id.as_u128())
            .collect()
    }

    #[test]
    fn a_read_that_began_earlier_and_ended_later_leaves_the_newer_routes_in_place() {
        let mut routes = Routes::default();
        // Read 1 began with one endpoint; read 2, after a second was created, ended first.
        assert!(routes.apply(2, Some(7), &[endpoint(7, 1), endpoint(7, 2)]));
        assert!(!routes.apply(1, Some(7), &[endpoint(7, 1)]));
        assert_eq!(ids(&routes, 7), [1, 2]);
        assert!(routes.apply(3, Some(7), &[endpoint(7, 2)]));
        assert_eq!(ids(&routes, 7), [2]);
    }

    #[test]
    fn a_workspace_whose_endpoints_are_gone_has_no_routes() {
        let mut routes = Routes::default();
        routes.apply(1, Some(7), &[endpoint(7, 1)]);
        routes.apply(2, Some(7), &[]);
        assert!(routes.of(7).is_none());
    }

    #[test]
    fn a_read_of_every_workspace_replaces_only_those_read_before_it() {
        let mut routes = Routes::default();
        routes.apply(1, Some(7), &[endpoint(7, 1)]);
        routes.apply(3, Some(8), &[endpoint(8, 3), endpoint(8, 4)]);
        routes.apply(4, Some(9), &[endpoint(9, 5)]);
        // Read 2 of every workspace began before workspace 8's and 9's reads.
        let everything = [endpoint(7, 1), endpoint(7, 2), endpoint(8, 3)];
        assert!(routes.apply(2, None, &everything));
        assert_eq!(ids(&routes, 7), [1, 2]);
        assert_eq!(ids(&routes, 8), [3, 4]);
        assert_eq!(ids(&routes, 9), [5]);
        // A read of one workspace that began before the read of all is too old now.
        assert!(!routes.apply(2, Some(7), &[]));
        assert_eq!(ids(&routes, 7), [1, 2]);
        assert!(!routes.apply(1, None, &[]));
        assert_eq!(ids(&routes, 8), [3, 4]);
        // A newer read of all applies everywhere, removing what is gone.
        assert!(routes.apply(5, None, &[endpoint(8, 3)]));
        assert!(routes.of(7).is_none());
        assert_eq!(ids(&routes, 8), [3]);
        assert!(routes.of(9).is_none());
    }
}
