//! The specification's MCP contract: `GET {url}/tools` answers
//! `{"tools": [{name, description, input_schema}]}` (`inputSchema` and a bare array are
//! accepted too); `POST {url}/call` takes `{"name", "arguments"}` and answers any JSON; a
//! non-2xx answer is a tool error.

use serde_json::{Value, json};

use super::{CallContext, Endpoint, McpError, McpHub, McpTool, unwrap_result};

/// The server's tools.
pub(super) async fn list_tools(
    hub: &McpHub,
    endpoint: &Endpoint,
    context: &CallContext,
) -> Result<Vec<McpTool>, McpError> {
    let request = hub.http.get(format!("{}/tools", endpoint.url));
    let (status, body) = exchange(hub, endpoint, context, request).await?;
    if !(200..300).contains(&status) {
        return Err(McpError::Unreachable(format!(
            "listing tools answered {status}"
        )));
    }
    let answer: Value =
        serde_json::from_slice(&body).map_err(|e| McpError::Malformed(e.to_string()))?;
    let listed = match &answer {
        Value::Array(items) => items.clone(),
        other => other["tools"]
            .as_array()
            .cloned()
            .ok_or_else(|| McpError::Malformed("no tools array".to_owned()))?,
    };
    listed
        .iter()
        .map(|tool| {
            let name = tool["name"]
                .as_str()
                .filter(|n| !n.is_empty())
                .ok_or_else(|| McpError::Malformed("a tool without a name".to_owned()))?;
            let schema = tool
                .get("input_schema")
                .or_else(|| tool.get("inputSchema"))
                .cloned()
                .filter(Value::is_object)
                .unwrap_or_else(|| json!({"type": "object"}));
            Ok(McpTool {
                name: name.to_owned(),
                description: tool["description"].as_str().unwrap_or_default().to_owned(),
                input_schema: schema,
            })
        })
        .collect()
}

/// Calls one tool.
pub(super) async fn call(
    hub: &McpHub,
    endpoint: &Endpoint,
    context: &CallContext,
    tool: &str,
    arguments: Value,
) -> Result<Value, McpError> {
    let request = hub
        .http
        .post(format!("{}/call", endpoint.url))
        .json(&json!({"name": tool, "arguments": arguments}));
    let (status, body) = exchange(hub, endpoint, context, request).await?;
    let answer: Value = serde_json::from_slice(&body)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&body).into_owned()));
    if !(200..300).contains(&status) {
        let detail = match &answer {
            Value::Object(map) if map.contains_key("error") => map["error"].to_string(),
            other => other.to_string(),
        };
        return Err(McpError::ToolFailed(format!("answered {status}: {detail}")));
    }
    Ok(unwrap_result(answer))
}

/// Sends `request` with the server's and the context's headers; answers the status and a
/// body no larger than the limit.
async fn exchange(
    hub: &McpHub,
    endpoint: &Endpoint,
    context: &CallContext,
    request: reqwest::RequestBuilder,
) -> Result<(u16, Vec<u8>), McpError> {
    let mut request = request.headers(endpoint.headers.clone());
    for (name, value) in context.headers() {
        request = request.header(name, value);
    }
    let limit = hub.settings.max_response_bytes;
    let exchange = async {
        let mut response = request.send().await.map_err(unreachable)?;
        let status = response.status().as_u16();
        if response
            .content_length()
            .is_some_and(|length| length > limit as u64)
        {
            return Err(McpError::TooLarge(limit));
        }
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(unreachable)? {
            if body.len() + chunk.len() > limit {
                return Err(McpError::TooLarge(limit));
            }
            body.extend_from_slice(&chunk);
        }
        Ok((status, body))
    };
    tokio::time::timeout(hub.settings.timeout, exchange)
        .await
        .map_err(|_| McpError::Timeout(hub.timeout_ms()))?
}

/// A transport error, told without its URL (which may carry credentials in its query).
fn unreachable(error: reqwest::Error) -> McpError {
    McpError::Unreachable(error.without_url().to_string())
}
