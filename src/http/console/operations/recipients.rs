//! One flow's recipients as a person reads them: who, where each stands, how many attempts,
//! and why one failed or was skipped.

use askama::Template;
use axum::Router;
use axum::extract::{Path, State};
use axum::response::Response;
use axum::routing::get;
use parley_persistence::flows;

use crate::http::AppState;

use super::super::session::Console;
use super::super::view::{Shell, when};
use super::super::{Failure, named, page};

/// Recipients the page shows (the first, in sending order).
const SHOWN: u64 = 200;

pub(super) fn router() -> Router<AppState> {
    Router::new().route("/console/flows/{id}/recipients", get(recipients_page))
}

/// A recipient as the page shows it.
struct RecipientLine {
    contact: String,
    status: &'static str,
    attempts: i32,
    error: String,
    updated: String,
}

#[derive(Template)]
#[template(path = "console/flow_recipients.html")]
struct RecipientsPage {
    shell: Shell,
    title: String,
    total: u64,
    shown: usize,
    recipients: Vec<RecipientLine>,
}

async fn recipients_page(
    State(state): State<AppState>,
    console: Console,
    Path(id): Path<String>,
) -> Result<Response, Failure> {
    let workspace_id = console.caller.workspace_id;
    let flow = named(&console, &id, "uid", "Flow", |id| {
        flows::find(&state.db, workspace_id, id)
    })
    .await?;
    let listed = flows::recipients(&state.db, flow.id, None, SHOWN).await?;
    let recipients: Vec<RecipientLine> = listed
        .items
        .into_iter()
        .map(|r| RecipientLine {
            contact: r.contact,
            status: r.status.as_str(),
            attempts: r.attempts,
            error: r.error.unwrap_or_default(),
            updated: when(r.updated_at),
        })
        .collect();
    let total = flows::statistics(&state.db, flow.id).await?.total;
    Ok(page(&RecipientsPage {
        shell: Shell::new(&console, "flows"),
        title: flow
            .description
            .unwrap_or_else(|| format!("Flow {}", flow.id)),
        total,
        shown: recipients.len(),
        recipients,
    }))
}
