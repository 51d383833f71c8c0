//! The work a workspace runs besides conversations: flows (live statistics; pause, resume,
//! cancel), scheduled tasks (pause, resume; their runs), channels (state and credential
//! errors) and the workspace's usage against its quotas.

mod flows;
mod recipients;
mod tasks;
mod usage;

use std::collections::HashMap;

use askama::Template;
use axum::Router;
use axum::extract::State;
use axum::response::Response;
use axum::routing::get;
use uuid::Uuid;

use crate::http::AppState;

use super::session::Console;
use super::view::{Shell, when};
use super::{Failure, page, workspace_channels};

pub(super) fn router() -> Router<AppState> {
    Router::new()
        .route("/console/channels", get(channels_page))
        .merge(flows::router())
        .merge(recipients::router())
        .merge(tasks::router())
        .merge(usage::router())
}

/// A channel as the page shows it.
struct ChannelLine {
    id: Uuid,
    name: String,
    number: String,
    integration: &'static str,
    active: bool,
    problem: String,
    updated: String,
}

#[derive(Template)]
#[template(path = "console/channels.html")]
struct ChannelsPage {
    shell: Shell,
    channels: Vec<ChannelLine>,
}

async fn channels_page(
    State(state): State<AppState>,
    console: Console,
) -> Result<Response, Failure> {
    let channels = workspace_channels(&state, console.caller.workspace_id)
        .await?
        .into_iter()
        .map(|c| ChannelLine {
            id: c.id,
            number: c
                .display_phone_number
                .or(c.phone_number_id)
                .unwrap_or_default(),
            integration: c.integration.as_str(),
            active: c.active,
            problem: c.credentials_error.unwrap_or_default(),
            updated: when(c.updated_at),
            name: c.name,
        })
        .collect();
    Ok(page(&ChannelsPage {
        shell: Shell::new(&console, "channels"),
        channels,
    }))
}

/// The names of the workspace's channels, by id.
async fn channel_names(
    state: &AppState,
    workspace_id: i64,
) -> Result<HashMap<Uuid, String>, Failure> {
    Ok(workspace_channels(state, workspace_id)
        .await?
        .into_iter()
        .map(|c| (c.id, c.name))
        .collect())
}
