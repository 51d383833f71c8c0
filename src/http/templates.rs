//! Message templates and template sends of a WhatsApp channel:
//! `GET|POST /channels/{id}/waba/templates` through Meta's Graph API (validated before Meta is
//! asked; Meta's refusals answered 502 with Meta's code and message in `details`), and
//! `POST /channels/{id}/waba/send`, which upserts the identity by phone, sends the template and
//! records it, rendered, in the identity's conversation so the assistant sees it when the person
//! answers.

use axum::Router;
use axum::extract::State;
use axum::routing::{get, post};
use parley_actors::channel::{Outbound, OutboundMessage, SendError};
use parley_actors::whatsapp::GraphError;
use parley_persistence::conversations::{self, NewMessage, OPEN};
use parley_persistence::entities::{channel, identity};
use parley_persistence::identities::{self, NewIdentity, PHONE};
use parley_persistence::{PersistenceError, clock, deliveries};
use serde::Deserialize;
use serde_json::{Map, Value, json};
use uuid::Uuid;

use crate::domain::{Permission, Phone};
use crate::http::AppState;
use crate::http::auth::Caller;
use crate::http::channels::find_channel;
use crate::http::envelope::Envelope;
use crate::http::error::{ApiError, PathSegment, Result};
use crate::http::extract::{Json, Path};
use crate::http::validation::Problems;

const CATEGORIES: [&str; 3] = ["MARKETING", "AUTHENTICATION", "UTILITY"];
const COMPONENT_TYPES: [&str; 5] = ["HEADER", "BODY", "FOOTER", "BUTTONS", "CAROUSEL"];
const TEMPLATE_TYPES: [&str; 3] = ["text", "list", "carousel"];
const SEND_COMPONENTS: [&str; 4] = ["header", "body", "button", "buttons"];

pub(crate) fn router() -> Router<AppState> {
    Router::new()
        .route(
            "/channels/{channel_id}/waba/templates",
            get(list_templates).post(create_template),
        )
        .route("/channels/{channel_id}/waba/send", post(send_template))
}

fn meta_error(error: GraphError) -> ApiError {
    match error {
        GraphError::Api { code, message, .. } => ApiError::MetaRefused { code, message },
        GraphError::Timeout(_) => ApiError::UpstreamTimeout(error.to_string()),
        other => ApiError::UpstreamFailed(other.to_string()),
    }
}

fn channels(state: &AppState) -> Result<parley_actors::Channels> {
    state.actors.channels().map_err(|e| ApiError::Unavailable {
        code: "not_ready",
        message: e.to_string(),
    })
}

