//! Appending messages to a conversation: one alone, one through the database's writer, or a
//! few that must be stored together.

use chrono::{DateTime, Utc};
use sea_orm::sea_query::InsertStatement;
use sea_orm::{DatabaseExecutor, EntityTrait, QueryTrait};
use serde_json::Value;
use uuid::Uuid;

use super::NewMessage;
use crate::entities::{conversation, message};
use crate::event_deliveries::{Addressed, insert_all};
use crate::one_call::{self, Write};
use crate::usage::{self, Count, Metric};
use crate::values::{Direction, Role};
use crate::{GroupCommit, Merged, Result, Writes};

/// As [`append_message`], committed by the database's writer with other writes (in one
/// statement with the other messages waiting to be stored), and `told`, its events for the
/// endpoints that take them, committed with it.
///
/// # Errors
/// As [`append_message`].
pub async fn store_message(
    writer: &GroupCommit,
    conversation: &conversation::Model,
    new: NewMessage,
    now: DateTime<Utc>,
    told: Vec<Addressed>,
) -> Result<message::Model> {
    let appended = Appended {
        conversation: conversation.clone(),
        messages: vec![(new, now)],
        told,
    };
    let mut stored = if appended.has_files() {
        // The message and its files are stored together or not at all: a transaction of
        // its own, not a piece of a merged statement.
        appended.store_alone(writer).await?
    } else {
        writer.write_merged(appended).await?
    };
    Ok(stored.pop().ok_or(sea_orm::DbErr::RecordNotInserted)?)
}

/// Most messages [`store_messages`] stores in one statement of their own; past them (a model
/// that asked for dozens of calls at once), one statement per message in a transaction. Each
/// number of rows up to it is one more statement the writer's connection keeps prepared, and
/// on SQLite a prepared statement weighs by its rows.
const MOST_IN_ONE_STATEMENT: usize = 16;

/// Appends `messages` (each with the time it happened) to `conversation` together, committed
/// by the database's writer with other writes: a tool round's request and its results, which
/// the history must hold together or not at all. Without files (and up to
/// [`MOST_IN_ONE_STATEMENT`]) they are one `INSERT`, atomic by itself, in the writer's batch
/// with the other messages waiting; otherwise a transaction of their own.
///
/// # Errors
/// As [`append_message`]; nothing is stored then.
pub async fn store_messages(
    writer: &GroupCommit,
    conversation: &conversation::Model,
    messages: Vec<(NewMessage, DateTime<Utc>)>,
) -> Result<Vec<message::Model>> {
    if messages.is_empty() {
        return Ok(Vec::new());
    }
    let appended = Appended {
        conversation: conversation.clone(),
        messages,
        told: Vec::new(),
    };
    if appended.messages.len() > MOST_IN_ONE_STATEMENT || appended.has_files() {
        return appended.store_alone(writer).await;
    }
    writer.write_merged(appended).await
}

/// Messages for the writer to append to one conversation, each with the time it happened
/// (see [`store_message`] and [`store_messages`]), and the events of the first.
struct Appended {
    conversation: conversation::Model,
    messages: Vec<(NewMessage, DateTime<Utc>)>,
    told: Vec<Addressed>,
}

impl Appended {
    /// The rows of the piece's messages, each with its conversation's assistant.
    fn rows(&self) -> impl Iterator<Item = (Option<Uuid>, message::Model)> + '_ {
        self.messages.iter().map(|(new, at)| {
            let row = row(&self.conversation, new.clone(), *at);
            (self.conversation.assistant_id, row)
        })
    }

    /// Whether a message of the piece carries files.
    fn has_files(&self) -> bool {
        self.messages
            .iter()
            .any(|(new, _)| !new.attachments.is_empty())
    }

    /// Stores the piece in a transaction of its own, one statement per message and its files,
    /// then its events: for what a merged statement cannot carry.
    async fn store_alone(self, writer: &GroupCommit) -> Result<Vec<message::Model>> {
        let piece = std::sync::Arc::new(self);
        writer
            .write_atomic(move |db| {
                let piece = piece.clone();
                Box::pin(async move {
                    let mut stored = Vec::with_capacity(piece.messages.len());
                    for (new, at) in &piece.messages {
                        let conversation = &piece.conversation;
                        stored.push(append_message(db, conversation, new.clone(), *at).await?);
                    }
                    insert_all(db, &piece.told, piece.told_at()).await?;
                    Ok(stored)
                })
            })
            .await
    }

    /// When the piece's events happened: with its first message.
    fn told_at(&self) -> DateTime<Utc> {
        self.messages.first().map_or_else(Utc::now, |(_, at)| *at)
    }
}

