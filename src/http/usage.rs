//! Usage and quotas: `GET /usage` (a workspace's own, read key), `GET /admin/usage` and
//! `GET|PUT /admin/workspaces/{id}/quotas` (the installation's operator token). Figures come
//! from `usage_daily`, so on a cluster they are the cluster's.

use std::collections::BTreeMap;

use axum::extract::State;
use chrono::NaiveDate;
use parley_persistence::usage::{self, GroupBy};
use parley_persistence::{clock, workspaces};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::domain::Permission;
use crate::http::AppState;
use crate::http::auth::{Caller, Viewer};
use crate::http::envelope::Envelope;
use crate::http::error::{ApiError, Result};
use crate::http::extract::Query;
use crate::http::validation::Problems;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

/// Longest span one read covers, in days.
const MAX_SPAN_DAYS: i64 = 366;

mod quotas;

use self::quotas::QuotasRecord;

pub(crate) fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(get_usage))
        .routes(routes!(get_installation_usage))
        .merge(quotas::router())
}

/// What `GET /usage` takes.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct UsageQuery {
    /// First day (UTC, `YYYY-MM-DD`); default: the first of this month.
    from: Option<String>,
    /// Last day, included; default: today.
    to: Option<String>,
    /// `day` (default), `assistant`, `channel` or `worker`.
    group_by: Option<String>,
}

/// What `GET /admin/usage` takes: the same, and which workspace (all when absent).
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct InstallationUsageQuery {
    /// One workspace's usage; every workspace's when absent.
    workspace_id: Option<i64>,
    /// As `GET /usage`.
    from: Option<String>,
    /// As `GET /usage`.
    to: Option<String>,
    /// As `GET /usage`.
    group_by: Option<String>,
}

/// A read's days and grouping, checked.
struct Span {
    from: NaiveDate,
    to: NaiveDate,
    group_by: GroupBy,
    group_name: String,
}

fn span_of(from: Option<&str>, to: Option<&str>, group_by: Option<&str>) -> Result<Span> {
    let today = clock::now().date_naive();
    let mut problems = Problems::default();
    let mut day = |field: &'static str, raw: Option<&str>, default: NaiveDate| match raw {
        None => Some(default),
        Some(raw) => {
            let parsed = NaiveDate::parse_from_str(raw, "%Y-%m-%d").ok();
            if parsed.is_none() {
                problems.add([field], "must be a day as YYYY-MM-DD");
            }
            parsed
        }
    };
    let from = day("from", from, usage::month_start(today));
    let to = day("to", to, today);
    let group_name = group_by.unwrap_or("day").to_owned();
    let group = GroupBy::parse(&group_name);
    if group.is_none() {
        problems.add(
            ["group_by"],
            "must be one of day, assistant, channel, worker",
        );
    }
    if let (Some(from), Some(to)) = (from, to) {
        if from > to {
            problems.add(["from"], "must not be after to");
        } else if (to - from).num_days() >= MAX_SPAN_DAYS {
            problems.add(
                ["to"],
                format!("must be within {MAX_SPAN_DAYS} days of from"),
            );
        }
    }
    problems.finish()?;
    match (from, to, group) {
        (Some(from), Some(to), Some(group_by)) => Ok(Span {
            from,
            to,
            group_by,
            group_name,
        }),
        _ => Err(ApiError::invalid_field(
            ["from"],
            "must be a day as YYYY-MM-DD",
        )),
    }
}

/// One bucket: its key and every metric.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub(crate) struct UsageBucket {
    /// For `group_by=day`.
    #[serde(skip_serializing_if = "Option::is_none")]
    day: Option<NaiveDate>,
    /// For `group_by=assistant` (null: counted of no assistant).
    #[serde(skip_serializing_if = "Option::is_none")]
    assistant_id: Option<Option<Uuid>>,
    /// For `group_by=channel` (null: of no channel).
    #[serde(skip_serializing_if = "Option::is_none")]
    channel_id: Option<Option<Uuid>>,
    /// For `group_by=worker` (null: of no worker).
    #[serde(skip_serializing_if = "Option::is_none")]
    worker_id: Option<Option<Uuid>>,
    /// Every metric by name.
    #[schema(value_type = BTreeMap<String, i64>)]
    metrics: BTreeMap<&'static str, i64>,
}

