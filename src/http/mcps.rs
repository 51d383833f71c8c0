//! MCP servers of a workspace (snake_case): `POST|GET /workspace/mcps`,
//! `GET|PATCH|DELETE /workspace/mcps/{id}` and `GET /workspace/mcps/{id}/tools`; attaching them
//! to assistants: `PUT|DELETE /assistant/{a}/mcp/{m}` and `GET /assistant/{a}/mcp/tools`.
//! Header values are sealed at rest and answered as `****`; listings always ask the servers.

use axum::extract::State;
use chrono::{DateTime, Utc};
use parley_actors::mcp::{CallContext, McpError, McpTool};
use parley_persistence::entities::mcp_server;
use parley_persistence::mcp_servers;
use parley_persistence::{McpTransport, clock};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use uuid::Uuid;

use crate::domain::Permission;
use crate::http::AppState;
use crate::http::auth::Caller;
use crate::http::envelope::{DeletedRecord, Envelope};
use crate::http::error::Refusal;
use crate::http::error::{ApiError, FieldError, Result};
use crate::http::extract::{Json, Path, Query};
use crate::http::pagination::{ListQuery, PageResponse};
use crate::http::validation::parse_uuid;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

/// What every header value (and every value of the URL's query) is answered as.
const MASK: &str = "****";

mod assistants;
mod fields;

use self::fields::fields;

use self::assistants::{
    __path_attach_mcp, __path_detach_mcp, __path_list_assistant_tools, attach_mcp, detach_mcp,
    list_assistant_tools,
};

pub(crate) fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_mcps, create_mcp))
        .routes(routes!(get_mcp, update_mcp, delete_mcp))
        .routes(routes!(list_server_tools))
        .routes(routes!(attach_mcp, detach_mcp))
        .routes(routes!(list_assistant_tools))
}

/// An MCP server as the API shows it: header values masked.
#[derive(Debug, Serialize, utoipa::ToSchema)]
struct McpRecord {
    id: Uuid,
    name: String,
    transport: McpTransport,
    url: String,
    headers: Vec<Value>,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
}

impl From<mcp_server::Model> for McpRecord {
    fn from(m: mcp_server::Model) -> Self {
        let headers = m
            .headers
            .as_array()
            .into_iter()
            .flatten()
            .map(|h| json!({"key": h["key"], "value": MASK}))
            .collect();
        Self {
            id: m.id,
            name: m.name,
            transport: m.transport,
            url: fields::masked_url(&m.url),
            headers,
            created_at: m.created_at,
            updated_at: m.updated_at,
        }
    }
}

/// The create answer: `mcp_id` beside the record.
#[derive(Debug, Serialize, utoipa::ToSchema)]
struct CreatedMcp {
    mcp_id: Uuid,
    #[serde(flatten)]
    record: McpRecord,
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
pub(super) struct HeaderBody {
    /// An HTTP header name; not one Parley or the HTTP client sets (`X-Parley-*`, `Mcp-*`,
    /// `Proxy-*`, hop-by-hop and framing headers).
    #[schema(
        min_length = 1,
        pattern = r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$",
        example = "Authorization"
    )]
    pub(super) key: String,
    #[schema(max_length = 16384)]
    pub(super) value: String,
}

/// An MCP server's fields; a PATCH changes those it gives.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
pub(super) struct McpBody {
    #[schema(value_type = Option<String>, min_length = 1, max_length = 100)]
    pub(super) name: Option<String>,
    #[schema(value_type = Option<McpTransport>)]
    pub(super) transport: Option<String>,
    /// An `http` or `https` URL without credentials, leading outside Parley's host and
    /// network (DESIGN §11).
    #[schema(value_type = Option<String>, max_length = 2048, pattern = "^[Hh][Tt][Tt][Pp][Ss]?://[^/]", example = "https://mcp.example.com/mcp")]
    pub(super) url: Option<String>,
    #[schema(value_type = Option<Vec<HeaderBody>>, max_items = 20)]
    pub(super) headers: Option<Vec<HeaderBody>>,
}

crate::http::openapi::create_body!(
    /// The body of `POST /workspace/mcps`.
    NewMcpBody = McpBody, ["name", "transport", "url"]
);

/// Register an MCP server.
///
/// Its tools become available to the assistants it is attached to. The URL must lead outside
/// Parley's host and network.
#[utoipa::path(
    post,
    path = "/workspace/mcps",
    tag = "mcp",
    request_body = NewMcpBody,
    responses((status = 201, body = Envelope<CreatedMcp>), (status = 502, body = Refusal)),
)]
#[tracing::instrument(skip_all, fields(workspace_id = caller.workspace_id))]
async fn create_mcp(
    caller: Caller,
    State(state): State<AppState>,
    Json(body): Json<McpBody>,
) -> Result<Envelope<CreatedMcp>> {
    caller.require(Permission::Write)?;
    let fields = fields(&state, body, None)?;
    let created = mcp_servers::create(&state.db, caller.workspace_id, fields, clock::now()).await?;
    tracing::info!(mcp_id = %created.id, "MCP server registered");
    Ok(Envelope::created(
        "MCP server registered successfully",
        CreatedMcp {
            mcp_id: created.id,
            record: created.into(),
        },
    ))
}

