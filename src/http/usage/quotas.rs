//! A workspace's quotas: `GET|PUT /admin/workspaces/{id}/quotas`, the installation's operator's
//! alone; checked so that a negative, fractional or absurd limit is refused naming its field.

use std::collections::BTreeMap;

use axum::extract::State;
use parley_persistence::usage::Category;
use parley_persistence::usage::quotas::{self, Quotas};
use parley_persistence::{clock, workspaces};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::operator_only;
use crate::http::AppState;
use crate::http::auth::Viewer;
use crate::http::envelope::Envelope;
use crate::http::error::{ApiError, Result};
use crate::http::extract::{Json, Path};
use crate::http::validation::Problems;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub(super) fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(get_quotas, put_quotas))
}

/// Largest monthly token quota accepted (a thousand billion).
const MAX_TOKENS_PER_MONTH: i64 = 1_000_000_000_000;
/// Largest daily message quota accepted.
const MAX_MESSAGES_PER_DAY: i64 = 1_000_000_000;
/// Largest per-key rate accepted.
const MAX_REQUESTS_PER_SECOND: i64 = 100_000;

/// A workspace's quotas; null: no limit.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub(crate) struct QuotasRecord {
    /// Model tokens (prompt and completion) per UTC calendar month.
    model_tokens_per_month: Option<i64>,
    /// Messages sent per UTC day, every category together.
    messages_per_day: Option<i64>,
    /// Messages sent per UTC day, by category (`marketing`, `utility`, `authentication`,
    /// `service`).
    #[schema(value_type = BTreeMap<String, i64>)]
    messages_per_day_by_category: BTreeMap<&'static str, i64>,
    /// Requests per second each API key may make.
    requests_per_second_per_key: Option<u32>,
}

impl From<Quotas> for QuotasRecord {
    fn from(quotas: Quotas) -> Self {
        Self {
            model_tokens_per_month: quotas.model_tokens_per_month,
            messages_per_day: quotas.messages_per_day,
            messages_per_day_by_category: quotas
                .messages_per_day_by_category
                .into_iter()
                .map(|(category, limit)| (category.as_str(), limit))
                .collect(),
            requests_per_second_per_key: quotas.requests_per_second_per_key,
        }
    }
}

/// `PUT /admin/workspaces/{id}/quotas`: every quota (one absent or null is lifted).
#[derive(Debug, Default, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
struct QuotasBody {
    #[schema(value_type = Option<i64>, minimum = 0)]
    model_tokens_per_month: Option<Value>,
    #[schema(value_type = Option<i64>, minimum = 0)]
    messages_per_day: Option<Value>,
    #[schema(value_type = Option<BTreeMap<String, i64>>)]
    messages_per_day_by_category: Option<Value>,
    #[schema(value_type = Option<i64>, minimum = 1)]
    requests_per_second_per_key: Option<Value>,
}

/// A whole number from `min` to `max`, or null.
fn limit(
    problems: &mut Problems,
    path: &[&str],
    raw: Option<&Value>,
    (min, max): (i64, i64),
) -> Option<i64> {
    let raw = raw.filter(|v| !v.is_null())?;
    let found = raw.as_i64().filter(|n| (min..=max).contains(n));
    if found.is_none() {
        problems.add(
            path.iter().copied(),
            format!("must be a whole number from {min} to {max}, or null"),
        );
    }
    found
}

