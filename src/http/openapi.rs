//! The API's OpenAPI 3.1 document, built from the handlers' own `#[utoipa::path]` declarations
//! (the router and the document come from the same `routes!` calls), and the offline docs page.
//!
//! Handlers declare their success answer and the refusals only they make (409, 502, 504).
//! Refusals every operation can meet (a bad request, authentication, a missing resource, the
//! body limit, rate limiting, a server error, the general time limit) are added here once, each
//! with the shared error body of DESIGN §4.

use axum::Router;
use utoipa::openapi::path::{Operation, ParameterBuilder, ParameterIn};
use utoipa::openapi::response::ResponseBuilder;
use utoipa::openapi::schema::{ObjectBuilder, Schema, SchemaType, Type};
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityRequirement, SecurityScheme};
use utoipa::openapi::{Content, OpenApi, Ref, RefOr, Required};
use utoipa_swagger_ui::SwaggerUi;

use crate::http::error::{ApiError, FieldError, Refusal};
use crate::http::pagination::MAX_LIMIT;

/// Where the document is served.
pub(crate) const DOCUMENT_PATH: &str = "/openapi.json";
/// Where the docs page is served.
pub(crate) const DOCS_PATH: &str = "/docs";

/// The name of the bearer scheme in the document.
const BEARER: &str = "apiKey";

/// Operations that need no key.
const PUBLIC_PREFIXES: [&str; 3] = ["/health", "/ready", "/webhooks/"];

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

/// What the docs page's Authorize dialog says.
const AUTHORIZE_TEXT: &str = "An API key, sent as `Authorization: Bearer <key>`. The demo \
    (`parley serve --demo`) prints one with every permission in its banner and keeps it across \
    restarts; on a real deployment, `parley admin bootstrap` makes the first workspace and its \
    admin key, and `POST /workspace/api-keys` makes more.";

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
        "Forbidden" => ApiError::Forbidden("This API key lacks the 'write' permission".to_owned()),
        "PayloadTooLarge" => ApiError::PayloadTooLarge(1024 * 1024),
        "RateLimited" => ApiError::RateLimited(
            "Too many failed authentications from this address; slow down".to_owned(),
        ),
        "Unavailable" => ApiError::not_ready("The channels' supervisor is restarting"),
        "Conflict" => {
            ApiError::Conflict("A resource with the same unique value already exists".to_owned())
        }
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
        ("504", true, _) => ApiError::UpstreamTimeout(
            "The language model did not answer in time; the message is kept".to_owned(),
        ),
        ("504", false, _) => ApiError::UpstreamTimeout(
            "Meta did not answer in time; the send goes on and its outcome is recorded on the \
             message"
                .to_owned(),
        ),
        (_, true, _) => ApiError::UpstreamFailed(
            "The language model failed to answer; the message is kept".to_owned(),
        ),
        (_, _, true) => ApiError::BadGateway {
            code: "mcp_unreachable",
            message: "The MCP server 'Clock' did not answer: connection refused".to_owned(),
            details: vec![FieldError::new(
                ["mcp_servers", "0b7c9a52-2f41-4a7e-9d55-3c1f0e8a6b21"],
                "Clock: connection refused",
            )],
        },
        _ => ApiError::UpstreamFailed(
            "Meta could not be reached to verify the channel's credentials".to_owned(),
        ),
    }
}

/// A refusal's content: the error body, with `example`.
fn refusal_content(example: &ApiError) -> Content {
    let mut content = Content::new(Some(Ref::from_schema_name("Error")));
    content.example = serde_json::to_value(example.body()).ok();
    content
}