impl Merged for Appended {
    type Answer = Vec<message::Model>;

    /// With events, the message and their deliveries commit together. (Its counts need no
    /// transaction: they go in the same call as the messages, see [`insert_rows`].)
    fn atomic(&self) -> bool {
        !self.told.is_empty()
    }

    /// Every piece's messages and what they count are one call that commits together
    /// ([`crate::one_call`]), with no transaction around it.
    fn one_statement(_pieces: &[&Self]) -> bool {
        true
    }

    /// The pieces of one message in one `INSERT`, each of several in one of its own, and what
    /// they all count in one `UPSERT`, in one call: the statements of single messages keep the
    /// numbers of rows the writer's batches give them (see
    /// `group_commit::merged::statement_sizes`), and a round's rows are few.
    fn run_all<'e>(
        db: &'e DatabaseExecutor<'e>,
        pieces: Vec<&'e Self>,
    ) -> Writes<'e, Vec<Self::Answer>> {
        let singles: Vec<_> = pieces
            .iter()
            .filter(|piece| piece.messages.len() == 1)
            .flat_map(|piece| piece.rows())
            .collect();
        let rounds: Vec<Vec<_>> = pieces
            .iter()
            .filter(|piece| piece.messages.len() > 1)
            .map(|piece| piece.rows().collect())
            .collect();
        Box::pin(async move {
            let groups = std::iter::once(&singles).chain(&rounds);
            one_call::run(db, counted_inserts(groups.filter(|rows| !rows.is_empty()))).await?;
            let mut singles = singles.into_iter().map(|(_, row)| row);
            let mut rounds = rounds.into_iter();
            let mut answers = Vec::with_capacity(pieces.len());
            for piece in &pieces {
                let stored: Vec<_> = if piece.messages.len() == 1 {
                    singles.next().into_iter().collect()
                } else {
                    let rows = rounds.next().unwrap_or_default();
                    rows.into_iter().map(|(_, row)| row).collect()
                };
                answers.push(stored);
            }
            for piece in &pieces {
                insert_all(db, &piece.told, piece.told_at()).await?;
            }
            Ok(answers)
        })
    }
}

/// Appends a message to `conversation`. Its `last_message_at` moves to `now` in the same
/// statement: the database's trigger `messages_touch_conversation` keeps it (one round trip,
/// and one commit, per stored message).
///
/// # Errors
/// [`crate::PersistenceError::Conflict`] when the platform message id was already stored for
/// the channel (a re-delivered webhook).
pub async fn append_message(
    db: &impl one_call::Executor,
    conversation: &conversation::Model,
    mut new: NewMessage,
    now: DateTime<Utc>,
) -> Result<message::Model> {
    let files = std::mem::take(&mut new.attachments);
    let row = row(conversation, new, now);
    let mut stored = insert_rows(db, vec![(conversation.assistant_id, row)]).await?;
    let stored = stored.pop().ok_or(sea_orm::DbErr::RecordNotInserted)?;
    let files = crate::attachments::rows(&stored, conversation.identity_id, &files);
    crate::attachments::insert(db, &files).await?;
    Ok(stored)
}

