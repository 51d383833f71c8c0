//! Usage and quotas: counters in UTC day buckets, written in the transaction of the fact they
//! count; a workspace's quotas, set by the installation's operator; and a conversation's token
//! totals beside it.
//!
//! A counter's key never holds a NULL (SQL's NULLs are all different in a unique key, so an
//! upsert would never meet its row): a count with no assistant or no channel is kept under the
//! nil UUID.

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
                    .table("usage_daily")
                    .col(big_integer("workspace_id"))
                    .col(date("day"))
                    .col(uuid("assistant_id"))
                    .col(uuid("channel_id"))
                    .col(string("metric"))
                    .col(big_integer("value"))
                    .primary_key(
                        Index::create()
                            .col("workspace_id")
                            .col("day")
                            .col("assistant_id")
                            .col("channel_id")
                            .col("metric"),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table("workspace_quotas")
                    .col(big_integer("workspace_id").primary_key())
                    .col(big_integer_null("model_tokens_per_month"))
                    .col(big_integer_null("messages_per_day"))
                    .col(json_null("messages_per_day_by_category"))
                    .col(integer_null("requests_per_second_per_key"))
                    .col(timestamp_with_time_zone("updated_at"))
                    .to_owned(),
            )
            .await?;
        for column in ["prompt_tokens", "completion_tokens"] {
            manager
                .alter_table(
                    Table::alter()
                        .table("conversations")
                        .add_column(ColumnDef::new(column).big_integer().not_null().default(0))
                        .to_owned(),
                )
                .await?;
        }
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        for column in ["prompt_tokens", "completion_tokens"] {
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
            .drop_table(Table::drop().table("workspace_quotas").to_owned())
            .await?;
        manager
            .drop_table(Table::drop().table("usage_daily").to_owned())
            .await
    }
}
