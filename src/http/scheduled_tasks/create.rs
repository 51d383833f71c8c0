//! `POST /scheduled-tasks`: the body checked once into a [`NewTaskCommand`] (name, type and
//! its typed payload, timezone, recurrence, first run), then what the payload refers to found
//! in the caller's workspace and stored resolved (an identity path becomes its id).

use std::time::Duration;

use axum::extract::State;
use chrono::{DateTime, NaiveDateTime, TimeZone, Utc};
use parley_actors::scheduler::{Recurrence, RecurrenceError, TaskPayload, recurrence};
use parley_persistence::scheduled_tasks::{self, NewTask};
use parley_persistence::{TaskType, clock};
use serde::Deserialize;
use serde_json::Value;

use super::resolve::Resolver;
use super::{TaskRecord, tell};
use crate::domain::Permission;
use crate::http::AppState;
use crate::http::auth::Caller;
use crate::http::envelope::Envelope;
use crate::http::error::{ApiError, FieldError, Result};
use crate::http::extract::Json;
use crate::http::validation::{Checked, checked, problem};

/// Longest task name.
const MAX_NAME: usize = 200;

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[schema(example = json!({
    "name": "Monday reminder",
    "task_type": "send_message",
    "payload": {"identity_id": "+351912345678", "channel_id": "3fa85f64-5717-4562-b3fc-2c963f66afa6",
                "message": "Your order ships today."},
    "scheduled_at": "2027-12-06T09:00:00",
    "recurrence": "0 9 * * MON",
    "timezone": "Europe/Lisbon"
}))]
pub(super) struct CreateTaskBody {
    #[schema(required = true, value_type = String, min_length = 1, max_length = 200)]
    name: Option<String>,
    #[schema(required = true, value_type = TaskType)]
    task_type: Option<String>,
    /// The body of the endpoint the task stands for (DESIGN §5 "Scheduled tasks").
    #[schema(required = true, value_type = Object)]
    payload: Option<Value>,
    /// ISO 8601; without an offset, read in `timezone`.
    #[schema(required = true, value_type = String, example = "2027-12-06T09:00:00")]
    scheduled_at: Option<String>,
    /// A cron expression (five or six fields) to repeat the task.
    #[schema(value_type = Option<String>, example = "0 9 * * MON-FRI")]
    recurrence: Option<String>,
    /// An IANA zone; UTC when not given.
    #[schema(value_type = Option<String>, example = "Europe/Lisbon")]
    timezone: Option<String>,
}

/// A task to create as the body asks for it, each field checked once.
struct NewTaskCommand {
    name: String,
    task_type: TaskType,
    payload: TaskPayload,
    timezone: String,
    /// The cron expression as given, with its parsed form.
    recurrence: Option<(String, Recurrence)>,
    scheduled_at: DateTime<Utc>,
}

impl TryFrom<(CreateTaskBody, Duration)> for NewTaskCommand {
    type Error = ApiError;

    /// The body, with the shortest interval a recurrence may ask for.
    fn try_from((body, min_interval): (CreateTaskBody, Duration)) -> Result<Self> {
        let name = name(body.name.as_deref());
        let task_type = task_type(body.task_type.as_deref());
        let timezone = timezone(body.timezone);
        let payload = match &task_type {
            Ok(task_type) => payload(*task_type, body.payload.as_ref()),
            // A payload is read against its type; without a type, only its presence counts.
            Err(_) => body
                .payload
                .as_ref()
                .map_or_else(|| problem(["payload"], "is required"), |_| Err(Vec::new())),
        };
        let recurrence = match &timezone {
            Ok(timezone) => recurrence(body.recurrence.as_deref(), timezone, min_interval),
            Err(_) => Ok(None),
        };
        let scheduled_at = match &recurrence {
            Ok(recurring) => {
                let zone = timezone.as_deref().ok();
                scheduled_at(body.scheduled_at.as_deref(), recurring.as_ref(), zone)
            }
            Err(_) => Err(Vec::new()),
        };
        checked!(name, task_type, timezone, payload, recurrence, scheduled_at);
        Ok(Self {
            name,
            task_type,
            payload,
            timezone,
            recurrence,
            scheduled_at,
        })
    }
}

fn name(raw: Option<&str>) -> Checked<String> {
    let name = raw.map(str::trim).unwrap_or_default().to_owned();
    if name.is_empty() || name.chars().count() > MAX_NAME {
        return problem(["name"], format!("is required, 1 to {MAX_NAME} characters"));
    }
    Ok(name)
}

fn task_type(raw: Option<&str>) -> Checked<TaskType> {
    match raw {
        None => problem(["task_type"], "is required"),
        Some(raw) => TaskType::parse(raw).map_or_else(
            || {
                problem(
                    ["task_type"],
                    "must be send_message, send_template, start_flow, set_stage or assistant_followup",
                )
            },
            Ok,
        ),
    }
}

fn payload(task_type: TaskType, raw: Option<&Value>) -> Checked<TaskPayload> {
    let Some(raw) = raw else {
        return problem(["payload"], "is required");
    };
    TaskPayload::parse(task_type, raw).map_err(|found| {
        found
            .into_iter()
            .map(|(field, problem)| {
                if field.is_empty() {
                    FieldError::new(["payload"], problem)
                } else {
                    let path = std::iter::once("payload").chain(field.split('.'));
                    FieldError::new(path, problem)
                }
            })
            .collect()
    })
}

fn timezone(raw: Option<String>) -> Checked<String> {
    let timezone = raw.unwrap_or_else(|| "UTC".to_owned());
    if recurrence::timezone(&timezone).is_err() {
        return problem(
            ["timezone"],
            "must be an IANA timezone such as Europe/Lisbon",
        );
    }
    Ok(timezone)
}

