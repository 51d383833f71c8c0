//! Channels as records: `GET /channels`, `GET|PUT|DELETE /channels/{id}`, `POST /channels/waba`
//! (a live channel with credentials, or an inactive one awaiting them), and
//! `POST /channels/{id}/worker/{worker_id}`. Talking to Meta comes with the WhatsApp work.

use axum::Router;
use axum::extract::State;
use axum::routing::{get, post};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chrono::{DateTime, Utc};
use parley_persistence::channels::{self, ChannelChanges, NewChannel};
use parley_persistence::entities::channel;
use parley_persistence::{PersistenceError, clock};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use uuid::Uuid;

use crate::domain::{LongName, Permission};
use crate::http::AppState;
use crate::http::auth::Caller;
use crate::http::envelope::Envelope;
use crate::http::error::{ApiError, Result};
use crate::http::extract::{Json, Path, Query};
use crate::http::pagination::{ListQuery, PageResponse};
use crate::http::validation::{Problems, parse_uuid};
use crate::http::workers::find_worker;

/// The integrations a channel can use (DESIGN.md §5).
const INTEGRATIONS: [&str; 3] = ["cloud_api", "mm_lite", "sandbox"];
const SANDBOX: &str = "sandbox";

pub(crate) fn router() -> Router<AppState> {
    Router::new()
        .route("/channels", get(list_channels))
        .route("/channels/waba", post(create_channel))
        .route(
            "/channels/{channel_id}",
            get(get_channel).put(update_channel).delete(delete_channel),
        )
        .route(
            "/channels/{channel_id}/worker/{worker_id}",
            post(sync_worker),
        )
}

/// A channel as the API shows it (camelCase). The access token is write-only:
/// `hasAccessToken` says whether one is stored.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ChannelRecord {
    id: Uuid,
    name: String,
    #[serde(rename = "type")]
    channel_type: String,
    integration: String,
    active: bool,
    settings: Value,
    phone_number_id: Option<String>,
    business_id: Option<String>,
    worker_id: Option<Uuid>,
    has_access_token: bool,
    /// Why Meta refused the access token (error 190), until a new one is given.
    credentials_error: Option<String>,
    webhook: Webhook,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Webhook {
    /// Where Meta should post; known only when a public URL is configured.
    url: Option<String>,
    verify_token: String,
}

impl ChannelRecord {
    fn new(c: channel::Model, public_url: Option<&str>) -> Self {
        let url =
            public_url.map(|base| format!("{}/webhooks/waba/{}", base.trim_end_matches('/'), c.id));
        Self {
            id: c.id,
            name: c.name,
            channel_type: c.channel_type,
            integration: c.integration,
            active: c.active,
            settings: c.settings,
            phone_number_id: c.phone_number_id,
            business_id: c.business_account_id,
            worker_id: c.worker_id,
            has_access_token: c.access_token_encrypted.is_some(),
            credentials_error: c.credentials_error,
            webhook: Webhook {
                url,
                verify_token: c.verify_token,
            },
            created_at: c.created_at,
            updated_at: c.updated_at,
        }
    }
}

fn record(state: &AppState, c: channel::Model) -> ChannelRecord {
    ChannelRecord::new(c, state.settings.public_url.as_deref())
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct CreateChannelBody {
    name: Option<String>,
    access_token: Option<String>,
    phone_number_id: Option<String>,
    business_id: Option<String>,
    integration: Option<String>,
    settings: Option<Value>,
}

#[tracing::instrument(skip_all, fields(workspace_id = caller.workspace_id))]
async fn create_channel(
    caller: Caller,
    State(state): State<AppState>,
    Json(body): Json<CreateChannelBody>,
) -> Result<Envelope<ChannelRecord>> {
    caller.require(Permission::Write)?;
    let mut problems = Problems::default();
    let name = match &body.name {
        Some(name) => problems.parse(["name"], LongName::try_from(name.as_str())),
        None => {
            problems.add(["name"], "is required");
            None
        }
    };
    let integration = body.integration.unwrap_or_else(|| "cloud_api".to_owned());
    if !INTEGRATIONS.contains(&integration.as_str()) {
        problems.add(
            ["integration"],
            "must be one of cloud_api, mm_lite, sandbox",
        );
    }
    let settings = settings_object(&mut problems, body.settings);
    let access_token = credential(&mut problems, "accessToken", body.access_token, 4096);
    let phone_number_id = platform_id(&mut problems, "phoneNumberId", body.phone_number_id);
    let business_id = platform_id(&mut problems, "businessId", body.business_id);

    // Sandbox channels need no Meta credentials; the first form (token and number) makes a live
    // channel; the second (name and business account) an inactive one awaiting credentials.
    let live = integration == SANDBOX || access_token.is_some() || phone_number_id.is_some();
    if integration != SANDBOX {
        if live {
            for (field, given) in [
                ("accessToken", access_token.is_some()),
                ("phoneNumberId", phone_number_id.is_some()),
                ("businessId", business_id.is_some()),
            ] {
                if !given {
                    problems.add([field], "is required for a live channel");
                }
            }
        } else if business_id.is_none() {
            problems.add(["businessId"], "is required");
        }
    }
    problems.finish()?;
    let Some(name) = name else {
        return Err(ApiError::invalid_field(["name"], "is required"));
    };

    let created = channels::create(
        &state.db,
        caller.workspace_id,
        NewChannel {
            name: name.into_inner(),
            integration,
            active: live,
            settings,
            phone_number_id,
            business_account_id: business_id,
            access_token_encrypted: access_token.map(|t| state.secrets.seal(&t)),
            verify_token: new_verify_token(),
        },
        clock::now(),
    )
    .await
    .map_err(phone_number_conflict)?;
    tracing::info!(channel_id = %created.id, integration = %created.integration, "channel created");
    register_webhook(&state, &created).await;
    Ok(Envelope::created(
        "Channel created successfully",
        record(&state, created),
    ))
}

#[tracing::instrument(skip_all, fields(workspace_id = caller.workspace_id))]
async fn list_channels(
    caller: Caller,
    State(state): State<AppState>,
    Query(query): Query<ListQuery>,
) -> Result<PageResponse<ChannelRecord>> {
    caller.require(Permission::Read)?;
    let page = query.page()?;
    let paged = channels::list(&state.db, caller.workspace_id, page).await?;
    let public_url = state.settings.public_url.as_deref();
    Ok(PageResponse::new(
        "Channels retrieved successfully",
        page,
        paged,
        |c| ChannelRecord::new(c, public_url),
    ))
}

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
        record(&state, found),
    ))
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct UpdateChannelBody {
    name: Option<String>,
    settings: Option<Value>,
    active: Option<bool>,
    access_token: Option<String>,
    phone_number_id: Option<String>,
    business_id: Option<String>,
}

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
    if will_be_active && current.integration != SANDBOX && !has_credentials {
        return Err(ApiError::Conflict(
            "A channel cannot be active without accessToken and phoneNumberId".to_owned(),
        ));
    }
    let changes = ChannelChanges {
        name: name.map(LongName::into_inner),
        settings,
        active: body.active,
        phone_number_id,
        business_account_id: business_id,
        access_token_encrypted: access_token.map(|t| state.secrets.seal(&t)),
        worker_id: None,
    };
    let was_active = current.active;
    let updated = channels::update(&state.db, current, changes, clock::now())
        .await
        .map_err(phone_number_conflict)?;
    if let Ok(channels) = state.actors.channels() {
        channels.retire(updated.id);
    }
    if updated.active && (!was_active || new_token) {
        register_webhook(&state, &updated).await;
    } else if updated.active
        && let Ok(channels) = state.actors.channels()
    {
        channels.start(updated.id).await;
    }
    Ok(Envelope::ok(
        "Channel updated successfully",
        record(&state, updated),
    ))
}

