//! The inbound WhatsApp webhook: `GET /webhooks/waba/{channel_id}` answers Meta's verification;
//! `POST /webhooks/waba/{channel_id}` and `POST /webhooks/waba` (routed by
//! `metadata.phone_number_id`) check `X-Hub-Signature-256` over the raw body before parsing,
//! store each message idempotently by its WhatsApp id, apply statuses, answer 200 at once, and
//! leave the answering to the actors.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use parley_actors::outbound::ReportChannel;
use parley_actors::whatsapp::payload::{ChangeValue, Delivery};
use parley_actors::whatsapp::signature;
use parley_persistence::entities::channel;
use parley_persistence::{DatabaseConnection, Integration, channels, clock, webhook_events};
use serde::Deserialize;
use serde_json::{Value, json};
use subtle::ConstantTimeEq;
use uuid::Uuid;

use crate::http::AppState;
use crate::http::envelope::Envelope;
use crate::http::error::{ApiError, Result};
use crate::http::extract::{Path, Query, RawBody, parse_typed};
use crate::metrics;
use parley_actors::changes::{Change, Listener};
use parley_actors::remembered::Remembered;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub(crate) fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(receive_routed))
        .routes(routes!(verify_webhook, receive_for_channel))
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
struct Verification {
    #[serde(rename = "hub.mode")]
    mode: Option<String>,
    #[serde(rename = "hub.verify_token")]
    verify_token: Option<String>,
    #[serde(rename = "hub.challenge")]
    challenge: Option<String>,
}

/// Meta's subscription check: echo the challenge when the mode and token match.
#[utoipa::path(
    get,
    path = "/webhooks/waba/{channel_id}",
    tag = "webhooks",
    params(("channel_id" = String, Path, format = Uuid, description = "Channel id"), Verification),
    responses(
        (status = 200, content_type = "text/plain", body = String, description = "The challenge, echoed"),
        (status = 403, content_type = "text/plain", body = String, description = "Mode or token do not match"),
    ),
)]
async fn verify_webhook(
    State(state): State<AppState>,
    Path(channel_id): Path<String>,
    Query(query): Query<Verification>,
) -> Response {
    let channel = match Uuid::parse_str(&channel_id) {
        Ok(id) => channels::find_in_any_workspace(&state.db, id)
            .await
            .ok()
            .flatten(),
        Err(_) => None,
    };
    let matches = channel.is_some_and(|c| {
        let presented = query.verify_token.as_deref().unwrap_or_default();
        let same: bool = presented.as_bytes().ct_eq(c.verify_token.as_bytes()).into();
        query.mode.as_deref() == Some("subscribe") && same
    });
    match (matches, query.challenge) {
        (true, Some(challenge)) => (StatusCode::OK, challenge).into_response(),
        _ => (StatusCode::FORBIDDEN, "verification failed").into_response(),
    }
}

