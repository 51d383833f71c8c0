//! The cluster's coordination tables (DESIGN §2 "Cluster"): the membership table every node
//! heartbeats in, the partition leases that say which node owns what (with the epoch each
//! takeover increments, which claims are fenced by), and the settings fixed at the first start
//! (the partition count). Created on both databases; only a PostgreSQL cluster writes them.

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
                    .table("cluster_nodes")
                    .col(pk_uuid("id"))
                    .col(text("advertise_url"))
                    .col(timestamp_with_time_zone("started_at"))
                    .col(timestamp_with_time_zone("heartbeat_at"))
                    .col(boolean("draining"))
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table("partition_leases")
                    .col(integer("partition").primary_key())
                    .col(uuid_null("node_id"))
                    .col(big_integer("epoch"))
                    .col(timestamp_with_time_zone("expires_at"))
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table("cluster_settings")
                    .col(string("key").primary_key())
                    .col(big_integer("value"))
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        for table in ["cluster_settings", "partition_leases", "cluster_nodes"] {
            manager
                .drop_table(Table::drop().table(table).to_owned())
                .await?;
        }
        Ok(())
    }
}
