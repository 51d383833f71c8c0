//! Tenancy: businesses hold workspaces, users are members of workspaces, API keys belong to one
//! workspace and the user who created them.

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
                    .table("businesses")
                    .col(pk_uuid("id"))
                    .col(string("name"))
                    .col(timestamp_with_time_zone("created_at"))
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("businesses_name_key")
                    .table("businesses")
                    .col("name")
                    .unique()
                    .to_owned(),
            )
            .await?;

        manager
            .create_table(
                Table::create()
                    .table("workspaces")
                    .col(big_pk_auto("id"))
                    .col(uuid("business_id"))
                    .col(string("name"))
                    .col(text_null("description"))
                    .col(timestamp_with_time_zone("created_at"))
                    .col(timestamp_with_time_zone("updated_at"))
                    .foreign_key(
                        ForeignKey::create()
                            .name("workspaces_business_id_fkey")
                            .from("workspaces", "business_id")
                            .to("businesses", "id")
                            .on_delete(ForeignKeyAction::Cascade),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("workspaces_business_id_name_key")
                    .table("workspaces")
                    .col("business_id")
                    .col("name")
                    .unique()
                    .to_owned(),
            )
            .await?;

        manager
            .create_table(
                Table::create()
                    .table("users")
                    .col(pk_uuid("id"))
                    .col(uuid("business_id"))
                    .col(string_null("email"))
                    .col(timestamp_with_time_zone("created_at"))
                    .foreign_key(
                        ForeignKey::create()
                            .name("users_business_id_fkey")
                            .from("users", "business_id")
                            .to("businesses", "id")
                            .on_delete(ForeignKeyAction::Cascade),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("users_business_id_email_key")
                    .table("users")
                    .col("business_id")
                    .col("email")
                    .unique()
                    .to_owned(),
            )
            .await?;

        manager
            .create_table(
                Table::create()
                    .table("workspace_members")
                    .col(big_integer("workspace_id"))
                    .col(uuid("user_id"))
                    .col(string("role"))
                    .col(timestamp_with_time_zone("created_at"))
                    .primary_key(Index::create().col("workspace_id").col("user_id"))
                    .foreign_key(
                        ForeignKey::create()
                            .name("workspace_members_workspace_id_fkey")
                            .from("workspace_members", "workspace_id")
                            .to("workspaces", "id")
                            .on_delete(ForeignKeyAction::Cascade),
                    )
                    .foreign_key(
                        ForeignKey::create()
                            .name("workspace_members_user_id_fkey")
                            .from("workspace_members", "user_id")
                            .to("users", "id")
                            .on_delete(ForeignKeyAction::Cascade),
                    )
                    .to_owned(),
            )
            .await?;

        manager
            .create_table(
                Table::create()
                    .table("api_keys")
                    .col(pk_uuid("id"))
                    .col(big_integer("workspace_id"))
                    .col(uuid("user_id"))
                    .col(string("name"))
                    .col(string("key_hash"))
                    .col(string("permissions"))
                    .col(timestamp_with_time_zone("created_at"))
                    .col(timestamp_with_time_zone_null("last_used_at"))
                    .col(timestamp_with_time_zone_null("expires_at"))
                    .col(timestamp_with_time_zone_null("revoked_at"))
                    .foreign_key(
                        ForeignKey::create()
                            .name("api_keys_workspace_id_fkey")
                            .from("api_keys", "workspace_id")
                            .to("workspaces", "id")
                            .on_delete(ForeignKeyAction::Cascade),
                    )
                    .foreign_key(
                        ForeignKey::create()
                            .name("api_keys_user_id_fkey")
                            .from("api_keys", "user_id")
                            .to("users", "id")
                            .on_delete(ForeignKeyAction::Cascade),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("api_keys_key_hash_key")
                    .table("api_keys")
                    .col("key_hash")
                    .unique()
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("api_keys_workspace_id_idx")
                    .table("api_keys")
                    .col("workspace_id")
                    .to_owned(),
            )
            .await?;
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        for table in [
            "api_keys",
            "workspace_members",
            "users",
            "workspaces",
            "businesses",
        ] {
            manager
                .drop_table(Table::drop().table(table).to_owned())
                .await?;
        }
        Ok(())
    }
}
