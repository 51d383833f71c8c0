//! Template campaigns, the flows that send them, one row per flow recipient (its progress, so
//! that a restarted flow continues where it stopped), identities' opt-out, and the templates of
//! sandbox channels (which have no Meta to keep them).

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
                    .table("identities")
                    .add_column(boolean("opted_out").default(false))
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table("sandbox_templates")
                    .col(pk_uuid("id"))
                    .col(uuid("channel_id"))
                    .col(string("name"))
                    .col(string("language"))
                    .col(string("category"))
                    .col(json("components"))
                    .col(timestamp_with_time_zone("created_at"))
                    .foreign_key(
                        ForeignKey::create()
                            .name("sandbox_templates_channel_id_fkey")
                            .from("sandbox_templates", "channel_id")
                            .to("channels", "id")
                            .on_delete(ForeignKeyAction::Cascade),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("sandbox_templates_channel_id_name_language_key")
                    .table("sandbox_templates")
                    .col("channel_id")
                    .col("name")
                    .col("language")
                    .unique()
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table("campaigns")
                    .col(pk_uuid("id"))
                    .col(big_integer("workspace_id"))
                    .col(uuid("channel_id"))
                    .col(string("name"))
                    .col(json_null("description"))
                    .col(string("status"))
                    .col(string("template_name"))
                    .col(string("template_language"))
                    .col(string("params_strategy"))
                    .col(json("template_parameters"))
                    .col(timestamp_with_time_zone("created_at"))
                    .col(timestamp_with_time_zone("updated_at"))
                    .foreign_key(
                        ForeignKey::create()
                            .name("campaigns_workspace_id_fkey")
                            .from("campaigns", "workspace_id")
                            .to("workspaces", "id")
                            .on_delete(ForeignKeyAction::Cascade),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("campaigns_workspace_id_id_idx")
                    .table("campaigns")
                    .col("workspace_id")
                    .col("id")
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table("flows")
                    .col(pk_uuid("id"))
                    .col(big_integer("workspace_id"))
                    .col(uuid("campaign_id"))
                    .col(uuid("channel_id"))
                    .col(text_null("description"))
                    .col(string("status"))
                    .col(json("configuration"))
                    .col(big_integer("total"))
                    .col(text_null("reason"))
                    .col(timestamp_with_time_zone_null("started_at"))
                    .col(timestamp_with_time_zone_null("sends_done_at"))
                    .col(timestamp_with_time_zone_null("finished_at"))
                    .col(timestamp_with_time_zone("created_at"))
                    .col(timestamp_with_time_zone("updated_at"))
                    .foreign_key(
                        ForeignKey::create()
                            .name("flows_workspace_id_fkey")
                            .from("flows", "workspace_id")
                            .to("workspaces", "id")
                            .on_delete(ForeignKeyAction::Cascade),
                    )
                    .foreign_key(
                        ForeignKey::create()
                            .name("flows_campaign_id_fkey")
                            .from("flows", "campaign_id")
                            .to("campaigns", "id")
                            .on_delete(ForeignKeyAction::Cascade),
                    )
                    .to_owned(),
            )
            .await?;
        for (name, column) in [
            ("flows_workspace_id_id_idx", "workspace_id"),
            ("flows_campaign_id_idx", "campaign_id"),
            ("flows_channel_id_idx", "channel_id"),
            ("flows_status_idx", "status"),
        ] {
            let mut index = Index::create();
            index.name(name).table("flows").col(column);
            if column == "workspace_id" {
                index.col("id");
            }
            manager.create_index(index.to_owned()).await?;
        }
        manager
            .create_table(
                Table::create()
                    .table("flow_recipients")
                    .col(pk_uuid("id"))
                    .col(uuid("flow_id"))
                    .col(big_integer("position"))
                    .col(uuid("identity_id"))
                    .col(string("contact"))
                    .col(string("status"))
                    .col(integer("attempts"))
                    .col(uuid_null("message_id"))
                    .col(string_null("platform_message_id"))
                    .col(big_integer_null("error_code"))
                    .col(text_null("error"))
                    .col(timestamp_with_time_zone_null("next_attempt_at"))
                    .col(timestamp_with_time_zone("updated_at"))
                    .foreign_key(
                        ForeignKey::create()
                            .name("flow_recipients_flow_id_fkey")
                            .from("flow_recipients", "flow_id")
                            .to("flows", "id")
                            .on_delete(ForeignKeyAction::Cascade),
                    )
                    .to_owned(),
            )
            .await?;
        // One row per identity and flow; the position keeps the order of `contactUids`.
        manager
            .create_index(
                Index::create()
                    .name("flow_recipients_flow_id_identity_id_key")
                    .table("flow_recipients")
                    .col("flow_id")
                    .col("identity_id")
                    .unique()
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("flow_recipients_flow_id_status_position_idx")
                    .table("flow_recipients")
                    .col("flow_id")
                    .col("status")
                    .col("position")
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("flow_recipients_platform_message_id_idx")
                    .table("flow_recipients")
                    .col("platform_message_id")
                    .to_owned(),
            )
            .await?;
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        for table in ["flow_recipients", "flows", "campaigns", "sandbox_templates"] {
            manager
                .drop_table(Table::drop().table(table).to_owned())
                .await?;
        }
        manager
            .alter_table(
                Table::alter()
                    .table("identities")
                    .drop_column("opted_out")
                    .to_owned(),
            )
            .await?;
        Ok(())
    }
}