#[tracing::instrument(skip_all, fields(workspace_id = caller.workspace_id, channel_id = %channel_id))]
async fn delete_channel(
    caller: Caller,
    State(state): State<AppState>,
    Path(channel_id): Path<String>,
) -> Result<Envelope<Value>> {
    caller.require(Permission::Write)?;
    let id = parse_uuid(&channel_id, "channel_id")?;
    let txn = parley_persistence::begin_write(&state.db).await?;
    if !channels::delete(&txn, caller.workspace_id, id).await? {
        return Err(ApiError::NotFound("Channel"));
    }
    txn.commit().await.map_err(PersistenceError::from)?;
    Ok(Envelope::ok(
        "Channel deleted successfully",
        json!({ "id": id }),
    ))
}

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
    let updated = channels::update(&state.db, channel, changes, clock::now()).await?;
    tracing::info!(worker_id = %worker.id, "worker synced to channel");
    Ok(Envelope::ok(
        "Worker synced to channel successfully",
        record(&state, updated),
    ))
}

/// The caller's channel named by a path parameter (400 malformed, 404 unknown).
pub(crate) async fn find_channel(
    state: &AppState,
    caller: &Caller,
    raw: &str,
) -> Result<channel::Model> {
    let id = parse_uuid(raw, "channel_id")?;
    channels::find(&state.db, caller.workspace_id, id)
        .await?
        .ok_or(ApiError::NotFound("Channel"))
}

/// Starts a live channel's actor and registers Parley's webhook with Meta for a live
/// `cloud_api`/`mm_lite` channel when a public URL is configured. A refusal is logged, not fatal: the channel exists and the operator can
/// register the URL shown in its record by hand.
async fn register_webhook(state: &AppState, channel: &channel::Model) {
    let Ok(channels) = state.actors.channels() else {
        return;
    };
    if channel.active {
        channels.start(channel.id).await;
    }
    if !channel.active || channel.integration == SANDBOX || state.settings.public_url.is_none() {
        return;
    }
    if let Err(error) = channels.register_webhook(channel.id).await {
        tracing::warn!(channel_id = %channel.id, %error, "webhook registration with Meta failed");
    }
}

fn settings_object(problems: &mut Problems, value: Option<Value>) -> Value {
    crate::http::validation::object_or_empty(problems, "settings", value)
}

/// A secret credential: non-empty, bounded, no surrounding whitespace kept.
fn credential(
    problems: &mut Problems,
    field: &str,
    value: Option<String>,
    max: usize,
) -> Option<String> {
    let value = value?.trim().to_owned();
    if value.is_empty() || value.len() > max {
        problems.add([field], format!("must be 1 to {max} characters"));
        return None;
    }
    Some(value)
}

/// One of Meta's object ids: 1 to 64 letters, digits, `_` or `-`.
fn platform_id(problems: &mut Problems, field: &str, value: Option<String>) -> Option<String> {
    let value = value?.trim().to_owned();
    let valid = !value.is_empty()
        && value.len() <= 64
        && value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if !valid {
        problems.add([field], "must be 1 to 64 letters, digits, '_' or '-'");
        return None;
    }
    Some(value)
}

fn new_verify_token() -> String {
    let mut bytes = [0u8; 24];
    #[allow(clippy::expect_used)]
    getrandom::fill(&mut bytes).expect("the operating system's random source is available");
    URL_SAFE_NO_PAD.encode(bytes)
}

fn phone_number_conflict(error: PersistenceError) -> ApiError {
    match error {
        PersistenceError::Conflict(_) => {
            ApiError::Conflict("That phoneNumberId already belongs to a channel".to_owned())
        }
        other => other.into(),
    }
}