/// Receive Meta's webhook for one channel.
///
/// Signed by Meta with the app secret (`X-Hub-Signature-256`); needs no API key.
#[utoipa::path(
    post,
    path = "/webhooks/waba/{channel_id}",
    tag = "webhooks",
    params(
        ("channel_id" = String, Path, format = Uuid, description = "Channel id"),
        ("X-Hub-Signature-256" = String, Header, description = "`sha256=` and the hex HMAC-SHA256 of the raw body with the app secret"),
    ),
    request_body(content = Value, description = "Meta's webhook delivery (`object`, `entry[].changes[]`)"),
    responses((status = 200, body = Envelope<Value>)),
)]
async fn receive_for_channel(
    State(state): State<AppState>,
    Path(channel_id): Path<String>,
    headers: HeaderMap,
    RawBody(body): RawBody,
) -> Result<Envelope<Value>> {
    check_signature(&state, &headers, &body)
        .inspect_err(|_| metrics::webhook_events("refused", 1))?;
    let id = Uuid::parse_str(&channel_id).map_err(|_| ApiError::NotFound("Channel"))?;
    let channel = state
        .webhook_channels
        .by_id(&state.db, id)
        .await?
        .ok_or(ApiError::NotFound("Channel"))?;
    let delivery: Delivery = parse_typed(&body)?;
    let mut summary = Summary::default();
    for value in delivery.into_changes() {
        let number = &value.metadata.phone_number_id;
        if !number.is_empty()
            && channel.integration != Integration::Sandbox
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

/// Receive Meta's webhook (routed by phone number id).
///
/// Signed by Meta with the app secret (`X-Hub-Signature-256`); needs no API key.
#[utoipa::path(
    post,
    path = "/webhooks/waba",
    tag = "webhooks",
    params(("X-Hub-Signature-256" = String, Header, description = "`sha256=` and the hex HMAC-SHA256 of the raw body with the app secret")),
    request_body(content = Value, description = "Meta's webhook delivery, routed by `metadata.phone_number_id`"),
    responses((status = 200, body = Envelope<Value>)),
)]
async fn receive_routed(
    State(state): State<AppState>,
    headers: HeaderMap,
    RawBody(body): RawBody,
) -> Result<Envelope<Value>> {
    check_signature(&state, &headers, &body)
        .inspect_err(|_| metrics::webhook_events("refused", 1))?;
    let delivery: Delivery = parse_typed(&body)?;
    let mut summary = Summary::default();
    for value in delivery.into_changes() {
        let number = value.metadata.phone_number_id.clone();
        match state.webhook_channels.by_number(&state.db, &number).await? {
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

/// How long the channel a webhook is addressed to is answered from memory.
const WEBHOOK_CHANNEL_TTL: Duration = Duration::from_secs(10);

/// The channels webhooks were addressed to in the last [`WEBHOOK_CHANNEL_TTL`], by id and by
/// phone number id, so that a webhook does not read its channel again: one statement less on
/// every delivery, messages and statuses alike (each message sent comes back as up to three
/// statuses). Only channels found are remembered, so a channel created meanwhile is found at
/// once; a channel changed or deleted through this server is forgotten at once (it listens to
/// the actors' announcer), one changed through another server sharing the database is seen
/// within the time to live.
#[derive(Clone, Debug)]
pub(crate) struct WebhookChannels(Remembered<String, Arc<channel::Model>>);

impl Default for WebhookChannels {
    fn default() -> Self {
        Self(Remembered::new(WEBHOOK_CHANNEL_TTL))
    }
}

impl Listener for WebhookChannels {
    /// A channel that changed or was deleted is forgotten.
    fn changed(&self, change: &Change) {
        if let Change::Channel { channel_id, .. } | Change::ChannelDeleted { channel_id, .. } =
            change
        {
            let channel_id = *channel_id;
            self.0.forget(|_, channel| channel.id == channel_id);
        }
    }
}

impl WebhookChannels {
    /// The channel of `id`, unless deleted.
    async fn by_id(
        &self,
        db: &DatabaseConnection,
        id: Uuid,
    ) -> Result<Option<Arc<channel::Model>>> {
        let read = || {
            let db = db.clone();
            async move {
                Ok(channels::find_in_any_workspace(&db, id)
                    .await?
                    .map(Arc::new))
            }
        };
        self.0.recall(&format!("id/{id}"), read).await
    }

    /// The channel of a phone number id, unless deleted.
    async fn by_number(
        &self,
        db: &DatabaseConnection,
        number: &str,
    ) -> Result<Option<Arc<channel::Model>>> {
        let read = || {
            let (db, number) = (db.clone(), number.to_owned());
            async move {
                let found = channels::find_by_phone_number_id(&db, &number).await?;
                Ok(found.map(Arc::new))
            }
        };
        self.0.recall(&format!("number/{number}"), read).await
    }
}

/// 401 unless the body carries a valid signature; unsigned bodies pass only under the explicit
/// development setting.
fn check_signature(state: &AppState, headers: &HeaderMap, body: &[u8]) -> Result<()> {
    let header = headers
        .get("x-hub-signature-256")
        .and_then(|v| v.to_str().ok());
    let whatsapp = &state.settings.whatsapp;
    let secret = whatsapp.webhook_secret();
    match (header, secret) {
        (Some(header), Some(secret)) if signature::verify(secret.as_bytes(), body, header) => {
            Ok(())
        }
        (None, _) if whatsapp.allow_unsigned => Ok(()),
        (_, None) if whatsapp.allow_unsigned => Ok(()),
        (None, _) => Err(ApiError::WebhookSignature("X-Hub-Signature-256 is missing")),
        (Some(_), None) => Err(ApiError::WebhookSignature(
            "no app secret is configured to verify X-Hub-Signature-256",
        )),
        (Some(_), Some(_)) => Err(ApiError::WebhookSignature(
            "X-Hub-Signature-256 does not match the body",
        )),
    }
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
        metrics::webhook_events("stored", self.stored);
        metrics::webhook_events("duplicate", self.duplicates);
        metrics::webhook_events("status", self.statuses);
        metrics::webhook_events("ignored", self.ignored);
        Envelope::ok(
            "Webhook received",
            json!({"stored": self.stored, "duplicates": self.duplicates,
                   "statuses": self.statuses, "ignored": self.ignored}),
        )
    }
}

/// Stores the messages of one change (new ones go to the inbound worker) and applies its
/// statuses. A message that cannot be read is counted and skipped; it never fails the others.
async fn accept(
    state: &AppState,
    channel: &channel::Model,
    value: ChangeValue,
    summary: &mut Summary,
) -> Result<()> {
    for parsed in value.inbound() {
        let message = match parsed {
            Ok(message) => message,
            Err(unreadable) => {
                tracing::warn!(channel_id = %channel.id, %unreadable, "inbound message ignored");
                summary.ignored += 1;
                continue;
            }
        };
        let payload = serde_json::to_value(&message)
            .map_err(|e| ApiError::Internal(anyhow::anyhow!("storing an inbound message: {e}")))?;
        let event = webhook_events::NewEvent {
            workspace_id: channel.workspace_id,
            channel_id: channel.id,
            platform_message_id: message.wamid.clone(),
            payload,
            now: clock::now(),
        };
        match state.actors.inbound().store(event).await? {
            Some(_) => summary.stored += 1,
            None => summary.duplicates += 1,
        }
    }
    let reported_on = ReportChannel {
        workspace_id: channel.workspace_id,
        channel_id: channel.id,
    };
    for report in value.reports() {
        let applied = state.actors.reports().apply(reported_on, &report).await?;
        if applied {
            summary.statuses += 1;
        }
    }
    Ok(())
}
