//! Flows with their live statistics, paused, resumed and cancelled from the page.

use askama::Template;
use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::response::Response;
use axum::routing::{get, post};
use std::collections::HashMap;

use parley_persistence::campaigns;
use parley_persistence::flows::{self, FlowFilter};
use parley_persistence::{FlowStatus, entities::flow};
use uuid::Uuid;

use crate::http::AppState;
use crate::http::error::ApiError;

use super::super::session::Console;
use super::super::view::{Done, Shell, when};
use super::super::{Failure, Plain, acting, named, page, page_with, see_other};
use super::channel_names;

/// Flows the page shows (the newest).
const SHOWN: u64 = 50;

const DONE: &[(&str, &str)] = &[
    (
        "paused",
        "The flow is paused: nothing more is sent until you resume it.",
    ),
    ("running", "The flow is sending again."),
    (
        "cancelled",
        "The flow is cancelled: what was not sent will not be.",
    ),
];

pub(super) fn router() -> Router<AppState> {
    Router::new()
        .route("/console/flows", get(flows_page))
        .route("/console/flows/rows", get(flows_rows))
        .route("/console/flows/{id}/{to}", post(move_flow))
}

/// A flow as the page shows it.
struct FlowLine {
    id: Uuid,
    title: String,
    /// The campaign it sends.
    campaign: String,
    channel: String,
    status: &'static str,
    total: u64,
    pending: u64,
    sent: u64,
    delivered: u64,
    /// Delivered of the sent, as a percentage.
    delivery_rate: String,
    read: u64,
    /// Read of the delivered, as a percentage.
    read_rate: String,
    failed: u64,
    skipped: u64,
    created: String,
    may_pause: bool,
    may_resume: bool,
    may_cancel: bool,
}

#[derive(Template)]
#[template(path = "console/flows.html")]
struct FlowsPage {
    shell: Shell,
    flows: Vec<FlowLine>,
}

#[derive(Template)]
#[template(path = "console/flow_rows.html")]
struct FlowRows {
    shell: Shell,
    flows: Vec<FlowLine>,
}

async fn flows_page(
    State(state): State<AppState>,
    console: Console,
    Query(query): Query<Done>,
) -> Result<Response, Failure> {
    let flows = lines(&state, &console).await?;
    let shell = Shell::new(&console, "flows").told(query.done.as_deref(), DONE);
    Ok(page(&FlowsPage { shell, flows }))
}

/// The table's rows alone, read again every few seconds by the page.
async fn flows_rows(State(state): State<AppState>, console: Console) -> Result<Response, Failure> {
    let flows = lines(&state, &console).await?;
    Ok(page(&FlowRows {
        shell: Shell::new(&console, "flows"),
        flows,
    }))
}

async fn lines(state: &AppState, console: &Console) -> Result<Vec<FlowLine>, Failure> {
    let workspace_id = console.caller.workspace_id;
    let names = channel_names(state, workspace_id).await?;
    let found = flows::list(&state.db, workspace_id, FlowFilter::default(), None, SHOWN).await?;
    let mut campaigns: HashMap<Uuid, String> = HashMap::new();
    let mut lines = Vec::with_capacity(found.items.len());
    for f in found.items {
        let stats = flows::statistics(&state.db, f.id).await?;
        let campaign = match campaigns.get(&f.campaign_id) {
            Some(name) => name.clone(),
            None => {
                let name = campaigns::find(&state.db, workspace_id, f.campaign_id)
                    .await?
                    .map_or_else(|| "a deleted campaign".to_owned(), |c| c.name);
                campaigns.insert(f.campaign_id, name.clone());
                name
            }
        };
        lines.push(FlowLine {
            id: f.id,
            title: f.description.clone().unwrap_or_else(|| campaign.clone()),
            campaign,
            channel: names.get(&f.channel_id).cloned().unwrap_or_default(),
            status: f.status.as_str(),
            total: stats.total,
            pending: stats.pending,
            sent: stats.sent,
            delivered: stats.delivered,
            delivery_rate: percent(stats.delivery_rate()),
            read: stats.read,
            read_rate: percent(stats.read_rate()),
            failed: stats.failed,
            skipped: stats.skipped,
            created: when(f.created_at),
            may_pause: f.status.may_move_to(FlowStatus::Paused),
            may_resume: f.status.may_move_to(FlowStatus::Running),
            may_cancel: f.status.may_move_to(FlowStatus::Cancelled),
        });
    }
    Ok(lines)
}

async fn move_flow(
    State(state): State<AppState>,
    console: Console,
    Path((id, to)): Path<(String, String)>,
    body: Bytes,
) -> Result<Response, Failure> {
    let _: Plain = acting(&console, &body)?;
    let to = match to.as_str() {
        "pause" => FlowStatus::Paused,
        "resume" => FlowStatus::Running,
        "cancel" => FlowStatus::Cancelled,
        _ => return Err(Failure::new(&console, ApiError::NotFound("Route"))),
    };
    let found = find(&state, &console, &id).await?;
    match state
        .actors
        .flows()
        .set_status(&found, to)
        .await
        .map_err(ApiError::from)
    {
        Ok(moved) => Ok(see_other(&format!(
            "/console/flows?done={}",
            moved.status.as_str()
        ))),
        Err(error) => {
            let status = error.status();
            let shell = Shell::new(&console, "flows").refused(error.public_message());
            let flows = lines(&state, &console).await?;
            Ok(page_with(status, &FlowsPage { shell, flows }))
        }
    }
}

async fn find(state: &AppState, console: &Console, raw: &str) -> Result<flow::Model, Failure> {
    let workspace_id = console.caller.workspace_id;
    named(console, raw, "uid", "Flow", |id| {
        flows::find(&state.db, workspace_id, id)
    })
    .await
}

/// A share (0 to 1) as the page shows it: `75%`.
fn percent(share: f64) -> String {
    format!("{:.0}%", share * 100.0)
}
