//! ChannelActor: one per active channel. It owns the outbound side of its number: the Graph
//! client, a per-number rate limiter (80 messages/s by default), per-recipient spacing for
//! Meta's pair limit, the 24-hour service window, retries by Meta error code, and template
//! listing and creation. A `sandbox` channel talks to no one: its sends are recorded and
//! reported delivered.

use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::Duration;

use governor::{DefaultDirectRateLimiter, DefaultKeyedRateLimiter, Quota, RateLimiter};
use parley_persistence::entities::channel;
use parley_persistence::{DatabaseConnection, channels, clock, deliveries};
use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use serde_json::{Value, json};
use uuid::Uuid;

use crate::secrets::SecretBox;
use crate::whatsapp::{GraphClient, GraphError};

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
    /// Meta's Graph API.
    pub graph: GraphClient,
    /// Opens the stored access tokens.
    pub secrets: Arc<SecretBox>,
    /// Limits and retries.
    pub settings: ChannelSettings,
}

/// What to send.
#[derive(Clone, Debug)]
pub enum Outbound {
    /// Free-form text; only inside the 24-hour window.
    Text {
        /// The text (at most 4096 characters).
        body: String,
        /// The inbound message this answers, shown as a reply in WhatsApp.
        context: Option<String>,
    },
    /// An approved template; allowed any time.
    Template {
        /// Template name.
        name: String,
        /// Language code (`en_US`).
        language: String,
        /// Meta's components with parameters (lower-case types).
        components: Value,
    },
}

/// A message for one recipient.
#[derive(Clone, Debug)]
pub struct OutboundMessage {
    /// Recipient's phone digits (no `+`).
    pub to: String,
    /// Recipient's identity, for the 24-hour window check of free-form text.
    pub identity_id: Option<Uuid>,
    /// Content.
    pub content: Outbound,
}

/// Meta accepted the message (or the sandbox recorded it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Accepted {
    /// The message's platform id.
    pub platform_message_id: String,
    /// `sent` (accepted by Meta) or `delivered` (sandbox).
    pub status: &'static str,
}

/// Why a message was not sent.
#[derive(Clone, Debug, thiserror::Error, PartialEq, Eq)]
pub enum SendError {
    /// The channel is inactive.
    #[error("the channel is not active")]
    Inactive,
    /// Meta refused the credentials earlier (190); new ones are needed.
    #[error("the channel's credentials are invalid: {0}")]
    CredentialsInvalid(String),
    /// More than 24 hours since the person's last message: only a template may be sent.
    #[error("outside the 24-hour window since the person's last message; send a template")]
    WindowClosed,
    /// Meta refused the message; `code` is Meta's.
    #[error("Meta refused the message ({code}): {message}")]
    Refused {
        /// Meta's error code.
        code: i64,
        /// Meta's message.
        message: String,
    },
    /// Meta could not be reached or kept failing.
    #[error("Meta could not take the message: {0}")]
    Unavailable(String),
}

impl SendError {
    /// The error object stored with a failed message.
    pub fn to_json(&self) -> Value {
        match self {
            Self::Refused { code, message } => json!({"code": code, "message": message}),
            Self::CredentialsInvalid(message) => json!({"code": 190, "message": message}),
            Self::WindowClosed => json!({"code": 131047, "message": self.to_string()}),
            other => json!({"code": null, "message": other.to_string()}),
        }
    }
}

/// Behaviour of a channel actor.
pub(crate) struct ChannelActor;

/// State of a channel actor.
pub(crate) struct ChannelState {
    /// The channel as last loaded.
    channel: channel::Model,
    /// Its access token, opened once.
    token: Option<String>,
    /// Shared dependencies.
    deps: Arc<ChannelDeps>,
    /// Throughput of the number; shared with the send tasks.
    number: Arc<DefaultDirectRateLimiter>,
    /// Spacing per recipient; shared with the send tasks.
    pairs: Arc<DefaultKeyedRateLimiter<String>>,
}

