//! Scheduled tasks: when they run next and how their runs went; paused and resumed from the
//! page.

use askama::Template;
use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::response::Response;
use axum::routing::{get, post};
use parley_persistence::entities::scheduled_task;
use parley_persistence::{Page, TaskStatus, scheduled_tasks};
use uuid::Uuid;

use crate::http::AppState;
use parley_actors::scheduler::TaskMove;

use crate::http::error::ApiError;

use super::super::session::Console;
use super::super::view::{Done, Shell, when, when_or_dash};
use super::super::{Failure, Plain, acting, named, page, see_other};

/// Tasks, and runs of one task, a page shows.
const SHOWN: u64 = 100;

const DONE: &[(&str, &str)] = &[
    (
        "paused",
        "The task is paused: it does not run until you resume it.",
    ),
    ("resumed", "The task is scheduled again."),
];

pub(super) fn router() -> Router<AppState> {
    Router::new()
        .route("/console/tasks", get(tasks_page))
        .route("/console/tasks/{id}", get(task_page))
        .route("/console/tasks/{id}/pause", post(pause))
        .route("/console/tasks/{id}/resume", post(resume))
}

/// A task as the pages show it.
struct TaskLine {
    id: Uuid,
    name: String,
    kind: &'static str,
    status: &'static str,
    recurrence: String,
    next: String,
    last: String,
    runs: i32,
    error: String,
    may_pause: bool,
    may_resume: bool,
}

impl From<scheduled_task::Model> for TaskLine {
    fn from(t: scheduled_task::Model) -> Self {
        Self {
            id: t.id,
            kind: t.task_type.as_str(),
            status: t.status.as_str(),
            recurrence: t.recurrence.unwrap_or_else(|| "once".to_owned()),
            next: when_or_dash(t.next_run_at),
            last: when_or_dash(t.last_run_at),
            runs: t.run_count,
            error: t.last_error.unwrap_or_default(),
            may_pause: t.status == TaskStatus::Scheduled,
            may_resume: t.status == TaskStatus::Paused,
            name: t.name,
        }
    }
}

/// One run of a task.
struct RunLine {
    due: String,
    started: String,
    finished: String,
    status: &'static str,
    late: bool,
    error: String,
}

#[derive(Template)]
#[template(path = "console/tasks.html")]
struct TasksPage {
    shell: Shell,
    tasks: Vec<TaskLine>,
}

#[derive(Template)]
#[template(path = "console/task.html")]
struct TaskPage {
    shell: Shell,
    task: TaskLine,
    runs: Vec<RunLine>,
}

const FIRST: Page = Page {
    page: 1,
    limit: SHOWN,
};

async fn tasks_page(
    State(state): State<AppState>,
    console: Console,
    Query(query): Query<Done>,
) -> Result<Response, Failure> {
    let tasks = scheduled_tasks::list(&state.db, console.caller.workspace_id, FIRST)
        .await?
        .items
        .into_iter()
        .map(TaskLine::from)
        .collect();
    let shell = Shell::new(&console, "tasks").told(query.done.as_deref(), DONE);
    Ok(page(&TasksPage { shell, tasks }))
}

async fn task_page(
    State(state): State<AppState>,
    console: Console,
    Path(id): Path<String>,
    Query(query): Query<Done>,
) -> Result<Response, Failure> {
    let found = find(&state, &console, &id).await?;
    let shell = Shell::new(&console, "tasks").told(query.done.as_deref(), DONE);
    render(&state, found, shell).await
}

async fn render(
    state: &AppState,
    found: scheduled_task::Model,
    shell: Shell,
) -> Result<Response, Failure> {
    let runs = scheduled_tasks::runs(&state.db, found.id, FIRST)
        .await?
        .items
        .into_iter()
        .map(|r| RunLine {
            due: when(r.due_at),
            started: when(r.started_at),
            finished: when_or_dash(r.finished_at),
            status: r.status.as_str(),
            late: r.late,
            error: r.error.unwrap_or_default(),
        })
        .collect();
    Ok(page(&TaskPage {
        shell,
        task: found.into(),
        runs,
    }))
}

async fn pause(
    state: State<AppState>,
    console: Console,
    id: Path<String>,
    body: Bytes,
) -> Result<Response, Failure> {
    act(state, console, id, body, TaskMove::Pause, "paused").await
}

async fn resume(
    state: State<AppState>,
    console: Console,
    id: Path<String>,
    body: Bytes,
) -> Result<Response, Failure> {
    act(state, console, id, body, TaskMove::Resume, "resumed").await
}

async fn act(
    State(state): State<AppState>,
    console: Console,
    Path(id): Path<String>,
    body: Bytes,
    how: TaskMove,
    done: &str,
) -> Result<Response, Failure> {
    let _: Plain = acting(&console, &body)?;
    let found = find(&state, &console, &id).await?;
    let scheduler = state.actors.scheduler();
    let moved = scheduler.move_task(&state.db, &found, how).await;
    match moved.map_err(ApiError::from) {
        Ok(moved) => Ok(see_other(&format!(
            "/console/tasks/{}?done={done}",
            moved.id
        ))),
        Err(error) => {
            let status = error.status();
            let shell = Shell::new(&console, "tasks").refused(error.public_message());
            let mut response = render(&state, found, shell).await?;
            *response.status_mut() = status;
            Ok(response)
        }
    }
}

async fn find(
    state: &AppState,
    console: &Console,
    raw: &str,
) -> Result<scheduled_task::Model, Failure> {
    let workspace_id = console.caller.workspace_id;
    named(console, raw, "id", "Scheduled task", |id| {
        scheduled_tasks::find(&state.db, workspace_id, id)
    })
    .await
}
