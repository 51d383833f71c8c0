//! Event webhooks: the business's endpoints (`event_webhooks`, their signing secrets sealed
//! like channel tokens, the previous one kept for a day after a rotation) and one durable row
//! per endpoint and event (`event_deliveries`), written in the transaction of the fact it
//! tells of and worked off by the delivery actor until it succeeds or runs out of retries.

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
                    .table("event_webhooks")
                    .col(pk_uuid("id"))
                    .col(big_integer("workspace_id"))
                    .col(text("url"))
                    .col(text_null("description"))
                    .col(json("events"))
                    .col(boolean("enabled"))
                    .col(text("secret"))
                    .col(text_null("previous_secret"))
                    .col(timestamp_with_time_zone_null("previous_secret_until"))
                    .col(timestamp_with_time_zone_null("failing_since"))
                    .col(text_null("disabled_reason"))
                    .col(timestamp_with_time_zone("created_at"))
                    .col(timestamp_with_time_zone("updated_at"))
                    .foreign_key(
                        ForeignKey::create()
                            .name("event_webhooks_workspace_id_fkey")
                            .from("event_webhooks", "workspace_id")
                            .to("workspaces", "id")
                            .on_delete(ForeignKeyAction::Cascade),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("event_webhooks_workspace_id_idx")
                    .table("event_webhooks")
                    .col("workspace_id")
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table("event_deliveries")
                    .col(pk_uuid("id"))
                    .col(big_integer("workspace_id"))
                    .col(uuid("endpoint_id"))
                    .col(uuid("event_id"))
                    .col(string("event_type"))
                    .col(text("body"))
                    .col(string("status"))
                    .col(integer("attempts"))
                    .col(integer_null("last_status_code"))
                    .col(text_null("last_error"))
                    .col(timestamp_with_time_zone("next_attempt_at"))
                    .col(timestamp_with_time_zone("created_at"))
                    .col(timestamp_with_time_zone("updated_at"))
                    .foreign_key(
                        ForeignKey::create()
                            .name("event_deliveries_endpoint_id_fkey")
                            .from("event_deliveries", "endpoint_id")
                            .to("event_webhooks", "id")
                            .on_delete(ForeignKeyAction::Cascade),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("event_deliveries_endpoint_status_next_idx")
                    .table("event_deliveries")
                    .col("endpoint_id")
                    .col("status")
                    .col("next_attempt_at")
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("event_deliveries_status_next_idx")
                    .table("event_deliveries")
                    .col("status")
                    .col("next_attempt_at")
                    .to_owned(),
            )
            .await?;
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        for table in ["event_deliveries", "event_webhooks"] {
            manager
                .drop_table(Table::drop().table(table).to_owned())
                .await?;
        }
        Ok(())
    }
}
