//! Three of the messages table's indexes hold only the rows they are there to find.
//!
//! Every message stored wrote a page of each of the table's six B-trees; on SQLite each is a
//! frame of the write-ahead log, and a checkpoint copies and syncs them all. Three of those
//! indexes were full of rows nobody looks up through them: the status index (scanned for
//! replies `pending` or left `sending`, while nearly every message is `received`, `sent`,
//! `delivered` or `read`), the platform id key (a chat turn's messages have none) and the
//! reply index (a person's message answers nothing). Kept partial, a person's message writes 4
//! pages instead of 8 and a reply 5, and PostgreSQL maintains two indexes fewer per row.
//!
//! A partial index serves a query only when the planner can tell the query's rows are in it:
//! `platform_message_id = ?` and `reply_to_message_id = ?` imply `IS NOT NULL` to both
//! databases; the status scans repeat the index's own condition word for word
//! (`parley_persistence::deliveries`), since a bound `status = ?` proves nothing about the
//! value to a plan made once for any value (SQLite's stable plans, PostgreSQL's generic ones).

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub(crate) struct Migration;

/// Each index as it was (name, statement) and its partial successor (name, statement). The
/// successor is made before the old index goes, under a name of its own.
const INDEXES: [(&str, &str, &str, &str); 3] = [
    (
        "messages_status_idx",
        "CREATE INDEX messages_status_idx ON messages (status)",
        "messages_waiting_status_idx",
        "CREATE INDEX messages_waiting_status_idx ON messages (status) \
         WHERE status IN ('pending', 'sending')",
    ),
    (
        "messages_channel_id_platform_message_id_key",
        "CREATE UNIQUE INDEX messages_channel_id_platform_message_id_key \
         ON messages (channel_id, platform_message_id)",
        "messages_platform_id_key",
        "CREATE UNIQUE INDEX messages_platform_id_key ON messages (channel_id, platform_message_id) \
         WHERE platform_message_id IS NOT NULL",
    ),
    (
        "messages_reply_to_message_id_idx",
        "CREATE INDEX messages_reply_to_message_id_idx ON messages (reply_to_message_id)",
        "messages_replies_idx",
        "CREATE INDEX messages_replies_idx ON messages (reply_to_message_id) \
         WHERE reply_to_message_id IS NOT NULL",
    ),
];

// async_trait cannot express the trait's lifetimes with `'_`, so the elided form is used.
#[allow(elided_lifetimes_in_paths)]
#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let db = manager.get_connection();
        for (full, _, _, partial) in INDEXES {
            db.execute_unprepared(partial).await?;
            db.execute_unprepared(&format!("DROP INDEX {full}")).await?;
        }
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let db = manager.get_connection();
        for (_, full, partial, _) in INDEXES {
            db.execute_unprepared(full).await?;
            db.execute_unprepared(&format!("DROP INDEX {partial}"))
                .await?;
        }
        Ok(())
    }
}