#[derive(utoipa::OpenApi)]
#[openapi(
    info(
        title = "Parley",
        description = "Self-hostable conversational messaging: AI assistants on WhatsApp Business \
                       channels, template campaigns and flows, scheduled tasks. Every answer is \
                       `{\"message\", \"data\"}`; every refusal is `{\"message\", \"error\", \"details\"}`.",
        license(name = "Apache-2.0")
    ),
    components(schemas(Refusal)),
    tags(
        (name = "health", description = "Liveness and readiness"),
        (name = "workspaces", description = "Tenants"),
        (name = "api-keys", description = "Keys and their permissions"),
        (name = "workers", description = "Workers (who answers on a channel)"),
        (name = "assistants", description = "A worker's assistant: model, instructions, tools"),
        (name = "channels", description = "WhatsApp Business and sandbox channels"),
        (name = "templates", description = "Message templates of a channel"),
        (name = "messages", description = "Template sends"),
        (name = "sandbox", description = "The offline channel: inject messages, read the outbox"),
        (name = "webhooks", description = "Meta's webhook (signed, no key)"),
        (name = "identities", description = "People: one identity across phones, e-mails and channels"),
        (name = "stages", description = "Journey stages"),
        (name = "memory", description = "What assistants remember about a person"),
        (name = "conversation", description = "Talk to an assistant over HTTP (chat, SSE stream)"),
        (name = "conversations", description = "Stored conversations and messages"),
        (name = "mcp", description = "MCP servers and the tools they give assistants"),
        (name = "campaigns", description = "Template campaigns"),
        (name = "flows", description = "Campaign runs to many identities"),
        (name = "scheduled-tasks", description = "Actions run later, once or on a schedule"),
        (name = "admin", description = "The live actor tree"),
    )
)]
struct ApiDoc;

/// The whole document: the base above merged with the routed operations, then the common
/// refusals and the security requirement added to each operation.
pub(crate) fn document(routed: OpenApi) -> OpenApi {
    let mut doc = <ApiDoc as utoipa::OpenApi>::openapi();
    doc.merge(routed);
    let components = doc.components.get_or_insert_with(Default::default);
    components.security_schemes.insert(
        BEARER.to_owned(),
        SecurityScheme::Http(
            HttpBuilder::new()
                .scheme(HttpAuthScheme::Bearer)
                .description(Some(AUTHORIZE_TEXT))
                .build(),
        ),
    );
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
    for (path, item) in doc.paths.paths.iter_mut() {
        let public = PUBLIC_PREFIXES.iter().any(|p| path.starts_with(p));
        let operations = [
            (&mut item.get, false),
            (&mut item.post, true),
            (&mut item.put, true),
            (&mut item.patch, true),
            (&mut item.delete, true),
        ];
        for (operation, writes) in operations {
            if let Some(operation) = operation.as_mut() {
                complete(operation, path, public, writes);
            }
        }
    }
    doc
}

/// Adds the common refusals, each with an example as the API would answer it at `path`, and
/// the security requirement.
fn complete(operation: &mut Operation, path: &str, public: bool, writes: bool) {
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
    if !public {
        operation.security = Some(vec![SecurityRequirement::new::<_, _, &str>(BEARER, [])]);
    }
}

/// Declares `Idempotency-Key` on every POST operation of `doc` (those behind the idempotency
/// middleware).
pub(crate) fn with_idempotency_key(doc: &mut OpenApi) {
    let header = ParameterBuilder::new()
        .name("Idempotency-Key")
        .parameter_in(ParameterIn::Header)
        .required(Required::False)
        .description(Some(
            "Within 24 hours, the same key and body answer the first response again without \
             acting again; the same key with another body is a 409 `idempotency_key_reused`.",
        ))
        .schema(Some(
            ObjectBuilder::new()
                .schema_type(Type::String)
                .min_length(Some(1))
                .max_length(Some(crate::http::idempotency::MAX_KEY_LEN))
                .pattern(Some("^[!-~]+$")),
        ))
        .build();
    for item in doc.paths.paths.values_mut() {
        if let Some(post) = item.post.as_mut() {
            post.parameters
                .get_or_insert_with(Vec::new)
                .push(header.clone());
        }
    }
}

/// `schema` (an object's) with `fields` required: a create and a PATCH share one body type,
/// and only the create needs them. A PATCH field may be null (as if absent); a required one may
/// not, so its null alternative goes.
pub(crate) fn requiring(schema: RefOr<Schema>, fields: &[&str]) -> RefOr<Schema> {
    match schema {
        RefOr::T(Schema::Object(mut object)) => {
            object.required = fields.iter().map(|f| (*f).to_owned()).collect();
            for field in fields {
                if let Some(property) = object.properties.get_mut(*field) {
                    let given =
                        std::mem::replace(property, RefOr::T(Schema::Object(Default::default())));
                    *property = without_null(given);
                }
            }
            RefOr::T(Schema::Object(object))
        }
        other => other,
    }
}

