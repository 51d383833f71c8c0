//! One recipient's send: whom it reaches (or why it is skipped), the template filled for them
//! and sent through the Outbox, and what Meta's answer means for the recipient (sent, retried
//! after `retryDelayMs`, failed, skipped) and for the flow (a fatal channel problem ends it).

use parley_persistence::entities::{channel, flow, flow_recipient};
use parley_persistence::flows::{self, SendOutcome};
use parley_persistence::{
    DatabaseConnection, FailureReason, PersistenceError, RecipientStatus, SkipReason, clock,
    conversations,
};
use serde_json::Value;
use uuid::Uuid;

use super::FlowConfig;
use super::handle::Flows;
use super::params::{self, Filling, Needed};
use super::person::Reach;
use super::recover::{attempt_message_id, before_retry};
use crate::channel::SendError;
use crate::outbound::{OutboundError, Outbox};
use crate::thread::{Found, Thread};
use crate::whatsapp::error::{INVALID_TOKEN, OUTSIDE_WINDOW, STOPPED_MARKETING};
use crate::whatsapp::status::StatusReport;
use crate::whatsapp::{MetaError, TemplateRef};

/// Why a flow ends in `error` at once.
#[derive(Debug)]
pub(super) struct Fatal(pub(super) String);

/// The campaign's template, found once per run.
pub(super) struct Prepared {
    pub(super) flow: flow::Model,
    pub(super) config: FlowConfig,
    pub(super) channel: channel::Model,
    pub(super) template: TemplateRef,
    /// Meta's definition (a sandbox channel keeps its own).
    pub(super) definition: Value,
    pub(super) needed: Vec<Needed>,
    pub(super) filling: Filling,
}

/// How one send went, for the runner.
pub(super) enum Sent {
    /// Recorded; go on.
    Recorded,
    /// The flow cannot go on.
    Fatal(Fatal),
}

/// What a flow's sends need; cheap to clone into each send's task.
#[derive(Clone)]
pub(super) struct Sender {
    pub(super) db: DatabaseConnection,
    pub(super) outbox: Outbox,
    /// Told when a send's late report moved its recipient.
    pub(super) flows: Flows,
}

/// Sends the template to one claimed recipient, whom it `reach`es (in the conversation
/// `found` on the flow's channel), and records how it went.
pub(super) async fn send_one(
    sender: &Sender,
    prepared: &Prepared,
    recipient: flow_recipient::Model,
    (reach, found): (Reach, Found),
) -> Result<Sent, PersistenceError> {
    let skip = |reason: SkipReason| SendOutcome::Final {
        status: RecipientStatus::Skipped,
        code: None,
        error: reason.as_str().to_owned(),
    };
    let (outcome, fatal) = match reach {
        Reach::Gone => (skip(SkipReason::IdentityDeleted), None),
        Reach::OptedOut => (skip(SkipReason::OptedOut), None),
        Reach::NoPhone => (skip(SkipReason::NoPhone), None),
        Reach::Person(phone, person) => {
            match params::fill(&prepared.needed, &prepared.filling, &person) {
                Err(parameter) => {
                    tracing::info!(flow_id = %prepared.flow.id, identity_id = %recipient.identity_id, %parameter, "recipient skipped: a parameter has no value");
                    (skip(SkipReason::MissingParameter), None)
                }
                Ok(parameters) => {
                    let rendered = prepared.template.render(&prepared.definition, &parameters);
                    let thread = Thread {
                        workspace_id: prepared.flow.workspace_id,
                        identity_id: recipient.identity_id,
                        channel_id: prepared.channel.id,
                    };
                    // `attempts` is the row's count before this send's claim.
                    let attempt = recipient.attempts.saturating_add(1);
                    let id = attempt_message_id(recipient.id, attempt);
                    let sent = sender
                        .outbox
                        .send_rendered((thread, found), phone, rendered, Some(id))
                        .await;
                    match judge(sender, prepared, &recipient, sent).await? {
                        (retry @ SendOutcome::Retry { .. }, fatal) => {
                            (before_retry(&sender.db, id, retry).await?, fatal)
                        }
                        judged => judged,
                    }
                }
            }
        }
    };
    let state = match &outcome {
        SendOutcome::Accepted { status, .. } | SendOutcome::Final { status, .. } => status.as_str(),
        SendOutcome::Retry { .. } => "retrying",
    };
    record_outcome(sender, recipient.id, outcome).await?;
    crate::measure::flow_recipient(state);
    Ok(fatal.map_or(Sent::Recorded, Sent::Fatal))
}