impl QuotasBody {
    fn checked(&self) -> Result<Quotas> {
        let mut problems = Problems::default();
        let model_tokens_per_month = limit(
            &mut problems,
            &["model_tokens_per_month"],
            self.model_tokens_per_month.as_ref(),
            (0, MAX_TOKENS_PER_MONTH),
        );
        let messages_per_day = limit(
            &mut problems,
            &["messages_per_day"],
            self.messages_per_day.as_ref(),
            (0, MAX_MESSAGES_PER_DAY),
        );
        let requests_per_second_per_key = limit(
            &mut problems,
            &["requests_per_second_per_key"],
            self.requests_per_second_per_key.as_ref(),
            (1, MAX_REQUESTS_PER_SECOND),
        )
        .and_then(|n| u32::try_from(n).ok());
        let mut by_category = BTreeMap::new();
        match &self.messages_per_day_by_category {
            None | Some(Value::Null) => {}
            Some(Value::Object(fields)) => {
                for (name, raw) in fields {
                    let Some(category) = Category::parse(name) else {
                        problems.add(
                            ["messages_per_day_by_category", name.as_str()],
                            "is not a category: marketing, utility, authentication or service",
                        );
                        continue;
                    };
                    let path = ["messages_per_day_by_category", name.as_str()];
                    if let Some(n) =
                        limit(&mut problems, &path, Some(raw), (0, MAX_MESSAGES_PER_DAY))
                    {
                        by_category.insert(category, n);
                    }
                }
            }
            Some(_) => problems.add(
                ["messages_per_day_by_category"],
                "must be an object of category to a daily limit",
            ),
        }
        problems.finish()?;
        Ok(Quotas {
            model_tokens_per_month,
            messages_per_day,
            messages_per_day_by_category: by_category,
            requests_per_second_per_key,
        })
    }
}

/// A workspace's quotas.
///
/// Needs the operator token.
#[utoipa::path(
    get,
    path = "/admin/workspaces/{workspace_id}/quotas",
    tag = "admin",
    params(("workspace_id" = i64, Path, description = "Workspace id")),
    responses((status = 200, body = Envelope<QuotasRecord>)),
)]
#[tracing::instrument(skip_all)]
async fn get_quotas(
    viewer: Viewer,
    State(state): State<AppState>,
    Path(workspace_id): Path<String>,
) -> Result<Envelope<QuotasRecord>> {
    operator_only(
        &viewer,
        "reads a workspace's quotas here; GET /usage shows them",
    )?;
    let workspace_id = existing_workspace(&state, &workspace_id).await?;
    let quotas = quotas::get(&state.db, workspace_id).await?;
    Ok(Envelope::ok("Quotas retrieved successfully", quotas.into()))
}

/// Set a workspace's quotas.
///
/// Every quota at once: one absent or null is lifted. Past a quota the API answers 429
/// `quota_exceeded`; raising the daily message quota resumes the flows it paused. Needs the
/// operator token: a workspace's own keys cannot raise its quotas.
#[utoipa::path(
    put,
    path = "/admin/workspaces/{workspace_id}/quotas",
    tag = "admin",
    params(("workspace_id" = i64, Path, description = "Workspace id")),
    request_body = QuotasBody,
    responses((status = 200, body = Envelope<QuotasRecord>)),
)]
#[tracing::instrument(skip_all)]
async fn put_quotas(
    viewer: Viewer,
    State(state): State<AppState>,
    Path(workspace_id): Path<String>,
    Json(body): Json<QuotasBody>,
) -> Result<Envelope<QuotasRecord>> {
    operator_only(&viewer, "sets quotas")?;
    let workspace_id = existing_workspace(&state, &workspace_id).await?;
    let quotas = body.checked()?;
    quotas::set(&state.db, workspace_id, &quotas, clock::now()).await?;
    let outbox = state.actors.outbox();
    outbox.quotas().forget(workspace_id);
    let resumed = state.actors.flows().resume_over_quota(workspace_id).await?;
    tracing::info!(workspace_id, resumed, "workspace quotas set");
    Ok(Envelope::ok("Quotas set successfully", quotas.into()))
}

/// The id of an existing workspace, from the path.
async fn existing_workspace(state: &AppState, raw: &str) -> Result<i64> {
    let id: i64 = raw
        .parse()
        .map_err(|_| ApiError::invalid_field(["workspace_id"], "must be a workspace's number"))?;
    workspaces::find_by_id(&state.db, id)
        .await?
        .ok_or(ApiError::NotFound("Workspace"))?;
    Ok(id)
}
