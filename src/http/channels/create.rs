//! `POST /channels/waba`: a live channel with credentials (verified with Meta first), a
//! sandbox, or an inactive channel awaiting credentials.

use axum::extract::State;
use parley_persistence::channels::{self, NewChannel};
use parley_persistence::{Integration, clock};
use serde::Deserialize;
use serde_json::Value;

use super::fields::{credential, new_verify_token, platform_id, settings_object};
use super::record::{ChannelRecord, record};
use super::{NUMBER_TAKEN, register_webhook, verify_number};
use crate::domain::{LongName, Permission};
use crate::http::AppState;
use crate::http::auth::Caller;
use crate::http::envelope::Envelope;
use crate::http::error::{ApiError, FieldError, Refusal, Result};
use crate::http::extract::Json;
use crate::http::validation::{Problems, checked, problem};

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub(super) struct CreateChannelBody {
    #[schema(required = true, value_type = String, min_length = 3, max_length = 100)]
    name: Option<String>,
    /// Meta's token; with `phoneNumberId` and `businessId`, a live channel active at once.
    #[schema(value_type = Option<String>, min_length = 1, max_length = 4096)]
    access_token: Option<String>,
    #[schema(value_type = Option<String>, pattern = r"^[A-Za-z0-9_-]{1,64}$", example = "102290129340398")]
    phone_number_id: Option<String>,
    /// Required but for a sandbox channel; alone (with the name), an inactive channel awaiting
    /// credentials.
    #[schema(value_type = Option<String>, pattern = r"^[A-Za-z0-9_-]{1,64}$", example = "102290129340398")]
    business_id: Option<String>,
    /// `cloud_api` when not given.
    #[schema(value_type = Option<Integration>)]
    integration: Option<String>,
    #[schema(value_type = Option<Object>)]
    settings: Option<Value>,
}

/// Register a WhatsApp Business channel.
///
/// `integration: sandbox` needs no Meta account: its messages stay in Parley (see the sandbox
/// endpoints). A live channel's credentials are checked with Meta first.
#[utoipa::path(
    post,
    path = "/channels/waba",
    tag = "channels",
    request_body = CreateChannelBody,
    responses((status = 201, body = Envelope<ChannelRecord>), (status = 502, body = Refusal)),
)]
#[tracing::instrument(skip_all, fields(workspace_id = caller.workspace_id))]
pub(super) async fn create_channel(
    caller: Caller,
    State(state): State<AppState>,
    Json(body): Json<CreateChannelBody>,
) -> Result<Envelope<ChannelRecord>> {
    caller.require(Permission::Write)?;
    let command = NewChannelCommand::try_from(body)?;
    let verified = match (&command.access_token, &command.phone_number_id) {
        (Some(token), Some(number)) if command.integration.is_live() => {
            Some(verify_number(&state, token, number).await?)
        }
        _ => None,
    };
    let new = NewChannel {
        name: command.name.into_inner(),
        integration: command.integration,
        active: command.live,
        settings: command.settings,
        phone_number_id: command.phone_number_id,
        business_account_id: command.business_id,
        access_token_encrypted: command.access_token.map(|t| state.secrets.seal(&t)),
        verify_token: new_verify_token(),
        verified,
    };
    let created = channels::create(&state.db, caller.workspace_id, new, clock::now())
        .await
        .map_err(|e| ApiError::unique(e, NUMBER_TAKEN))?;
    tracing::info!(channel_id = %created.id, integration = created.integration.as_str(), "channel created");
    register_webhook(&state, &created).await;
    Ok(Envelope::created(
        "Channel created successfully",
        record(&state, &caller, created),
    ))
}

/// A channel to create as the body asks for it, each field checked once.
struct NewChannelCommand {
    name: LongName,
    integration: Integration,
    /// A sandbox, or the first form (token and number): active at once. The second form (name
    /// and business account) makes an inactive channel awaiting credentials.
    live: bool,
    settings: Value,
    access_token: Option<String>,
    phone_number_id: Option<String>,
    business_id: Option<String>,
}

impl TryFrom<CreateChannelBody> for NewChannelCommand {
    type Error = ApiError;

    fn try_from(body: CreateChannelBody) -> Result<Self> {
        let name = match &body.name {
            Some(name) => LongName::try_from(name.as_str())
                .map_err(|e| vec![FieldError::new(["name"], e.to_string())]),
            None => problem(["name"], "is required"),
        };
        let integration = match body.integration.as_deref() {
            None => Ok(Integration::CloudApi),
            Some(name) => Integration::parse(name).map_or_else(
                || {
                    problem(
                        ["integration"],
                        "must be one of cloud_api, mm_lite, sandbox",
                    )
                },
                Ok,
            ),
        };
        let mut problems = Problems::default();
        let settings = settings_object(&mut problems, body.settings);
        let access_token = credential(&mut problems, "accessToken", body.access_token, 4096);
        let phone_number_id = platform_id(&mut problems, "phoneNumberId", body.phone_number_id);
        let business_id = platform_id(&mut problems, "businessId", body.business_id);
        let sandbox = integration
            .as_ref()
            .is_ok_and(|i| *i == Integration::Sandbox);
        let live = sandbox || access_token.is_some() || phone_number_id.is_some();
        if !sandbox {
            let needed: &[(&str, bool)] = if live {
                &[
                    ("accessToken", access_token.is_some()),
                    ("phoneNumberId", phone_number_id.is_some()),
                    ("businessId", business_id.is_some()),
                ]
            } else {
                &[("businessId", business_id.is_some())]
            };
            for (field, given) in needed {
                if !given {
                    let why = if live {
                        "is required for a live channel"
                    } else {
                        "is required"
                    };
                    problems.add([*field], why);
                }
            }
        }
        let rest = problems.into_checked();
        checked!(name, integration, rest);
        let () = rest;
        Ok(Self {
            name,
            integration,
            live,
            settings,
            access_token,
            phone_number_id,
            business_id,
        })
    }
}
