//! Delivery reports' moves of their messages, run by the writer in one statement for all those
//! waiting that move to the same status with the same error.

use std::collections::HashSet;

use sea_orm::sea_query::Expr;
use sea_orm::{
    ColumnTrait, ConnectionTrait, DatabaseExecutor, EntityTrait, QueryFilter, QueryTrait,
};
use serde_json::Value;
use uuid::Uuid;

use crate::entities::message;
use crate::values::MessageStatus;
use crate::{Merged, Result, Writes};

/// A report's move of the message of `channel_id` with Meta's id `platform_message_id` (as
/// [`super::apply_status`] moves it, without reading it first): forward to `status` only, with
/// Meta's error (none clears an earlier one). A campaign at Meta's 1,000 msg/s tier brings as
/// many reports a second; a read and a write each, one statement and one commit for each
/// write, made them the database's busiest statements.
#[derive(Clone, Debug)]
pub struct Reported {
    /// The channel the report came through.
    pub channel_id: Uuid,
    /// Meta's id of the message the report names.
    pub platform_message_id: String,
    /// What Meta reported.
    pub status: MessageStatus,
    /// Meta's error, for `failed`.
    pub error: Option<Value>,
}

impl Reported {
    fn same_move(&self, other: &Self) -> bool {
        self.channel_id == other.channel_id
            && self.status == other.status
            && self.error == other.error
    }
}

impl Merged for Reported {
    /// Whether the report moved its message (a report of where the message already is, or
    /// behind it, or of a message not stored with Meta's id yet, moves nothing).
    type Answer = bool;

    fn one_statement(pieces: &[&Self]) -> bool {
        pieces.windows(2).all(|two| two[0].same_move(two[1]))
    }

    fn run_all<'e>(
        db: &'e DatabaseExecutor<'e>,
        pieces: Vec<&'e Self>,
    ) -> Writes<'e, Vec<Self::Answer>> {
        Box::pin(move_all(db, pieces))
    }
}

/// Runs `reports`, one statement per channel, status and error among them; answers whether
/// each moved its message (of two reports of one move for one message, the first).
async fn move_all(db: &impl ConnectionTrait, reports: Vec<&Reported>) -> Result<Vec<bool>> {
    let mut moved = HashSet::new();
    let mut done: Vec<&Reported> = Vec::new();
    for report in &reports {
        if done.iter().any(|earlier| earlier.same_move(report)) {
            continue;
        }
        done.push(report);
        let ids = reports
            .iter()
            .filter(|other| other.same_move(report))
            .map(|other| other.platform_message_id.clone());
        // The condition on the current status makes concurrent reports race safely.
        let mut update = message::Entity::update_many()
            .col_expr(message::Column::Status, Expr::value(report.status))
            .col_expr(message::Column::Error, report.error.clone().into())
            .filter(message::Column::ChannelId.eq(report.channel_id))
            .filter(message::Column::PlatformMessageId.is_in(ids))
            .filter(message::Column::Status.is_in(report.status.lower()))
            .into_query();
        update.returning_col(message::Column::PlatformMessageId);
        for row in db.query_all(&update).await? {
            let wamid = row.try_get::<String>("", "platform_message_id")?;
            moved.insert((report.channel_id, wamid));
        }
    }
    Ok(reports
        .iter()
        .map(|report| moved.remove(&(report.channel_id, report.platform_message_id.clone())))
        .collect())
}
