//! Live pages: a Server-Sent-Events stream that says `changed` when what a page shows moved,
//! and the page's htmx reads its list again. Pages hear of changes by push: every write a
//! console shows announces [`Change::Inbox`] (or [`Change::Messages`]) for its workspace, on
//! this node or (through the cluster's news) on another, and [`Pulse`] wakes the workspace's
//! open streams; each then reads its page's cheap mark once and speaks only when it moved.
//! While nothing changes an open page costs the database nothing.

use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use axum::response::sse::{Event, KeepAlive, Sse};
use futures_util::Stream;
use parley_actors::Change;
use parley_actors::changes::Listener;
use parley_persistence::PersistenceError;
use tokio::sync::watch;

use crate::http::AppState;

/// How long a stream lets a burst of changes settle before it reads its mark: a hundred
/// messages in a second are one read per page, not a hundred.
const SETTLE: Duration = Duration::from_millis(200);

/// The workspaces' pulses on this node: a counter per workspace with open pages, moved by
/// every change a console shows.
#[derive(Clone, Debug, Default)]
pub(crate) struct Pulse(Arc<Mutex<HashMap<i64, watch::Sender<u64>>>>);

impl Pulse {
    /// The pulse of `workspace_id`, for one open page.
    fn subscribe(&self, workspace_id: i64) -> watch::Receiver<u64> {
        let mut pulses = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        pulses
            .entry(workspace_id)
            .or_insert_with(|| watch::channel(0).0)
            .subscribe()
    }

    /// Moves the pulse of `workspace_id`, forgetting it when no page listens any more.
    fn beat(&self, workspace_id: i64) {
        let mut pulses = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(pulse) = pulses.get(&workspace_id) {
            if pulse.receiver_count() == 0 {
                pulses.remove(&workspace_id);
            } else {
                pulse.send_modify(|n| *n = n.wrapping_add(1));
            }
        }
    }
}

impl Listener for Pulse {
    fn changed(&self, change: &Change) {
        if let Change::Inbox { workspace_id } | Change::Messages { workspace_id, .. } = change {
            self.beat(*workspace_id);
        }
    }
}

/// The stream of `changed` events for a page of `workspace_id` whose content `read` marks,
/// for as long as the session of `token` lasts (then it ends, and the browser's next try is
/// sent to sign in). The session is looked at when the workspace's pulse moves (a sign-out
/// everywhere moves it) and once per idle time.
pub(super) fn changes<M, F, Fut>(
    state: AppState,
    workspace_id: i64,
    token: String,
    read: F,
) -> Sse<impl Stream<Item = Result<Event, Infallible>>>
where
    M: PartialEq + Send + 'static,
    F: Fn(AppState) -> Fut + Send + 'static,
    Fut: Future<Output = Result<M, PersistenceError>> + Send,
{
    let pulse = state.console_pulse.subscribe(workspace_id);
    let stream = futures_util::stream::unfold(
        (state, token, read, None::<M>, pulse),
        |(state, token, read, mut last, mut pulse)| async move {
            loop {
                if last.is_some() {
                    let idle = state.console.idle();
                    tokio::select! {
                        beat = pulse.changed() => {
                            if beat.is_err() {
                                return None;
                            }
                            tokio::time::sleep(SETTLE).await;
                            pulse.borrow_and_update();
                        }
                        () = tokio::time::sleep(idle) => {}
                    }
                }
                if !state.console.lives(&token).await {
                    return None;
                }
                match read(state.clone()).await {
                    Ok(mark) => {
                        let moved = last.as_ref().is_some_and(|last| *last != mark);
                        last = Some(mark);
                        if moved {
                            // Not empty: a browser drops an event without data.
                            let event = Event::default().event("changed").data("1");
                            return Some((Ok(event), (state, token, read, last, pulse)));
                        }
                    }
                    Err(error) => {
                        tracing::warn!(%error, "a live console page's mark");
                        // Read again at the next change rather than spin.
                        if last.is_none() {
                            tokio::time::sleep(Duration::from_secs(1)).await;
                        }
                    }
                }
            }
        },
    );
    Sse::new(stream).keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
}
