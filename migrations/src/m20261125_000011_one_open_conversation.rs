//! An identity has at most one open conversation on a channel, kept by the database: a partial
//! unique index over the open ones. Whoever starts a thread's conversation (a turn, a send, the
//! opt-out) first looks for the open one and starts one when there is none; two of them doing
//! that at once each started their own, and the thread's messages split between the two.
//! Now the second start finds the first's conversation instead (`conversations::start`).
//!
//! Open conversations that already share a thread are closed first, all but the most recently
//! active of each, as an idle one is when the next message comes; their messages stay with them.

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub(crate) struct Migration;

const CLOSE_DUPLICATES: &str = "UPDATE conversations SET status = 'closed' \
     WHERE status = 'open' AND EXISTS ( \
       SELECT 1 FROM conversations AS newer \
       WHERE newer.identity_id = conversations.identity_id \
         AND newer.channel_id = conversations.channel_id \
         AND newer.status = 'open' \
         AND (newer.last_message_at > conversations.last_message_at \
              OR (newer.last_message_at = conversations.last_message_at \
                  AND newer.id > conversations.id)))";

/// `conversations::start` names the same columns and predicate as its conflict target, which is
/// how PostgreSQL and SQLite find this index.
const CREATE_INDEX: &str = "CREATE UNIQUE INDEX conversations_identity_id_channel_id_open_key \
     ON conversations (identity_id, channel_id) WHERE status = 'open'";

// async_trait cannot express the trait's lifetimes with `'_`, so the elided form is used.
#[allow(elided_lifetimes_in_paths)]
#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let db = manager.get_connection();
        db.execute_unprepared(CLOSE_DUPLICATES).await?;
        db.execute_unprepared(CREATE_INDEX).await?;
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .get_connection()
            .execute_unprepared(
                "DROP INDEX IF EXISTS conversations_identity_id_channel_id_open_key",
            )
            .await?;
        Ok(())
    }
}
