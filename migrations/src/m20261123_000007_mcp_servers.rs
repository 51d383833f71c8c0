//! MCP servers of a workspace (their header values sealed) and which assistants use them.

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
                    .table("mcp_servers")
                    .col(pk_uuid("id"))
                    .col(big_integer("workspace_id"))
                    .col(string("name"))
                    .col(string("transport"))
                    .col(text("url"))
                    .col(json("headers"))
                    .col(timestamp_with_time_zone("created_at"))
                    .col(timestamp_with_time_zone("updated_at"))
                    .foreign_key(
                        ForeignKey::create()
                            .name("mcp_servers_workspace_id_fkey")
                            .from("mcp_servers", "workspace_id")
                            .to("workspaces", "id")
                            .on_delete(ForeignKeyAction::Cascade),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("mcp_servers_workspace_id_idx")
                    .table("mcp_servers")
                    .col("workspace_id")
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table("assistant_mcp_servers")
                    .col(pk_uuid("id"))
                    .col(big_integer("workspace_id"))
                    .col(uuid("assistant_id"))
                    .col(uuid("mcp_server_id"))
                    .col(timestamp_with_time_zone("created_at"))
                    .foreign_key(
                        ForeignKey::create()
                            .name("assistant_mcp_servers_assistant_id_fkey")
                            .from("assistant_mcp_servers", "assistant_id")
                            .to("assistants", "id")
                            .on_delete(ForeignKeyAction::Cascade),
                    )
                    .foreign_key(
                        ForeignKey::create()
                            .name("assistant_mcp_servers_mcp_server_id_fkey")
                            .from("assistant_mcp_servers", "mcp_server_id")
                            .to("mcp_servers", "id")
                            .on_delete(ForeignKeyAction::Cascade),
                    )
                    .to_owned(),
            )
            .await?;
        // Attaching is idempotent: one row per assistant and server.
        manager
            .create_index(
                Index::create()
                    .name("assistant_mcp_servers_assistant_id_mcp_server_id_key")
                    .table("assistant_mcp_servers")
                    .col("assistant_id")
                    .col("mcp_server_id")
                    .unique()
                    .to_owned(),
            )
            .await?;
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_table(Table::drop().table("assistant_mcp_servers").to_owned())
            .await?;
        manager
            .drop_table(Table::drop().table("mcp_servers").to_owned())
            .await?;
        Ok(())
    }
}
