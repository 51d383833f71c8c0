//! MCP servers attached to assistants: `PUT|DELETE /assistant/{a}/mcp/{m}` (a server is
//! attached only when it answers) and `GET /assistant/{a}/mcp/tools` (every attached server's
//! tools under the names the model sees).

use axum::extract::State;
use parley_actors::conversation::BUILTIN_TOOLS;
use parley_actors::mcp::CallContext;
use parley_actors::mcp::naming::expose;
use parley_persistence::{assistants, mcp_servers};
use serde::Serialize;
use serde_json::{Value, json};
use uuid::Uuid;

use super::{find_mcp, unreachable};
use crate::domain::Permission;
use crate::http::AppState;
use crate::http::auth::Caller;
use crate::http::envelope::Envelope;
use crate::http::error::Refusal;
use crate::http::error::{ApiError, Result};
use crate::http::extract::Path;
use crate::http::validation::parse_uuid;

/// Give an assistant an MCP server's tools.
///
/// Its tools are listed first: 502 when the server cannot list them. Attaching twice is harmless.
#[utoipa::path(
    put,
    path = "/assistant/{assistant_id}/mcp/{mcp_id}",
    tag = "mcp",
    params(("assistant_id" = String, Path, format = Uuid, description = "Assistant id"), ("mcp_id" = String, Path, format = Uuid, description = "MCP server id")),
    responses((status = 200, body = Envelope<Value>), (status = 502, body = Refusal)),
)]
#[tracing::instrument(skip_all, fields(workspace_id = caller.workspace_id))]
pub(super) async fn attach_mcp(
    caller: Caller,
    State(state): State<AppState>,
    Path((assistant_id, mcp_id)): Path<(String, String)>,
) -> Result<Envelope<Value>> {
    caller.require(Permission::Write)?;
    let assistant = find_assistant_id(&state, &caller, &assistant_id).await?;
    let server = find_mcp(&state, &caller, &mcp_id).await?;
    let context = CallContext {
        workspace_id: caller.workspace_id,
        assistant_id: Some(assistant),
        ..CallContext::default()
    };
    // Only a server that answers is attached; listing also refreshes the turns' cache.
    let tools = state
        .actors
        .mcp()
        .list_tools(&server, &context)
        .await
        .map_err(|e| unreachable(&server, &e))?;
    state
        .actors
        .store()
        .attach_mcp_server(caller.workspace_id, assistant, server.id)
        .await?;
    Ok(Envelope::ok(
        "MCP server attached",
        json!({"assistant_id": assistant, "mcp_id": server.id, "tools": tools}),
    ))
}

/// Take an MCP server's tools from an assistant.
///
/// Detaching one that is not attached is harmless.
#[utoipa::path(
    delete,
    path = "/assistant/{assistant_id}/mcp/{mcp_id}",
    tag = "mcp",
    params(("assistant_id" = String, Path, format = Uuid, description = "Assistant id"), ("mcp_id" = String, Path, format = Uuid, description = "MCP server id")),
    responses((status = 200, body = Envelope<Value>), (status = 502, body = Refusal)),
)]
#[tracing::instrument(skip_all, fields(workspace_id = caller.workspace_id))]
pub(super) async fn detach_mcp(
    caller: Caller,
    State(state): State<AppState>,
    Path((assistant_id, mcp_id)): Path<(String, String)>,
) -> Result<Envelope<Value>> {
    caller.require(Permission::Write)?;
    let assistant = find_assistant_id(&state, &caller, &assistant_id).await?;
    let server = find_mcp(&state, &caller, &mcp_id).await?;
    state
        .actors
        .store()
        .detach_mcp_server(caller.workspace_id, assistant, server.id)
        .await?;
    Ok(Envelope::ok(
        "MCP server detached",
        json!({"assistant_id": assistant, "mcp_id": server.id}),
    ))
}

/// One tool of an attached server, as `GET /assistant/{a}/mcp/tools` answers it.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub(super) struct AssistantToolRecord {
    mcp_id: Uuid,
    server: String,
    name: String,
    exposed_name: String,
    description: String,
    input_schema: Value,
}

/// List the tools an assistant can use.
///
/// Every tool its MCP servers offer, named `<server>__<tool>`, next to `remember`, `forget` and
/// `set_stage`.
#[utoipa::path(
    get,
    path = "/assistant/{assistant_id}/mcp/tools",
    tag = "mcp",
    params(("assistant_id" = String, Path, format = Uuid, description = "Assistant id")),
    responses((status = 200, body = Envelope<Vec<AssistantToolRecord>>), (status = 502, body = Refusal)),
)]
#[tracing::instrument(skip_all, fields(workspace_id = caller.workspace_id))]
pub(super) async fn list_assistant_tools(
    caller: Caller,
    State(state): State<AppState>,
    Path(assistant_id): Path<String>,
) -> Result<Envelope<Vec<AssistantToolRecord>>> {
    caller.require(Permission::Read)?;
    let assistant = find_assistant_id(&state, &caller, &assistant_id).await?;
    let context = CallContext {
        workspace_id: caller.workspace_id,
        assistant_id: Some(assistant),
        ..CallContext::default()
    };
    let hub = state.actors.mcp();
    let mut listed = Vec::new();
    for server in mcp_servers::attached_to(&state.db, assistant).await? {
        let tools = hub
            .list_tools(&server, &context)
            .await
            .map_err(|e| unreachable(&server, &e))?;
        listed.push((server.id, server.name.clone(), tools));
    }
    // The names the model sees, next to the built-in tools' names.
    let records = expose(&listed, &BUILTIN_TOOLS)
        .into_iter()
        .map(|t| AssistantToolRecord {
            mcp_id: t.mcp_id,
            server: t.server,
            name: t.tool.name,
            exposed_name: t.exposed_name,
            description: t.tool.description,
            input_schema: t.tool.input_schema,
        })
        .collect();
    Ok(Envelope::ok("Tools retrieved successfully", records))
}

async fn find_assistant_id(state: &AppState, caller: &Caller, raw: &str) -> Result<Uuid> {
    let id = parse_uuid(raw, "assistant_id")?;
    assistants::find(&state.db, caller.workspace_id, id)
        .await?
        .map(|a| a.id)
        .ok_or(ApiError::NotFound("Assistant"))
}
