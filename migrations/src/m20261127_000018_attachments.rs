//! Media: one `attachments` row per file a message carries, written in the transaction that
//! stores the message and worked off by the channel's media worker (pending → stored or
//! failed). The file itself lives in the media store under a content address; the row says
//! where (`storage_key`) and what Meta promised of it (`sha256`, the media id and its expiry).

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
                    .table("attachments")
                    .col(pk_uuid("id"))
                    .col(uuid("message_id"))
                    .col(big_integer("workspace_id"))
                    .col(uuid("channel_id"))
                    .col(uuid("identity_id"))
                    .col(string("kind"))
                    .col(string_null("mime_type"))
                    .col(big_integer_null("size"))
                    .col(string_null("sha256"))
                    .col(text_null("caption"))
                    .col(text_null("file_name"))
                    .col(boolean("voice"))
                    .col(string("status"))
                    .col(text_null("failure"))
                    .col(string_null("storage_key"))
                    .col(string_null("meta_media_id"))
                    .col(timestamp_with_time_zone_null("expires_at"))
                    .col(integer("attempts"))
                    .col(timestamp_with_time_zone("next_attempt_at"))
                    .col(text_null("transcript"))
                    .col(timestamp_with_time_zone("created_at"))
                    .col(timestamp_with_time_zone("updated_at"))
                    .foreign_key(
                        ForeignKey::create()
                            .name("attachments_message_id_fkey")
                            .from("attachments", "message_id")
                            .to("messages", "id")
                            .on_delete(ForeignKeyAction::Cascade),
                    )
                    .to_owned(),
            )
            .await?;
        for (name, cols) in [
            ("attachments_message_id_idx", &["message_id"][..]),
            (
                "attachments_status_next_idx",
                &["status", "next_attempt_at"][..],
            ),
            ("attachments_identity_id_idx", &["identity_id"][..]),
            ("attachments_storage_key_idx", &["storage_key"][..]),
        ] {
            let mut index = Index::create();
            index.name(name).table("attachments");
            for col in cols {
                index.col(*col);
            }
            manager.create_index(index.to_owned()).await?;
        }
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_table(Table::drop().table("attachments").to_owned())
            .await
    }
}