/// The row of `new` in `conversation`, every column given (the time at storage precision), so
/// that it is what the database keeps without reading it back.
fn row(conversation: &conversation::Model, new: NewMessage, now: DateTime<Utc>) -> message::Model {
    message::Model {
        id: new.id.unwrap_or_else(Uuid::now_v7),
        workspace_id: conversation.workspace_id,
        conversation_id: conversation.id,
        channel_id: conversation.channel_id,
        direction: new.direction,
        role: new.role,
        content: new.content,
        status: new.status,
        platform_message_id: new.platform_message_id,
        error: new.error,
        usage: new.usage,
        tool_calls: new.tool_calls,
        tool_call_id: new.tool_call_id,
        created_at: crate::clock::at_storage_precision(now),
        reply_to_message_id: new.reply_to_message_id,
        outbound: new.outbound,
        metadata: new.metadata,
        operator_id: new.operator_id,
    }
}

/// Inserts `rows` (each with its conversation's assistant) in one statement, with what they
/// count (see [`metered`]) in the same call ([`crate::one_call`]), and answers them.
async fn insert_rows(
    db: &impl one_call::Executor,
    rows: Vec<(Option<Uuid>, message::Model)>,
) -> Result<Vec<message::Model>> {
    one_call::run(db, counted_inserts([&rows])).await?;
    Ok(rows.into_iter().map(|(_, row)| row).collect())
}

/// One `INSERT` per group of rows, then one `UPSERT` of what they all count (unless the counts
/// are kept back for the writer's batch, see [`usage::to_write`]): a call's statements.
fn counted_inserts<'a>(
    groups: impl IntoIterator<Item = &'a Vec<(Option<Uuid>, message::Model)>>,
) -> Vec<Write> {
    let mut counts = Vec::new();
    let mut writes = Vec::new();
    for rows in groups {
        counts.extend(metered(rows));
        writes.push(insert(rows).into());
    }
    writes.extend(usage::to_write(&counts).map(Write::from));
    writes
}

/// The `INSERT` of `rows`.
fn insert(rows: &[(Option<Uuid>, message::Model)]) -> InsertStatement {
    message::Entity::insert_many(
        rows.iter()
            .map(|(_, row)| message::ActiveModel::from(row.clone())),
    )
    .into_query()
}

/// Whether a tool result's metadata says an MCP server answered it.
fn is_mcp(metadata: Option<&Value>) -> bool {
    metadata.is_some_and(|m| m["source"] == "mcp")
}

/// What `rows` count: the model's tokens an answer spent, a person's message received, an MCP
/// server's answer to a tool call. (The conversation's own token totals move in the insert's
/// statement: the trigger that keeps its `last_message_at` adds them.)
fn metered(rows: &[(Option<Uuid>, message::Model)]) -> Vec<Count> {
    let mut counts = Vec::new();
    for (assistant_id, row) in rows {
        let count = |metric, value| {
            Count::new(row.workspace_id, row.created_at, metric, value)
                .on(row.channel_id)
                .by(*assistant_id)
        };
        if let Some(usage) = &row.usage {
            let tokens = |name: &str| usage.get(name).and_then(Value::as_i64).unwrap_or(0);
            counts.push(count(Metric::ModelPromptTokens, tokens("prompt_tokens")));
            counts.push(count(
                Metric::ModelCompletionTokens,
                tokens("completion_tokens"),
            ));
        }
        match row.role {
            Role::User if row.direction == Direction::Inbound => {
                counts.push(count(Metric::MessagesReceived, 1));
            }
            Role::Tool if is_mcp(row.metadata.as_ref()) => {
                counts.push(count(Metric::McpCalls, 1));
            }
            _ => {}
        }
    }
    counts
}

#[cfg(test)]
mod tests {
    use chrono::Utc;
    use sea_orm::{
        ColumnTrait, ConnectionTrait, DatabaseConnection, QueryFilter, QueryOrder, Statement,
    };
    use serde_json::json;

    use super::*;
    use crate::channels::{self, NewChannel};
    use crate::identities::{self, NewIdentity};
    use crate::values::{Integration, MessageStatus};

