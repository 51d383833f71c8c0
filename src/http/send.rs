//! `POST /channels/{id}/waba/send`: a template to a phone number. The handler validates the
//! body and hands the send to the outbox, which finds or creates the identity, records the
//! rendered text in its conversation and sends the template through the channel.

use std::time::Duration;

use axum::extract::State;
use parley_actors::outbound::{OutboundError, Sent, TemplateSend};
use parley_actors::whatsapp::template::header_links;
use parley_actors::whatsapp::{TemplateParameters, TemplateRef};
use parley_persistence::MessageStatus;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use uuid::Uuid;

use crate::domain::{Permission, Phone};
use crate::http::AppState;
use crate::http::auth::Caller;
use crate::http::envelope::Envelope;
use crate::http::error::Refusal;
use crate::http::error::{ApiError, PathSegment, Result};
use crate::http::extract::{Json, Path};
use crate::http::lookup::find_channel;
use crate::http::validation::Problems;
use crate::http::validation::{egress_allows, is_template_language};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

const TEMPLATE_TYPES: [&str; 3] = ["text", "list", "carousel"];

crate::http::openapi::string_schema!(
    /// The kind of template a send names.
    TemplateType, one_of = TEMPLATE_TYPES
);
const SEND_COMPONENTS: [&str; 4] = ["header", "body", "button", "buttons"];

pub(crate) fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(send_template))
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
struct SendIdentity {
    #[schema(value_type = Option<String>)]
    name: Option<String>,
    /// E.164 recommended (`+351912345678`).
    #[schema(min_length = 1)]
    phone: String,
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
struct SendBody {
    identity: SendIdentity,
    template_id: String,
    /// `carousel` exactly when the template has a CAROUSEL component.
    #[schema(value_type = TemplateType)]
    template_type: String,
    #[schema(pattern = "^[a-z]{2,3}(_[A-Z]{2})?$", example = "en_US")]
    template_language: String,
    /// `header`, `body` and `button`, each an array of parameter objects: exactly one per
    /// placeholder of the template's body and text header (none for a template without); a
    /// template with an IMAGE, VIDEO or DOCUMENT header takes its file as the one header
    /// parameter, `{"type": "image", "image": {"id": an upload's media id}}` (or `"link"`).
    #[schema(value_type = Option<Object>)]
    template_components: Option<Value>,
}

/// Send a template to one person.
///
/// The person is found or created from `identity`; the answer says when Meta accepted the message.
#[utoipa::path(
    post,
    path = "/channels/{channel_id}/waba/send",
    tag = "messages",
    params(("channel_id" = String, Path, format = Uuid, description = "Channel id")),
    request_body = SendBody,
    responses((status = 200, body = Envelope<SentRecord>), (status = 502, body = Refusal), (status = 504, body = Refusal)),
)]
#[tracing::instrument(skip_all, fields(workspace_id = caller.workspace_id, channel_id = %channel_id))]
async fn send_template(
    caller: Caller,
    State(state): State<AppState>,
    Path(channel_id): Path<String>,
    Json(body): Json<SendBody>,
) -> Result<Envelope<SentRecord>> {
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
    for link in header_links(&parameters) {
        let hub = state.actors.mcp();
        egress_allows(
            &mut problems,
            hub.egress(),
            ["templateComponents", "header"],
            link,
        );
    }
    problems.finish()?;
    let phone =
        phone.ok_or_else(|| ApiError::invalid_field(["identity", "phone"], "is required"))?;
    if !channel.active {
        return Err(ApiError::Conflict("The channel is not active".to_owned()));
    }
    let send = TemplateSend {
        workspace_id: caller.workspace_id,
        channel,
        phone,
        name: body.identity.name,
        template: TemplateRef {
            name_or_id: body.template_id,
            language: body.template_language.clone(),
            carousel: body.template_type == "carousel",
        },
        parameters,
        message_id: None,
    };
    // The send runs on its own: past the limit the client hears 504, and the send still
    // finishes and is recorded.
    let limit = Duration::from_secs(state.settings.server.send_timeout_secs);
    let sent = tokio::time::timeout(limit, state.actors.outbox().send_template(send))
        .await
        .map_err(|_| ApiError::send_timed_out())?
        .map_err(|error| match error {
            OutboundError::TemplateNotFound => ApiError::invalid_field(
                ["templateId"],
                format!(
                    "names no template of this channel in {}",
                    body.template_language
                ),
            ),
            error => error.into(),
        })?;
    let record = SentRecord::from(sent);
    Ok(Envelope::ok("Template message sent", record))
}

/// The answer of a send (camelCase like every channel body).
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
struct SentRecord {
    message_id: Uuid,
    conversation_id: Uuid,
    identity_id: Uuid,
    platform_message_id: String,
    status: MessageStatus,
    content: String,
}

impl From<Sent> for SentRecord {
    fn from(sent: Sent) -> Self {
        Self {
            message_id: sent.message_id,
            conversation_id: sent.conversation_id,
            identity_id: sent.identity_id,
            platform_message_id: sent.platform_message_id,
            status: sent.status,
            content: sent.content,
        }
    }
}

/// `templateComponents`: lower-case component type → array of Meta parameter objects.
fn send_parameters(problems: &mut Problems, given: Option<Value>) -> TemplateParameters {
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
                } else if let Some(parameters) = value.as_array() {
                    check_parameter_sizes(problems, key, parameters);
                } else {
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

/// Meta's limits on parameter values, checked before anything is rendered or sent: header
/// text 60 characters, body text 1,024, a button's text or payload 128; at most 100
/// parameters a component.
fn check_parameter_sizes(problems: &mut Problems, component: &str, parameters: &[Value]) {
    let longest = match component {
        "header" => 60,
        "body" => 1_024,
        _ => 128,
    };
    if parameters.len() > 100 {
        problems.add(
            [
                PathSegment::from("templateComponents"),
                PathSegment::from(component),
            ],
            "must have at most 100 parameters",
        );
    }
    for (index, parameter) in parameters.iter().enumerate() {
        for field in ["text", "payload"] {
            let too_long = parameter[field]
                .as_str()
                .is_some_and(|t| t.chars().count() > longest);
            if too_long {
                problems.add(
                    [
                        PathSegment::from("templateComponents"),
                        PathSegment::from(component),
                        PathSegment::from(index),
                        PathSegment::from(field),
                    ],
                    format!("must be at most {longest} characters"),
                );
            }
        }
    }
}
