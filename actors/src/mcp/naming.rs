//! The names MCP tools get when they are offered to the model: `<server slug>__<tool>`, only
//! `[A-Za-z0-9_-]`, at most 64 characters, a numeric suffix when two would collide. The
//! built-in tools keep their own names (which have no `__`).

use std::collections::HashSet;

use uuid::Uuid;

use super::McpTool;

/// Longest tool name the Chat Completions API accepts.
const MAX_NAME: usize = 64;

/// A server's tool as the model sees it.
#[derive(Clone, Debug, PartialEq)]
pub struct ExposedTool {
    /// The server.
    pub mcp_id: Uuid,
    /// The server's name.
    pub server: String,
    /// The tool as the server names it.
    pub tool: McpTool,
    /// The name offered to the model.
    pub exposed_name: String,
}

/// Names every tool of `servers` (in order: servers as attached, tools as listed), each name
/// unique and distinct from `taken`.
pub fn expose(servers: &[(Uuid, String, Vec<McpTool>)], taken: &[&str]) -> Vec<ExposedTool> {
    let mut used: HashSet<String> = taken.iter().map(|t| (*t).to_owned()).collect();
    let mut exposed = Vec::new();
    for (mcp_id, server, tools) in servers {
        let slug = sanitize(server);
        for tool in tools {
            let base = truncate(&format!("{slug}__{}", sanitize(&tool.name)), MAX_NAME);
            let mut name = base.clone();
            let mut n = 2;
            while used.contains(&name) {
                let suffix = format!("_{n}");
                name = format!("{}{suffix}", truncate(&base, MAX_NAME - suffix.len()));
                n += 1;
            }
            used.insert(name.clone());
            exposed.push(ExposedTool {
                mcp_id: *mcp_id,
                server: server.clone(),
                tool: tool.clone(),
                exposed_name: name,
            });
        }
    }
    exposed
}

/// Keeps `[A-Za-z0-9_-]`, turning anything else into `_`; never empty.
fn sanitize(raw: &str) -> String {
    let cleaned: String = raw
        .trim()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c.to_ascii_lowercase()
            } else {
                '_'
            }
        })
        .collect();
    if cleaned.is_empty() {
        "mcp".to_owned()
    } else {
        cleaned
    }
}

fn truncate(name: &str, max: usize) -> String {
    name.chars().take(max).collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn tool(name: &str) -> McpTool {
        McpTool {
            name: name.to_owned(),
            description: String::new(),
            input_schema: json!({"type": "object"}),
        }
    }

    #[test]
    fn names_are_prefixed_by_the_server_and_sanitised() {
        let servers = [(
            Uuid::nil(),
            "Order Desk!".to_owned(),
            vec![tool("get.status")],
        )];
        let exposed = expose(&servers, &[]);
        assert_eq!(exposed[0].exposed_name, "order_desk___get_status");
    }

    #[test]
    fn collisions_get_a_numeric_suffix_and_names_stay_within_64_characters() {
        let long = "x".repeat(80);
        let servers = [
            (
                Uuid::nil(),
                "crm".to_owned(),
                vec![tool("find"), tool(&long)],
            ),
            (
                Uuid::max(),
                "CRM".to_owned(),
                vec![tool("find"), tool(&long)],
            ),
        ];
        let names: Vec<String> = expose(&servers, &["remember"])
            .into_iter()
            .map(|t| t.exposed_name)
            .collect();
        assert_eq!(names[0], "crm__find");
        assert_eq!(names[2], "crm__find_2");
        assert!(names.iter().all(|n| n.len() <= 64), "{names:?}");
        assert_ne!(names[1], names[3]);
        assert!(names[3].ends_with("_2"));
    }
}
