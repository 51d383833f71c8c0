//! One send, with its retries, outside the actor so that sends of one number run concurrently.
//! A stored message is claimed (`pending` → `sending`) right before each HTTP attempt and
//! given back (`sending` → `pending`) while the job waits to retry, so that a stop during a
//! wait sends it again at start-up and a stop during an attempt is never sent twice. The job
//! records Meta's answer itself: the caller may have stopped waiting.

use std::time::Duration;

use parley_persistence::usage::{self, Category};
use parley_persistence::{DatabaseConnection, GroupCommit, MessageStatus, clock, deliveries};
use ractor::ActorRef;
use uuid::Uuid;

use super::limits::Limits;
use super::{Accepted, ChannelMsg, ChannelSettings, Lane, SendError};
use crate::events::{Events, Handover, MessageTold, Recorded};
use crate::whatsapp::error::PAIR_RATE_LIMIT;
use crate::whatsapp::{GraphClient, GraphError, MetaErrorKind, Outgoing};

/// Longest single wait between attempts.
const MAX_RETRY_WAIT: Duration = Duration::from_secs(30);

/// The stored side of a send: which message to claim and record, if any.
pub(super) struct SendJob {
    pub(super) db: DatabaseConnection,
    /// Claims and Meta's answers, committed with other writes.
    pub(super) writer: GroupCommit,
    pub(super) message_id: Option<Uuid>,
    /// Whose message it is, for its events.
    pub(super) told: Told,
    pub(super) keep_when_unavailable: bool,
    /// Whether the channel retries (see [`super::SendRequest::channel_retries`]).
    pub(super) channel_retries: bool,
    /// Where it waits for the number's room.
    pub(super) lane: Lane,
    /// Whose lease a claim must still hold (its fence is read at each claim).
    pub(super) placement: crate::cluster::Placement,
}

/// What the events of a send say besides the message: where, to whom.
pub(super) struct Told {
    pub(super) events: Events,
    pub(super) workspace_id: i64,
    pub(super) channel_id: Uuid,
    pub(super) identity_id: Option<Uuid>,
    /// The operator who wrote the message, whom its events name.
    pub(super) operator: Option<crate::whatsapp::Author>,
    /// Meta's pricing category of the message, for the usage its send counts.
    pub(super) category: Category,
}

impl Told {
    /// The usage a send accepted now counts.
    fn counted(&self) -> usage::Count {
        let sent = usage::Metric::MessagesSent(self.category);
        usage::Count::new(self.workspace_id, clock::now(), sent, 1).on(self.channel_id)
    }

    /// The event of message `id` reaching `status`.
    fn event(
        &self,
        id: Uuid,
        status: MessageStatus,
        platform_message_id: Option<&str>,
        error: Option<&serde_json::Value>,
    ) -> Option<Recorded> {
        let told = MessageTold {
            workspace_id: self.workspace_id,
            message_id: id,
            channel_id: self.channel_id,
            identity_id: self.identity_id,
            platform_message_id,
            error,
            operator: self.operator.as_ref(),
        };
        self.events.message(status, told)
    }
}

/// The live number a job sends from.
pub(super) struct LiveSend {
    pub(super) graph: GraphClient,
    pub(super) settings: ChannelSettings,
    pub(super) limits: Limits,
    pub(super) phone_number_id: String,
    pub(super) marketing: bool,
    pub(super) token: String,
    pub(super) me: ActorRef<ChannelMsg>,
}

/// What to do after a failed attempt.
enum Next {
    /// Try again after this long.
    Retry(Duration),
    /// Give up with this error.
    Stop(SendError),
}

impl SendJob {
    /// Records a refusal that came before any attempt (inactive channel, closed window).
    pub(super) async fn refuse(&self, error: SendError) -> Result<Accepted, SendError> {
        if !error.is_transient() {
            self.record_failure(&error).await;
        }
        Err(error)
    }

    /// A sandbox channel talks to no one: the message is delivered as soon as it is claimed.
    pub(super) async fn record_sandbox(&self) -> Result<Accepted, SendError> {
        self.claim().await?;
        let accepted = Accepted {
            platform_message_id: format!("sandbox.{}", Uuid::now_v7()),
            status: MessageStatus::Delivered,
        };
        self.record_success(&accepted).await;
        Ok(accepted)
    }

    /// Sends through Meta, retrying what Meta asks to retry.
    pub(super) async fn run(
        &self,
        live: &LiveSend,
        outgoing: Outgoing,
    ) -> Result<Accepted, SendError> {
        let body = outgoing.wire_body();
        let marketing = live.marketing && outgoing.is_template();
        let mut attempt = 0;
        loop {
            let waiting = std::time::Instant::now();
            live.limits.until_ready(&outgoing.to, self.lane).await;
            crate::measure::limiter_wait(waiting.elapsed());
            self.claim().await?;
            let outcome = live
                .graph
                .send(&live.token, &live.phone_number_id, &body, marketing)
                .await;
            match &outcome {
                Ok(_) => crate::measure::graph_sent(),
                Err(error) => crate::measure::graph_send_failed(error.code()),
            }
            let error = match outcome {
                Ok(wamid) => {
                    let accepted = Accepted {
                        platform_message_id: wamid,
                        status: MessageStatus::Sent,
                    };
                    self.record_success(&accepted).await;
                    return Ok(accepted);
                }
                Err(error) => error,
            };
            match next_step(live, &error, attempt, self.channel_retries) {
                Next::Retry(delay) => {
                    self.release().await?;
                    attempt += 1;
                    tracing::warn!(%error, attempt, ?delay, "send failed; retrying");
                    tokio::time::sleep(delay.min(MAX_RETRY_WAIT)).await;
                }
                Next::Stop(error) => {
                    if error.is_transient() && self.keep_when_unavailable {
                        // Meta kept failing: the message waits, pending, for a later try.
                        self.release().await?;
                    } else {
                        self.record_failure(&error).await;
                    }
                    return Err(error);
                }
            }
        }
    }

