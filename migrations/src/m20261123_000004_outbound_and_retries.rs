//! One outbound path: an outbound message keeps what it is on the wire (text or template, its
//! recipient) so that one left pending at a stop is sent again as what it was; and inbound
//! events that failed on a transient error are retried with backoff while the service runs.

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub(crate) struct Migration;

// async_trait cannot express the trait's lifetimes with `'_`, so the elided form is used.
#[allow(elided_lifetimes_in_paths)]
#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter()
                    .table("messages")
                    .add_column(json_null("outbound"))
                    .to_owned(),
            )
            .await?;
        manager
            .alter_table(
                Table::alter()
                    .table("webhook_events")
                    .add_column(integer("attempts").default(0))
                    .to_owned(),
            )
            .await?;
        manager
            .alter_table(
                Table::alter()
                    .table("webhook_events")
                    .add_column(timestamp_with_time_zone_null("next_attempt_at"))
                    .to_owned(),
            )
            .await?;
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        for column in ["next_attempt_at", "attempts"] {
            manager
                .alter_table(
                    Table::alter()
                        .table("webhook_events")
                        .drop_column(column)
                        .to_owned(),
                )
                .await?;
        }
        manager
            .alter_table(
                Table::alter()
                    .table("messages")
                    .drop_column("outbound")
                    .to_owned(),
            )
            .await?;
        Ok(())
    }
}
