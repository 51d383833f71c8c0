//! A channel as the API shows it.

use chrono::{DateTime, Utc};
use parley_persistence::Integration;
use parley_persistence::entities::channel;
use serde::Serialize;
use serde_json::Value;
use uuid::Uuid;

use crate::domain::Permission;
use crate::http::AppState;
use crate::http::auth::Caller;

/// A channel as the API shows it (camelCase). The access token is write-only:
/// `hasAccessToken` says whether one is stored.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ChannelRecord {
    id: Uuid,
    name: String,
    #[serde(rename = "type")]
    channel_type: String,
    integration: Integration,
    active: bool,
    settings: Value,
    phone_number_id: Option<String>,
    business_id: Option<String>,
    worker_id: Option<Uuid>,
    has_access_token: bool,
    /// Why Meta refused the access token (error 190), until a new one is given.
    credentials_error: Option<String>,
    /// The number as Meta verified it with the channel's credentials.
    display_phone_number: Option<String>,
    /// The business's verified name at Meta.
    verified_name: Option<String>,
    webhook: Webhook,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
struct Webhook {
    /// Where Meta should post; known only when a public URL is configured.
    url: Option<String>,
    /// What Meta echoes when it verifies the webhook: shown to admin keys only (`null` to
    /// others), as whoever holds it can answer Meta's verification for the channel.
    verify_token: Option<String>,
}

impl ChannelRecord {
    /// The record of `c` as `caller` sees it (the verify token to admin keys only).
    pub(super) fn new(c: channel::Model, public_url: Option<&str>, caller: &Caller) -> Self {
        let reveal = caller.permissions.contains(Permission::Admin);
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
            display_phone_number: c.display_phone_number,
            verified_name: c.verified_name,
            webhook: Webhook {
                url,
                verify_token: reveal.then_some(c.verify_token),
            },
            created_at: c.created_at,
            updated_at: c.updated_at,
        }
    }
}

pub(super) fn record(state: &AppState, caller: &Caller, c: channel::Model) -> ChannelRecord {
    ChannelRecord::new(c, state.settings.server.public_url.as_deref(), caller)
}
