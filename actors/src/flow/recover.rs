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
    DatabaseConnection, FailureReason, MessageStatus, PersistenceError, RecipientStatus, clock,
    conversations, deliveries,
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

/// What a recipient's next attempt must make of this attempt's message, which its sender
/// answered with an error meaning "try again" (`retry`): Meta may have taken it all the same
/// (the database failed while recording Meta's answer), and a message left pending would be
/// sent by whoever resumes its channel next. So: no message, or one still pending (deleted
/// here before anyone claims it): the retry stands, and nothing of this attempt is left to
/// send; one claimed (`sending`): it may have reached Meta, so the recipient fails
/// `interrupted` and is never sent twice; one Meta accepted: the recipient takes it; one Meta
/// refused: the retry stands.
///
/// # Errors
/// Fails on a database error (the recipient then stays claimed, and the actor's recovery
/// settles it the same way).
pub(super) async fn before_retry(
    db: &DatabaseConnection,
    message_id: Uuid,
    retry: SendOutcome,
) -> Result<SendOutcome, PersistenceError> {
    let Some(message) = conversations::find_message(db, message_id).await? else {
        return Ok(retry);
    };
    let interrupted = || SendOutcome::Final {
        status: RecipientStatus::Failed,
        code: None,
        error: FailureReason::Interrupted.as_str().to_owned(),
    };
    Ok(match message.status {
        MessageStatus::Pending if deliveries::delete_if_pending(db, message.id).await? => retry,
        // Claimed meanwhile, or mid-attempt: it may have reached Meta.
        MessageStatus::Pending | MessageStatus::Sending => interrupted(),
        status => match RecipientStatus::of_delivery(status) {
            Some(RecipientStatus::Failed) | None => retry,
            Some(status) => SendOutcome::Accepted {
                message_id: message.id,
                platform_message_id: message.platform_message_id.unwrap_or_default(),
                status,
            },
        },
    })
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

#[cfg(test)]
mod tests {
    use chrono::Duration;
    use parley_persistence::conversations::{self, NewMessage};
    use parley_persistence::deliveries;

    use super::*;

    /// A message of `status` stored under `id` for the identity, as an attempt's would be.
    async fn attempt_message(
        db: &DatabaseConnection,
        (ws, channel_id, identity_id): (i64, Uuid, Uuid),
        id: Uuid,
        status: MessageStatus,
    ) {
        let now = clock::now();
        let conversation = conversations::start(db, ws, identity_id, channel_id, None, now)
            .await
            .expect("conversation")
            .conversation();
        let mut message = NewMessage::to_person("Hi".into(), MessageStatus::Pending);
        message.id = Some(id);
        conversations::append_message(db, &conversation, message, now)
            .await
            .expect("message");
        match status {
            MessageStatus::Pending => {}
            MessageStatus::Sending => {
                assert!(deliveries::claim(db, id, None).await.expect("claim"));
            }
            other => {
                let wamid = format!("wamid.{id}");
                deliveries::record_send(db, id, other, Some(&wamid), None)
                    .await
                    .expect("recorded");
            }
        }
    }

    #[tokio::test]
    async fn before_a_retry_the_attempts_message_is_never_left_to_be_sent_twice() {
        let (deps, _dir, _model) = crate::test_support::deps().await;
        let db = &deps.db;
        let (ws, channel_id, identity_id, _) = crate::test_support::world(db).await;
        let retry = || SendOutcome::Retry {
            code: None,
            error: "down".to_owned(),
            at: clock::now() + Duration::seconds(5),
        };
        let place = (ws, channel_id, identity_id);

        // Still pending (the channel never claimed it): deleted, and the retry stands.
        let pending = Uuid::now_v7();
        attempt_message(db, place, pending, MessageStatus::Pending).await;
        let settled = before_retry(db, pending, retry()).await.expect("settled");
        assert!(matches!(settled, SendOutcome::Retry { .. }), "{settled:?}");
        assert!(
            conversations::find_message(db, pending)
                .await
                .expect("read")
                .is_none(),
            "no resumption can send it"
        );

        // Claimed: it may have reached Meta; never tried again.
        let claimed = Uuid::now_v7();
        attempt_message(db, place, claimed, MessageStatus::Sending).await;
        let settled = before_retry(db, claimed, retry()).await.expect("settled");
        assert!(
            matches!(&settled, SendOutcome::Final { status: RecipientStatus::Failed, error, .. } if error == "interrupted"),
            "{settled:?}"
        );

        // Accepted, though the sender heard a failure (its answer's record failed): taken.
        let accepted = Uuid::now_v7();
        attempt_message(db, place, accepted, MessageStatus::Sent).await;
        let settled = before_retry(db, accepted, retry()).await.expect("settled");
        assert!(
            matches!(&settled, SendOutcome::Accepted { message_id, status: RecipientStatus::Sent, .. } if *message_id == accepted),
            "{settled:?}"
        );

        // Never stored: the retry stands.
        let settled = before_retry(db, Uuid::now_v7(), retry())
            .await
            .expect("settled");
        assert!(matches!(settled, SendOutcome::Retry { .. }));
    }
}
