//! Core resources: workers and their assistants, channels, stages, identities with their contact
//! points, stage history and memory, conversations and messages.
//!
//! Uniqueness the product depends on is declared here (DESIGN.md §3), not checked in code.

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub(crate) struct Migration;

/// A foreign key from `table.column` to `target.id`.
fn reference(
    table: &str,
    column: &str,
    target: &str,
    on_delete: ForeignKeyAction,
) -> ForeignKeyCreateStatement {
    ForeignKey::create()
        .name(format!("{table}_{column}_fkey"))
        .from(table.to_owned(), column.to_owned())
        .to(target.to_owned(), "id")
        .on_delete(on_delete)
        .to_owned()
}

fn index(table: &str, columns: &[&str], unique: bool) -> IndexCreateStatement {
    let suffix = if unique { "key" } else { "idx" };
    let mut statement = Index::create();
    statement
        .name(format!("{table}_{}_{suffix}", columns.join("_")))
        .table(table.to_owned());
    for column in columns {
        statement.col((*column).to_owned());
    }
    if unique {
        statement.unique();
    }
    statement.to_owned()
}

/// Every resource row belongs to a workspace and goes with it.
fn scoped(table: &str) -> TableCreateStatement {
    Table::create()
        .table(table.to_owned())
        .col(pk_uuid("id"))
        .col(big_integer("workspace_id"))
        .foreign_key(&mut reference(
            table,
            "workspace_id",
            "workspaces",
            ForeignKeyAction::Cascade,
        ))
        .to_owned()
}

