//! Channels as records: `GET /channels`, `GET|PUT|DELETE /channels/{id}`, `POST /channels/waba`
//! (a live channel with credentials, or an inactive one awaiting them), and
//! `POST /channels/{id}/worker/{worker_id}`. Talking to Meta comes with the WhatsApp work.

use axum::extract::State;
use parley_actors::store::channels::Deleted;
use parley_actors::whatsapp::GraphError;
use parley_persistence::channels::{self, ChannelChanges, VerifiedNumber};
use parley_persistence::entities::channel;
use serde::Deserialize;
use serde_json::Value;

use crate::domain::{LongName, Permission};
use crate::http::AppState;
use crate::http::auth::Caller;
use crate::http::envelope::{DeletedRecord, Envelope};
use crate::http::error::Refusal;
use crate::http::error::{ApiError, Result};
use crate::http::extract::{Json, Path, Query};
use crate::http::lookup::{find_channel, find_worker};
use crate::http::pagination::{ListQuery, PageResponse};
use crate::http::validation::{Problems, parse_uuid};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

mod create;
mod fields;
mod record;

use self::create::{__path_create_channel, create_channel};

use self::fields::{credential, platform_id, settings_object};
pub(crate) use self::record::ChannelRecord;
use self::record::record;

pub(crate) fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_channels))
        .routes(routes!(create_channel))
        .routes(routes!(get_channel, update_channel, delete_channel))
        .routes(routes!(sync_worker))
}

/// List channels.
///
/// WhatsApp Business and sandbox channels, in pages; an access token is never shown
/// (`hasAccessToken`).
#[utoipa::path(
    get,
    path = "/channels",
    tag = "channels",
    params(ListQuery),
    responses((status = 200, body = PageResponse<ChannelRecord>), (status = 502, body = Refusal)),
)]
#[tracing::instrument(skip_all, fields(workspace_id = caller.workspace_id))]
async fn list_channels(
    caller: Caller,
    State(state): State<AppState>,
    Query(query): Query<ListQuery>,
) -> Result<PageResponse<ChannelRecord>> {
    caller.require(Permission::Read)?;
    let page = query.page()?;
    let paged = channels::list(&state.db, caller.workspace_id, page).await?;
    let public_url = state.settings.server.public_url.as_deref();
    Ok(PageResponse::new(
        "Channels retrieved successfully",
        page,
        paged,
        |c| ChannelRecord::new(c, public_url, &caller),
    ))
}

