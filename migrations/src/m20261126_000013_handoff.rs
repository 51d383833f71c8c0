//! Human handoff: a conversation is answered by the assistant or, handed over, by a person.
//! `mode` says which (`assistant` for every conversation so far); `mode_changed_at` and
//! `handoff_reason` say when and why it last changed; `human_active_at` is when a person last
//! acted in it while it was theirs (the handoff, or an operator's message), from which the
//! automatic return to the assistant counts. The partial index serves the sweep that finds
//! conversations whose person has been quiet too long: there are only ever a few of them.

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub(crate) struct Migration;

const CREATE_INDEX: &str = "CREATE INDEX conversations_human_active_at \
     ON conversations (human_active_at) WHERE mode = 'human'";

// async_trait cannot express the trait's lifetimes with `'_`, so the elided form is used.
#[allow(elided_lifetimes_in_paths)]
#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        // One column per statement: SQLite alters a table one change at a time.
        let columns = [
            string("mode").default("assistant").to_owned(),
            timestamp_with_time_zone_null("mode_changed_at"),
            text_null("handoff_reason"),
            timestamp_with_time_zone_null("human_active_at"),
        ];
        for mut column in columns {
            manager
                .alter_table(
                    Table::alter()
                        .table("conversations")
                        .add_column(&mut column)
                        .to_owned(),
                )
                .await?;
        }
        manager
            .get_connection()
            .execute_unprepared(CREATE_INDEX)
            .await?;
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .get_connection()
            .execute_unprepared("DROP INDEX IF EXISTS conversations_human_active_at")
            .await?;
        for column in [
            "human_active_at",
            "handoff_reason",
            "mode_changed_at",
            "mode",
        ] {
            manager
                .alter_table(
                    Table::alter()
                        .table("conversations")
                        .drop_column(column)
                        .to_owned(),
                )
                .await?;
        }
        Ok(())
    }
}
