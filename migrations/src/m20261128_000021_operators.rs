//! Operators are people: accounts with a password (argon2id), one-time invitations, console
//! sessions as rows (valid on every node, kept over a restart), who answered a message,
//! who a conversation is assigned to, private notes and saved replies.
//!
//! Notes have a table of their own rather than a role of `messages`: every reader of messages
//! (the model's history, the API's history, sends, events, usage) then leaves them out by
//! construction, not by remembering a filter.

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub(crate) struct Migration;

// async_trait cannot express the trait's lifetimes with `'_`, so the elided form is used.
#[allow(elided_lifetimes_in_paths)]
#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table("operators")
                    .col(uuid("id").primary_key())
                    .col(big_integer("workspace_id"))
                    .col(string("email"))
                    .col(string("name"))
                    .col(string("role"))
                    .col(string_null("password_hash"))
                    .col(timestamp_with_time_zone_null("disabled_at"))
                    .col(timestamp_with_time_zone("created_at"))
                    .foreign_key(
                        ForeignKey::create()
                            .from("operators", "workspace_id")
                            .to("workspaces", "id")
                            .on_delete(ForeignKeyAction::Cascade),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("operators_workspace_email")
                    .table("operators")
                    .col("workspace_id")
                    .col("email")
                    .unique()
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("operators_email")
                    .table("operators")
                    .col("email")
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table("operator_invitations")
                    .col(string("token_hash").primary_key())
                    .col(uuid("operator_id"))
                    .col(timestamp_with_time_zone("expires_at"))
                    .col(timestamp_with_time_zone_null("used_at"))
                    .col(timestamp_with_time_zone("created_at"))
                    .foreign_key(
                        ForeignKey::create()
                            .from("operator_invitations", "operator_id")
                            .to("operators", "id")
                            .on_delete(ForeignKeyAction::Cascade),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table("console_sessions")
                    .col(string("token_hash").primary_key())
                    .col(big_integer("workspace_id"))
                    .col(uuid_null("operator_id"))
                    .col(uuid_null("api_key_id"))
                    .col(timestamp_with_time_zone("created_at"))
                    .col(timestamp_with_time_zone("seen_at"))
                    .foreign_key(
                        ForeignKey::create()
                            .from("console_sessions", "workspace_id")
                            .to("workspaces", "id")
                            .on_delete(ForeignKeyAction::Cascade),
                    )
                    .to_owned(),
            )
            .await?;
        for column in ["operator_id", "api_key_id", "workspace_id"] {
            manager
                .create_index(
                    Index::create()
                        .name(format!("console_sessions_{column}"))
                        .table("console_sessions")
                        .col(column)
                        .to_owned(),
                )
                .await?;
        }
        manager
            .create_table(
                Table::create()
                    .table("saved_replies")
                    .col(uuid("id").primary_key())
                    .col(big_integer("workspace_id"))
                    .col(string("shortcut"))
                    .col(text("text"))
                    .col(timestamp_with_time_zone("created_at"))
                    .foreign_key(
                        ForeignKey::create()
                            .from("saved_replies", "workspace_id")
                            .to("workspaces", "id")
                            .on_delete(ForeignKeyAction::Cascade),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("saved_replies_workspace_shortcut")
                    .table("saved_replies")
                    .col("workspace_id")
                    .col("shortcut")
                    .unique()
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table("conversation_notes")
                    .col(uuid("id").primary_key())
                    .col(big_integer("workspace_id"))
                    .col(uuid("conversation_id"))
                    .col(uuid_null("operator_id"))
                    .col(text("text"))
                    .col(timestamp_with_time_zone("created_at"))
                    .foreign_key(
                        ForeignKey::create()
                            .from("conversation_notes", "conversation_id")
                            .to("conversations", "id")
                            .on_delete(ForeignKeyAction::Cascade),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("conversation_notes_conversation")
                    .table("conversation_notes")
                    .col("conversation_id")
                    .col("created_at")
                    .to_owned(),
            )
            .await?;
        manager
            .alter_table(
                Table::alter()
                    .table("messages")
                    .add_column(ColumnDef::new("operator_id").uuid().null())
                    .to_owned(),
            )
            .await?;
        manager
            .alter_table(
                Table::alter()
                    .table("conversations")
                    .add_column(ColumnDef::new("assigned_operator_id").uuid().null())
                    .to_owned(),
            )
            .await?;
        manager
            .alter_table(
                Table::alter()
                    .table("conversations")
                    .add_column(
                        ColumnDef::new("assigned_at")
                            .timestamp_with_time_zone()
                            .null(),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("conversations_assigned")
                    .table("conversations")
                    .col("assigned_operator_id")
                    .col("assigned_at")
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_index(
                Index::drop()
                    .name("conversations_assigned")
                    .table("conversations")
                    .to_owned(),
            )
            .await?;
        for column in ["assigned_at", "assigned_operator_id"] {
            manager
                .alter_table(
                    Table::alter()
                        .table("conversations")
                        .drop_column(column)
                        .to_owned(),
                )
                .await?;
        }
        manager
            .alter_table(
                Table::alter()
                    .table("messages")
                    .drop_column("operator_id")
                    .to_owned(),
            )
            .await?;
        for table in [
            "conversation_notes",
            "saved_replies",
            "console_sessions",
            "operator_invitations",
            "operators",
        ] {
            manager
                .drop_table(Table::drop().table(table).to_owned())
                .await?;
        }
        Ok(())
    }
}