/// Occurrences looked at to find a recurrence's shortest interval (a day's worth of a cron
/// that fires every minute at some hours, far more than any one expression varies over).
const GAPS_CHECKED: usize = 1_500;

fn recurrence(
    raw: Option<&str>,
    timezone: &str,
    min_interval: Duration,
) -> Checked<Option<(String, Recurrence)>> {
    let Some(expression) = raw.map(str::trim).filter(|r| !r.is_empty()) else {
        return Ok(None);
    };
    match Recurrence::parse(expression, timezone) {
        Ok(parsed) => {
            let shortest = parsed.shortest_gap(clock::now(), GAPS_CHECKED);
            let too_often = shortest
                .and_then(|gap| gap.to_std().ok())
                .is_some_and(|gap| gap < min_interval);
            if too_often {
                return problem(
                    ["recurrence"],
                    format!(
                        "must not run more often than every {} seconds",
                        min_interval.as_secs()
                    ),
                );
            }
            Ok(Some((expression.to_owned(), parsed)))
        }
        Err(RecurrenceError::Timezone) => problem(
            ["timezone"],
            "must be an IANA timezone such as Europe/Lisbon",
        ),
        Err(error) => problem(["recurrence"], error.to_string()),
    }
}

/// The first run: the given time, or the recurrence's next occurrence.
fn scheduled_at(
    raw: Option<&str>,
    recurring: Option<&(String, Recurrence)>,
    timezone: Option<&str>,
) -> Checked<DateTime<Utc>> {
    match (raw, recurring) {
        (Some(raw), _) => at_time(raw, timezone),
        // A recurring task without a first time starts at its next occurrence.
        (None, Some((_, parsed))) => parsed.next_after(clock::now()).map_or_else(
            || problem(["recurrence"], "never fires: no time matches it"),
            Ok,
        ),
        (None, None) => problem(["scheduled_at"], "is required (or give a recurrence)"),
    }
}

/// An ISO 8601 time: with an offset (`2027-12-01T09:00:00Z`, `…+01:00`), or without one, read
/// in the task's timezone (`2027-12-01T09:00:00` is nine o'clock there).
fn at_time(raw: &str, timezone: Option<&str>) -> Checked<DateTime<Utc>> {
    if let Ok(at) = DateTime::parse_from_rfc3339(raw) {
        return Ok(at.with_timezone(&Utc));
    }
    let local = NaiveDateTime::parse_from_str(raw, "%Y-%m-%dT%H:%M:%S%.f")
        .or_else(|_| NaiveDateTime::parse_from_str(raw, "%Y-%m-%dT%H:%M"));
    let zone = timezone.and_then(|name| recurrence::timezone(name).ok());
    match (local, zone) {
        (Ok(local), Some(zone)) => zone
            .from_local_datetime(&local)
            .earliest()
            .map(|at| at.with_timezone(&Utc))
            .map_or_else(
                || {
                    problem(
                        ["scheduled_at"],
                        "does not exist in the task's timezone (a clock change skips it)",
                    )
                },
                Ok,
            ),
        _ => problem(
            ["scheduled_at"],
            "must be an ISO 8601 time such as 2026-12-01T09:00:00Z, or 2026-12-01T09:00:00 \
             read in the task's timezone",
        ),
    }
}

/// Schedule a task.
///
/// Once at `scheduled_at`, or on a cron `recurrence` in a timezone. Types: send a template, set a
/// stage, and more (see `task_type`). A recurrence may not ask for two runs closer than the
/// installation's `actors.scheduler_min_interval_secs` (60 s by default; 400 naming
/// `recurrence`), and a workspace holds at most `actors.scheduler_task_quota` scheduled, paused
/// or running tasks (1,000 by default; 409 past it). A `send_template` task's template must
/// exist on the channel and its parameters fill exactly its placeholders.
#[utoipa::path(
    post,
    path = "/scheduled-tasks",
    tag = "scheduled-tasks",
    request_body = CreateTaskBody,
    responses((status = 201, body = Envelope<TaskRecord>)),
)]
#[tracing::instrument(skip_all, fields(workspace_id = caller.workspace_id))]
pub(super) async fn create_task(
    caller: Caller,
    State(state): State<AppState>,
    Json(body): Json<CreateTaskBody>,
) -> Result<Envelope<TaskRecord>> {
    caller.require(Permission::Write)?;
    let limits = &state.settings.actors;
    let min_interval = Duration::from_secs(limits.scheduler_min_interval_secs);
    let command = NewTaskCommand::try_from((body, min_interval))?;
    let active =
        scheduled_tasks::count_active(&state.db, caller.workspace_id, limits.scheduler_task_quota)
            .await?;
    if active >= limits.scheduler_task_quota {
        return Err(ApiError::ConflictCode {
            code: "task_quota_reached",
            message: format!(
                "This workspace has {active} scheduled, paused or running tasks, its quota; \
                 delete some first"
            ),
        });
    }
    let payload = Resolver {
        state: &state,
        ws: caller.workspace_id,
    }
    .resolve(command.payload)
    .await?;
    let new = NewTask {
        name: command.name,
        task_type: command.task_type,
        payload: payload.to_json(),
        scheduled_at: command.scheduled_at,
        recurrence: command.recurrence.map(|(expression, _)| expression),
        timezone: command.timezone,
    };
    let created =
        scheduled_tasks::create(&state.db, caller.workspace_id, new, clock::now()).await?;
    tracing::info!(task_id = %created.id, task_type = created.task_type.as_str(), "scheduled task created");
    tell(&state, created.id);
    Ok(Envelope::created(
        "Scheduled task created successfully",
        created.into(),
    ))
}
