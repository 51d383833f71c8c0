//! The writes a campaign makes per recipient (its claim, the send's outcome, Meta's reports
//! moving it) as [`Merged`] kinds: at Meta's 1,000 msg/s tier each is a thousand writes a
//! second, and one statement and one commit apiece made them the database's busiest (on
//! PostgreSQL each waited for its own flush of the log). Ten flows on one number each claim a
//! recipient or two as their sends end; together their claims are one statement.

use std::collections::{HashMap, HashSet};

use chrono::{DateTime, Utc};
use sea_orm::sea_query::{CaseStatement, Expr, Query};
use sea_orm::{
    ColumnTrait, ConnectionTrait, DatabaseExecutor, EntityTrait, QueryFilter, QueryTrait,
};
use uuid::Uuid;

use super::{SendOutcome, claim_all, record};
use crate::cluster::Fence;
use crate::entities::flow_recipient;
use crate::values::RecipientStatus;
use crate::{Merged, Result, Writes};

/// A runner's claim of recipients (as [`claim_all`] does), for the writer: the claims waiting in
/// one batch, of any flows, are one statement per fence.
#[derive(Clone, Debug)]
pub struct Claimed {
    /// The recipients, due, in order.
    pub ids: Vec<Uuid>,
    /// The flow's partition lease, on a cluster.
    pub fence: Option<Fence>,
    /// When.
    pub now: DateTime<Utc>,
}

impl Merged for Claimed {
    /// The recipients this claim took (one claimed meanwhile elsewhere, or by a stale lease,
    /// is left out; one in two claims of a batch goes to the first).
    type Answer = Vec<Uuid>;

    fn one_statement(pieces: &[&Self]) -> bool {
        pieces.windows(2).all(|two| two[0].fence == two[1].fence)
    }

    fn run_all<'e>(
        db: &'e DatabaseExecutor<'e>,
        pieces: Vec<&'e Self>,
    ) -> Writes<'e, Vec<Self::Answer>> {
        Box::pin(async move {
            let mut taken = HashSet::new();
            let mut fences: Vec<Option<Fence>> = Vec::new();
            for piece in &pieces {
                if fences.contains(&piece.fence) {
                    continue;
                }
                fences.push(piece.fence);
                let of = pieces.iter().filter(|other| other.fence == piece.fence);
                let ids: Vec<Uuid> = of
                    .clone()
                    .flat_map(|other| other.ids.iter().copied())
                    .collect();
                let now = of.map(|other| other.now).max().unwrap_or(piece.now);
                taken.extend(claim_all(db, &ids, now, piece.fence.as_ref()).await?);
            }
            Ok(pieces
                .iter()
                .map(|piece| {
                    piece
                        .ids
                        .iter()
                        .copied()
                        .filter(|id| taken.remove(id))
                        .collect()
                })
                .collect())
        })
    }
}

/// How a claimed recipient's send ended, for the writer (as [`record`] does): the accepted
/// sends waiting in one batch are one statement per status, any other outcome its own.
#[derive(Clone, Debug)]
pub struct Recorded {
    /// The recipient.
    pub id: Uuid,
    /// How its send ended.
    pub outcome: SendOutcome,
    /// When.
    pub now: DateTime<Utc>,
}

impl Recorded {
    /// The status of an accepted send; `None` for any other outcome.
    fn accepted(&self) -> Option<RecipientStatus> {
        match self.outcome {
            SendOutcome::Accepted { status, .. } => Some(status),
            SendOutcome::Retry { .. } | SendOutcome::Final { .. } => None,
        }
    }
}

impl Merged for Recorded {
    type Answer = ();

    fn one_statement(pieces: &[&Self]) -> bool {
        pieces.first().and_then(|first| first.accepted()).is_some()
            && pieces
                .windows(2)
                .all(|two| two[0].accepted() == two[1].accepted())
    }

    fn run_all<'e>(
        db: &'e DatabaseExecutor<'e>,
        pieces: Vec<&'e Self>,
    ) -> Writes<'e, Vec<Self::Answer>> {
        Box::pin(async move {
            let mut statuses: Vec<RecipientStatus> = Vec::new();
            for piece in &pieces {
                match piece.accepted() {
                    Some(status) if !statuses.contains(&status) => statuses.push(status),
                    Some(_) => {}
                    None => record(db, piece.id, piece.outcome.clone(), piece.now).await?,
                }
            }
            for status in statuses {
                let of: Vec<&Recorded> = pieces
                    .iter()
                    .copied()
                    .filter(|piece| piece.accepted() == Some(status))
                    .collect();
                record_accepted(db, status, &of).await?;
            }
            Ok(vec![(); pieces.len()])
        })
    }
}