/// Messages of a channel actor.
pub(crate) enum ChannelMsg {
    /// Send a message; answered when Meta accepted or refused it.
    Send(OutboundMessage, RpcReplyPort<Result<Accepted, SendError>>),
    /// The channel's templates from Meta.
    ListTemplates(RpcReplyPort<Result<Vec<Value>, GraphError>>),
    /// Submit a template to Meta.
    CreateTemplate(Value, RpcReplyPort<Result<Value, GraphError>>),
    /// Register Parley's webhook with Meta for this channel's business account.
    RegisterWebhook(RpcReplyPort<Result<bool, GraphError>>),
    /// Meta refused the credentials (190).
    CredentialsRejected(String),
}

impl Actor for ChannelActor {
    type Msg = ChannelMsg;
    type State = ChannelState;
    type Arguments = (channel::Model, Arc<ChannelDeps>);

    async fn pre_start(
        &self,
        _myself: ActorRef<Self::Msg>,
        (channel, deps): Self::Arguments,
    ) -> Result<Self::State, ActorProcessingErr> {
        let per_second = NonZeroU32::new(deps.settings.per_second).unwrap_or(NonZeroU32::MIN);
        let pair_burst = NonZeroU32::new(deps.settings.pair_burst).unwrap_or(NonZeroU32::MIN);
        let pair_quota =
            Quota::with_period(deps.settings.pair_period.max(Duration::from_millis(1)))
                .unwrap_or_else(|| Quota::per_second(NonZeroU32::MIN))
                .allow_burst(pair_burst);
        let token = open_token(&deps, &channel);
        Ok(ChannelState {
            channel,
            token,
            number: Arc::new(RateLimiter::direct(Quota::per_second(per_second))),
            pairs: Arc::new(RateLimiter::keyed(pair_quota)),
            deps,
        })
    }

    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        message: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            ChannelMsg::Send(outbound, reply) => {
                match admit(state, &outbound).await {
                    Err(refused) => {
                        let _ = reply.send(Err(refused));
                    }
                    Ok(None) => {
                        let _ = reply.send(Ok(Accepted {
                            platform_message_id: format!("sandbox.{}", Uuid::now_v7()),
                            status: "delivered",
                        }));
                    }
                    Ok(Some(token)) => {
                        // Sends run concurrently; the limiters pace them.
                        let job = SendJob {
                            deps: state.deps.clone(),
                            number: state.number.clone(),
                            pairs: state.pairs.clone(),
                            phone_number_id: state
                                .channel
                                .phone_number_id
                                .clone()
                                .unwrap_or_default(),
                            marketing: state.channel.integration == "mm_lite",
                            token,
                            me: myself.clone(),
                        };
                        tokio::spawn(async move {
                            let _ = reply.send(job.run(outbound).await);
                        });
                    }
                }
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
                    _ => Err(GraphError::Api {
                        code: 0,
                        message: "the channel has no access token or business account".to_owned(),
                        status: 409,
                    }),
                };
                let _ = reply.send(outcome);
            }
            ChannelMsg::RegisterWebhook(reply) => {
                let _ = reply.send(register(state).await);
            }
            ChannelMsg::CredentialsRejected(message) => {
                tracing::error!(channel_id = %state.channel.id, %message, "Meta refused the channel's credentials");
                channels::mark_credentials_invalid(&state.deps.db, state.channel.id, &message)
                    .await?;
                state.channel.credentials_error = Some(message);
            }
        }
        Ok(())
    }
}