/// Read a channel.
///
/// With `credentialsError` when Meta refused its credentials.
#[utoipa::path(
    get,
    path = "/channels/{channel_id}",
    tag = "channels",
    params(("channel_id" = String, Path, format = Uuid, description = "Channel id")),
    responses((status = 200, body = Envelope<ChannelRecord>), (status = 502, body = Refusal)),
)]
#[tracing::instrument(skip_all, fields(workspace_id = caller.workspace_id, channel_id = %channel_id))]
async fn get_channel(
    caller: Caller,
    State(state): State<AppState>,
    Path(channel_id): Path<String>,
) -> Result<Envelope<ChannelRecord>> {
    caller.require(Permission::Read)?;
    let found = find_channel(&state, &caller, &channel_id).await?;
    Ok(Envelope::ok(
        "Channel retrieved successfully",
        record(&state, &caller, found),
    ))
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
struct UpdateChannelBody {
    #[schema(value_type = Option<String>, min_length = 3, max_length = 100)]
    name: Option<String>,
    #[schema(value_type = Option<Object>)]
    settings: Option<Value>,
    #[schema(value_type = Option<bool>)]
    active: Option<bool>,
    #[schema(value_type = Option<String>, min_length = 1, max_length = 4096)]
    access_token: Option<String>,
    #[schema(value_type = Option<String>, pattern = r"^[A-Za-z0-9_-]{1,64}$", example = "102290129340398")]
    phone_number_id: Option<String>,
    #[schema(value_type = Option<String>, pattern = r"^[A-Za-z0-9_-]{1,64}$", example = "102290129340398")]
    business_id: Option<String>,
}

/// Change a channel.
///
/// Only the fields given change; new credentials are checked with Meta first.
#[utoipa::path(
    put,
    path = "/channels/{channel_id}",
    tag = "channels",
    params(("channel_id" = String, Path, format = Uuid, description = "Channel id")),
    request_body = UpdateChannelBody,
    responses((status = 200, body = Envelope<ChannelRecord>), (status = 502, body = Refusal)),
)]
#[tracing::instrument(skip_all, fields(workspace_id = caller.workspace_id, channel_id = %channel_id))]
async fn update_channel(
    caller: Caller,
    State(state): State<AppState>,
    Path(channel_id): Path<String>,
    Json(body): Json<UpdateChannelBody>,
) -> Result<Envelope<ChannelRecord>> {
    caller.require(Permission::Write)?;
    let current = find_channel(&state, &caller, &channel_id).await?;
    let mut problems = Problems::default();
    let name = body
        .name
        .and_then(|n| problems.parse(["name"], LongName::try_from(n.as_str())));
    let settings = body
        .settings
        .map(|s| settings_object(&mut problems, Some(s)));
    let access_token = credential(&mut problems, "accessToken", body.access_token, 4096);
    let phone_number_id = platform_id(&mut problems, "phoneNumberId", body.phone_number_id);
    let business_id = platform_id(&mut problems, "businessId", body.business_id);
    problems.finish()?;

    let will_be_active = body.active.unwrap_or(current.active);
    let new_token = access_token.is_some();
    let has_credentials = (access_token.is_some() || current.access_token_encrypted.is_some())
        && (phone_number_id.is_some() || current.phone_number_id.is_some());
    if will_be_active && current.integration.is_live() && !has_credentials {
        return Err(ApiError::Conflict(
            "A channel cannot be active without accessToken and phoneNumberId".to_owned(),
        ));
    }
    // Going live, or live with new credentials: Meta must confirm the token holds the number.
    let claims_number = !current.active || access_token.is_some() || phone_number_id.is_some();
    let verified = if will_be_active && current.integration.is_live() && claims_number {
        let token = match &access_token {
            Some(token) => token.clone(),
            None => stored_token(&state, &current)?,
        };
        let number = phone_number_id
            .clone()
            .or_else(|| current.phone_number_id.clone())
            .unwrap_or_default();
        Some(verify_number(&state, &token, &number).await?)
    } else {
        None
    };
    let changes = ChannelChanges {
        name: name.map(LongName::into_inner),
        settings,
        active: body.active,
        phone_number_id,
        business_account_id: business_id,
        access_token_encrypted: access_token.map(|t| state.secrets.seal(&t)),
        worker_id: None,
        verified,
    };
    let was_active = current.active;
    let updated = state
        .actors
        .store()
        .update_channel(current, changes)
        .await
        .map_err(|e| ApiError::unique(e, NUMBER_TAKEN))?;
    // The channels registry restarts the actor with the new data; Meta needs telling only
    // when the channel went live or got new credentials.
    if updated.active && (!was_active || new_token) {
        register_webhook(&state, &updated).await;
    }
    Ok(Envelope::ok(
        "Channel updated successfully",
        record(&state, &caller, updated),
    ))
}

/// Delete a channel.
///
/// Refused (409 `channel_has_active_flows`) while a flow on it is queued, running or paused; its
/// conversations stay readable.
#[utoipa::path(
    delete,
    path = "/channels/{channel_id}",
    tag = "channels",
    params(("channel_id" = String, Path, format = Uuid, description = "Channel id")),
    responses((status = 200, body = Envelope<DeletedRecord>), (status = 502, body = Refusal)),
)]
#[tracing::instrument(skip_all, fields(workspace_id = caller.workspace_id, channel_id = %channel_id))]
async fn delete_channel(
    caller: Caller,
    State(state): State<AppState>,
    Path(channel_id): Path<String>,
) -> Result<Envelope<DeletedRecord>> {
    caller.require(Permission::Write)?;
    let id = parse_uuid(&channel_id, "channel_id")?;
    match state
        .actors
        .store()
        .delete_channel(caller.workspace_id, id)
        .await?
    {
        Deleted::Yes => {}
        Deleted::NotFound => return Err(ApiError::NotFound("Channel")),
        Deleted::Busy => {
            return Err(ApiError::ConflictCode {
                code: "channel_has_active_flows",
                message: "A flow on this channel is queued, running or paused; cancel it first"
                    .to_owned(),
            });
        }
    }
    Ok(Envelope::ok(
        "Channel deleted successfully",
        DeletedRecord { id },
    ))
}

