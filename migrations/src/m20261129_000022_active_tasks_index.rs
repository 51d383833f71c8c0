//! A workspace's tasks by status: the task quota counts a workspace's scheduled, paused and
//! running tasks, which the workspace index alone found only by reading every task of the
//! workspace, finished ones too. The new index serves the workspace's listing as the old one did
//! (its first column), so it replaces it.

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub(crate) struct Migration;

// async_trait cannot express the trait's lifetimes with `'_`, so the elided form is used.
#[allow(elided_lifetimes_in_paths)]
#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_index(
                Index::create()
                    .name("scheduled_tasks_workspace_id_status_idx")
                    .table("scheduled_tasks")
                    .col("workspace_id")
                    .col("status")
                    .to_owned(),
            )
            .await?;
        manager
            .drop_index(
                Index::drop()
                    .name("scheduled_tasks_workspace_id_idx")
                    .table("scheduled_tasks")
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_index(
                Index::create()
                    .name("scheduled_tasks_workspace_id_idx")
                    .table("scheduled_tasks")
                    .col("workspace_id")
                    .to_owned(),
            )
            .await?;
        manager
            .drop_index(
                Index::drop()
                    .name("scheduled_tasks_workspace_id_status_idx")
                    .table("scheduled_tasks")
                    .to_owned(),
            )
            .await
    }
}
