//! Deleting a campaign keeps its finished flows readable (their statistics and recipients), as
//! deleting a channel keeps its conversations: the campaign is marked deleted (`deleted_at`)
//! instead of removed, so the flows' rows, which cascade from it, stay.

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
                    .table("campaigns")
                    .add_column(timestamp_with_time_zone_null("deleted_at"))
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter()
                    .table("campaigns")
                    .drop_column("deleted_at")
                    .to_owned(),
            )
            .await
    }
}
