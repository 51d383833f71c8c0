//! A flow's recipients left `sending` by a stop, settled when its actor starts by what became of
//! their message. Each attempt stores its message under an id made from the recipient's (see
//! [`attempt_message_id`]), so the message table tells:
//!
//! - no message, or one still `pending` (deleted here before any sender claims it): nothing
//!   reached Meta; the recipient goes back to `pending` and is sent again, the attempt uncounted;
//! - a message sent, delivered or read: the recipient takes its status and Meta's id (the
//!   statistics match what Meta received);
//! - a message refused: the recipient fails with Meta's error;
//! - a message `sending`: it may have reached Meta; failed `interrupted`, never sent twice.
//!
//! Only claims made before this process started are sent again: a claim of this process (the
//! actor failed, its runner's sends may still be under way) is failed `interrupted` as before.

use chrono::{DateTime, Utc};
use parley_persistence::entities::flow_recipient;
use parley_persistence::flows::{self, SendOutcome};
use parley_persistence::{
    DatabaseConnection, MessageStatus, PersistenceError, RecipientStatus, clock, conversations,
    deliveries,
};
use uuid::Uuid;

/// How the recipients left `sending` were settled.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Recovered {
    /// Sent again: their attempt never reached Meta.
    pub(super) released: u64,
    /// Taken from their message, which went out (or was refused) before the stop.
    pub(super) reconciled: u64,
    /// Failed `interrupted`: caught mid-attempt.
    pub(super) interrupted: u64,
}

/// The id the message of a recipient's attempt is stored under: the recipient's id with the
/// attempt's number (its claims so far, this one included) in the last bits.
pub(crate) fn attempt_message_id(recipient_id: Uuid, attempt: i32) -> Uuid {
    let attempt = u128::from(attempt.unsigned_abs());
    Uuid::from_u128(recipient_id.as_u128() ^ attempt)
}

/// Settles every recipient of `flow_id` left `sending`.
///
/// # Errors
/// Fails on a database error.
pub(super) async fn recover(
    db: &DatabaseConnection,
    flow_id: Uuid,
    started_at: DateTime<Utc>,
) -> Result<Recovered, PersistenceError> {
    let mut recovered = Recovered::default();
    for recipient in flows::left_sending(db, flow_id).await? {
        if recipient.updated_at >= started_at {
            flows::fail_interrupted(db, recipient.id, clock::now()).await?;
            recovered.interrupted += 1;
            continue;
        }
        settle(db, &recipient, &mut recovered).await?;
    }
    Ok(recovered)
}

async fn settle(
    db: &DatabaseConnection,
    recipient: &flow_recipient::Model,
    recovered: &mut Recovered,
) -> Result<(), PersistenceError> {
    let now = clock::now();
    let message_id = attempt_message_id(recipient.id, recipient.attempts);
    let message = conversations::find_message(db, message_id).await?;
    let unsent = match &message {
        None => true,
        Some(m) if m.status == MessageStatus::Pending => {
            deliveries::delete_if_pending(db, m.id).await?
        }
        Some(_) => false,
    };
    if unsent {
        flows::release(db, recipient.id, now).await?;
        recovered.released += 1;
        return Ok(());
    }
    let reached = message.as_ref().and_then(|m| {
        let status = RecipientStatus::of_delivery(m.status)?;
        Some((m, status))
    });
    match reached {
        Some((m, RecipientStatus::Failed)) => {
            let error = m.error.clone().unwrap_or_default();
            let outcome = SendOutcome::Final {
                status: RecipientStatus::Failed,
                code: error["code"].as_i64(),
                error: error["message"].as_str().unwrap_or("failed").to_owned(),
            };
            flows::record(db, recipient.id, outcome, now).await?;
            recovered.reconciled += 1;
        }
        Some((m, status)) => {
            let outcome = SendOutcome::Accepted {
                message_id: m.id,
                platform_message_id: m.platform_message_id.clone().unwrap_or_default(),
                status,
            };
            flows::record(db, recipient.id, outcome, now).await?;
            recovered.reconciled += 1;
        }
        None => {
            flows::fail_interrupted(db, recipient.id, now).await?;
            recovered.interrupted += 1;
        }
    }
    Ok(())
}
