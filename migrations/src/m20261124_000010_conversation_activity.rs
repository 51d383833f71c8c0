//! A conversation's `last_message_at` is kept by the database: a trigger moves it to each new
//! message's `created_at` in the same statement as the insert. Storing a message was an INSERT
//! and an UPDATE, two round trips (and on PostgreSQL two commits) on every turn's two writes.

use sea_orm_migration::prelude::*;
use sea_orm_migration::sea_orm::DbBackend;

#[derive(DeriveMigrationName)]
pub(crate) struct Migration;

const SQLITE_UP: &str = "CREATE TRIGGER messages_touch_conversation AFTER INSERT ON messages \
     BEGIN \
       UPDATE conversations SET last_message_at = NEW.created_at WHERE id = NEW.conversation_id; \
     END";

const POSTGRES_UP: [&str; 2] = [
    "CREATE FUNCTION messages_touch_conversation() RETURNS trigger LANGUAGE plpgsql AS $$ \
     BEGIN \
       UPDATE conversations SET last_message_at = NEW.created_at WHERE id = NEW.conversation_id; \
       RETURN NULL; \
     END $$",
    "CREATE TRIGGER messages_touch_conversation AFTER INSERT ON messages \
     FOR EACH ROW EXECUTE FUNCTION messages_touch_conversation()",
];

// async_trait cannot express the trait's lifetimes with `'_`, so the elided form is used.
#[allow(elided_lifetimes_in_paths)]
#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let db = manager.get_connection();
        match manager.get_database_backend() {
            DbBackend::Postgres => {
                for statement in POSTGRES_UP {
                    db.execute_unprepared(statement).await?;
                }
            }
            _ => {
                db.execute_unprepared(SQLITE_UP).await?;
            }
        }
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let db = manager.get_connection();
        if manager.get_database_backend() == DbBackend::Postgres {
            db.execute_unprepared("DROP TRIGGER IF EXISTS messages_touch_conversation ON messages")
                .await?;
            db.execute_unprepared("DROP FUNCTION IF EXISTS messages_touch_conversation()")
                .await?;
        } else {
            db.execute_unprepared("DROP TRIGGER IF EXISTS messages_touch_conversation")
                .await?;
        }
        Ok(())
    }
}
