//! An MCP server's body checked once: its name, transport, URL and headers, laid over the
//! current server for a PATCH. A tenant may not speak for Parley or the protocol: header names
//! Parley sets itself (`X-Parley-*`), hop-by-hop and framing headers are refused, and so are
//! credentials in the URL (they belong in headers, which are sealed at rest); the URL's query
//! values are masked in answers.

use parley_persistence::McpTransport;
use parley_persistence::entities::mcp_server;
use parley_persistence::mcp_servers::McpServerFields;
use reqwest::Url;
use reqwest::header::{HeaderName, HeaderValue};
use serde_json::{Value, json};

use super::{HeaderBody, MASK, McpBody};
use crate::http::AppState;
use crate::http::error::{FieldError, PathSegment, Result};
use crate::http::validation::{Checked, checked, problem, required, tenant_url};

/// Most headers a server may have.
const MAX_HEADERS: usize = 20;
/// Longest name.
const MAX_NAME: usize = 100;
/// Longest header value.
const MAX_HEADER_VALUE: usize = 16 * 1024;

/// Header names a tenant may not set: hop-by-hop and framing headers the HTTP client owns, and
/// those of the Model Context Protocol's own exchange. `X-Parley-*` and `Proxy-*` are refused
/// by prefix.
const RESERVED_HEADERS: [&str; 11] = [
    "connection",
    "content-length",
    "content-type",
    "expect",
    "host",
    "keep-alive",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "accept",
];

/// Checks a body laid over `current` (for a PATCH) and seals the header values.
pub(super) fn fields(
    state: &AppState,
    body: McpBody,
    current: Option<&mcp_server::Model>,
) -> Result<McpServerFields> {
    let name = name(body.name, current);
    let transport = transport(body.transport.as_deref(), current);
    let url = url(state, body.url, current);
    let headers = match body.headers {
        Some(given) => sealed_headers(state, &given),
        None => Ok(current.map_or_else(|| json!([]), |c| c.headers.clone())),
    };
    checked!(name, transport, url, headers);
    Ok(McpServerFields {
        name,
        transport,
        url,
        headers,
    })
}

fn name(given: Option<String>, current: Option<&mcp_server::Model>) -> Checked<String> {
    let name = given
        .map(|n| n.trim().to_owned())
        .or_else(|| current.map(|c| c.name.clone()));
    match required("name", name)? {
        n if n.is_empty() || n.chars().count() > MAX_NAME => {
            problem(["name"], format!("must be 1 to {MAX_NAME} characters"))
        }
        n => Ok(n),
    }
}

fn transport(given: Option<&str>, current: Option<&mcp_server::Model>) -> Checked<McpTransport> {
    match given {
        Some(raw) => McpTransport::parse(raw).map_or_else(
            || problem(["transport"], "must be http or streamable-http"),
            Ok,
        ),
        None => required("transport", current.map(|c| c.transport)),
    }
}

fn url(
    state: &AppState,
    given: Option<String>,
    current: Option<&mcp_server::Model>,
) -> Checked<String> {
    let url = required("url", given.or_else(|| current.map(|c| c.url.clone())))?;
    tenant_url(state.actors.mcp().egress(), url)
}

/// The URL as the API shows it: every query value masked (it may be a key).
pub(super) fn masked_url(raw: &str) -> String {
    let Ok(mut url) = Url::parse(raw) else {
        return raw.to_owned();
    };
    if url.query().is_none() {
        return raw.to_owned();
    }
    let keys: Vec<String> = url.query_pairs().map(|(key, _)| key.into_owned()).collect();
    url.query_pairs_mut()
        .clear()
        .extend_pairs(keys.iter().map(|key| (key.as_str(), MASK)));
    url.to_string()
}

/// Whether a tenant may set a header of this name.
fn is_reserved(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    name.starts_with("x-parley-")
        || name.starts_with("proxy-")
        || name.starts_with("mcp-")
        || RESERVED_HEADERS.contains(&name.as_str())
}

fn sealed_headers(state: &AppState, given: &[HeaderBody]) -> Checked<Value> {
    let mut problems = Vec::new();
    if given.len() > MAX_HEADERS {
        problems.push(FieldError::new(
            ["headers"],
            format!("must have at most {MAX_HEADERS} items"),
        ));
    }
    let at = |index: usize, field: &str| {
        [
            PathSegment::from("headers"),
            index.into(),
            PathSegment::from(field),
        ]
    };
    let mut sealed = Vec::with_capacity(given.len());
    for (index, header) in given.iter().enumerate() {
        if HeaderName::try_from(header.key.as_str()).is_err() {
            problems.push(FieldError::new(
                at(index, "key"),
                "must be a valid HTTP header name",
            ));
        } else if is_reserved(&header.key) {
            problems.push(FieldError::new(
                at(index, "key"),
                "is set by Parley or the HTTP client itself (X-Parley-*, Mcp-*, hop-by-hop and \
                 framing headers); choose another name",
            ));
        }
        if header.value.len() > MAX_HEADER_VALUE {
            problems.push(FieldError::new(
                at(index, "value"),
                format!("must be at most {MAX_HEADER_VALUE} bytes"),
            ));
        } else if HeaderValue::try_from(header.value.as_str()).is_err() {
            problems.push(FieldError::new(
                at(index, "value"),
                "must be a valid HTTP header value",
            ));
        }
        sealed.push(json!({"key": header.key, "value": state.actors.mcp().seal(&header.value)}));
    }
    if problems.is_empty() {
        Ok(Value::Array(sealed))
    } else {
        Err(problems)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parley_and_the_client_set_are_reserved_in_any_case() {
        for name in [
            "X-Parley-Workspace-Id",
            "x-parley-identity-id",
            "Content-Length",
            "Host",
            "Transfer-Encoding",
            "Proxy-Authorization",
            "Mcp-Session-Id",
        ] {
            assert!(is_reserved(name), "{name}");
        }
        assert!(!is_reserved("Authorization"));
        assert!(!is_reserved("X-Api-Key"));
    }

    #[test]
    fn query_values_are_masked_and_keys_kept() {
        assert_eq!(
            masked_url("https://mcp.example.com/m?api_key=s3cret&team=7"),
            "https://mcp.example.com/m?api_key=****&team=****"
        );
        assert_eq!(
            masked_url("https://mcp.example.com/m"),
            "https://mcp.example.com/m"
        );
    }
}
