//! Live pages: a Server-Sent-Events stream that says `changed` when what a page shows moved,
//! and the page's htmx reads its list again. What moved is told by a cheap mark read from the
//! database every second (the newest message of a workspace, the statuses of a conversation's
//! messages), so a change made by any process sharing the database shows, and an open tab costs
//! one indexed read a second.

use std::convert::Infallible;
use std::future::Future;
use std::time::Duration;

use axum::response::sse::{Event, KeepAlive, Sse};
use futures_util::Stream;
use parley_persistence::PersistenceError;

use crate::http::AppState;

/// How often a live page's mark is read.
const EVERY: Duration = Duration::from_secs(1);

/// The stream of `changed` events for a page whose content `read` marks, for as long as the
/// session of `token` lasts (then it ends, and the browser's next try is sent to sign in).
pub(super) fn changes<M, F, Fut>(
    state: AppState,
    token: String,
    read: F,
) -> Sse<impl Stream<Item = Result<Event, Infallible>>>
where
    M: PartialEq + Send + 'static,
    F: Fn(AppState) -> Fut + Send + 'static,
    Fut: Future<Output = Result<M, PersistenceError>> + Send,
{
    let stream = futures_util::stream::unfold(
        (state, token, read, None::<M>),
        |(state, token, read, mut last)| async move {
            loop {
                if !state.console.lives(&token) {
                    return None;
                }
                match read(state.clone()).await {
                    Ok(mark) => {
                        let moved = last.as_ref().is_some_and(|last| *last != mark);
                        last = Some(mark);
                        if moved {
                            // Not empty: a browser drops an event without data.
                            let event = Event::default().event("changed").data("1");
                            return Some((Ok(event), (state, token, read, last)));
                        }
                    }
                    Err(error) => tracing::warn!(%error, "a live console page's mark"),
                }
                tokio::time::sleep(EVERY).await;
            }
        },
    );
    Sse::new(stream).keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
}