// async_trait cannot express the trait's lifetimes with `'_`, so the elided form is used.
#[allow(elided_lifetimes_in_paths)]
#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let cascade = ForeignKeyAction::Cascade;
        let set_null = ForeignKeyAction::SetNull;

        manager
            .create_table(
                scoped("workers")
                    .col(string("name"))
                    .col(text_null("description"))
                    .col(string_null("timezone"))
                    .col(timestamp_with_time_zone("created_at"))
                    .col(timestamp_with_time_zone("updated_at"))
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(index("workers", &["workspace_id"], false))
            .await?;

        manager
            .create_table(
                scoped("assistants")
                    .col(uuid("worker_id"))
                    .col(string("name"))
                    .col(text("instructions"))
                    .col(json("languages"))
                    .col(string("provider"))
                    .col(string_null("model"))
                    .col(json("settings"))
                    .col(timestamp_with_time_zone("created_at"))
                    .col(timestamp_with_time_zone("updated_at"))
                    .foreign_key(&mut reference(
                        "assistants",
                        "worker_id",
                        "workers",
                        cascade,
                    ))
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(index("assistants", &["worker_id"], false))
            .await?;

        manager
            .create_table(
                scoped("channels")
                    .col(string("name"))
                    .col(string("channel_type"))
                    .col(string("integration"))
                    .col(boolean("active"))
                    .col(json("settings"))
                    .col(string_null("phone_number_id"))
                    .col(string_null("business_account_id"))
                    .col(text_null("access_token_encrypted"))
                    .col(uuid_null("worker_id"))
                    .col(string("verify_token"))
                    .col(timestamp_with_time_zone("created_at"))
                    .col(timestamp_with_time_zone("updated_at"))
                    .foreign_key(&mut reference("channels", "worker_id", "workers", set_null))
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(index("channels", &["workspace_id"], false))
            .await?;
        // Inbound webhooks are routed by phone number id, so one number is one channel.
        manager
            .create_index(index("channels", &["phone_number_id"], true))
            .await?;

        manager
            .create_table(
                scoped("stages")
                    .col(string("name"))
                    .col(text_null("description"))
                    .col(json("metadata"))
                    .col(timestamp_with_time_zone("created_at"))
                    .col(timestamp_with_time_zone("updated_at"))
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(index("stages", &["workspace_id", "name"], true))
            .await?;

        manager
            .create_table(
                scoped("identities")
                    .col(string_null("name"))
                    .col(string_null("external_id"))
                    .col(json("metadata"))
                    .col(uuid_null("stage_id"))
                    .col(timestamp_with_time_zone("created_at"))
                    .col(timestamp_with_time_zone("updated_at"))
                    .foreign_key(&mut reference("identities", "stage_id", "stages", set_null))
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(index("identities", &["workspace_id", "external_id"], true))
            .await?;

        manager
            .create_table(
                scoped("contact_points")
                    .col(uuid("identity_id"))
                    .col(string("kind"))
                    .col(string("value"))
                    .col(boolean("is_primary"))
                    .col(timestamp_with_time_zone("created_at"))
                    .foreign_key(&mut reference(
                        "contact_points",
                        "identity_id",
                        "identities",
                        cascade,
                    ))
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(index(
                "contact_points",
                &["workspace_id", "kind", "value"],
                true,
            ))
            .await?;
        manager
            .create_index(index("contact_points", &["identity_id"], false))
            .await?;

        manager
            .create_table(
                scoped("identity_stages")
                    .col(uuid("identity_id"))
                    .col(uuid_null("stage_id"))
                    .col(string("stage_name"))
                    .col(json("metadata"))
                    .col(timestamp_with_time_zone("created_at"))
                    .foreign_key(&mut reference(
                        "identity_stages",
                        "identity_id",
                        "identities",
                        cascade,
                    ))
                    .foreign_key(&mut reference(
                        "identity_stages",
                        "stage_id",
                        "stages",
                        set_null,
                    ))
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(index("identity_stages", &["identity_id"], false))
            .await?;

        manager
            .create_table(
                scoped("memory_entries")
                    .col(uuid("identity_id"))
                    .col(string("key"))
                    .col(json("value"))
                    .col(json("metadata"))
                    .col(timestamp_with_time_zone("created_at"))
                    .col(timestamp_with_time_zone("updated_at"))
                    .foreign_key(&mut reference(
                        "memory_entries",
                        "identity_id",
                        "identities",
                        cascade,
                    ))
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(index("memory_entries", &["identity_id", "key"], true))
            .await?;

        manager
            .create_table(
                scoped("conversations")
                    .col(uuid("identity_id"))
                    .col(uuid("channel_id"))
                    .col(uuid_null("assistant_id"))
                    .col(string("status"))
                    .col(timestamp_with_time_zone("started_at"))
                    .col(timestamp_with_time_zone("last_message_at"))
                    .foreign_key(&mut reference(
                        "conversations",
                        "identity_id",
                        "identities",
                        cascade,
                    ))
                    .foreign_key(&mut reference(
                        "conversations",
                        "channel_id",
                        "channels",
                        cascade,
                    ))
                    .foreign_key(&mut reference(
                        "conversations",
                        "assistant_id",
                        "assistants",
                        set_null,
                    ))
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(index(
                "conversations",
                &["identity_id", "channel_id"],
                false,
            ))
            .await?;
        manager
            .create_index(index(
                "conversations",
                &["workspace_id", "last_message_at"],
                false,
            ))
            .await?;

        manager
            .create_table(
                scoped("messages")
                    .col(uuid("conversation_id"))
                    .col(uuid("channel_id"))
                    .col(string("direction"))
                    .col(string("role"))
                    .col(text("content"))
                    .col(string("status"))
                    .col(string_null("platform_message_id"))
                    .col(json_null("error"))
                    .col(json_null("usage"))
                    .col(json_null("tool_calls"))
                    .col(string_null("tool_call_id"))
                    .col(timestamp_with_time_zone("created_at"))
                    .foreign_key(&mut reference(
                        "messages",
                        "conversation_id",
                        "conversations",
                        cascade,
                    ))
                    .foreign_key(&mut reference(
                        "messages",
                        "channel_id",
                        "channels",
                        cascade,
                    ))
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(index("messages", &["conversation_id", "created_at"], false))
            .await?;
        // A re-delivered webhook carries the same platform id and must not be stored twice.
        manager
            .create_index(index(
                "messages",
                &["channel_id", "platform_message_id"],
                true,
            ))
            .await?;
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        for table in [
            "messages",
            "conversations",
            "memory_entries",
            "identity_stages",
            "contact_points",
            "identities",
            "stages",
            "channels",
            "assistants",
            "workers",
        ] {
            manager
                .drop_table(Table::drop().table(table.to_owned()).to_owned())
                .await?;
        }
        Ok(())
    }
}
