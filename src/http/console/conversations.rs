//! The inbox: the workspace's conversations, newest activity first, filtered by channel, mode,
//! status and assignee, searched by person (name, phone, e-mail) and by what was said, with
//! the person's name and phone, the assignee and the last message; live.

use std::collections::HashMap;

use askama::Template;
use axum::Router;
use axum::extract::{Query, State};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use parley_persistence::entities::channel;
use parley_persistence::inbox::{self, Assigned, InboxFilter, InboxRow};
use parley_persistence::{ConversationMode, clock};
use serde::Deserialize;
use uuid::Uuid;

use crate::http::AppState;
use crate::http::error::ApiError;
use crate::http::validation::parse_uuid;

use super::session::Console;
use super::view::{Shell, author, clipped, when};
use super::{Failure, live, page, workspace_channels};

/// Conversations an inbox page shows.
const SHOWN: u64 = 100;

pub(super) fn router() -> Router<AppState> {
    Router::new()
        .route("/console/conversations", get(inbox_page))
        .route("/console/conversations/rows", get(inbox_rows))
        .route("/console/conversations/live", get(inbox_live))
}

/// The filters, as the form sends them (an empty value is no filter).
#[derive(Debug, Default, Deserialize)]
pub(super) struct InboxQuery {
    #[serde(default)]
    channel: String,
    #[serde(default)]
    mode: String,
    #[serde(default)]
    status: String,
    /// `all` (or empty), `mine` or `unassigned`.
    #[serde(default)]
    assigned: String,
    /// Words to search.
    #[serde(default)]
    q: String,
}

impl InboxQuery {
    fn filter(&self, state: &AppState, console: &Console) -> Result<InboxFilter, ApiError> {
        let channel_id = match self.channel.as_str() {
            "" => None,
            raw => Some(parse_uuid(raw, "channel")?),
        };
        let mode =
            match self.mode.as_str() {
                "" => None,
                raw => Some(ConversationMode::parse(raw).ok_or_else(|| {
                    ApiError::invalid_field(["mode"], "must be assistant or human")
                })?),
            };
        let open = match self.status.as_str() {
            "" => None,
            "open" => Some(true),
            "closed" => Some(false),
            _ => {
                return Err(ApiError::invalid_field(
                    ["status"],
                    "must be open or closed",
                ));
            }
        };
        let assigned = match (self.assigned.as_str(), console.operator_id()) {
            ("" | "all", _) => Assigned::All,
            ("unassigned", _) => Assigned::NoOne,
            ("mine", Some(me)) => Assigned::To(me),
            ("mine", None) => {
                return Err(ApiError::invalid_field(
                    ["assigned"],
                    "mine needs an operator's session (a key's session is no one's)",
                ));
            }
            _ => {
                return Err(ApiError::invalid_field(
                    ["assigned"],
                    "must be all, mine or unassigned",
                ));
            }
        };
        if self.q.chars().count() > 200 {
            return Err(ApiError::invalid_field(
                ["q"],
                "must be at most 200 characters",
            ));
        }
        let search = Some(self.q.trim().to_owned()).filter(|q| !q.is_empty());
        let idle_since = clock::now() - state.settings.actors.conversation_idle();
        Ok(InboxFilter {
            channel_id,
            mode,
            open,
            idle_since,
            assigned,
            search,
        })
    }

    /// The query string of these filters, for the rows' live reads.
    fn encoded(&self) -> String {
        form_urlencoded::Serializer::new(String::new())
            .append_pair("channel", &self.channel)
            .append_pair("mode", &self.mode)
            .append_pair("status", &self.status)
            .append_pair("assigned", &self.assigned)
            .append_pair("q", &self.q)
            .finish()
    }
}

/// One line of the inbox as the page shows it.
pub(super) struct Row {
    id: Uuid,
    who: String,
    phone: String,
    channel: String,
    mode: &'static str,
    open: bool,
    last: String,
    last_by: &'static str,
    at: String,
    /// Who it is assigned to.
    assignee: Option<String>,
}

/// A channel of the filter's list.
pub(super) struct ChannelOption {
    id: Uuid,
    name: String,
    selected: bool,
}

