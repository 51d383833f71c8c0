//! WhatsApp: inbound webhook events stored before they are answered (idempotent by message id),
//! the link from a reply to the message it answers, and a channel's credential health.

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
                    .table("webhook_events")
                    .col(pk_uuid("id"))
                    .col(big_integer("workspace_id"))
                    .col(uuid("channel_id"))
                    .col(string("platform_message_id"))
                    .col(json("payload"))
                    .col(string("status"))
                    .col(text_null("error"))
                    .col(timestamp_with_time_zone("received_at"))
                    .col(timestamp_with_time_zone_null("processed_at"))
                    .foreign_key(
                        ForeignKey::create()
                            .name("webhook_events_channel_id_fkey")
                            .from("webhook_events", "channel_id")
                            .to("channels", "id")
                            .on_delete(ForeignKeyAction::Cascade),
                    )
                    .to_owned(),
            )
            .await?;
        // Meta delivers at least once: a re-delivered message id is the same event.
        manager
            .create_index(
                Index::create()
                    .name("webhook_events_channel_id_platform_message_id_key")
                    .table("webhook_events")
                    .col("channel_id")
                    .col("platform_message_id")
                    .unique()
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("webhook_events_status_idx")
                    .table("webhook_events")
                    .col("status")
                    .to_owned(),
            )
            .await?;
        manager
            .alter_table(
                Table::alter()
                    .table("messages")
                    .add_column(uuid_null("reply_to_message_id"))
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("messages_reply_to_message_id_idx")
                    .table("messages")
                    .col("reply_to_message_id")
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("messages_status_idx")
                    .table("messages")
                    .col("status")
                    .to_owned(),
            )
            .await?;
        manager
            .alter_table(
                Table::alter()
                    .table("channels")
                    .add_column(text_null("credentials_error"))
                    .to_owned(),
            )
            .await?;
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter()
                    .table("channels")
                    .drop_column("credentials_error")
                    .to_owned(),
            )
            .await?;
        manager
            .drop_index(
                Index::drop()
                    .name("messages_status_idx")
                    .table("messages")
                    .to_owned(),
            )
            .await?;
        manager
            .drop_index(
                Index::drop()
                    .name("messages_reply_to_message_id_idx")
                    .table("messages")
                    .to_owned(),
            )
            .await?;
        manager
            .alter_table(
                Table::alter()
                    .table("messages")
                    .drop_column("reply_to_message_id")
                    .to_owned(),
            )
            .await?;
        manager
            .drop_table(Table::drop().table("webhook_events").to_owned())
            .await?;
        Ok(())
    }
}
