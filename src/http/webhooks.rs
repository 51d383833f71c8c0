//! The inbound WhatsApp webhook: `GET /webhooks/waba/{channel_id}` answers Meta's verification;
//! `POST /webhooks/waba/{channel_id}` and `POST /webhooks/waba` (routed by
//! `metadata.phone_number_id`) check `X-Hub-Signature-256` over the raw body before parsing,
//! store each message idempotently by its WhatsApp id, apply statuses, answer 200 at once, and
//! leave the answering to the actors.

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use parley_actors::whatsapp::payload::{ChangeValue, Delivery};
use parley_actors::whatsapp::signature;
use parley_persistence::entities::channel;
use parley_persistence::{channels, clock, deliveries, webhook_events};
use serde::Deserialize;
use serde_json::{Value, json};
use uuid::Uuid;

use crate::http::AppState;
use crate::http::envelope::Envelope;
use crate::http::error::{ApiError, Result};
use crate::http::extract::{Path, Query, parse_json};

pub(crate) fn router() -> Router<AppState> {
    Router::new()
        .route("/webhooks/waba", axum::routing::post(receive_routed))
        .route(
            "/webhooks/waba/{channel_id}",
            get(verify_webhook).post(receive_for_channel),
        )
}

#[derive(Debug, Deserialize)]
struct Verification {
    #[serde(rename = "hub.mode")]
    mode: Option<String>,
    #[serde(rename = "hub.verify_token")]
    verify_token: Option<String>,
    #[serde(rename = "hub.challenge")]
    challenge: Option<String>,
}

/// Meta's subscription check: echo the challenge when the mode and token match.
async fn verify_webhook(
    State(state): State<AppState>,
    Path(channel_id): Path<String>,
    Query(query): Query<Verification>,
) -> Response {
    let channel = match Uuid::parse_str(&channel_id) {
        Ok(id) => channels::find_any(&state.db, id).await.ok().flatten(),
        Err(_) => None,
    };
    let matches = channel.is_some_and(|c| {
        query.mode.as_deref() == Some("subscribe")
            && query.verify_token.as_deref() == Some(c.verify_token.as_str())
    });
    match (matches, query.challenge) {
        (true, Some(challenge)) => (StatusCode::OK, challenge).into_response(),
        _ => (StatusCode::FORBIDDEN, "verification failed").into_response(),
    }
}

async fn receive_for_channel(
    State(state): State<AppState>,
    Path(channel_id): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Envelope<Value>> {
    check_signature(&state, &headers, &body)?;
    let id = Uuid::parse_str(&channel_id).map_err(|_| ApiError::NotFound("Channel"))?;
    let channel = channels::find_any(&state.db, id)
        .await?
        .ok_or(ApiError::NotFound("Channel"))?;
    let delivery: Delivery = parse_json(&body)?;
    let mut summary = Summary::default();
    for value in changes(delivery) {
        let number = &value.metadata.phone_number_id;
        if !number.is_empty()
            && channel.integration != "sandbox"
            && channel.phone_number_id.as_deref() != Some(number.as_str())
        {
            tracing::warn!(channel_id = %channel.id, phone_number_id = %number, "webhook change for another number ignored");
            summary.ignored += 1;
            continue;
        }
        accept(&state, &channel, value, &mut summary).await?;
    }
    Ok(summary.answer())
}

async fn receive_routed(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Envelope<Value>> {
    check_signature(&state, &headers, &body)?;
    let delivery: Delivery = parse_json(&body)?;
    let mut summary = Summary::default();
    for value in changes(delivery) {
        let number = value.metadata.phone_number_id.clone();
        match channels::find_by_phone_number_id(&state.db, &number).await? {
            Some(channel) => accept(&state, &channel, value, &mut summary).await?,
            None => {
                // Answering 200 keeps Meta from retrying a number Parley does not serve.
                tracing::warn!(phone_number_id = %number, "webhook for an unknown number ignored");
                summary.ignored += 1;
            }
        }
    }
    Ok(summary.answer())
}

/// 401 unless the body carries a valid signature; unsigned bodies pass only under the explicit
/// development setting.
fn check_signature(state: &AppState, headers: &HeaderMap, body: &[u8]) -> Result<()> {
    let header = headers
        .get("x-hub-signature-256")
        .and_then(|v| v.to_str().ok());
    let secret = state.settings.whatsapp_app_secret.as_deref();
    match (header, secret) {
        (Some(header), Some(secret)) if signature::verify(secret.as_bytes(), body, header) => {
            Ok(())
        }
        (None, _) if state.settings.whatsapp_allow_unsigned => Ok(()),
        (_, None) if state.settings.whatsapp_allow_unsigned => Ok(()),
        (None, _) => Err(ApiError::WebhookSignature("X-Hub-Signature-256 is missing")),
        (Some(_), None) => Err(ApiError::WebhookSignature(
            "no app secret is configured to verify X-Hub-Signature-256",
        )),
        (Some(_), Some(_)) => Err(ApiError::WebhookSignature(
            "X-Hub-Signature-256 does not match the body",
        )),
    }
}

fn changes(delivery: Delivery) -> impl Iterator<Item = ChangeValue> {
    delivery
        .entry
        .into_iter()
        .flat_map(|e| e.changes)
        .filter(|c| c.field.is_empty() || c.field == "messages")
        .map(|c| c.value)
}

/// What a delivery contained.
#[derive(Debug, Default)]
struct Summary {
    stored: u32,
    duplicates: u32,
    statuses: u32,
    ignored: u32,
}

impl Summary {
    fn answer(self) -> Envelope<Value> {
        Envelope::ok(
            "Webhook received",
            json!({"stored": self.stored, "duplicates": self.duplicates,
                   "statuses": self.statuses, "ignored": self.ignored}),
        )
    }
}

/// Stores the messages of one change (new ones are dispatched) and applies its statuses.
async fn accept(
    state: &AppState,
    channel: &channel::Model,
    value: ChangeValue,
    summary: &mut Summary,
) -> Result<()> {
    for message in value.messages {
        let Some(wamid) = message["id"]
            .as_str()
            .filter(|id| !id.is_empty())
            .map(str::to_owned)
        else {
            summary.ignored += 1;
            continue;
        };
        let from = message["from"].as_str().unwrap_or_default();
        let profile_name = value
            .contacts
            .iter()
            .find(|c| c.wa_id == from)
            .or(value.contacts.first())
            .map(|c| c.profile.name.clone())
            .unwrap_or_default();
        let payload = json!({"message": message, "profile_name": profile_name});
        let stored = webhook_events::insert_if_new(
            &state.db,
            channel.workspace_id,
            channel.id,
            &wamid,
            payload,
            clock::now(),
        )
        .await?;
        match stored {
            Some(event) => {
                summary.stored += 1;
                state.actors.dispatch(event);
            }
            None => summary.duplicates += 1,
        }
    }
    for status in value.statuses {
        let error = status.errors.first().map(|e| {
            json!({"code": e["code"], "title": e["title"], "message": e["message"],
                   "details": e["error_data"]["details"]})
        });
        if deliveries::apply_status(&state.db, channel.id, &status.id, &status.status, error)
            .await?
        {
            summary.statuses += 1;
        }
    }
    Ok(())
}
