//! ChannelActor: one per active channel. It owns the outbound side of its number: the Graph
//! client, the per-number and per-recipient limits, the 24-hour service window, retries by
//! Meta error code, and template listing and creation. A `sandbox` channel talks to no one:
//! its sends are recorded and reported delivered.
//!
//! Every send of a stored message claims it (`pending` → `sending`) right before each HTTP
//! attempt and records Meta's answer itself, so a caller that stops waiting loses nothing.

mod handle;
mod limits;
mod local;
pub mod registry;
pub mod remote;
mod sandbox;
mod send_job;
mod sending;

use std::sync::Arc;
use std::time::Duration;

use parley_persistence::entities::channel;
use parley_persistence::{DatabaseConnection, GroupCommit, Integration, channels, deliveries};
use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use serde_json::Value;

pub use self::handle::Channels;
use self::limits::Limits;
use self::send_job::SendJob;
pub use self::sending::{Accepted, Lane, SendAnswer, SendError, SendRequest};
use crate::domain::SecretBox;
use crate::tree::ActorPath;
use crate::whatsapp::{GraphClient, GraphError, MetaError, OutboundContent, Outgoing};

/// Outbound limits of a number; from configuration.
#[derive(Clone, Debug)]
pub struct ChannelSettings {
    /// Messages per second per number (Meta's default throughput is 80).
    pub per_second: u32,
    /// Messages a recipient may receive in a burst before spacing applies.
    pub pair_burst: u32,
    /// Spacing between messages to one recipient after the burst (Meta: about 6 s).
    pub pair_period: Duration,
    /// Attempts after a retryable failure (130429, 131056, 5xx, connection, timeout).
    pub max_retries: u32,
    /// First retry delay; doubles per attempt.
    pub retry_backoff: Duration,
    /// Public base URL, to register the webhook with Meta.
    pub public_url: Option<String>,
}

/// What the channel actors need.
#[derive(Clone, Debug)]
pub struct ChannelDeps {
    /// Connection pool.
    pub db: DatabaseConnection,
    /// The database's writer: claims and Meta's answers are committed with other writes.
    pub writer: GroupCommit,
    /// Meta's Graph API.
    pub graph: GraphClient,
    /// Opens the stored access tokens.
    pub secrets: Arc<SecretBox>,
    /// Limits and retries.
    pub settings: ChannelSettings,
    /// Events of what sends record (a message sent or failed).
    pub events: crate::events::Events,
    /// Which channels this node owns (all, on a single node); claims carry its fence.
    pub placement: crate::cluster::Placement,
}

/// Behaviour of a channel actor.
pub(crate) struct ChannelActor;

/// What a channel actor starts with.
pub(crate) struct ChannelArgs {
    pub(crate) channel: channel::Model,
    pub(crate) deps: Arc<ChannelDeps>,
}

/// State of a channel actor.
pub(crate) struct ChannelState {
    /// The channel as loaded when the actor started; a change restarts the actor.
    channel: channel::Model,
    /// Where it sits in the tree, for its log lines.
    path: ActorPath,
    /// Its access token, opened once.
    token: Option<String>,
    /// Shared dependencies.
    deps: Arc<ChannelDeps>,
    /// Throughput of the number and spacing per recipient; shared with the send jobs.
    limits: Limits,
}

/// Messages of a channel actor.
pub(crate) enum ChannelMsg {
    /// Send a message; answered once Meta accepted or refused it and the answer is recorded.
    Send(SendRequest, RpcReplyPort<Result<Accepted, SendError>>),
    /// The channel's templates from Meta.
    ListTemplates(RpcReplyPort<Result<Vec<Value>, GraphError>>),
    /// Submit a template to Meta.
    CreateTemplate(Value, RpcReplyPort<Result<Value, GraphError>>),
    /// Register Parley's webhook with Meta for this channel's business account.
    RegisterWebhook(RpcReplyPort<Result<bool, GraphError>>),
    /// Meta refused the credentials (190).
    CredentialsRejected(String),
    /// A person's message reached the number (it counts in the number's throughput).
    Received,
}

impl Actor for ChannelActor {
    type Msg = ChannelMsg;
    type State = ChannelState;
    type Arguments = ChannelArgs;

    async fn pre_start(
        &self,
        _myself: ActorRef<Self::Msg>,
        ChannelArgs { channel, deps }: ChannelArgs,
    ) -> Result<Self::State, ActorProcessingErr> {
        let token = open_token(&deps, &channel);
        Ok(ChannelState {
            path: ActorPath::channel(channel.id),
            limits: Limits::new(&deps.settings),
            channel,
            token,
            deps,
        })
    }

    #[tracing::instrument(name = "channel", skip_all, fields(actor = %state.path, channel_id = %state.channel.id))]
    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        message: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            ChannelMsg::Send(request, reply) => send(state, &myself, request, reply).await,
            ChannelMsg::ListTemplates(reply)
                if state.channel.integration == Integration::Sandbox =>
            {
                let _ = reply.send(sandbox::list(state).await);
            }
            ChannelMsg::CreateTemplate(body, reply)
                if state.channel.integration == Integration::Sandbox =>
            {
                let _ = reply.send(sandbox::create(state, &body).await);
            }
            ChannelMsg::ListTemplates(reply) => {
                let outcome = match (&state.token, &state.channel.business_account_id) {
                    (Some(token), Some(waba)) => state.deps.graph.list_templates(token, waba).await,
                    _ => Ok(Vec::new()),
                };
                let _ = reply.send(outcome);
            }
            ChannelMsg::CreateTemplate(body, reply) => {
                let outcome = match (&state.token, &state.channel.business_account_id) {
                    (Some(token), Some(waba)) => {
                        state.deps.graph.create_template(token, waba, &body).await
                    }
                    _ => Err(GraphError::Api(MetaError::bare(
                        409,
                        "the channel has no access token or business account",
                    ))),
                };
                let _ = reply.send(outcome);
            }
            ChannelMsg::RegisterWebhook(reply) => {
                let _ = reply.send(register(state).await);
            }
            ChannelMsg::CredentialsRejected(message) => {
                tracing::error!(%message, "Meta refused the channel's credentials");
                channels::mark_credentials_invalid(&state.deps.db, state.channel.id, &message)
                    .await?;
                state.channel.credentials_error = Some(message);
            }
            ChannelMsg::Received => state.limits.received(),
        }
        Ok(())
    }
}