/// `schema` without its null alternative: `["string", "null"]` becomes `"string"`, and
/// `oneOf: [null, X]` becomes `X`.
fn without_null(schema: RefOr<Schema>) -> RefOr<Schema> {
    let is_null = |item: &RefOr<Schema>| {
        matches!(item, RefOr::T(Schema::Object(o))
            if matches!(&o.schema_type, SchemaType::Type(Type::Null)))
    };
    match schema {
        RefOr::T(Schema::Object(mut object)) => {
            if let SchemaType::Array(types) = &object.schema_type {
                let mut kept: Vec<Type> = types
                    .iter()
                    .filter(|t| **t != Type::Null)
                    .cloned()
                    .collect();
                object.schema_type = match kept.len() {
                    1 => SchemaType::Type(kept.remove(0)),
                    _ => SchemaType::Array(kept),
                };
            }
            RefOr::T(Schema::Object(object))
        }
        RefOr::T(Schema::OneOf(mut one_of)) if one_of.items.iter().any(is_null) => {
            one_of.items.retain(|item| !is_null(item));
            match one_of.items.len() {
                1 => one_of.items.remove(0),
                _ => RefOr::T(Schema::OneOf(one_of)),
            }
        }
        other => other,
    }
}

/// Declares `$name`, the schema of a create's body: `$body`'s, with `$fields` required.
macro_rules! create_body {
    ($(#[$meta:meta])* $name:ident = $body:ty, [$($field:literal),+ $(,)?]) => {
        $(#[$meta])*
        pub(crate) struct $name;

        impl utoipa::PartialSchema for $name {
            fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
                $crate::http::openapi::requiring(
                    <$body as utoipa::PartialSchema>::schema(),
                    &[$($field),+],
                )
            }
        }

        impl utoipa::ToSchema for $name {
            fn schemas(
                schemas: &mut Vec<(
                    String,
                    utoipa::openapi::RefOr<utoipa::openapi::schema::Schema>,
                )>,
            ) {
                <$body as utoipa::ToSchema>::schemas(schemas);
            }
        }
    };
}
pub(crate) use create_body;

/// A string schema: `description`, and the values it may take or the pattern it matches (with
/// an example of it, which the docs page fills in).
pub(crate) fn string_of(
    description: &str,
    values: Option<&[&str]>,
    pattern: Option<(&str, &str)>,
) -> RefOr<Schema> {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .description(Some(description.trim()))
        .enum_values(values.map(<[&str]>::to_vec))
        .pattern(pattern.map(|(pattern, _)| pattern))
        .examples(pattern.map(|(_, example)| example))
        .into()
}

/// Declares `$name`, the schema of a string field a handler checks by hand: against a list of
/// values (`one_of`, the very list the handler uses) or a pattern, with an example.
macro_rules! string_schema {
    ($(#[doc = $doc:literal])* $name:ident, one_of = $values:expr) => {
        $crate::http::openapi::string_schema!(@declare $name, concat!($($doc, " "),*), Some(&$values[..]), None);
    };
    ($(#[doc = $doc:literal])* $name:ident, pattern = $pattern:literal, example = $example:literal) => {
        $crate::http::openapi::string_schema!(@declare $name, concat!($($doc, " "),*), None, Some(($pattern, $example)));
    };
    (@declare $name:ident, $description:expr, $values:expr, $pattern:expr) => {
        #[doc = $description]
        pub(crate) struct $name;

        impl utoipa::PartialSchema for $name {
            fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
                $crate::http::openapi::string_of($description, $values, $pattern)
            }
        }

        impl utoipa::ToSchema for $name {}
    };
}
pub(crate) use string_schema;

/// `GET /openapi.json` and the Swagger UI page at `/docs`, both without a key. Swagger UI's
/// files are compiled in (`vendored`), so the page works with no network anywhere.
pub(crate) fn routes<S: Clone + Send + Sync + 'static>(doc: OpenApi) -> Router<S> {
    SwaggerUi::new(DOCS_PATH).url(DOCUMENT_PATH, doc).into()
}