/// Records `sends`, all accepted with `status`, in one statement.
async fn record_accepted(
    db: &impl ConnectionTrait,
    status: RecipientStatus,
    sends: &[&Recorded],
) -> Result<()> {
    let (mut messages, mut platform_ids) = (CaseStatement::new(), CaseStatement::new());
    for send in sends {
        if let SendOutcome::Accepted {
            message_id,
            platform_message_id,
            ..
        } = &send.outcome
        {
            let this = || flow_recipient::Column::Id.eq(send.id);
            messages = messages.case(this(), Expr::value(*message_id));
            platform_ids = platform_ids.case(this(), Expr::value(platform_message_id.clone()));
        }
    }
    let now = sends.iter().map(|send| send.now).max();
    flow_recipient::Entity::update_many()
        .col_expr(flow_recipient::Column::Status, Expr::value(status))
        .col_expr(
            flow_recipient::Column::MessageId,
            messages
                .finally(Expr::col(flow_recipient::Column::MessageId))
                .into(),
        )
        .col_expr(
            flow_recipient::Column::PlatformMessageId,
            platform_ids
                .finally(Expr::col(flow_recipient::Column::PlatformMessageId))
                .into(),
        )
        // An earlier attempt's transient error does not outlive the success.
        .col_expr(flow_recipient::Column::ErrorCode, Expr::value(None::<i64>))
        .col_expr(flow_recipient::Column::Error, Expr::value(None::<String>))
        .col_expr(
            flow_recipient::Column::NextAttemptAt,
            Expr::value(None::<DateTime<Utc>>),
        )
        .col_expr(flow_recipient::Column::UpdatedAt, Expr::value(now))
        .filter(flow_recipient::Column::Id.is_in(sends.iter().map(|send| send.id)))
        .exec(db)
        .await?;
    Ok(())
}

/// Meta's report on a flow recipient's message, for the writer: it moves the recipient whose
/// template Meta knows as `platform_message_id` forward to `status` (never back). The reports
/// waiting in one batch are one statement per status and error.
#[derive(Clone, Debug)]
pub struct Reached {
    /// Meta's id of the recipient's message.
    pub platform_message_id: String,
    /// What Meta reported.
    pub status: RecipientStatus,
    /// Meta's error code and message, for `failed`.
    pub error: Option<(Option<i64>, String)>,
    /// When.
    pub now: DateTime<Utc>,
}

impl Reached {
    fn same_move(&self, other: &Self) -> bool {
        self.status == other.status && self.error == other.error
    }
}

impl Merged for Reached {
    /// The recipient's flow and identity, when the report moved one.
    type Answer = Option<(Uuid, Uuid)>;

    fn one_statement(pieces: &[&Self]) -> bool {
        pieces.windows(2).all(|two| two[0].same_move(two[1]))
    }

    fn run_all<'e>(
        db: &'e DatabaseExecutor<'e>,
        pieces: Vec<&'e Self>,
    ) -> Writes<'e, Vec<Self::Answer>> {
        Box::pin(reach_all(db, pieces))
    }
}

/// The statuses a report of `status` moves a recipient from; none for a status no report
/// brings.
fn moves_from(status: RecipientStatus) -> &'static [RecipientStatus] {
    match status {
        RecipientStatus::Delivered => &[RecipientStatus::Sent],
        RecipientStatus::Read => &[RecipientStatus::Sent, RecipientStatus::Delivered],
        RecipientStatus::Failed => &[
            RecipientStatus::Sent,
            RecipientStatus::Delivered,
            RecipientStatus::Read,
        ],
        _ => &[],
    }
}

/// Runs `reports`, one statement per status and error among them; answers the flow and identity
/// of the recipient each moved (of two reports of one move for one message, the first).
async fn reach_all(
    db: &impl ConnectionTrait,
    reports: Vec<&Reached>,
) -> Result<Vec<Option<(Uuid, Uuid)>>> {
    let mut moved: HashMap<String, (Uuid, Uuid)> = HashMap::new();
    let mut done: Vec<&Reached> = Vec::new();
    for report in &reports {
        let lower = moves_from(report.status);
        if lower.is_empty() || done.iter().any(|earlier| earlier.same_move(report)) {
            continue;
        }
        done.push(report);
        let wamids = reports
            .iter()
            .filter(|other| other.same_move(report))
            .map(|other| other.platform_message_id.clone());
        let mut update = flow_recipient::Entity::update_many()
            .col_expr(flow_recipient::Column::Status, Expr::value(report.status))
            .col_expr(flow_recipient::Column::UpdatedAt, Expr::value(report.now))
            .filter(flow_recipient::Column::PlatformMessageId.is_in(wamids))
            .filter(flow_recipient::Column::Status.is_in(lower.iter().copied()));
        if let Some((code, message)) = &report.error {
            update = update
                .col_expr(flow_recipient::Column::ErrorCode, Expr::value(*code))
                .col_expr(flow_recipient::Column::Error, Expr::value(message.clone()));
        }
        let mut update = update.into_query();
        update.returning(Query::returning().columns([
            flow_recipient::Column::PlatformMessageId,
            flow_recipient::Column::FlowId,
            flow_recipient::Column::IdentityId,
        ]));
        for row in db.query_all(&update).await? {
            let wamid = row.try_get::<String>("", "platform_message_id")?;
            let flow_id = row.try_get::<Uuid>("", "flow_id")?;
            let identity_id = row.try_get::<Uuid>("", "identity_id")?;
            moved.insert(wamid, (flow_id, identity_id));
        }
    }
    Ok(reports
        .iter()
        .map(|report| moved.remove(&report.platform_message_id))
        .collect())
}