/// Sync a worker to a channel.
///
/// Messages arriving on the channel go to this worker's assistant from now on.
#[utoipa::path(
    post,
    path = "/channels/{channel_id}/worker/{worker_id}",
    tag = "channels",
    params(("channel_id" = String, Path, format = Uuid, description = "Channel id"), ("worker_id" = String, Path, format = Uuid, description = "Worker id")),
    responses((status = 200, body = Envelope<ChannelRecord>), (status = 502, body = Refusal)),
)]
#[tracing::instrument(skip_all, fields(workspace_id = caller.workspace_id, channel_id = %channel_id))]
async fn sync_worker(
    caller: Caller,
    State(state): State<AppState>,
    Path((channel_id, worker_id)): Path<(String, String)>,
) -> Result<Envelope<ChannelRecord>> {
    caller.require(Permission::Write)?;
    let channel = find_channel(&state, &caller, &channel_id).await?;
    let worker = find_worker(&state, &caller, &worker_id).await?;
    let changes = ChannelChanges {
        worker_id: Some(Some(worker.id)),
        ..ChannelChanges::default()
    };
    let updated = state
        .actors
        .store()
        .update_channel(channel, changes)
        .await?;
    tracing::info!(worker_id = %worker.id, "worker synced to channel");
    Ok(Envelope::ok(
        "Worker synced to channel successfully",
        record(&state, &caller, updated),
    ))
}

/// Starts a live channel's actor and registers Parley's webhook with Meta for a live
/// `cloud_api`/`mm_lite` channel when a public URL is configured. A refusal is logged, not fatal: the channel exists and the operator can
/// register the URL shown in its record by hand.
pub(super) async fn register_webhook(state: &AppState, channel: &channel::Model) {
    let channels = state.actors.channels();
    if channel.active {
        channels.start(channel.id).await;
    }
    if !channel.active
        || !channel.integration.is_live()
        || state.settings.server.public_url.is_none()
    {
        return;
    }
    if let Err(error) = channels.register_webhook(channel.id).await {
        tracing::warn!(channel_id = %channel.id, %error, "webhook registration with Meta failed");
    }
}

/// A number held by another channel: the answer says no more than that it is not available.
pub(super) const NUMBER_TAKEN: &str = "That phoneNumberId is not available";

/// Meta's word that `token` holds `number`: its display number and verified name; a 400 naming
/// `accessToken` when Meta refuses, a 502 when Meta cannot be asked.
pub(super) async fn verify_number(
    state: &AppState,
    token: &str,
    number: &str,
) -> Result<VerifiedNumber> {
    state
        .actors
        .verify_number(token, number)
        .await
        .map_err(|error| match error {
            GraphError::Api(refusal) if refusal.http_status.is_some_and(|s| s < 500) => {
                let code = refusal.code.unwrap_or_default();
                tracing::info!(code, "Meta refused a channel's credentials");
                ApiError::invalid_field(
                    ["accessToken"],
                    format!("was refused by Meta for this phoneNumberId (Meta error {code})"),
                )
            }
            other => {
                tracing::warn!(error = %other, "Meta could not verify a channel's credentials");
                ApiError::credentials_unverified()
            }
        })
}

/// The channel's stored access token, opened.
fn stored_token(state: &AppState, channel: &channel::Model) -> Result<String> {
    let sealed = channel
        .access_token_encrypted
        .as_deref()
        .unwrap_or_default();
    state
        .secrets
        .open(sealed)
        .map_err(|e| ApiError::Internal(e.context("opening a channel's access token")))
}
