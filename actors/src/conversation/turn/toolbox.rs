//! The tools one turn offers: the built-in ones (unless the assistant disables memory) and the
//! tools of the MCP servers attached to the assistant, named so that they never collide. A
//! server that cannot list its tools is left out of the turn (and logged); the turn goes on.

use parley_persistence::entities::{mcp_server, stage};
use serde_json::{Value, json};

use super::super::route::Routed;
use super::super::tools;
use crate::llm::{ToolCall, ToolSpec};
use crate::mcp::naming::{ExposedTool, expose};
use crate::mcp::{CallContext, McpHub};

/// The tools of one turn.
pub(super) struct Toolbox {
    /// What the model is offered.
    pub(super) specs: Vec<ToolSpec>,
    /// The MCP tools among them, by exposed name.
    mcp: Vec<ExposedTool>,
    /// Their servers.
    servers: Vec<mcp_server::Model>,
    /// On whose behalf the servers are called.
    context: CallContext,
}

impl Toolbox {
    /// Gathers the turn's tools; MCP tool lists come from the hub's cache while fresh.
    pub(super) async fn assemble(
        hub: &McpHub,
        routed: &Routed,
        stages: &[stage::Model],
        context: CallContext,
    ) -> Self {
        let mut specs = if routed.settings.memory_enabled {
            tools::specs(stages)
        } else {
            Vec::new()
        };
        if routed.settings.handoff {
            specs.push(tools::handoff_spec());
        }
        let mut listed = Vec::with_capacity(routed.mcp_servers.len());
        for server in &routed.mcp_servers {
            match hub.cached_tools(server, &context).await {
                Ok(server_tools) => {
                    listed.push((server.id, server.name.clone(), (*server_tools).clone()));
                }
                Err(error) => {
                    tracing::warn!(mcp_id = %server.id, %error, "an MCP server's tools are left out of this turn");
                }
            }
        }
        let builtin: Vec<&str> = specs.iter().map(|s| s.name.as_str()).collect();
        let mcp = expose(&listed, &builtin);
        specs.extend(mcp.iter().map(|t| ToolSpec {
            name: t.exposed_name.clone(),
            description: if t.tool.description.is_empty() {
                format!("{} (from {})", t.tool.name, t.server)
            } else {
                t.tool.description.clone()
            },
            parameters: t.tool.input_schema.clone(),
        }));
        Self {
            specs,
            mcp,
            servers: routed.mcp_servers.clone(),
            context,
        }
    }

    /// Whether this turn offers the built-in tool `name`.
    pub(super) fn offers(&self, name: &str) -> bool {
        self.specs.iter().any(|s| s.name == name)
    }

    /// Runs `call` if it names an MCP tool of this turn (`None` for a built-in tool). A
    /// failing tool answers `{"error": …}`: the model reads it and answers anyway.
    pub(super) async fn run_mcp(&self, hub: &McpHub, call: &ToolCall) -> Option<Value> {
        let exposed = self
            .mcp
            .iter()
            .find(|t| t.exposed_name == call.function.name)?;
        let server = self.servers.iter().find(|s| s.id == exposed.mcp_id)?;
        let arguments = match serde_json::from_str::<Value>(&call.function.arguments) {
            Ok(arguments @ (Value::Object(_) | Value::Null)) => arguments,
            Ok(_) => return Some(json!({"error": "arguments must be a JSON object"})),
            Err(e) => return Some(json!({"error": format!("arguments are not valid JSON: {e}")})),
        };
        let outcome = hub
            .call(server, &self.context, &exposed.tool.name, arguments)
            .await;
        Some(match outcome {
            Ok(result) => result,
            Err(error) => {
                tracing::warn!(mcp_id = %server.id, tool = %exposed.tool.name, %error, "MCP tool failed");
                json!({"error": error.to_string()})
            }
        })
    }
}
