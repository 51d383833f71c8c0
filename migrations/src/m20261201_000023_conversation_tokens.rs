//! A conversation's token totals are kept by the database too: the trigger that moves its
//! `last_message_at` on each new message now also adds the tokens the message's `usage` says
//! the model spent. Each reply was an `INSERT` and an `UPDATE` of its conversation, one more
//! round trip per turn inside the writer's batch (1,000 of about 2,700 statements for 1,000
//! WhatsApp turns on PostgreSQL); the trigger's one `UPDATE` now does both.

use sea_orm_migration::prelude::*;
use sea_orm_migration::sea_orm::DbBackend;

#[derive(DeriveMigrationName)]
pub(crate) struct Migration;

/// The trigger as it was (`m20261124_000010_conversation_activity`) and as it is now, on
/// SQLite: the body of `CREATE TRIGGER messages_touch_conversation AFTER INSERT ON messages`.
const SQLITE_BEFORE: &str =
    "UPDATE conversations SET last_message_at = NEW.created_at WHERE id = NEW.conversation_id;";
const SQLITE_AFTER: &str = "UPDATE conversations SET last_message_at = NEW.created_at, \
       prompt_tokens = prompt_tokens + COALESCE(json_extract(NEW.usage, '$.prompt_tokens'), 0), \
       completion_tokens = completion_tokens \
         + COALESCE(json_extract(NEW.usage, '$.completion_tokens'), 0) \
     WHERE id = NEW.conversation_id;";

/// The same on PostgreSQL: the body of the trigger's function.
const POSTGRES_BEFORE: &str =
    "UPDATE conversations SET last_message_at = NEW.created_at WHERE id = NEW.conversation_id;";
const POSTGRES_AFTER: &str = "UPDATE conversations SET last_message_at = NEW.created_at, \
       prompt_tokens = prompt_tokens + COALESCE((NEW.usage ->> 'prompt_tokens')::bigint, 0), \
       completion_tokens = completion_tokens \
         + COALESCE((NEW.usage ->> 'completion_tokens')::bigint, 0) \
     WHERE id = NEW.conversation_id;";

async fn touch_with(
    manager: &SchemaManager<'_>,
    sqlite: &str,
    postgres: &str,
) -> Result<(), DbErr> {
    let db = manager.get_connection();
    if manager.get_database_backend() == DbBackend::Postgres {
        db.execute_unprepared(&format!(
            "CREATE OR REPLACE FUNCTION messages_touch_conversation() RETURNS trigger \
             LANGUAGE plpgsql AS $$ BEGIN {postgres} RETURN NULL; END $$"
        ))
        .await?;
    } else {
        // One call, so one connection: another of the pool would prepare the `CREATE`
        // against the schema it read before the `DROP` and find the trigger still there.
        db.execute_unprepared(&format!(
            "DROP TRIGGER IF EXISTS messages_touch_conversation; \
             CREATE TRIGGER messages_touch_conversation AFTER INSERT ON messages \
             BEGIN {sqlite} END"
        ))
        .await?;
    }
    Ok(())
}

// async_trait cannot express the trait's lifetimes with `'_`, so the elided form is used.
#[allow(elided_lifetimes_in_paths)]
#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        touch_with(manager, SQLITE_AFTER, POSTGRES_AFTER).await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        touch_with(manager, SQLITE_BEFORE, POSTGRES_BEFORE).await
    }
}