/// What was used over some days.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub(crate) struct UsageRecord {
    /// First day.
    from: NaiveDate,
    /// Last day, included.
    to: NaiveDate,
    /// How buckets are keyed.
    group_by: String,
    /// Every metric summed: `model_prompt_tokens`, `model_completion_tokens`,
    /// `messages_sent_{marketing|utility|authentication|service}`, `messages_received`,
    /// `mcp_calls`, `event_deliveries`, `media_bytes`.
    #[schema(value_type = BTreeMap<String, i64>)]
    totals: BTreeMap<&'static str, i64>,
    /// The buckets.
    buckets: Vec<UsageBucket>,
    /// The workspace's quotas (for one workspace's usage).
    #[serde(skip_serializing_if = "Option::is_none")]
    quotas: Option<QuotasRecord>,
}

/// A workspace's usage as `span` asks.
async fn read(state: &AppState, workspace_id: Option<i64>, span: Span) -> Result<UsageRecord> {
    let read = usage::read(&state.db, workspace_id, span.from, span.to, span.group_by).await?;
    let buckets = read
        .buckets
        .into_iter()
        .map(|bucket| {
            let id = Some(bucket.id);
            UsageBucket {
                day: bucket.day,
                assistant_id: (span.group_by == GroupBy::Assistant)
                    .then_some(id)
                    .flatten(),
                channel_id: (span.group_by == GroupBy::Channel).then_some(id).flatten(),
                worker_id: (span.group_by == GroupBy::Worker).then_some(id).flatten(),
                metrics: bucket.figures,
            }
        })
        .collect();
    let quotas = match workspace_id {
        Some(id) => Some(
            parley_persistence::usage::quotas::get(&state.db, id)
                .await?
                .into(),
        ),
        None => None,
    };
    Ok(UsageRecord {
        from: span.from,
        to: span.to,
        group_by: span.group_name,
        totals: read.totals,
        buckets,
        quotas,
    })
}

/// What the workspace used.
///
/// Model tokens, messages sent by Meta's pricing category and received, MCP tool calls, event
/// deliveries and media bytes, counted per UTC day; totals over `from`..`to` and buckets by
/// `group_by`, with the workspace's quotas. Needs a read key.
#[utoipa::path(
    get,
    path = "/usage",
    tag = "usage",
    params(UsageQuery),
    responses((status = 200, body = Envelope<UsageRecord>)),
)]
#[tracing::instrument(skip_all, fields(workspace_id = caller.workspace_id))]
async fn get_usage(
    caller: Caller,
    State(state): State<AppState>,
    Query(query): Query<UsageQuery>,
) -> Result<Envelope<UsageRecord>> {
    caller.require(Permission::Read)?;
    let span = span_of(
        query.from.as_deref(),
        query.to.as_deref(),
        query.group_by.as_deref(),
    )?;
    let record = read(&state, Some(caller.workspace_id), span).await?;
    Ok(Envelope::ok("Usage retrieved successfully", record))
}

/// 403 unless the operator is looking.
pub(super) fn operator_only(viewer: &Viewer, what: &str) -> Result<()> {
    match viewer {
        Viewer::Operator => Ok(()),
        Viewer::Workspace(_) => Err(ApiError::Forbidden(format!(
            "Only the installation's operator {what}; a workspace's keys cannot"
        ))),
    }
}

/// What the installation (or one workspace) used.
///
/// As `GET /usage`, for every workspace together or the one named. Needs the operator token.
#[utoipa::path(
    get,
    path = "/admin/usage",
    tag = "admin",
    params(InstallationUsageQuery),
    responses((status = 200, body = Envelope<UsageRecord>)),
)]
#[tracing::instrument(skip_all)]
async fn get_installation_usage(
    viewer: Viewer,
    State(state): State<AppState>,
    Query(query): Query<InstallationUsageQuery>,
) -> Result<Envelope<UsageRecord>> {
    operator_only(&viewer, "reads the installation's usage")?;
    let span = span_of(
        query.from.as_deref(),
        query.to.as_deref(),
        query.group_by.as_deref(),
    )?;
    if let Some(id) = query.workspace_id {
        workspaces::find_by_id(&state.db, id)
            .await?
            .ok_or(ApiError::NotFound("Workspace"))?;
    }
    let record = read(&state, query.workspace_id, span).await?;
    Ok(Envelope::ok("Usage retrieved successfully", record))
}