/// Records how a recipient's send ended; one accepted is then brought to where its message
/// already is. Meta's reports can overtake the send's answer: a report that moved the message
/// (whose id is recorded before the answer returns) while the recipient did not hold that id
/// yet found no recipient. Each side writes first and reads the other after, so one of them
/// sees the other: the report finds the recipient, or this read finds the report.
pub(super) async fn record_outcome(
    sender: &Sender,
    recipient_id: Uuid,
    outcome: SendOutcome,
) -> Result<(), PersistenceError> {
    let accepted = match &outcome {
        SendOutcome::Accepted {
            message_id,
            platform_message_id,
            status,
        } => Some((*message_id, platform_message_id.clone(), *status)),
        SendOutcome::Retry { .. } | SendOutcome::Final { .. } => None,
    };
    let recorded = flows::Recorded {
        id: recipient_id,
        outcome,
        now: clock::now(),
    };
    sender.flows.writer().write_merged(recorded).await?;
    let Some((message_id, wamid, recorded)) = accepted else {
        return Ok(());
    };
    let Some(message) = conversations::find_message(&sender.db, message_id).await? else {
        return Ok(());
    };
    // Where the recipient already is (a sandbox answers `delivered`), there is nothing to move.
    if RecipientStatus::of_delivery(message.status).is_none_or(|status| status == recorded) {
        return Ok(());
    }
    let report = StatusReport {
        wamid,
        status: message.status,
        error: message
            .error
            .and_then(|e| serde_json::from_value::<MetaError>(e).ok()),
    };
    super::reach_recipient(&sender.flows, &report).await
}

/// What a send's answer means for the recipient and the flow, by the kind of Meta's error.
async fn judge(
    sender: &Sender,
    prepared: &Prepared,
    recipient: &flow_recipient::Model,
    sent: Result<crate::outbound::Sent, OutboundError>,
) -> Result<(SendOutcome, Option<Fatal>), PersistenceError> {
    let error = match sent {
        Ok(sent) => {
            let status = RecipientStatus::of_delivery(sent.status).unwrap_or(RecipientStatus::Sent);
            let accepted = SendOutcome::Accepted {
                message_id: sent.message_id,
                platform_message_id: sent.platform_message_id,
                status,
            };
            return Ok((accepted, None));
        }
        Err(error) => error,
    };
    let verdict = Verdict::new(prepared, recipient);
    Ok(match error {
        OutboundError::NotSent { error, .. } => {
            if let SendError::Refused(meta) = &error
                && meta.code == Some(STOPPED_MARKETING)
            {
                let (ws, events) = (prepared.flow.workspace_id, sender.outbox.events());
                let (identity_id, why) = (recipient.identity_id, "stopped_marketing");
                crate::people::opt_out(&sender.db, events, ws, identity_id, why).await?;
            }
            judge_not_sent(&verdict, error)
        }
        // A flow sends templates, which the window does not hold back.
        error @ OutboundError::OutsideWindow => (
            verdict.failed(Some(OUTSIDE_WINDOW), error.to_string()),
            None,
        ),
        error @ OutboundError::ParameterCount(_) => (
            verdict.failed(None, error.to_string()),
            Some(Fatal(format!(
                "the campaign's template does not take its parameters: {error}"
            ))),
        ),
        OutboundError::TemplateNotFound | OutboundError::TemplateShape => (
            verdict.failed(None, FailureReason::TemplateNotFound.as_str().to_owned()),
            Some(Fatal(
                "the campaign's template does not exist at Meta".to_owned(),
            )),
        ),
        OutboundError::Storage(detail) => (verdict.wait_for_database(&detail), None),
        // The runner checks the quota before each claim; a send that raced past it waits
        // and is tried again (the runner pauses the flow meanwhile).
        error @ OutboundError::QuotaExceeded(_) => {
            (verdict.retry_or_fail(None, error.to_string()), None)
        }
        error @ (OutboundError::Templates(_)
        | OutboundError::NoPhone
        | OutboundError::Unavailable(_)
        | OutboundError::TimedOut) => (verdict.retry_or_fail(None, error.to_string()), None),
        error @ OutboundError::ChannelInactive => (
            verdict.failed(None, error.to_string()),
            Some(Fatal(error.to_string())),
        ),
    })
}

