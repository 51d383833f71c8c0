//! "Store it pending, then deliver it": the one shape of a message to a person between its
//! row and its send. [`pending`] is the only way such a row is made (with what goes on the
//! wire, so that a message left at a stop is sent again as exactly what it was); a
//! [`Parcel`] is what the row's sender hands to [`super::Outbox::deliver`].

use parley_persistence::MessageStatus;
use parley_persistence::conversations::NewMessage;
use parley_persistence::entities::message;
use uuid::Uuid;

use crate::whatsapp::Outgoing;

/// The row of a message to a person that waits for its channel: `pending`, showing `text`,
/// carrying `outgoing`'s wire form. The caller stores it (alone, or in its own transaction
/// with what it answers) and then delivers the [`Parcel`] of the stored row.
pub fn pending(outgoing: &Outgoing, text: String) -> NewMessage {
    let mut message = NewMessage::to_person(text, MessageStatus::Pending);
    message.outbound = Some(outgoing.to_stored());
    message
}

/// A stored pending message and what goes on the wire, ready for its channel; crosses to
/// another node as it is (a turn run at the identity's owner hands its reply's parcel back to
/// the channel's).
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Parcel {
    /// The stored message the channel claims before each attempt and records the answer on.
    pub message_id: Uuid,
    /// The channel that sends it.
    pub channel_id: Uuid,
    /// What goes on the wire.
    pub outgoing: Outgoing,
}

impl Parcel {
    /// The parcel of a stored message: `None` for a message that does not wait for a channel
    /// (an answer to an API caller, or one stored before wire forms were kept).
    pub fn of(stored: &message::Model) -> Option<Self> {
        if stored.status != MessageStatus::Pending {
            return None;
        }
        Outgoing::from_stored(stored.outbound.as_ref()).map(|outgoing| Self {
            message_id: stored.id,
            channel_id: stored.channel_id,
            outgoing,
        })
    }
}