#[derive(Template)]
#[template(path = "console/conversations.html")]
struct InboxPage {
    shell: Shell,
    channels: Vec<ChannelOption>,
    mode: String,
    status: String,
    assigned: String,
    q: String,
    query: String,
    rows: Vec<Row>,
}

#[derive(Template)]
#[template(path = "console/conversation_rows.html")]
struct InboxRows {
    rows: Vec<Row>,
}

async fn inbox_page(
    State(state): State<AppState>,
    console: Console,
    Query(query): Query<InboxQuery>,
) -> Result<Response, Failure> {
    let filter = query
        .filter(&state, &console)
        .map_err(|error| Failure::new(&console, error))?;
    let channels = workspace_channels(&state, console.caller.workspace_id).await?;
    let rows = rows(&state, console.caller.workspace_id, &filter, &channels).await?;
    let options = channels
        .iter()
        .map(|c| ChannelOption {
            id: c.id,
            name: c.name.clone(),
            selected: filter.channel_id == Some(c.id),
        })
        .collect();
    Ok(page(&InboxPage {
        shell: Shell::new(&console, "conversations"),
        channels: options,
        mode: query.mode.clone(),
        status: query.status.clone(),
        assigned: if query.assigned.is_empty() {
            "all".to_owned()
        } else {
            query.assigned.clone()
        },
        q: query.q.clone(),
        query: query.encoded(),
        rows,
    }))
}

/// The rows alone, for the page's live reads.
async fn inbox_rows(
    State(state): State<AppState>,
    console: Console,
    Query(query): Query<InboxQuery>,
) -> Result<Response, Failure> {
    let filter = query.filter(&state, &console)?;
    let channels = workspace_channels(&state, console.caller.workspace_id).await?;
    let rows = rows(&state, console.caller.workspace_id, &filter, &channels).await?;
    Ok(page(&InboxRows { rows }))
}

/// `changed` whenever a message of the workspace is stored.
async fn inbox_live(State(state): State<AppState>, console: Console) -> impl IntoResponse {
    let workspace_id = console.caller.workspace_id;
    live::changes(
        state,
        workspace_id,
        console.token,
        move |state: AppState| async move { inbox::workspace_mark(&state.db, workspace_id).await },
    )
}

async fn rows(
    state: &AppState,
    workspace_id: i64,
    filter: &InboxFilter,
    channels: &[channel::Model],
) -> Result<Vec<Row>, Failure> {
    let names: HashMap<Uuid, &str> = channels.iter().map(|c| (c.id, c.name.as_str())).collect();
    let found = inbox::inbox(&state.db, workspace_id, filter.clone(), SHOWN).await?;
    let assignees: Vec<Uuid> = found
        .iter()
        .filter_map(|row| row.conversation.assigned_operator_id)
        .collect();
    let operators = parley_persistence::operators::names(&state.db, &assignees).await?;
    Ok(found
        .into_iter()
        .map(|row| line(row, &names, &operators, filter))
        .collect())
}

fn line(
    row: InboxRow,
    channels: &HashMap<Uuid, &str>,
    operators: &HashMap<Uuid, String>,
    filter: &InboxFilter,
) -> Row {
    let c = row.conversation;
    let open = c.status == parley_persistence::ConversationStatus::Open
        && c.last_message_at > filter.idle_since;
    let (last, last_by) = row.last_message.map_or((String::new(), ""), |m| {
        (clipped(&m.content, 140), author(m.role))
    });
    Row {
        id: c.id,
        who: row.name.unwrap_or_else(|| "Unnamed person".to_owned()),
        phone: row.phone.unwrap_or_default(),
        channel: channels
            .get(&c.channel_id)
            .map_or_else(|| "a deleted channel".to_owned(), |name| (*name).to_owned()),
        mode: c.mode.as_str(),
        open,
        last,
        last_by,
        at: when(c.last_message_at),
        assignee: c.assigned_operator_id.map(|id| {
            operators
                .get(&id)
                .cloned()
                .unwrap_or_else(|| "someone".to_owned())
        }),
    }
}