/// What a send the channel did not make means for the recipient and the flow.
fn judge_not_sent(verdict: &Verdict, error: SendError) -> (SendOutcome, Option<Fatal>) {
    match error {
        SendError::Refused(meta) => {
            let outcome = if meta.kind().is_retryable() {
                verdict.retry_or_fail(meta.code, meta.message)
            } else {
                verdict.failed(meta.code, meta.message)
            };
            (outcome, None)
        }
        SendError::WindowClosed => (
            verdict.failed(Some(OUTSIDE_WINDOW), error.to_string()),
            None,
        ),
        SendError::CredentialsInvalid(message) => (
            verdict.failed(Some(INVALID_TOKEN), message.clone()),
            Some(Fatal(format!(
                "the channel's credentials are invalid (190): {message}"
            ))),
        ),
        SendError::Inactive | SendError::UnknownChannel => (
            verdict.failed(None, error.to_string()),
            Some(Fatal(error.to_string())),
        ),
        SendError::Unavailable(message) => (verdict.retry_or_fail(None, message), None),
        SendError::Storage(detail) => (verdict.wait_for_database(&detail), None),
        SendError::NotOwner => (verdict.retry_or_fail(None, error.to_string()), None),
        SendError::AlreadyTaken => (verdict.failed(None, error.to_string()), None),
    }
}

/// What a recipient's record says of a send the database failed (never the database's own
/// words, which can name its internals).
const DATABASE_UNAVAILABLE: &str = "the database was unavailable; tried again";

/// A failed send's two possible ends for its recipient.
struct Verdict {
    /// Whether the flow's `maxRetries` leave room for another attempt.
    may_retry: bool,
    /// When that attempt would be, `retryDelayMs` from now.
    retry_at: chrono::DateTime<chrono::Utc>,
}

impl Verdict {
    fn new(prepared: &Prepared, recipient: &flow_recipient::Model) -> Self {
        let config = prepared.config;
        let delay = i64::try_from(config.retry_delay_ms).unwrap_or(i64::MAX);
        Self {
            // `attempts` is the row's count before this send's claim: this was attempt
            // `attempts + 1` of at most `1 + maxRetries`.
            may_retry: u32::try_from(recipient.attempts).unwrap_or(0) < config.max_retries,
            retry_at: clock::now() + chrono::Duration::milliseconds(delay),
        }
    }

    /// Another attempt after `retryDelayMs` while the retries last, else failed.
    fn retry_or_fail(&self, code: Option<i64>, error: String) -> SendOutcome {
        if self.may_retry {
            SendOutcome::Retry {
                code,
                error,
                at: self.retry_at,
            }
        } else {
            self.failed(code, error)
        }
    }

    /// Another attempt after `retryDelayMs` whatever the retries left: the database failed,
    /// not the send, and a recipient waits for it like any other write (an outage of seconds
    /// fails no one for good). The recipient's record says only that; the log says why.
    fn wait_for_database(&self, detail: &str) -> SendOutcome {
        tracing::warn!(%detail, "a flow's send waits for the database");
        SendOutcome::Retry {
            code: None,
            error: DATABASE_UNAVAILABLE.to_owned(),
            at: self.retry_at,
        }
    }