#[tracing::instrument(skip_all, fields(workspace_id = caller.workspace_id))]
async fn list_templates(
    caller: Caller,
    State(state): State<AppState>,
    Path(channel_id): Path<String>,
) -> Result<Envelope<Vec<Value>>> {
    caller.require(Permission::Read)?;
    let channel = find_channel(&state, &caller, &channel_id).await?;
    let templates = if channel.integration == "sandbox" {
        Vec::new()
    } else {
        channels(&state)?
            .list_templates(channel.id)
            .await
            .map_err(meta_error)?
    };
    Ok(Envelope::ok("Templates retrieved successfully", templates))
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct CreateTemplateBody {
    name: String,
    #[serde(rename = "type")]
    category: String,
    language: String,
    #[serde(default)]
    components: Vec<Value>,
    /// The message text; becomes the BODY component when none is given.
    content: Option<String>,
    is_carousel: Option<bool>,
}

#[tracing::instrument(skip_all, fields(workspace_id = caller.workspace_id))]
async fn create_template(
    caller: Caller,
    State(state): State<AppState>,
    Path(channel_id): Path<String>,
    Json(body): Json<CreateTemplateBody>,
) -> Result<Envelope<Value>> {
    caller.require(Permission::Write)?;
    let channel = find_channel(&state, &caller, &channel_id).await?;
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
    if channel.integration == "sandbox" {
        return Err(ApiError::Conflict(
            "Templates are approved by Meta; a sandbox channel has none".to_owned(),
        ));
    }
    let request = json!({"name": body.name, "language": body.language, "category": body.category,
                         "components": components});
    let created = channels(&state)?
        .create_template(channel.id, request)
        .await
        .map_err(meta_error)?;
    Ok(Envelope::created(
        "Template submitted for approval",
        created,
    ))
}

fn is_template_language(code: &str) -> bool {
    let (language, region) = code
        .split_once('_')
        .map_or((code, None), |(l, r)| (l, Some(r)));
    (2..=3).contains(&language.len())
        && language.bytes().all(|b| b.is_ascii_lowercase())
        && region.is_none_or(|r| r.len() == 2 && r.bytes().all(|b| b.is_ascii_uppercase()))
}

#[derive(Debug, Deserialize)]
struct SendIdentity {
    name: Option<String>,
    phone: String,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct SendBody {
    identity: SendIdentity,
    template_id: String,
    template_type: String,
    template_language: String,
    template_components: Option<Value>,
}

#[tracing::instrument(skip_all, fields(workspace_id = caller.workspace_id))]
async fn send_template(
    caller: Caller,
    State(state): State<AppState>,
    Path(channel_id): Path<String>,
    Json(body): Json<SendBody>,
) -> Result<Envelope<Value>> {
    caller.require(Permission::Write)?;
    let channel = find_channel(&state, &caller, &channel_id).await?;
    let mut problems = Problems::default();
    let phone = problems.parse(
        ["identity", "phone"],
        Phone::try_from(body.identity.phone.as_str()),
    );
    if body.template_id.trim().is_empty() {
        problems.add(["templateId"], "must name a template");
    }
    if !TEMPLATE_TYPES.contains(&body.template_type.as_str()) {
        problems.add(["templateType"], "must be one of text, list, carousel");
    }
    if !is_template_language(&body.template_language) {
        problems.add(
            ["templateLanguage"],
            "must be a language code such as en_US or pt_BR",
        );
    }
    let parameters = send_parameters(&mut problems, body.template_components);
    problems.finish()?;
    let phone =
        phone.ok_or_else(|| ApiError::invalid_field(["identity", "phone"], "is required"))?;
    if !channel.active {
        return Err(ApiError::Conflict("The channel is not active".to_owned()));
    }

    let (template_name, rendered) = if channel.integration == "sandbox" {
        let texts: Vec<&str> = parameters
            .get("body")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|p| p["text"].as_str())
            .collect();
        (
            body.template_id.clone(),
            format!("[template {}] {}", body.template_id, texts.join(" "))
                .trim()
                .to_owned(),
        )
    } else {
        let templates = channels(&state)?
            .list_templates(channel.id)
            .await
            .map_err(meta_error)?;
        let template = templates
            .iter()
            .find(|t| {
                (t["name"] == body.template_id.as_str() || t["id"] == body.template_id.as_str())
                    && t["language"] == body.template_language.as_str()
            })
            .ok_or(ApiError::NotFound("Template"))?;
        (
            template["name"]
                .as_str()
                .unwrap_or(&body.template_id)
                .to_owned(),
            render_template(template, &parameters),
        )
    };

    let person = upsert_identity(&state, &caller, &phone, body.identity.name.as_deref()).await?;
    let stored = record_outbound(&state, &channel, &person, rendered.clone()).await?;
    let claimed = deliveries::claim(&state.db, stored.0)
        .await?
        .ok_or_else(|| {
            ApiError::Internal(anyhow::anyhow!("a fresh message was claimed elsewhere"))
        })?;
    let outcome = channels(&state)?
        .send(
            channel.id,
            OutboundMessage {
                to: phone.digits().to_owned(),
                identity_id: Some(person.id),
                content: Outbound::Template {
                    name: template_name,
                    language: body.template_language.clone(),
                    components: wire_components(&parameters),
                },
            },
        )
        .await;
    match outcome {
        Ok(accepted) => {
            deliveries::record_send(
                &state.db,
                claimed.id,
                accepted.status,
                Some(&accepted.platform_message_id),
                None,
            )
            .await?;
            Ok(Envelope::ok(
                "Template message sent",
                json!({"message_id": claimed.id, "conversation_id": stored.1, "identity_id": person.id,
                       "platform_message_id": accepted.platform_message_id, "status": accepted.status,
                       "content": rendered}),
            ))
        }
        Err(error) => {
            deliveries::record_send(&state.db, claimed.id, "failed", None, Some(error.to_json()))
                .await?;
            Err(match error {
                SendError::Refused { code, message } => ApiError::MetaRefused { code, message },
                SendError::CredentialsInvalid(message) => {
                    ApiError::MetaRefused { code: 190, message }
                }
                SendError::Inactive => ApiError::Conflict(error.to_string()),
                other => ApiError::UpstreamFailed(other.to_string()),
            })
        }
    }
}

/// `templateComponents`: lower-case component type → array of Meta parameter objects.
fn send_parameters(problems: &mut Problems, given: Option<Value>) -> Map<String, Value> {
    match given {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(map)) => {
            for (key, value) in &map {
                let at = [
                    PathSegment::from("templateComponents"),
                    PathSegment::Key(key.clone()),
                ];
                if !SEND_COMPONENTS.contains(&key.as_str()) {
                    problems.add(at, "must be header, body or button");
                } else if !value.is_array() {
                    problems.add(at, "must be an array of parameter objects");
                }
            }
            map
        }
        Some(_) => {
            problems.add(["templateComponents"], "must be an object");
            Map::new()
        }
    }
}

/// Meta's `components` of a send: one per type, and one per button with its index.
fn wire_components(parameters: &Map<String, Value>) -> Value {
    let mut components = Vec::new();
    for (kind, values) in parameters {
        let values = values.as_array().cloned().unwrap_or_default();
        if kind.starts_with("button") {
            for (index, parameter) in values.into_iter().enumerate() {
                components.push(json!({"type": "button", "sub_type": "quick_reply",
                                       "index": index.to_string(), "parameters": [parameter]}));
            }
        } else {
            components.push(json!({"type": kind, "parameters": values}));
        }
    }
    Value::Array(components)
}