/// List MCP servers.
///
/// Header values are shown as `****`.
#[utoipa::path(
    get,
    path = "/workspace/mcps",
    tag = "mcp",
    params(ListQuery),
    responses((status = 200, body = PageResponse<McpRecord>), (status = 502, body = Refusal)),
)]
#[tracing::instrument(skip_all, fields(workspace_id = caller.workspace_id))]
async fn list_mcps(
    caller: Caller,
    State(state): State<AppState>,
    Query(query): Query<ListQuery>,
) -> Result<PageResponse<McpRecord>> {
    caller.require(Permission::Read)?;
    let page = query.page()?;
    let paged = mcp_servers::list(&state.db, caller.workspace_id, page).await?;
    Ok(PageResponse::new(
        "MCP servers retrieved successfully",
        page,
        paged,
        McpRecord::from,
    ))
}

/// Read an MCP server.
///
/// Header values are shown as `****`; query values of its URL too.
#[utoipa::path(
    get,
    path = "/workspace/mcps/{mcp_id}",
    tag = "mcp",
    params(("mcp_id" = String, Path, format = Uuid, description = "MCP server id")),
    responses((status = 200, body = Envelope<McpRecord>), (status = 502, body = Refusal)),
)]
#[tracing::instrument(skip_all, fields(workspace_id = caller.workspace_id))]
async fn get_mcp(
    caller: Caller,
    State(state): State<AppState>,
    Path(mcp_id): Path<String>,
) -> Result<Envelope<McpRecord>> {
    caller.require(Permission::Read)?;
    let found = find_mcp(&state, &caller, &mcp_id).await?;
    Ok(Envelope::ok(
        "MCP server retrieved successfully",
        found.into(),
    ))
}

/// Change an MCP server.
///
/// Only the fields given change.
#[utoipa::path(
    patch,
    path = "/workspace/mcps/{mcp_id}",
    tag = "mcp",
    params(("mcp_id" = String, Path, format = Uuid, description = "MCP server id")),
    request_body = McpBody,
    responses((status = 200, body = Envelope<McpRecord>), (status = 502, body = Refusal)),
)]
#[tracing::instrument(skip_all, fields(workspace_id = caller.workspace_id))]
async fn update_mcp(
    caller: Caller,
    State(state): State<AppState>,
    Path(mcp_id): Path<String>,
    Json(body): Json<McpBody>,
) -> Result<Envelope<McpRecord>> {
    caller.require(Permission::Write)?;
    let current = find_mcp(&state, &caller, &mcp_id).await?;
    let fields = fields(&state, body, Some(&current))?;
    let updated = state
        .actors
        .store()
        .update_mcp_server(current, fields)
        .await?;
    Ok(Envelope::ok(
        "MCP server updated successfully",
        updated.into(),
    ))
}

/// Delete an MCP server.
///
/// It is detached from every assistant.
#[utoipa::path(
    delete,
    path = "/workspace/mcps/{mcp_id}",
    tag = "mcp",
    params(("mcp_id" = String, Path, format = Uuid, description = "MCP server id")),
    responses((status = 200, body = Envelope<DeletedRecord>), (status = 502, body = Refusal)),
)]
#[tracing::instrument(skip_all, fields(workspace_id = caller.workspace_id))]
async fn delete_mcp(
    caller: Caller,
    State(state): State<AppState>,
    Path(mcp_id): Path<String>,
) -> Result<Envelope<DeletedRecord>> {
    caller.require(Permission::Write)?;
    let id = parse_uuid(&mcp_id, "mcp_id")?;
    if !state
        .actors
        .store()
        .delete_mcp_server(caller.workspace_id, id)
        .await?
    {
        return Err(ApiError::NotFound("MCP server"));
    }
    Ok(Envelope::ok(
        "MCP server deleted and detached from every assistant",
        DeletedRecord { id },
    ))
}

/// List an MCP server's tools.
///
/// Asked of the server now.
#[utoipa::path(
    get,
    path = "/workspace/mcps/{mcp_id}/tools",
    tag = "mcp",
    params(("mcp_id" = String, Path, format = Uuid, description = "MCP server id")),
    responses((status = 200, body = Envelope<Vec<McpTool>>), (status = 502, body = Refusal)),
)]
#[tracing::instrument(skip_all, fields(workspace_id = caller.workspace_id))]
async fn list_server_tools(
    caller: Caller,
    State(state): State<AppState>,
    Path(mcp_id): Path<String>,
) -> Result<Envelope<Vec<McpTool>>> {
    caller.require(Permission::Read)?;
    let server = find_mcp(&state, &caller, &mcp_id).await?;
    let context = CallContext {
        workspace_id: caller.workspace_id,
        ..CallContext::default()
    };
    let tools = state
        .actors
        .mcp()
        .list_tools(&server, &context)
        .await
        .map_err(|e| unreachable(&server, &e))?;
    Ok(Envelope::ok("Tools retrieved successfully", tools))
}

pub(super) async fn find_mcp(
    state: &AppState,
    caller: &Caller,
    raw: &str,
) -> Result<mcp_server::Model> {
    let id = parse_uuid(raw, "mcp_id")?;
    mcp_servers::find(&state.db, caller.workspace_id, id)
        .await?
        .ok_or(ApiError::NotFound("MCP server"))
}

/// 502 `mcp_unreachable`, naming the server and the cause.
pub(super) fn unreachable(server: &mcp_server::Model, error: &McpError) -> ApiError {
    ApiError::BadGateway {
        code: "mcp_unreachable",
        message: format!("The MCP server '{}' did not answer: {error}", server.name),
        details: vec![FieldError::new(
            ["mcp_servers", server.id.to_string().as_str()],
            format!("{}: {error}", server.name),
        )],
    }
}
