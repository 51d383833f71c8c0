//! Sends the platform accepted, recorded by the writer in one statement per status with the
//! usage they count and the events they make.

use sea_orm::sea_query::{CaseStatement, Expr};
use sea_orm::{ColumnTrait, DatabaseExecutor, EntityTrait, QueryFilter};
use serde_json::Value;
use uuid::Uuid;

use crate::entities::message;
use crate::event_deliveries::{Addressed, insert_all};
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

    fn one_statement(pieces: &[&Self]) -> bool {
        pieces.windows(2).all(|two| two[0].status == two[1].status)
            && (!crate::usage::metering() || pieces.iter().all(|piece| piece.counted.is_none()))
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
                message::Entity::update_many()
                    .col_expr(message::Column::Status, Expr::value(status))
                    .col_expr(message::Column::Error, Option::<Value>::None.into())
                    .col_expr(message::Column::PlatformMessageId, platform_ids.into())
                    .filter(message::Column::Id.is_in(of.iter().map(|piece| piece.message_id)))
                    .exec(db)
                    .await?;
            }
            let counted: Vec<_> = pieces.iter().filter_map(|p| p.counted.clone()).collect();
            crate::usage::add(db, &counted).await?;
            let now = crate::clock::now();
            for piece in &pieces {
                insert_all(db, &piece.told, now).await?;
            }
            Ok(vec![(); pieces.len()])
        })
    }
}