/// Checks what can be checked without Meta; answers the token to send with, or `None` for a
/// sandbox channel.
async fn admit(
    state: &ChannelState,
    outbound: &OutboundMessage,
) -> Result<Option<String>, SendError> {
    let channel = &state.channel;
    if !channel.active {
        return Err(SendError::Inactive);
    }
    if let Some(error) = &channel.credentials_error {
        return Err(SendError::CredentialsInvalid(error.clone()));
    }
    if let (Outbound::Text { .. }, Some(identity_id)) = (&outbound.content, outbound.identity_id) {
        let last = deliveries::last_inbound_at(&state.deps.db, identity_id, channel.id)
            .await
            .map_err(|e| SendError::Unavailable(e.to_string()))?;
        let open = last.is_some_and(|at| clock::now() - at < chrono::Duration::hours(24));
        if !open {
            return Err(SendError::WindowClosed);
        }
    }
    if channel.integration == "sandbox" {
        return Ok(None);
    }
    state
        .token
        .clone()
        .map(Some)
        .ok_or_else(|| SendError::CredentialsInvalid("the channel has no access token".to_owned()))
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
    if channel.integration == "sandbox" || !channel.active {
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
    tracing::info!(channel_id = %channel.id, %callback, "webhook registered with Meta");
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

/// One send, with its retries, outside the actor.
struct SendJob {
    deps: Arc<ChannelDeps>,
    number: Arc<DefaultDirectRateLimiter>,
    pairs: Arc<DefaultKeyedRateLimiter<String>>,
    phone_number_id: String,
    marketing: bool,
    token: String,
    me: ActorRef<ChannelMsg>,
}

impl SendJob {
    async fn run(self, outbound: OutboundMessage) -> Result<Accepted, SendError> {
        let body = wire_body(&outbound);
        let marketing = self.marketing && matches!(outbound.content, Outbound::Template { .. });
        let settings = &self.deps.settings;
        let mut attempt = 0;
        loop {
            self.pairs.until_key_ready(&outbound.to).await;
            self.number.until_ready().await;
            let outcome = self
                .deps
                .graph
                .send(&self.token, &self.phone_number_id, &body, marketing)
                .await;
            let error = match outcome {
                Ok(wamid) => {
                    return Ok(Accepted {
                        platform_message_id: wamid,
                        status: "sent",
                    });
                }
                Err(error) => error,
            };
            let retry_after = match error.code() {
                // Throughput exceeded: Meta counts per second, so wait at least that long.
                Some(130429) => Some(
                    settings
                        .retry_backoff
                        .saturating_mul(2u32.saturating_pow(attempt))
                        .max(Duration::from_secs(1)),
                ),
                // Pair limit: wait out the recipient's spacing; others are unaffected.
                Some(131056) => Some(settings.pair_period),
                Some(190) => {
                    let _ = self
                        .me
                        .send_message(ChannelMsg::CredentialsRejected(error.to_string()));
                    return Err(SendError::CredentialsInvalid(error.to_string()));
                }
                Some(131047) => return Err(SendError::WindowClosed),
                Some(code) if code != 0 => {
                    // 131026, 131049, 100 and the rest: permanent for this message.
                    let message = match &error {
                        GraphError::Api { message, .. } => message.clone(),
                        other => other.to_string(),
                    };
                    return Err(SendError::Refused { code, message });
                }
                _ => Some(
                    settings
                        .retry_backoff
                        .saturating_mul(2u32.saturating_pow(attempt)),
                ),
            };
            if attempt >= settings.max_retries {
                return Err(match error.code() {
                    Some(code) if code != 0 => SendError::Refused {
                        code,
                        message: error.to_string(),
                    },
                    _ => SendError::Unavailable(error.to_string()),
                });
            }
            attempt += 1;
            if let Some(delay) = retry_after {
                tracing::warn!(%error, attempt, ?delay, "send failed; retrying");
                tokio::time::sleep(delay.min(Duration::from_secs(30))).await;
            }
        }
    }
}

/// The Cloud API body of a message.
fn wire_body(outbound: &OutboundMessage) -> Value {
    match &outbound.content {
        Outbound::Text { body, context } => {
            let mut wire = json!({"messaging_product": "whatsapp", "recipient_type": "individual",
                                  "to": outbound.to, "type": "text",
                                  "text": {"body": body, "preview_url": false}});
            if let Some(wamid) = context {
                wire["context"] = json!({"message_id": wamid});
            }
            wire
        }
        Outbound::Template {
            name,
            language,
            components,
        } => json!({
            "messaging_product": "whatsapp", "recipient_type": "individual", "to": outbound.to,
            "type": "template",
            "template": {"name": name, "language": {"code": language}, "components": components}
        }),
    }
}

#[cfg(test)]
mod tests {
    use parley_persistence::conversations::{self, NewMessage};

    use super::*;
    use crate::test_support::{channel_deps, deps, world};

    fn text(identity_id: Uuid) -> OutboundMessage {
        OutboundMessage {
            to: "351912345678".to_owned(),
            identity_id: Some(identity_id),
            content: Outbound::Text {
                body: "Hello again".to_owned(),
                context: None,
            },
        }
    }

    async fn wrote(
        db: &DatabaseConnection,
        ws: i64,
        channel_id: Uuid,
        identity_id: Uuid,
        hours_ago: i64,
    ) {
        let at = clock::now() - chrono::Duration::hours(hours_ago);
        let conversation = conversations::start(db, ws, identity_id, channel_id, None, at)
            .await
            .expect("conversation");
        let message = NewMessage {
            direction: "inbound",
            role: "user",
            content: "hi".to_owned(),
            status: "received",
            platform_message_id: None,
            usage: None,
            tool_calls: None,
            tool_call_id: None,
            error: None,
            reply_to_message_id: None,
        };
        conversations::append_message(db, &conversation, message, at)
            .await
            .expect("message");
    }

    async fn send(
        actor: &ActorRef<ChannelMsg>,
        message: OutboundMessage,
    ) -> Result<Accepted, SendError> {
        ractor::call_t!(actor, ChannelMsg::Send, 5_000, message).expect("answer")
    }

    #[tokio::test]
    async fn free_form_text_needs_the_24_hour_window_and_templates_do_not() {
        let (deps, _dir, _model) = deps().await;
        let (ws, channel_id, quiet, recent) = world(&deps.db).await;
        wrote(&deps.db, ws, channel_id, quiet, 30).await;
        wrote(&deps.db, ws, channel_id, recent, 1).await;
        let channel = channels::find(&deps.db, ws, channel_id)
            .await
            .expect("query")
            .expect("channel");
        let (actor, _) = Actor::spawn(None, ChannelActor, (channel, Arc::new(channel_deps(&deps))))
            .await
            .expect("spawn");

        assert_eq!(
            send(&actor, text(quiet)).await,
            Err(SendError::WindowClosed)
        );
        let never = Uuid::now_v7();
        assert_eq!(
            send(&actor, text(never)).await,
            Err(SendError::WindowClosed)
        );
        assert_eq!(
            send(&actor, text(recent)).await.map(|a| a.status),
            Ok("delivered")
        );
        let template = OutboundMessage {
            content: Outbound::Template {
                name: "order_update".to_owned(),
                language: "en_US".to_owned(),
                components: json!([]),
            },
            ..text(quiet)
        };
        assert_eq!(
            send(&actor, template).await.map(|a| a.status),
            Ok("delivered")
        );
        actor.stop(None);
    }

    #[test]
    fn a_text_reply_quotes_the_message_it_answers() {
        let wire = wire_body(&OutboundMessage {
            to: "16505551234".to_owned(),
            identity_id: None,
            content: Outbound::Text {
                body: "Yes".to_owned(),
                context: Some("wamid.1".to_owned()),
            },
        });
        assert_eq!(wire["context"]["message_id"], "wamid.1");
        assert_eq!(wire["text"]["preview_url"], false);
        assert_eq!(wire["recipient_type"], "individual");
    }
}
