//! Idempotent sends (`Idempotency-Key`, per workspace, 24 h), metadata kept on inbound
//! messages, and channels that are deleted without taking their conversations with them.

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
                    .table("idempotency_keys")
                    .col(pk_uuid("id"))
                    .col(big_integer("workspace_id"))
                    .col(string("key"))
                    .col(string("fingerprint"))
                    .col(integer_null("status_code"))
                    .col(json_null("response"))
                    .col(timestamp_with_time_zone("created_at"))
                    .foreign_key(
                        ForeignKey::create()
                            .name("idempotency_keys_workspace_id_fkey")
                            .from("idempotency_keys", "workspace_id")
                            .to("workspaces", "id")
                            .on_delete(ForeignKeyAction::Cascade),
                    )
                    .to_owned(),
            )
            .await?;
        // One answer per key and workspace: a second request with the key finds the first.
        manager
            .create_index(
                Index::create()
                    .name("idempotency_keys_workspace_id_key_key")
                    .table("idempotency_keys")
                    .col("workspace_id")
                    .col("key")
                    .unique()
                    .to_owned(),
            )
            .await?;
        manager
            .alter_table(
                Table::alter()
                    .table("messages")
                    .add_column(json_null("metadata"))
                    .to_owned(),
            )
            .await?;
        // A deleted channel stays as a tombstone, so that its conversations and messages keep
        // their channel id and stay readable.
        manager
            .alter_table(
                Table::alter()
                    .table("channels")
                    .add_column(timestamp_with_time_zone_null("deleted_at"))
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
                    .drop_column("deleted_at")
                    .to_owned(),
            )
            .await?;
        manager
            .alter_table(
                Table::alter()
                    .table("messages")
                    .drop_column("metadata")
                    .to_owned(),
            )
            .await?;
        manager
            .drop_table(Table::drop().table("idempotency_keys").to_owned())
            .await?;
        Ok(())
    }
}