    /// Failed for good.
    fn failed(&self, code: Option<i64>, error: String) -> SendOutcome {
        SendOutcome::Final {
            status: RecipientStatus::Failed,
            code,
            error,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use parley_persistence::{FlowStatus, ParamsStrategy};

    use super::*;
    use crate::tree::{Slot, SupervisorKind};

    /// A flow's sends on `deps`'s database, through handles that reach no live supervisor
    /// (the test calls the send path directly).
    fn sender(deps: &crate::RuntimeDeps) -> Sender {
        let db = deps.conversations.db.clone();
        let channels = crate::channel::Channels::new(
            Slot::new(SupervisorKind::Channels),
            crate::cluster::Placement::single(),
        );
        let outbox = Outbox::new(
            db.clone(),
            deps.conversations.writer.clone(),
            channels,
            crate::changes::Announcer::default(),
            deps.conversations.settings.idle_after,
            deps.conversations.events.clone(),
            deps.conversations.quotas.clone(),
        );
        let flows = Flows::new(
            Slot::new(SupervisorKind::Flows),
            db.clone(),
            deps.conversations.writer.clone(),
            crate::cluster::Placement::single(),
            deps.conversations.events.clone(),
        );
        Sender { db, outbox, flows }
    }

    /// A running flow of `people` on the channel, each claimed for a send.
    async fn claimed_flow(
        db: &parley_persistence::DatabaseConnection,
        ws: i64,
        channel_id: Uuid,
        people: &[Uuid],
    ) -> (flow::Model, Vec<flow_recipient::Model>) {
        let (flow, due) = running_flow(db, ws, channel_id, people).await;
        for recipient in &due {
            assert!(
                flows::claim(db, recipient.id, clock::now(), None)
                    .await
                    .expect("claim")
            );
        }
        (flow, due)
    }

    /// A running flow of `people` on the channel, and its recipients, due.
    async fn running_flow(
        db: &parley_persistence::DatabaseConnection,
        ws: i64,
        channel_id: Uuid,
        people: &[Uuid],
    ) -> (flow::Model, Vec<flow_recipient::Model>) {
        use parley_persistence::CampaignStatus;
        use parley_persistence::campaigns::{self, CampaignFields};
        use parley_persistence::flows::{NewFlow, NewRecipient};

        let now = clock::now();
        let fields = CampaignFields {
            name: "c".into(),
            description: None,
            status: CampaignStatus::Active,
            template_name: "order_update".into(),
            template_language: "en_US".into(),
            params_strategy: ParamsStrategy::UseDefault,
            template_parameters: serde_json::json!({}),
        };
        let campaign = campaigns::create(db, ws, channel_id, fields, now)
            .await
            .expect("campaign");
        let new_flow = NewFlow {
            workspace_id: ws,
            campaign_id: campaign.id,
            channel_id,
            description: None,
            status: FlowStatus::Running,
            configuration: serde_json::json!({}),
        };
        let recipients = people
            .iter()
            .enumerate()
            .map(|(i, &identity_id)| NewRecipient {
                identity_id,
                contact: format!("p{i}"),
            })
            .collect();
        let flow = flows::create(db, new_flow, recipients, now)
            .await
            .expect("flow");
        let due = flows::due_recipients(db, flow.id, now, 10)
            .await
            .expect("due");
        (flow, due)
    }

    /// The claims of two flows' runners waiting in one batch of the writer: each takes its own
    /// recipients, a recipient asked for twice goes to the first claim, and one taken already
    /// goes to none.
    #[tokio::test]
    async fn claims_of_flows_together_each_take_their_own_once() {
        use parley_persistence::{DatabaseExecutor, Merged};

        let (deps, _dir, _model) = crate::test_support::runtime_deps().await;
        let db = &deps.conversations.db;
        let (ws, channel_id, a, b) = crate::test_support::world(db).await;
        let (_, first) = running_flow(db, ws, channel_id, &[a, b]).await;
        let (_, second) = running_flow(db, ws, channel_id, &[a]).await;
        let executor = DatabaseExecutor::Connection(db);
        let claim = |ids: Vec<Uuid>| flows::Claimed {
            ids,
            fence: None,
            now: clock::now(),
        };
        let (one, two) = (
            claim(vec![first[0].id, first[1].id]),
            claim(vec![second[0].id, first[0].id]),
        );
        let taken = flows::Claimed::run_all(&executor, vec![&one, &two])
            .await
            .expect("claims");
        assert_eq!(
            taken,
            vec![vec![first[0].id, first[1].id], vec![second[0].id]]
        );
        let again = flows::Claimed::run_all(&executor, vec![&one])
            .await
            .expect("claims");
        assert_eq!(again, vec![Vec::<Uuid>::new()]);
    }

    /// The window the reports' retry cannot see: Meta's report arrives once the message holds
    /// its id but before the recipient does. It moves the message and finds no recipient; the
    /// recipient must still end where the message is.
    #[tokio::test]
    async fn a_report_between_the_messages_id_and_the_recipients_reaches_the_recipient() {
        use parley_persistence::MessageStatus;

        let (deps, _dir, _model) = crate::test_support::runtime_deps().await;
        let sender = sender(&deps);
        let db = &sender.db;
        let (ws, channel_id, identity_id, _) = crate::test_support::world(db).await;
        let (flow, mut claimed) = claimed_flow(db, ws, channel_id, &[identity_id]).await;
        let recipient = claimed.remove(0);
        let message_id =
            crate::test_support::sent_message(db, ws, channel_id, identity_id, "wamid.1").await;

        let read = StatusReport {
            wamid: "wamid.1".into(),
            status: MessageStatus::Read,
            error: None,
        };
        let reports = crate::outbound::Reports::start(
            db.clone(),
            deps.conversations.writer.clone(),
            Arc::new(sender.flows.clone()),
            crate::events::Events::default(),
            crate::changes::Announcer::default(),
        );
        let channel = crate::outbound::ReportChannel {
            workspace_id: ws,
            channel_id,
        };
        assert!(reports.apply(channel, &read).await.expect("report"));
        let status = || async {
            flows::recipients(db, flow.id, None, 10)
                .await
                .expect("recipients")
                .items[0]
                .status
        };
        assert_eq!(status().await, RecipientStatus::Sending);

        let accepted = SendOutcome::Accepted {
            message_id,
            platform_message_id: "wamid.1".into(),
            status: RecipientStatus::Sent,
        };
        record_outcome(&sender, recipient.id, accepted)
            .await
            .expect("recorded");
        assert_eq!(status().await, RecipientStatus::Read);
    }

    /// Outcomes recorded and reports applied together (one batch of the writer each) leave every
    /// recipient where its own outcome and report say: each accepted send with its own message
    /// and id, a retry pending, a report moving only its own recipient, once, and never back.
    #[tokio::test]
    async fn recipients_recorded_and_reached_together_each_end_where_their_own_say() {
        use parley_persistence::{DatabaseExecutor, Merged};

        let (deps, _dir, _model) = crate::test_support::runtime_deps().await;
        let db = &deps.conversations.db;
        let (ws, channel_id, a, b) = crate::test_support::world(db).await;
        let (flow, claimed) = claimed_flow(db, ws, channel_id, &[a, b]).await;
        let (ra, rb) = (&claimed[0], &claimed[1]);
        let message_a = crate::test_support::sent_message(db, ws, channel_id, a, "wamid.A").await;
        let message_b = crate::test_support::sent_message(db, ws, channel_id, b, "wamid.B").await;
        let executor = DatabaseExecutor::Connection(db);
        let now = clock::now();
        let recorded = |id, outcome| flows::Recorded { id, outcome, now };
        let accepted = |message_id, wamid: &str, status| SendOutcome::Accepted {
            message_id,
            platform_message_id: wamid.to_owned(),
            status,
        };
        let at = now + chrono::Duration::seconds(30);
        let (sent, retry) = (
            recorded(ra.id, accepted(message_a, "wamid.A", RecipientStatus::Sent)),
            recorded(
                rb.id,
                SendOutcome::Retry {
                    code: Some(131_000),
                    error: "busy".into(),
                    at,
                },
            ),
        );
        flows::Recorded::run_all(&executor, vec![&sent, &retry])
            .await
            .expect("recorded");
        let rows = || async {
            let mut rows = flows::recipients(db, flow.id, None, 10)
                .await
                .expect("recipients")
                .items;
            rows.sort_by_key(|row| row.identity_id != a);
            rows
        };
        let now_rows = rows().await;
        assert_eq!(
            (
                now_rows[0].status,
                now_rows[0].message_id,
                now_rows[0].platform_message_id.as_deref()
            ),
            (RecipientStatus::Sent, Some(message_a), Some("wamid.A"))
        );
        assert_eq!(
            (
                now_rows[1].status,
                now_rows[1].error_code,
                now_rows[1].next_attempt_at
            ),
            (RecipientStatus::Pending, Some(131_000), Some(at))
        );
        // The retry went out, recorded with another send of the same status: one statement
        // for both, each recipient with its own message and id.
        let (sent_b, sent_a) = (
            recorded(rb.id, accepted(message_b, "wamid.B", RecipientStatus::Sent)),
            recorded(ra.id, accepted(message_a, "wamid.A", RecipientStatus::Sent)),
        );
        flows::Recorded::run_all(&executor, vec![&sent_b, &sent_a])
            .await
            .expect("recorded");
        let now_rows = rows().await;
        assert_eq!(
            (
                now_rows[1].status,
                now_rows[1].message_id,
                now_rows[1].platform_message_id.as_deref()
            ),
            (RecipientStatus::Sent, Some(message_b), Some("wamid.B"))
        );
        assert_eq!(now_rows[0].message_id, Some(message_a));

        let report = |wamid: &str, status, error| flows::Reached {
            platform_message_id: wamid.to_owned(),
            status,
            error,
            now,
        };
        let failure = Some((Some(131_026), "undeliverable".to_owned()));
        let (read_a, behind_a, failed_b, unknown) = (
            report("wamid.A", RecipientStatus::Read, None),
            report("wamid.A", RecipientStatus::Delivered, None),
            report("wamid.B", RecipientStatus::Failed, failure),
            report("wamid.none", RecipientStatus::Read, None),
        );
        let batch = vec![&read_a, &behind_a, &failed_b, &read_a, &unknown];
        let moved = flows::Reached::run_all(&executor, batch)
            .await
            .expect("reached");
        let (to_a, to_b) = (Some((flow.id, a)), Some((flow.id, b)));
        assert_eq!(moved, vec![to_a, None, to_b, None, None]);
        let now_rows = rows().await;
        assert_eq!(now_rows[0].status, RecipientStatus::Read);
        assert_eq!(
            (
                now_rows[1].status,
                now_rows[1].error_code,
                now_rows[1].error.as_deref()
            ),
            (
                RecipientStatus::Failed,
                Some(131_026),
                Some("undeliverable")
            )
        );
    }
}