/// Checks what can be checked without Meta, then hands the send to a job so that a channel's
/// sends run concurrently: the sandbox records at once, a live number's limits pace its jobs.
async fn send(
    state: &ChannelState,
    myself: &ActorRef<ChannelMsg>,
    request: SendRequest,
    reply: RpcReplyPort<Result<Accepted, SendError>>,
) {
    let job = SendJob {
        db: state.deps.db.clone(),
        writer: state.deps.writer.clone(),
        message_id: request.message_id,
        told: send_job::Told {
            events: state.deps.events.clone(),
            workspace_id: state.channel.workspace_id,
            channel_id: state.channel.id,
            identity_id: request.outgoing.identity_id,
            operator: request.outgoing.operator.clone(),
            category: request.outgoing.category(),
        },
        keep_when_unavailable: request.keep_when_unavailable,
        channel_retries: request.channel_retries,
        lane: request.lane,
        placement: state.deps.placement.clone(),
    };
    let token = match admit(state, &request.outgoing).await {
        Ok(token) => token,
        Err(refused) => {
            let _ = reply.send(job.refuse(refused).await);
            return;
        }
    };
    let Some(token) = token else {
        // Recorded beside the actor, like a live send: the channel's other sends do not wait
        // for this one's writes (in the actor, a busy sandbox number answered ~370 a second).
        tokio::spawn(async move {
            let _ = reply.send(job.record_sandbox().await);
        });
        return;
    };
    let live = send_job::LiveSend {
        graph: state.deps.graph.clone(),
        settings: state.deps.settings.clone(),
        limits: state.limits.clone(),
        phone_number_id: state.channel.phone_number_id.clone().unwrap_or_default(),
        marketing: state.channel.integration == Integration::MmLite,
        token,
        me: myself.clone(),
    };
    tokio::spawn(async move {
        let _ = reply.send(job.run(&live, request.outgoing).await);
    });
}

/// Answers the token to send with, or `None` for a sandbox channel; refuses what cannot be
/// sent at all.
async fn admit(state: &ChannelState, outgoing: &Outgoing) -> Result<Option<String>, SendError> {
    let channel = &state.channel;
    if !channel.active {
        return Err(SendError::Inactive);
    }
    if let Some(error) = &channel.credentials_error {
        return Err(SendError::CredentialsInvalid(error.clone()));
    }
    // A reply quoting the person's message answers inside the window by construction (and
    // Meta refuses it with 131047 otherwise); free text that answers nothing is checked here.
    let free_form = matches!(
        outgoing.content,
        OutboundContent::Text { context: None, .. } | OutboundContent::Media(_)
    );
    if let (true, Some(identity_id)) = (free_form, outgoing.identity_id)
        && !service_window_open(&state.deps.db, identity_id, channel.id).await?
    {
        return Err(SendError::WindowClosed);
    }
    if channel.integration == Integration::Sandbox {
        return Ok(None);
    }
    state
        .token
        .clone()
        .map(Some)
        .ok_or_else(|| SendError::CredentialsInvalid("the channel has no access token".to_owned()))
}

/// Whether free text may go to the identity on the channel: the person wrote on it within the
/// last 24 hours (WhatsApp's customer service window).
///
/// # Errors
/// Fails on a database error.
pub(crate) async fn service_window_open(
    db: &parley_persistence::DatabaseConnection,
    identity_id: uuid::Uuid,
    channel_id: uuid::Uuid,
) -> Result<bool, parley_persistence::PersistenceError> {
    let last = deliveries::last_inbound_at(db, identity_id, channel_id).await?;
    Ok(last.is_some_and(|at| parley_persistence::clock::now() - at < chrono::Duration::hours(24)))
}

async fn register(state: &ChannelState) -> Result<bool, GraphError> {
    let channel = &state.channel;
    let (Some(public_url), Some(token), Some(waba)) = (
        state.deps.settings.public_url.as_deref(),
        state.token.as_deref(),
        channel.business_account_id.as_deref(),
    ) else {
        return Ok(false);
    };
    if !channel.integration.is_live() || !channel.active {
        return Ok(false);
    }
    let callback = format!(
        "{}/webhooks/waba/{}",
        public_url.trim_end_matches('/'),
        channel.id
    );
    state
        .deps
        .graph
        .subscribe_app(token, waba, &callback, &channel.verify_token)
        .await?;
    tracing::info!(%callback, "webhook registered with Meta");
    Ok(true)
}

fn open_token(deps: &ChannelDeps, channel: &channel::Model) -> Option<String> {
    let sealed = channel.access_token_encrypted.as_deref()?;
    match deps.secrets.open(sealed) {
        Ok(token) => Some(token),
        Err(error) => {
            tracing::error!(channel_id = %channel.id, %error, "cannot open the channel's access token");
            None
        }
    }
}

#[cfg(test)]
mod tests;