    /// A migrated database, its writer, a workspace and a sandbox channel of it.
    async fn fixture() -> (
        tempfile::TempDir,
        DatabaseConnection,
        GroupCommit,
        i64,
        Uuid,
    ) {
        let (dir, db) = crate::test_support::migrated().await;
        let workspace_id = crate::test_support::workspace(&db, "acme", Utc::now()).await;
        let new = NewChannel {
            name: "Main".to_owned(),
            integration: Integration::Sandbox,
            active: true,
            settings: json!({}),
            phone_number_id: None,
            business_account_id: None,
            access_token_encrypted: None,
            verify_token: "v".to_owned(),
            verified: None,
        };
        let channel = channels::create(&db, workspace_id, new, Utc::now())
            .await
            .expect("channel");
        let writer = GroupCommit::start(db.clone());
        (dir, db, writer, workspace_id, channel.id)
    }

    /// An open conversation of a new identity on `channel`.
    async fn conversation(
        db: &DatabaseConnection,
        workspace_id: i64,
        channel: Uuid,
    ) -> conversation::Model {
        let now = Utc::now();
        let identity = NewIdentity {
            id: Uuid::now_v7(),
            name: None,
            external_id: None,
            metadata: json!({}),
            opted_out: false,
        };
        let identity = identities::create(db, workspace_id, identity, now)
            .await
            .expect("identity");
        super::super::start(db, workspace_id, identity.id, channel, None, now)
            .await
            .expect("conversation")
            .conversation()
    }

    /// A tool round of `calls` calls: the model's request (with the tokens it spent) and an
    /// MCP server's result for each.
    fn round(name: &str, calls: usize) -> Vec<(NewMessage, DateTime<Utc>)> {
        let ids: Vec<String> = (0..calls).map(|k| format!("{name}-{k}")).collect();
        let mut request = NewMessage::to_person(String::new(), MessageStatus::Sent);
        request.id = Some(Uuid::now_v7());
        request.usage = Some(json!({"prompt_tokens": 10, "completion_tokens": 2}));
        request.tool_calls = Some(json!(ids));
        let mut round = vec![(request, Utc::now())];
        for call in ids {
            let mut result = NewMessage::tool_result(call.clone(), format!("result of {call}"));
            result.id = Some(Uuid::now_v7());
            result.metadata = Some(json!({"source": "mcp"}));
            round.push((result, Utc::now()));
        }
        round
    }

    async fn stored_ids(db: &DatabaseConnection, conversation: &conversation::Model) -> Vec<Uuid> {
        message::Entity::find()
            .filter(message::Column::ConversationId.eq(conversation.id))
            .order_by_asc(message::Column::CreatedAt)
            .order_by_asc(message::Column::Id)
            .all(db)
            .await
            .expect("messages")
            .into_iter()
            .map(|m| m.id)
            .collect()
    }

