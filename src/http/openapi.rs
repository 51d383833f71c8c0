//! The API's OpenAPI 3.1 document, built from the handlers' own `#[utoipa::path]` declarations
//! (the router and the document come from the same `routes!` calls), and the offline docs page.
//!
//! Handlers declare their success answer and the refusals only they make (409, 502, 504).
//! Refusals every operation can meet are added once ([`refusals`]), each with the shared error
//! body of DESIGN §4 and an example as the API answers it.

use axum::Router;
use utoipa::openapi::path::{ParameterBuilder, ParameterIn};
use utoipa::openapi::schema::{ObjectBuilder, Schema, SchemaType, Type};
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityRequirement, SecurityScheme};
use utoipa::openapi::{OpenApi, RefOr, Required};
use utoipa_swagger_ui::SwaggerUi;

use crate::http::error::Refusal;

mod clients;
mod refusals;

/// Where the document is served.
pub(crate) const DOCUMENT_PATH: &str = "/openapi.json";
/// Where the docs page is served.
pub(crate) const DOCS_PATH: &str = "/docs";

/// The name of the bearer scheme in the document.
const BEARER: &str = "apiKey";

/// Operations that need no key.
const PUBLIC_PREFIXES: [&str; 3] = ["/health", "/ready", "/webhooks/"];

/// What the docs page's Authorize dialog says.
const AUTHORIZE_TEXT: &str = "An API key, sent as `Authorization: Bearer <key>`. The demo \
    (`parley serve --demo`) prints one with every permission in its banner and keeps it across \
    restarts; on a real deployment, `parley admin bootstrap` makes the first workspace and its \
    admin key, and `POST /workspace/api-keys` makes more.";

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
        (name = "event-webhooks", description = "Your endpoints for Parley's events (Standard Webhooks 1.0), and their deliveries"),
        (name = "identities", description = "People: one identity across phones, e-mails and channels"),
        (name = "stages", description = "Journey stages"),
        (name = "memory", description = "What assistants remember about a person"),
        (name = "conversation", description = "Talk to an assistant over HTTP (chat, SSE stream); hand a conversation to a person and back"),
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
    refusals::register(components);
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
                refusals::add(operation, path, public, writes);
                if !public {
                    operation.security =
                        Some(vec![SecurityRequirement::new::<_, _, &str>(BEARER, [])]);
                }
            }
        }
    }
    doc
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
/// The document served at [`DOCUMENT_PATH`] and the docs page; served as client generators
/// read it (`clients.rs`).
pub(crate) fn routes<S: Clone + Send + Sync + 'static>(doc: OpenApi) -> Router<S> {
    let mut json = serde_json::to_value(&doc).unwrap_or_default();
    clients::for_generators(&mut json);
    SwaggerUi::new(DOCS_PATH)
        .external_url_unchecked(DOCUMENT_PATH, json)
        .into()
}
