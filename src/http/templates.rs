//! Message templates of a WhatsApp channel: `GET|POST /channels/{id}/waba/templates` through
//! Meta's Graph API, validated before Meta is asked; Meta's refusals answer 502 with Meta's
//! code and message in `details`.

use axum::extract::State;
use parley_persistence::Integration;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::domain::Permission;
use crate::http::AppState;
use crate::http::auth::Caller;
use crate::http::envelope::Envelope;
use crate::http::error::Refusal;
use crate::http::error::{ApiError, PathSegment, Result};
use crate::http::extract::{Json, Path};
use crate::http::lookup::find_channel;
use crate::http::validation::Problems;
use crate::http::validation::is_template_language;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

const CATEGORIES: [&str; 3] = ["MARKETING", "AUTHENTICATION", "UTILITY"];

crate::http::openapi::string_schema!(
    /// A template's category at Meta.
    TemplateCategory, one_of = CATEGORIES
);
const COMPONENT_TYPES: [&str; 5] = ["HEADER", "BODY", "FOOTER", "BUTTONS", "CAROUSEL"];

pub(crate) fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(list_templates, create_template))
}

/// List a channel's message templates.
///
/// From Meta for a live channel; a sandbox channel keeps its own.
#[utoipa::path(
    get,
    path = "/channels/{channel_id}/waba/templates",
    tag = "templates",
    params(("channel_id" = String, Path, format = Uuid, description = "Channel id")),
    responses((status = 200, body = Envelope<Vec<MetaTemplate>>), (status = 502, body = Refusal)),
)]
#[tracing::instrument(skip_all, fields(workspace_id = caller.workspace_id))]
async fn list_templates(
    caller: Caller,
    State(state): State<AppState>,
    Path(channel_id): Path<String>,
) -> Result<Envelope<Vec<MetaTemplate>>> {
    caller.require(Permission::Read)?;
    let channel = find_channel(&state, &caller, &channel_id).await?;
    let templates = state
        .actors
        .channels()
        .list_templates(channel.id)
        .await
        .map_err(ApiError::from)?;
    Ok(Envelope::ok(
        "Templates retrieved successfully",
        templates.into_iter().map(MetaTemplate::of).collect(),
    ))
}

/// A template as Meta (or the sandbox) has it: `id`, `name`, `language`, `status`,
/// `components`, and its category as `type` (the specification's name: `MARKETING`,
/// `AUTHENTICATION`, `UTILITY`) and as `category` (Meta's).
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(transparent)]
#[schema(value_type = Object, example = json!({"id": "1234567890", "name": "order_update",
    "type": "UTILITY", "category": "UTILITY", "language": "en_US", "status": "APPROVED",
    "components": [{"type": "BODY", "text": "Hi {{1}}, your order {{2}} has shipped."}]}))]
struct MetaTemplate(Value);