    async fn mcp_calls(db: &DatabaseConnection) -> i64 {
        let sql = "SELECT COALESCE(SUM(value), 0) FROM usage_daily WHERE metric = 'mcp_calls'";
        db.query_one_raw(Statement::from_string(db.get_database_backend(), sql))
            .await
            .expect("read")
            .expect("a row")
            .try_get_by_index::<i64>(0)
            .expect("sum")
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn rounds_stored_at_once_each_get_their_own_rows_and_counts() {
        let (_dir, db, writer, workspace_id, channel) = fixture().await;
        let mut conversations = Vec::new();
        for _ in 0..6 {
            conversations.push(conversation(&db, workspace_id, channel).await);
        }

        // Rounds of several messages and single messages, waiting for the writer together.
        let stores: Vec<_> = conversations
            .iter()
            .cloned()
            .enumerate()
            .map(|(i, conversation)| {
                let writer = writer.clone();
                tokio::spawn(async move {
                    if i % 2 == 0 {
                        // One call, three, and more than one statement takes.
                        let calls = [1, 3, MOST_IN_ONE_STATEMENT + 4][i / 2];
                        let round = round(&format!("round-{i}"), calls);
                        let ids: Vec<Uuid> = round.iter().filter_map(|(m, _)| m.id).collect();
                        let stored = store_messages(&writer, &conversation, round).await;
                        (ids, stored.expect("round stored"))
                    } else {
                        let mut new = NewMessage::from_person(format!("hello {i}"));
                        let id = Uuid::now_v7();
                        new.id = Some(id);
                        let stored =
                            store_message(&writer, &conversation, new, Utc::now(), vec![]).await;
                        (vec![id], vec![stored.expect("message stored")])
                    }
                })
            })
            .collect();
        let mut answered = Vec::new();
        for store in stores {
            answered.push(store.await.expect("store ran"));
        }

        for ((ids, stored), conversation) in answered.iter().zip(&conversations) {
            let answered: Vec<Uuid> = stored.iter().map(|m| m.id).collect();
            assert_eq!(&answered, ids, "each store answers its own rows, in order");
            assert!(stored.iter().all(|m| m.conversation_id == conversation.id));
            assert_eq!(&stored_ids(&db, conversation).await, ids);
        }
        let calls = 1 + 3 + MOST_IN_ONE_STATEMENT + 4;
        let calls = i64::try_from(calls).expect("few");
        assert_eq!(mcp_calls(&db).await, calls, "each MCP call counted");
        assert!(
            store_messages(&writer, &conversations[0], Vec::new())
                .await
                .expect("nothing to store")
                .is_empty()
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_round_that_cannot_be_stored_leaves_none_of_its_messages() {
        let (_dir, db, writer, workspace_id, channel) = fixture().await;
        let conversation = conversation(&db, workspace_id, channel).await;
        let first = round("first", 1);
        let taken = first[1].0.id;
        store_messages(&writer, &conversation, first)
            .await
            .expect("first round");
        let before = stored_ids(&db, &conversation).await;

        // The second round's last result reuses a stored message's id: nothing of it stays.
        let mut second = round("second", 2);
        second[2].0.id = taken;
        let refused = store_messages(&writer, &conversation, second).await;

        assert!(refused.is_err(), "{refused:?}");
        assert_eq!(stored_ids(&db, &conversation).await, before);
        assert_eq!(mcp_calls(&db).await, 1, "the refused round counts nothing");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_message_whose_counts_cannot_be_written_is_not_stored_either() {
        let (_dir, db, writer, workspace_id, channel) = fixture().await;
        let conversation = conversation(&db, workspace_id, channel).await;
        let counted = |text: &str| {
            let mut new = NewMessage::from_person(text.to_owned());
            new.id = Some(Uuid::now_v7());
            new
        };
        store_message(&writer, &conversation, counted("first"), Utc::now(), vec![])
            .await
            .expect("stored with its count");
        let before = stored_ids(&db, &conversation).await;

        // The counters' table is gone: the message's `INSERT` ran, its counts' `UPSERT` fails.
        db.execute_unprepared("ALTER TABLE usage_daily RENAME TO usage_elsewhere")
            .await
            .expect("renamed");
        let refused = store_message(
            &writer,
            &conversation,
            counted("second"),
            Utc::now(),
            vec![],
        )
        .await;
        assert!(refused.is_err(), "{refused:?}");
        assert_eq!(
            stored_ids(&db, &conversation).await,
            before,
            "nothing stays"
        );

        // The writer's connection was left outside any transaction: the next store commits.
        db.execute_unprepared("ALTER TABLE usage_elsewhere RENAME TO usage_daily")
            .await
            .expect("renamed back");
        let third = counted("third");
        let id = third.id;
        store_message(&writer, &conversation, third, Utc::now(), vec![])
            .await
            .expect("stored after");
        let after = stored_ids(&db, &conversation).await;
        assert_eq!(after.len(), 2);
        assert_eq!(after.last().copied(), id);
    }
}
