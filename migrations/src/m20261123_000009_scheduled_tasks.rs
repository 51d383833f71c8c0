//! Scheduled tasks and their runs. A run is written `running` before its task executes, so a
//! stop mid-run is seen at start-up and never repeated.

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
                    .table("scheduled_tasks")
                    .col(pk_uuid("id"))
                    .col(big_integer("workspace_id"))
                    .col(string("name"))
                    .col(string("task_type"))
                    .col(json("payload"))
                    .col(timestamp_with_time_zone("scheduled_at"))
                    .col(string_null("recurrence"))
                    .col(string("timezone"))
                    .col(string("status"))
                    .col(timestamp_with_time_zone_null("next_run_at"))
                    .col(timestamp_with_time_zone_null("last_run_at"))
                    .col(integer("run_count"))
                    .col(text_null("last_error"))
                    .col(timestamp_with_time_zone("created_at"))
                    .col(timestamp_with_time_zone("updated_at"))
                    .foreign_key(
                        ForeignKey::create()
                            .name("scheduled_tasks_workspace_id_fkey")
                            .from("scheduled_tasks", "workspace_id")
                            .to("workspaces", "id")
                            .on_delete(ForeignKeyAction::Cascade),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("scheduled_tasks_status_next_run_at_idx")
                    .table("scheduled_tasks")
                    .col("status")
                    .col("next_run_at")
                    .to_owned(),
            )
            .await?;
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
            .create_table(
                Table::create()
                    .table("scheduled_task_runs")
                    .col(pk_uuid("id"))
                    .col(uuid("task_id"))
                    .col(timestamp_with_time_zone("due_at"))
                    .col(timestamp_with_time_zone("started_at"))
                    .col(timestamp_with_time_zone_null("finished_at"))
                    .col(string("status"))
                    .col(boolean("late"))
                    .col(text_null("error"))
                    .col(json_null("result"))
                    .foreign_key(
                        ForeignKey::create()
                            .name("scheduled_task_runs_task_id_fkey")
                            .from("scheduled_task_runs", "task_id")
                            .to("scheduled_tasks", "id")
                            .on_delete(ForeignKeyAction::Cascade),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("scheduled_task_runs_task_id_idx")
                    .table("scheduled_task_runs")
                    .col("task_id")
                    .to_owned(),
            )
            .await?;
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        for table in ["scheduled_task_runs", "scheduled_tasks"] {
            manager
                .drop_table(Table::drop().table(table).to_owned())
                .await?;
        }
        Ok(())
    }
}
