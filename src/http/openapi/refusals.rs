//! The refusals every operation can meet, each with an example built from the very error the
//! handlers return, so that the docs page shows what the API answers.

use utoipa::openapi::path::Operation;
use utoipa::openapi::response::ResponseBuilder;
use utoipa::openapi::{Components, Content, Ref, RefOr};

use crate::domain::Permission;
use crate::http::error::{ApiError, FieldError};
use crate::http::pagination::MAX_LIMIT;

/// Refusals any operation can answer, as (status, component name, description).
const COMMON_REFUSALS: [(&str, &str, &str); 8] = [
    (
        "400",
        "BadRequest",
        "The request is not acceptable as sent (see `details`).",
    ),
    (
        "401",
        "Unauthenticated",
        "No key, or an unknown, revoked or expired one.",
    ),
    (
        "403",
        "Forbidden",
        "The key lacks the permission or the workspace.",
    ),
    ("404", "NotFound", "No such resource in the caller's reach."),
    (
        "413",
        "PayloadTooLarge",
        "The body is over the configured limit.",
    ),
    (
        "429",
        "RateLimited",
        "Too many failed authentications from this address.",
    ),
    (
        "500",
        "InternalError",
        "A bug or unexpected failure (logged with the request id).",
    ),
    (
        "503",
        "Unavailable",
        "Not ready, or the request ran past its time limit.",
    ),
];

/// A refusal only writes can meet.
const CONFLICT: (&str, &str, &str) = (
    "409",
    "Conflict",
    "The request contradicts the current state (a unique value taken, an idempotency key reused, …).",
);

/// The 400 of an operation without a body: its query or path is refused.
const BAD_QUERY: (&str, &str, &str) = (
    "400",
    "BadQuery",
    "The query or path is not acceptable as sent (see `details`).",
);

/// Registers the shared refusals (all but 404, whose example names the thing) as components.
pub(super) fn register(components: &mut Components) {
    let shared = COMMON_REFUSALS.iter().chain([&CONFLICT, &BAD_QUERY]);
    for (_, name, description) in shared.filter(|(status, _, _)| *status != "404") {
        components.responses.insert(
            (*name).to_owned(),
            RefOr::T(
                ResponseBuilder::new()
                    .description(*description)
                    .content("application/json", refusal_content(&common_example(name)))
                    .build(),
            ),
        );
    }
}

/// Adds the common refusals to `operation`, each with an example as the API would answer it at
/// `path`, and describes and illustrates the refusals its handler declared.
pub(super) fn add(operation: &mut Operation, path: &str, public: bool, writes: bool) {
    let has_body = operation.request_body.is_some();
    let refusals = COMMON_REFUSALS
        .iter()
        .chain(writes.then_some(&CONFLICT))
        .filter(|(status, _, _)| !public || !matches!(*status, "403" | "429"));
    for (status, name, description) in refusals {
        let response = match (*status, has_body) {
            ("404", _) => RefOr::T(
                ResponseBuilder::new()
                    .description(*description)
                    .content(
                        "application/json",
                        refusal_content(&ApiError::NotFound(missing_thing(path))),
                    )
                    .build(),
            ),
            ("400", false) => RefOr::Ref(Ref::from_response_name(BAD_QUERY.1)),
            _ => RefOr::Ref(Ref::from_response_name(*name)),
        };
        operation
            .responses
            .responses
            .entry((*status).to_owned())
            .or_insert(response);
    }
    for (status, response) in &mut operation.responses.responses {
        if let RefOr::T(response) = response
            && response.description.is_empty()
        {
            response.description = match status.as_str() {
                "409" => CONFLICT.2,
                "502" => "An upstream (Meta, the language model, an MCP server) failed or refused.",
                "504" => "An upstream did not answer in time.",
                "201" => "Created.",
                _ => "Done.",
            }
            .to_owned();
        }
        if let RefOr::T(response) = response
            && let Some(content) = response.content.get_mut("application/json")
            && content.example.is_none()
        {
            let example = match status.as_str() {
                "409" => common_example(CONFLICT.1),
                "502" | "504" => upstream_example(status, path),
                _ => continue,
            };
            content.example = refusal_content(&example).example;
        }
    }
}

/// An example of the refusal `name` (a component of `COMMON_REFUSALS`, `CONFLICT` or
/// `BAD_QUERY`), built from the error the handlers return, so that it reads as the API answers.
fn common_example(name: &str) -> ApiError {
    match name {
        "BadRequest" => ApiError::invalid(vec![FieldError::new(["name"], "is required")]),
        "BadQuery" => ApiError::invalid(vec![FieldError::new(
            ["limit"],
            format!("must be between 1 and {MAX_LIMIT}"),
        )]),
        "Unauthenticated" => ApiError::Unauthenticated,
        "Forbidden" => ApiError::lacking(Permission::Write),
        "PayloadTooLarge" => ApiError::PayloadTooLarge(1024 * 1024),
        "RateLimited" => ApiError::too_many_failures(60),
        "Unavailable" => ApiError::not_ready("The channels' supervisor is restarting"),
        "Conflict" => ApiError::taken(),
        _ => ApiError::Internal(anyhow::anyhow!("an example")),
    }
}

/// What is not found at `path`: the thing its last path parameter names.
fn missing_thing(path: &str) -> &'static str {
    let last = path
        .rsplit('/')
        .find(|segment| segment.starts_with('{'))
        .unwrap_or("");
    match last {
        "{workspace_id}" => "Workspace",
        "{key_id}" => "API key",
        "{worker_id}" if !path.starts_with("/channels") => "Worker",
        "{assistant_id}" => "Assistant",
        "{stage_id}" => "Stage",
        "{identity_id}" => "Identity",
        "{key}" => "Memory entry",
        "{conversation_id}" => "Conversation",
        "{mcp_id}" => "MCP server",
        "{uid}" if path.starts_with("/flows") => "Flow",
        "{uid}" => "Campaign",
        "{id}" => "Scheduled task",
        _ => "Channel",
    }
}

/// An example of an upstream's refusal (`status` 502 or 504) at `path`.
fn upstream_example(status: &str, path: &str) -> ApiError {
    let model = path.starts_with("/conversation/");
    let mcp = path.contains("mcp");
    match (status, model, mcp) {
        ("504", true, _) => ApiError::model_timed_out(),
        ("504", false, _) => ApiError::send_timed_out(),
        (_, true, _) => ApiError::model_failed(),
        (_, _, true) => ApiError::BadGateway {
            code: "mcp_unreachable",
            message: "The MCP server 'Clock' did not answer: connection refused".to_owned(),
            details: vec![FieldError::new(
                ["mcp_servers", "0b7c9a52-2f41-4a7e-9d55-3c1f0e8a6b21"],
                "Clock: connection refused",
            )],
        },
        _ => ApiError::credentials_unverified(),
    }
}

/// A refusal's content: the error body, with `example`.
fn refusal_content(example: &ApiError) -> Content {
    let mut content = Content::new(Some(Ref::from_schema_name("Error")));
    content.example = serde_json::to_value(example.body()).ok();
    content
}
