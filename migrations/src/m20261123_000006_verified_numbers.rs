//! A live channel's number as Meta verified it when the channel got its credentials: the
//! display number and the business's verified name.

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub(crate) struct Migration;

// async_trait cannot express the trait's lifetimes with `'_`, so the elided form is used.
#[allow(elided_lifetimes_in_paths)]
#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        for column in ["display_phone_number", "verified_name"] {
            manager
                .alter_table(
                    Table::alter()
                        .table("channels")
                        .add_column(string_null(column))
                        .to_owned(),
                )
                .await?;
        }
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        for column in ["verified_name", "display_phone_number"] {
            manager
                .alter_table(
                    Table::alter()
                        .table("channels")
                        .drop_column(column)
                        .to_owned(),
                )
                .await?;
        }
        Ok(())
    }
}