    async fn claim(&self) -> Result<(), SendError> {
        let Some(id) = self.message_id else {
            return Ok(());
        };
        let claim = deliveries::Claim {
            message_id: id,
            fence: self.placement.fence(self.told.channel_id),
        };
        let claimed = self.writer.write_merged(claim).await?;
        if claimed {
            Ok(())
        } else {
            Err(SendError::AlreadyTaken)
        }
    }

    async fn release(&self) -> Result<(), SendError> {
        if let Some(id) = self.message_id {
            deliveries::release(&self.db, id).await?;
        }
        Ok(())
    }

    async fn record_success(&self, accepted: &Accepted) {
        let Some(id) = self.message_id else {
            return;
        };
        let (status, wamid) = (accepted.status, accepted.platform_message_id.clone());
        // A message delivered at once (the sandbox's) was sent first, as a live one is: its
        // `message.sent` comes before its `message.delivered`.
        let told: Vec<Recorded> = if status == MessageStatus::Delivered {
            [MessageStatus::Sent, MessageStatus::Delivered]
                .into_iter()
                .filter_map(|s| self.told.event(id, s, Some(&wamid), None))
                .collect()
        } else {
            self.told
                .event(id, status, Some(&wamid), None)
                .into_iter()
                .collect()
        };
        // The answer, what it counts and its events are recorded with the others waiting.
        let told: Vec<_> = told.into_iter().map(Recorded::into_addressed).collect();
        let handover = Handover::of(&told);
        let accepted = deliveries::Accepted {
            message_id: id,
            status,
            platform_message_id: wamid,
            counted: Some(self.told.counted()),
            told,
        };
        let recorded = self.writer.write_merged(accepted).await;
        if recorded.is_ok() {
            self.told.events.committed(handover);
        }
        if let Err(error) = recorded {
            // Meta has it; left `sending`, it is failed `interrupted` at the next start-up
            // rather than sent twice.
            tracing::error!(message_id = %id, %error, "a sent message could not be recorded");
        }
    }

    async fn record_failure(&self, error: &SendError) {
        let Some(id) = self.message_id else {
            return;
        };
        let error = error.to_json();
        let event = self
            .told
            .event(id, MessageStatus::Failed, None, Some(&error));
        let recorded = self
            .told
            .events
            .write_with(&self.writer, event.into_iter().collect(), move |db| {
                let error = error.clone();
                Box::pin(async move {
                    deliveries::record_send(db, id, MessageStatus::Failed, None, Some(error)).await
                })
            })
            .await;
        if let Err(failure) = recorded {
            tracing::error!(message_id = %id, error = %failure, "a failed send could not be recorded");
        }
    }
}

/// How Meta's answer decides the next step: by the error's kind (its code and HTTP status
/// together), the same reading every sender makes. `channel_retries`: whether the channel
/// tries again itself (else one attempt, and the caller decides).
fn next_step(live: &LiveSend, error: &GraphError, attempt: u32, channel_retries: bool) -> Next {
    let settings = &live.settings;
    let backoff = settings
        .retry_backoff
        .saturating_mul(2u32.saturating_pow(attempt));
    let retry_after = match error.kind() {
        MetaErrorKind::Credentials => {
            let _ = live
                .me
                .send_message(ChannelMsg::CredentialsRejected(error.to_string()));
            return Next::Stop(SendError::CredentialsInvalid(error.to_string()));
        }
        MetaErrorKind::Window => return Next::Stop(SendError::WindowClosed),
        MetaErrorKind::Recipient | MetaErrorKind::Permanent => {
            return Next::Stop(SendError::Refused(error.clone().into_meta()));
        }
        // Pair limit: wait out the recipient's spacing; others are unaffected.
        MetaErrorKind::Throttled if error.code() == Some(PAIR_RATE_LIMIT) => settings.pair_period,
        // Throughput exceeded: Meta counts per second, so the whole number waits at least that
        // long, every sender alike.
        MetaErrorKind::Throttled => {
            let wait = backoff.max(Duration::from_secs(1));
            live.limits.slow_down(wait.min(MAX_RETRY_WAIT));
            wait
        }
        MetaErrorKind::Transient => backoff,
    };
    if !channel_retries || attempt >= settings.max_retries {
        return Next::Stop(match error {
            GraphError::Api(meta) => SendError::Refused(meta.clone()),
            other => SendError::Unavailable(other.to_string()),
        });
    }
    Next::Retry(retry_after)
}