/// The text the person sees: the BODY with `{{1}}`… (or `{{name}}`) filled from the body's
/// parameters.
fn render_template(template: &Value, parameters: &Map<String, Value>) -> String {
    let text = template["components"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| {
            c["type"]
                .as_str()
                .is_some_and(|t| t.eq_ignore_ascii_case("body"))
        })
        .and_then(|c| c["text"].as_str())
        .unwrap_or_default()
        .to_owned();
    let values = parameters
        .get("body")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let mut rendered = text;
    for (index, parameter) in values.iter().enumerate() {
        let value = parameter["text"].as_str().unwrap_or_default();
        rendered = rendered.replace(&format!("{{{{{}}}}}", index + 1), value);
        if let Some(name) = parameter["parameter_name"].as_str() {
            rendered = rendered.replace(&format!("{{{{{name}}}}}"), value);
        }
    }
    rendered
}

/// The identity owning `phone`, created with `name` when there is none.
async fn upsert_identity(
    state: &AppState,
    caller: &Caller,
    phone: &Phone,
    name: Option<&str>,
) -> Result<identity::Model> {
    let ws = caller.workspace_id;
    if let Some(found) = identities::find_by_contact(&state.db, ws, PHONE, phone.as_str()).await? {
        return Ok(found);
    }
    let txn = parley_persistence::begin_write(&state.db).await?;
    let now = clock::now();
    let new = NewIdentity {
        id: Uuid::now_v7(),
        name: name
            .map(str::trim)
            .filter(|n| !n.is_empty())
            .map(str::to_owned),
        external_id: None,
        metadata: json!({}),
    };
    let created = identities::create(&txn, ws, new, now).await?;
    match identities::attach_contact(&txn, ws, created.id, PHONE, phone.as_str(), now).await {
        Ok(()) => {
            txn.commit().await.map_err(PersistenceError::from)?;
            Ok(created)
        }
        // Someone created them meanwhile: theirs wins.
        Err(PersistenceError::Conflict(_)) => {
            txn.rollback().await.map_err(PersistenceError::from)?;
            identities::find_by_contact(&state.db, ws, PHONE, phone.as_str())
                .await?
                .ok_or_else(|| ApiError::Internal(anyhow::anyhow!("the identity vanished")))
        }
        Err(other) => Err(other.into()),
    }
}

/// Stores the template's text as a pending outbound message of the identity's open conversation
/// on the channel (a new one when there is none); answers `(message id, conversation id)`.
async fn record_outbound(
    state: &AppState,
    channel: &channel::Model,
    person: &identity::Model,
    rendered: String,
) -> Result<(Uuid, Uuid)> {
    let now = clock::now();
    let conversation = match conversations::latest_for(&state.db, person.id, channel.id).await? {
        Some(open) if open.status == OPEN => open,
        _ => {
            conversations::start(
                &state.db,
                channel.workspace_id,
                person.id,
                channel.id,
                None,
                now,
            )
            .await?
        }
    };
    let stored = conversations::append_message(
        &state.db,
        &conversation,
        NewMessage {
            direction: "outbound",
            role: "assistant",
            content: rendered,
            status: deliveries::PENDING,
            platform_message_id: None,
            usage: None,
            tool_calls: None,
            tool_call_id: None,
            error: None,
            reply_to_message_id: None,
        },
        now,
    )
    .await?;
    Ok((stored.id, conversation.id))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_template_body_is_rendered_with_positional_and_named_parameters() {
        let template = json!({"components": [{"type": "HEADER", "text": "x"}, {"type": "BODY", "text": "Hi {{1}}, order {{order}} ships {{2}}."}]});
        let mut parameters = Map::new();
        parameters.insert(
            "body".to_owned(),
            json!([{"type": "text", "text": "Ana"}, {"type": "text", "text": "today", "parameter_name": "order"}]),
        );
        assert_eq!(
            render_template(&template, &parameters),
            "Hi Ana, order today ships today."
        );
    }

    #[test]
    fn template_languages_look_like_en_us() {
        for good in ["en_US", "pt_BR", "en", "fil"] {
            assert!(is_template_language(good), "{good}");
        }
        for bad in ["en-US", "EN_us", "english", ""] {
            assert!(!is_template_language(bad), "{bad}");
        }
    }

    #[test]
    fn buttons_become_one_component_each_with_their_index() {
        let mut parameters = Map::new();
        parameters.insert(
            "button".to_owned(),
            json!([{"type": "payload", "payload": "a"}, {"type": "payload", "payload": "b"}]),
        );
        let wire = wire_components(&parameters);
        assert_eq!(wire[1]["index"], "1");
        assert_eq!(wire[0]["sub_type"], "quick_reply");
    }
}