impl MetaTemplate {
    /// The record of Meta's template: its category also under `type`.
    fn of(mut template: Value) -> Self {
        if let Some(fields) = template.as_object_mut()
            && let Some(category) = fields.get("category").cloned()
        {
            fields.insert("type".to_owned(), category);
        }
        Self(template)
    }
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
struct CreateTemplateBody {
    #[schema(pattern = "^[a-z0-9_]{1,512}$", example = "order_update")]
    name: String,
    #[serde(rename = "type")]
    #[schema(value_type = TemplateCategory)]
    category: String,
    #[schema(pattern = "^[a-z]{2,3}(_[A-Z]{2})?$", example = "en_US")]
    language: String,
    #[serde(default)]
    components: Vec<Value>,
    /// The message text; becomes the BODY component when none is given.
    content: Option<String>,
    #[schema(value_type = Option<bool>)]
    is_carousel: Option<bool>,
}

/// Create a message template.
///
/// Submitted to Meta for approval on a live channel; approved at once on a sandbox channel.
#[utoipa::path(
    post,
    path = "/channels/{channel_id}/waba/templates",
    tag = "templates",
    params(("channel_id" = String, Path, format = Uuid, description = "Channel id")),
    request_body = CreateTemplateBody,
    responses((status = 201, body = Envelope<MetaTemplate>), (status = 502, body = Refusal)),
)]
#[tracing::instrument(skip_all, fields(workspace_id = caller.workspace_id))]
async fn create_template(
    caller: Caller,
    State(state): State<AppState>,
    Path(channel_id): Path<String>,
    Json(body): Json<CreateTemplateBody>,
) -> Result<Envelope<MetaTemplate>> {
    caller.require(Permission::Write)?;
    let channel = find_channel(&state, &caller, &channel_id).await?;
    let components = checked_components(&body)?;
    let request = json!({"name": body.name, "language": body.language, "category": body.category,
                         "components": components});
    let created = state
        .actors
        .channels()
        .create_template(channel.id, request.clone())
        .await
        .map_err(ApiError::from)?;
    // The whole record: what was submitted, with what Meta answered (its id, the status).
    let mut record = request;
    if let (Some(record), Some(answer)) = (record.as_object_mut(), created.as_object()) {
        record.extend(answer.clone());
    }
    let message = if channel.integration == Integration::Sandbox {
        "Template created (sandbox templates are approved at once)"
    } else {
        "Template submitted for approval"
    };
    Ok(Envelope::created(message, MetaTemplate::of(record)))
}

/// Checks a template body and answers its components, with `content` turned into the BODY
/// component when none is given; a 400 names every problem.
fn checked_components(body: &CreateTemplateBody) -> Result<Vec<Value>> {
    let mut problems = Problems::default();
    let name_ok = !body.name.is_empty()
        && body.name.len() <= 512
        && body
            .name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
    if !name_ok {
        problems.add(
            ["name"],
            "must be 1 to 512 lower-case letters, digits or underscores",
        );
    }
    if !CATEGORIES.contains(&body.category.as_str()) {
        problems.add(
            ["type"],
            "must be one of MARKETING, AUTHENTICATION, UTILITY",
        );
    }
    if !is_template_language(&body.language) {
        problems.add(
            ["language"],
            "must be a language code such as en_US or pt_BR",
        );
    }
    let mut components = body.components.clone();
    check_components(&mut problems, &components);
    let bodies = components.iter().filter(|c| c["type"] == "BODY").count();
    match (&body.content, bodies) {
        (Some(content), 0) if !content.trim().is_empty() => {
            components.push(json!({"type": "BODY", "text": content}));
        }
        (_, 0) => problems.add(
            ["components"],
            "must include a BODY component (or give content)",
        ),
        (_, 1) => {}
        _ => problems.add(["components"], "must include exactly one BODY component"),
    }
    if body.is_carousel == Some(true) && !components.iter().any(|c| c["type"] == "CAROUSEL") {
        problems.add(
            ["isCarousel"],
            "a carousel template needs a CAROUSEL component",
        );
    }
    problems.finish()?;
    Ok(components)
}

/// Each component's type, and the BODY's text.
fn check_components(problems: &mut Problems, components: &[Value]) {
    for (index, component) in components.iter().enumerate() {
        let kind = component["type"].as_str().unwrap_or_default();
        let at = |field: &str| {
            [
                PathSegment::from("components"),
                PathSegment::from(index),
                PathSegment::from(field),
            ]
        };
        if !COMPONENT_TYPES.contains(&kind) {
            problems.add(
                at("type"),
                "must be one of HEADER, BODY, FOOTER, BUTTONS, CAROUSEL (upper-case)",
            );
        }
        if kind == "BODY"
            && component["text"]
                .as_str()
                .is_none_or(|t| t.trim().is_empty())
        {
            problems.add(at("text"), "must be the body's text");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn template_languages_look_like_en_us() {
        for good in ["en_US", "pt_BR", "en", "fil"] {
            assert!(is_template_language(good), "{good}");
        }
        for bad in ["en-US", "EN_us", "english", ""] {
            assert!(!is_template_language(bad), "{bad}");
        }
    }
}
