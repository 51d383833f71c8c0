//! Sends the platform accepted, recorded by the writer in one statement per status with the
//! usage they count, all in one call, and the events they make.

use sea_orm::sea_query::{CaseStatement, Expr};
use sea_orm::{ColumnTrait, DatabaseExecutor, EntityTrait, QueryFilter, QueryTrait};
use serde_json::Value;
use uuid::Uuid;

use crate::entities::message;
use crate::event_deliveries::{Addressed, insert_all};
use crate::one_call::{self, Write};
use crate::values::MessageStatus;
use crate::{Merged, Writes};

/// A send the platform accepted, for the writer to record (as [`record_send`] does) with the
/// others waiting: one statement for all those of one status.
#[derive(Clone, Debug)]
pub struct Accepted {
    /// The message sent.
    pub message_id: Uuid,
    /// `sent`, or `delivered` for a sandbox.
    pub status: MessageStatus,
    /// The platform's id of the message.
    pub platform_message_id: String,
    /// The usage the send counts, written with it.
    pub counted: Option<crate::usage::Count>,
    /// Its events (`message.sent`, …) for the endpoints that take them, committed with it.
    pub told: Vec<Addressed>,
}

impl Merged for Accepted {
    type Answer = ();

    fn atomic(&self) -> bool {
        !self.told.is_empty()
    }

    /// Every status's `UPDATE` and what the sends count are one call that commits together
    /// ([`crate::one_call`]). (A message is accepted once, so no two of its statements touch
    /// the same row.)
    fn one_statement(_pieces: &[&Self]) -> bool {
        true
    }

    fn run_all<'e>(
        db: &'e DatabaseExecutor<'e>,
        pieces: Vec<&'e Self>,
    ) -> Writes<'e, Vec<Self::Answer>> {
        Box::pin(async move {
            let mut statuses: Vec<MessageStatus> = Vec::new();
            for piece in &pieces {
                if !statuses.contains(&piece.status) {
                    statuses.push(piece.status);
                }
            }
            let mut writes: Vec<Write> = Vec::with_capacity(statuses.len() + 1);
            for status in statuses {
                let of: Vec<&Accepted> = pieces
                    .iter()
                    .copied()
                    .filter(|piece| piece.status == status)
                    .collect();
                let platform_ids = of
                    .iter()
                    .fold(CaseStatement::new(), |case, piece| {
                        case.case(
                            message::Column::Id.eq(piece.message_id),
                            piece.platform_message_id.clone(),
                        )
                    })
                    .finally(Expr::col(message::Column::PlatformMessageId));
                let update = message::Entity::update_many()
                    .col_expr(message::Column::Status, Expr::value(status))
                    .col_expr(message::Column::Error, Option::<Value>::None.into())
                    .col_expr(message::Column::PlatformMessageId, platform_ids.into())
                    .filter(message::Column::Id.is_in(of.iter().map(|piece| piece.message_id)))
                    .into_query();
                writes.push(update.into());
            }
            let counted: Vec<_> = pieces.iter().filter_map(|p| p.counted.clone()).collect();
            writes.extend(crate::usage::to_write(&counted).map(Write::from));
            one_call::run(db, writes).await?;
            let now = crate::clock::now();
            for piece in &pieces {
                insert_all(db, &piece.told, now).await?;
            }
            Ok(vec![(); pieces.len()])
        })
    }
}
