//! The sends a flow's runner has in flight: each a task that records its own outcome and
//! answers whether the flow can go on.

use parley_persistence::PersistenceError;
use tokio::task::JoinSet;

use super::send::{Fatal, Sent};

/// The runner's sends under way.
pub(super) type InFlight = JoinSet<Result<Sent, PersistenceError>>;

/// What a finished send answers; a task that panicked counts as recorded.
pub(super) fn joined(
    done: Result<Result<Sent, PersistenceError>, tokio::task::JoinError>,
) -> Result<Sent, PersistenceError> {
    match done {
        Ok(outcome) => outcome,
        // A send task that panicked leaves its recipient `sending`: failed `interrupted` at
        // the actor's next start.
        Err(error) => {
            tracing::error!(%error, "a flow send task failed");
            Ok(Sent::Recorded)
        }
    }
}

/// Waits until `in_flight` holds fewer than `most` sends, then takes in every send that ended
/// meanwhile too (their room goes to the next claim); answers the first that ends the flow.
pub(super) async fn make_room(
    in_flight: &mut InFlight,
    most: usize,
) -> Result<Option<Fatal>, PersistenceError> {
    while in_flight.len() >= most {
        if let Some(done) = in_flight.join_next().await
            && let Sent::Fatal(fatal) = joined(done)?
        {
            return Ok(Some(fatal));
        }
    }
    while let Some(done) = in_flight.try_join_next() {
        if let Sent::Fatal(fatal) = joined(done)? {
            return Ok(Some(fatal));
        }
    }
    Ok(None)
}

/// Waits for the sends in flight (each records its own outcome).
pub(super) async fn drain(mut in_flight: InFlight) -> Result<(), PersistenceError> {
    while let Some(done) = in_flight.join_next().await {
        joined(done)?;
    }
    Ok(())
}
