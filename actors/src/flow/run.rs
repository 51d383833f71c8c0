//! The work of one flow, in a task its FlowActor owns: recipients in order, at most
//! `maxConcurrentMessages` in flight, paced, each claimed (`sending`) in the database before its
//! send; retries after `retryDelayMs`; then the wait for delivery reports and the end state.
//! Everything it knows is in the database, so a new runner continues where an old one stopped.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use parley_persistence::entities::{campaign, channel, flow, flow_recipient};
use parley_persistence::flows::{self, SendOutcome, Statistics};
use parley_persistence::identities::{self, EMAIL, PHONE};
use parley_persistence::{
    FlowStatus, ParamsStrategy, PersistenceError, RecipientStatus, campaigns, channels, clock,
    conversations, memory,
};
use serde_json::Value;
use tokio::sync::{Notify, watch};
use tokio::task::JoinSet;
use uuid::Uuid;

use super::params::{self, Filling, Needed, Person};
use super::{FlowConfig, STOPPED_MARKETING};
use crate::channel::SendError;
use crate::conversation::thread::Thread;
use crate::domain::Phone;
use crate::outbound::{OutboundError, Outbox, RenderedTemplate, TemplateParameters, TemplateRef};
use crate::runtime::Handles;
use crate::whatsapp::GraphError;
use crate::whatsapp::status::StatusReport;

/// Recipients read per query.
const BATCH: u64 = 50;
/// Longest sleep between two looks at a flow that waits (for retries or delivery reports).
const LOOK_AGAIN: Duration = Duration::from_secs(1);

/// Why a flow ends in `error` at once.
#[derive(Debug)]
struct Fatal(String);

/// What a runner needs.
pub(super) struct Runner {
    pub(super) flow_id: Uuid,
    pub(super) handles: Arc<Handles>,
    /// The flow's status as its actor last heard it.
    pub(super) control: watch::Receiver<FlowStatus>,
    /// Woken when a delivery report moved one of the flow's recipients.
    pub(super) reports: Arc<Notify>,
}

/// The campaign's template, found once per run.
struct Prepared {
    flow: flow::Model,
    config: FlowConfig,
    channel: channel::Model,
    template: TemplateRef,
    /// Meta's definition (a sandbox channel keeps its own).
    definition: Value,
    needed: Vec<Needed>,
    filling: Filling,
}

/// How one send went, for the runner.
enum Sent {
    /// Recorded; go on.
    Recorded,
    /// The flow cannot go on.
    Fatal(Fatal),
}

impl Runner {
    /// Runs the flow until it ends or is cancelled; errors are the database's.
    pub(super) async fn run(mut self) -> Result<(), PersistenceError> {
        let Some(prepared) = self.prepare().await? else {
            return Ok(());
        };
        let prepared = Arc::new(prepared);
        let mut in_flight: JoinSet<Result<Sent, PersistenceError>> = JoinSet::new();
        loop {
            if !self.until_running().await? {
                return drain(in_flight).await;
            }
            let due =
                flows::due_recipients(&self.handles.db, self.flow_id, clock::now(), BATCH).await?;
            if due.is_empty() {
                if let Some(done) = in_flight.join_next().await {
                    if let Sent::Fatal(fatal) = joined(done)? {
                        drain(in_flight).await?;
                        return self.end(FlowStatus::Error, Some(fatal.0)).await;
                    }
                    continue;
                }
                if let Some(at) = flows::next_retry_at(&self.handles.db, self.flow_id).await? {
                    let wait = (at - Utc::now()).to_std().unwrap_or_default();
                    self.sleep(wait.min(LOOK_AGAIN)).await;
                    continue;
                }
                return self.await_reports(&prepared).await;
            }
            for recipient in due {
                while in_flight.len() >= prepared.config.max_concurrent {
                    if let Some(done) = in_flight.join_next().await
                        && let Sent::Fatal(fatal) = joined(done)?
                    {
                        drain(in_flight).await?;
                        return self.end(FlowStatus::Error, Some(fatal.0)).await;
                    }
                }
                if !self.until_running().await? {
                    return drain(in_flight).await;
                }
                let now = clock::now();
                if !flows::claim(&self.handles.db, recipient.id, now).await? {
                    continue;
                }
                let handles = self.handles.clone();
                let shared = prepared.clone();
                in_flight.spawn(async move { send_one(&handles, &shared, recipient).await });
                self.sleep(prepared.config.pause()).await;
            }
        }
    }

    /// Reads the flow, its campaign and its template; `None` when the flow ended instead
    /// (gone, cancelled, or its template cannot be had).
    async fn prepare(&mut self) -> Result<Option<Prepared>, PersistenceError> {
        let handles = self.handles.clone();
        let db = &handles.db;
        loop {
            let Some(flow) = flows::find_any(db, self.flow_id).await? else {
                return Ok(None);
            };
            let config = FlowConfig::from_stored(&flow.configuration);
            let campaign = campaigns::find_any(db, flow.campaign_id).await?;
            let channel = channels::find_any(db, flow.channel_id).await?;
            let (Some(campaign), Some(channel)) = (campaign, channel) else {
                self.end(
                    FlowStatus::Error,
                    Some("the campaign or the channel was deleted".into()),
                )
                .await?;
                return Ok(None);
            };
            if !self.until_running().await? {
                return Ok(None);
            }
            match template_of(&self.handles, &campaign, &channel).await {
                Ok((template, definition)) => {
                    let needed = params::needed(&definition);
                    let filling = filling_of(&campaign);
                    return Ok(Some(Prepared {
                        flow,
                        config,
                        channel,
                        template,
                        definition,
                        needed,
                        filling,
                    }));
                }
                Err(TemplateProblem::Fatal(reason)) => {
                    self.end(FlowStatus::Error, Some(reason)).await?;
                    return Ok(None);
                }
                Err(TemplateProblem::Transient(error)) => {
                    tracing::warn!(flow_id = %self.flow_id, %error, "the campaign's template could not be read; trying again");
                    self.sleep(Duration::from_millis(config.retry_delay_ms).max(LOOK_AGAIN))
                        .await;
                }
            }
        }
    }

    /// Waits while the flow is paused and starts a queued one; `false` when it stopped being
    /// live (cancelled, or ended elsewhere).
    async fn until_running(&mut self) -> Result<bool, PersistenceError> {
        loop {
            let status = *self.control.borrow_and_update();
            match status {
                FlowStatus::Running => return Ok(true),
                FlowStatus::Queued => {
                    let db = &self.handles.db;
                    let now = clock::now();
                    if flows::transition(
                        db,
                        self.flow_id,
                        &[FlowStatus::Queued],
                        FlowStatus::Running,
                        now,
                    )
                    .await?
                    {
                        tracing::info!(flow_id = %self.flow_id, "flow started");
                        return Ok(true);
                    }
                    // Paused or cancelled meanwhile: the actor hears of it; look again.
                    let current = flows::find_any(db, self.flow_id).await?.map(|f| f.status);
                    match current {
                        Some(FlowStatus::Running) => return Ok(true),
                        Some(FlowStatus::Paused) => {
                            if self.control.changed().await.is_err() {
                                return Ok(false);
                            }
                        }
                        _ => return Ok(false),
                    }
                }
                FlowStatus::Paused => {
                    if self.control.changed().await.is_err() {
                        return Ok(false);
                    }
                }
                _ => return Ok(false),
            }
        }
    }

    /// Sleeps `wait`, waking early when the flow's status changes.
    async fn sleep(&mut self, wait: Duration) {
        if wait.is_zero() {
            return;
        }
        tokio::select! {
            () = tokio::time::sleep(wait) => {}
            _ = self.control.changed() => {}
        }
    }

    /// Every recipient has been tried: waits up to `timeoutMs` for the delivery reports of
    /// templates Meta accepted, then ends the flow as its recipients say.
    async fn await_reports(&mut self, prepared: &Prepared) -> Result<(), PersistenceError> {
        let db = &self.handles.db;
        let since = flows::mark_sends_done(db, self.flow_id, clock::now()).await?;
        let deadline = since
            + chrono::Duration::milliseconds(
                i64::try_from(prepared.config.timeout_ms).unwrap_or(i64::MAX),
            );
        loop {
            let stats = flows::statistics(db, self.flow_id).await?;
            let now = Utc::now();
            if stats.sent == 0 || now >= deadline {
                let (status, reason) = outcome(&stats);
                return self.end(status, reason).await;
            }
            let wait = (deadline - now)
                .to_std()
                .unwrap_or_default()
                .min(LOOK_AGAIN);
            tokio::select! {
                () = self.reports.notified() => {}
                () = tokio::time::sleep(wait) => {}
                changed = self.control.changed() => {
                    let live = changed.is_ok() && self.control.borrow().is_live();
                    if !live {
                        return Ok(());
                    }
                }
            }
        }
    }

    /// Ends the flow in `status` unless it was paused or cancelled meanwhile (then the user's
    /// move stands; a paused flow ends when resumed).
    async fn end(
        &mut self,
        status: FlowStatus,
        reason: Option<String>,
    ) -> Result<(), PersistenceError> {
        loop {
            if flows::finish(
                &self.handles.db,
                self.flow_id,
                status,
                reason.clone(),
                clock::now(),
            )
            .await?
            {
                tracing::info!(flow_id = %self.flow_id, status = status.as_str(), reason = reason.as_deref().unwrap_or(""), "flow ended");
                return Ok(());
            }
            let current = flows::find_any(&self.handles.db, self.flow_id)
                .await?
                .map(|f| f.status);
            match current {
                Some(FlowStatus::Paused | FlowStatus::Queued) => {
                    if !self.until_running().await? {
                        return Ok(());
                    }
                }
                _ => return Ok(()),
            }
        }
    }
}

/// The end state the recipients' counts call for (DESIGN §5 "Flows").
fn outcome(stats: &Statistics) -> (FlowStatus, Option<String>) {
    let confirmed = stats.delivered + stats.read;
    if stats.total > 0 && confirmed == stats.total {
        (FlowStatus::Completed, None)
    } else if confirmed > 0 {
        (FlowStatus::PartialCompleted, None)
    } else if stats.sent > 0 {
        (
            FlowStatus::Timeout,
            Some("no delivery was confirmed within timeoutMs".to_owned()),
        )
    } else {
        (
            FlowStatus::Failed,
            Some("no recipient received the template".to_owned()),
        )
    }
}

fn joined(
    done: Result<Result<Sent, PersistenceError>, tokio::task::JoinError>,
) -> Result<Sent, PersistenceError> {
    match done {
        Ok(outcome) => outcome,
        // A send task that panicked leaves its recipient `sending`: failed `interrupted` at
        // the actor's next start.
        Err(error) => {
            tracing::error!(%error, "a flow send task failed");
            Ok(Sent::Recorded)
        }
    }
}

/// Waits for the sends in flight (each records its own outcome).
async fn drain(
    mut in_flight: JoinSet<Result<Sent, PersistenceError>>,
) -> Result<(), PersistenceError> {
    while let Some(done) = in_flight.join_next().await {
        joined(done)?;
    }
    Ok(())
}

enum TemplateProblem {
    Fatal(String),
    Transient(String),
}

/// The campaign's template at Meta (none for a sandbox channel).
async fn template_of(
    handles: &Handles,
    campaign: &campaign::Model,
    channel: &channel::Model,
) -> Result<(TemplateRef, Value), TemplateProblem> {
    let template = TemplateRef {
        name_or_id: campaign.template_name.clone(),
        language: campaign.template_language.clone(),
        carousel: false,
    };
    let channels = handles
        .channels()
        .map_err(|e| TemplateProblem::Transient(e.to_string()))?;
    let listed = channels
        .list_templates(channel.id)
        .await
        .map_err(|error| match error {
            GraphError::Api { code: 190, .. } => TemplateProblem::Fatal(format!(
                "the channel's credentials are invalid (190): {error}"
            )),
            other => TemplateProblem::Transient(other.to_string()),
        })?;
    let definition = template.find(&listed).cloned().ok_or_else(|| {
        TemplateProblem::Fatal(format!(
            "template {} ({}) does not exist at Meta for this channel",
            campaign.template_name, campaign.template_language
        ))
    })?;
    Ok((template, definition))
}

fn filling_of(campaign: &campaign::Model) -> Filling {
    match campaign.params_strategy {
        ParamsStrategy::UseDefault => Filling::Defaults,
        ParamsStrategy::UseContactAssociation => {
            let expressions = campaign
                .template_parameters
                .as_object()
                .map(|raw| params::parse_all(raw).unwrap_or_default())
                .unwrap_or_default();
            Filling::PerPerson(expressions)
        }
    }
}

/// Sends the template to one claimed recipient and records how it went.
async fn send_one(
    handles: &Arc<Handles>,
    prepared: &Prepared,
    recipient: flow_recipient::Model,
) -> Result<Sent, PersistenceError> {
    let skip = |reason: &str| SendOutcome::Final {
        status: RecipientStatus::Skipped,
        code: None,
        error: reason.to_owned(),
    };
    let (outcome, fatal) = match person_of(handles, prepared, recipient.identity_id).await? {
        Reach::Gone => (skip("identity_deleted"), None),
        Reach::OptedOut => (skip("opted_out"), None),
        Reach::NoPhone => (skip("no_phone"), None),
        Reach::Person(phone, person) => {
            match params::fill(&prepared.needed, &prepared.filling, &person) {
                Err(parameter) => {
                    tracing::info!(flow_id = %prepared.flow.id, identity_id = %recipient.identity_id, %parameter, "recipient skipped: a parameter has no value");
                    (skip("missing_parameter"), None)
                }
                Ok(parameters) => {
                    let rendered = render(prepared, &parameters);
                    let thread = Thread {
                        workspace_id: prepared.flow.workspace_id,
                        identity_id: recipient.identity_id,
                        channel_id: prepared.channel.id,
                    };
                    let sent = Outbox::new(handles.clone())
                        .send_rendered(thread, phone, rendered)
                        .await;
                    judge(handles, prepared, &recipient, sent).await?
                }
            }
        }
    };
    let state = match &outcome {
        SendOutcome::Accepted { status, .. } | SendOutcome::Final { status, .. } => status.as_str(),
        SendOutcome::Retry { .. } => "retrying",
    };
    record_outcome(handles, recipient.id, outcome).await?;
    crate::measure::flow_recipient(state);
    Ok(fatal.map_or(Sent::Recorded, Sent::Fatal))
}

/// Records how a recipient's send ended; one accepted is then brought to where its message
/// already is. Meta's reports can overtake the send's answer: a report that moved the message
/// (whose id is recorded before the answer returns) while the recipient did not hold that id
/// yet found no recipient. Each side writes first and reads the other after, so one of them
/// sees the other: the report finds the recipient, or this read finds the report.
async fn record_outcome(
    handles: &Handles,
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
    flows::record(&handles.db, recipient_id, outcome, clock::now()).await?;
    let Some((message_id, wamid, recorded)) = accepted else {
        return Ok(());
    };
    let Some(message) = conversations::find_message(&handles.db, message_id).await? else {
        return Ok(());
    };
    // Where the recipient already is (a sandbox answers `delivered`), there is nothing to move.
    if RecipientStatus::of_delivery(message.status).is_none_or(|status| status == recorded) {
        return Ok(());
    }
    let report = StatusReport {
        wamid,
        status: message.status,
        error: message.error,
    };
    super::reach_recipient(handles, &report).await
}

fn render(prepared: &Prepared, parameters: &TemplateParameters) -> RenderedTemplate {
    prepared.template.render(&prepared.definition, parameters)
}

/// What a send's answer means for the recipient and the flow.
async fn judge(
    handles: &Handles,
    prepared: &Prepared,
    recipient: &flow_recipient::Model,
    sent: Result<crate::outbound::Sent, OutboundError>,
) -> Result<(SendOutcome, Option<Fatal>), PersistenceError> {
    let config = prepared.config;
    // `attempts` counts the claim of this send already.
    let may_retry = u32::try_from(recipient.attempts).unwrap_or(0) <= config.max_retries;
    let retry_at = clock::now()
        + chrono::Duration::milliseconds(i64::try_from(config.retry_delay_ms).unwrap_or(i64::MAX));
    let retry_or_fail = |code: Option<i64>, error: String| {
        if may_retry {
            SendOutcome::Retry {
                code,
                error,
                at: retry_at,
            }
        } else {
            SendOutcome::Final {
                status: RecipientStatus::Failed,
                code,
                error,
            }
        }
    };
    let failed = |code: Option<i64>, error: String| SendOutcome::Final {
        status: RecipientStatus::Failed,
        code,
        error,
    };
    Ok(match sent {
        Ok(sent) => (
            SendOutcome::Accepted {
                message_id: sent.message_id,
                platform_message_id: sent.platform_message_id,
                status: RecipientStatus::of_delivery(sent.status).unwrap_or(RecipientStatus::Sent),
            },
            None,
        ),
        Err(OutboundError::NotSent { error, .. }) => match error {
            SendError::Refused {
                code: code @ (130_429 | 131_056),
                message,
            } => (retry_or_fail(Some(code), message), None),
            SendError::Refused {
                code: STOPPED_MARKETING,
                message,
            } => {
                identities::opt_out(&handles.db, recipient.identity_id, clock::now()).await?;
                (failed(Some(STOPPED_MARKETING), message), None)
            }
            SendError::Refused { code, message } => (failed(Some(code), message), None),
            SendError::WindowClosed => (failed(Some(131_047), error.to_string()), None),
            SendError::CredentialsInvalid(message) => (
                failed(Some(190), message.clone()),
                Some(Fatal(format!(
                    "the channel's credentials are invalid (190): {message}"
                ))),
            ),
            SendError::Inactive | SendError::UnknownChannel => (
                failed(None, error.to_string()),
                Some(Fatal(error.to_string())),
            ),
            SendError::Unavailable(message) | SendError::Storage(message) => {
                (retry_or_fail(None, message), None)
            }
            SendError::AlreadyTaken => (failed(None, error.to_string()), None),
        },
        Err(OutboundError::TemplateNotFound | OutboundError::TemplateShape) => (
            failed(None, "template_not_found".to_owned()),
            Some(Fatal(
                "the campaign's template does not exist at Meta".to_owned(),
            )),
        ),
        Err(
            error @ (OutboundError::Templates(_)
            | OutboundError::Storage(_)
            | OutboundError::NoPhone
            | OutboundError::Unavailable(_)),
        ) => (retry_or_fail(None, error.to_string()), None),
    })
}

/// Whom a recipient reaches.
enum Reach {
    Gone,
    OptedOut,
    NoPhone,
    Person(Phone, Box<Person>),
}

/// The recipient's identity as the parameter expressions read it.
async fn person_of(
    handles: &Handles,
    prepared: &Prepared,
    identity_id: Uuid,
) -> Result<Reach, PersistenceError> {
    let workspace_id = prepared.flow.workspace_id;
    let db = &handles.db;
    let Some(identity) = identities::find(db, workspace_id, identity_id).await? else {
        return Ok(Reach::Gone);
    };
    if identity.opted_out {
        return Ok(Reach::OptedOut);
    }
    let contacts = identities::contacts_of(db, &[identity.id]).await?;
    let primary = |kind: &str| {
        contacts
            .iter()
            .filter(|c| c.kind == kind)
            .max_by_key(|c| c.is_primary)
            .map(|c| c.value.clone())
    };
    let Some(phone) = primary(PHONE).and_then(|p| Phone::try_from(p.as_str()).ok()) else {
        return Ok(Reach::NoPhone);
    };
    // Memory and the stage are read only when an expression reads them.
    let memory: HashMap<String, Value> = if prepared
        .filling
        .reads(|s| matches!(s, params::Source::Memory(_)))
    {
        memory::list(db, identity.id)
            .await?
            .into_iter()
            .map(|entry| (entry.key, entry.value))
            .collect()
    } else {
        HashMap::new()
    };
    let wants_stage = prepared
        .filling
        .reads(|s| matches!(s, params::Source::Stage));
    let stage = match identity.stage_id.filter(|_| wants_stage) {
        Some(stage_id) => identities::stages_by_id(db, &[stage_id])
            .await?
            .into_iter()
            .next()
            .map(|s| s.name),
        None => None,
    };
    let person = Person {
        name: identity.name,
        phone: Some(phone.as_str().to_owned()),
        email: primary(EMAIL),
        external_id: identity.external_id,
        metadata: identity.metadata,
        memory,
        stage,
    };
    Ok(Reach::Person(phone, Box::new(person)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stats(sent: u64, delivered: u64, read: u64, failed: u64, skipped: u64) -> Statistics {
        Statistics {
            total: sent + delivered + read + failed + skipped,
            sent,
            delivered,
            read,
            failed,
            skipped,
            ..Statistics::default()
        }
    }

    #[test]
    fn the_end_state_follows_the_recipients() {
        assert_eq!(outcome(&stats(0, 2, 1, 0, 0)).0, FlowStatus::Completed);
        assert_eq!(
            outcome(&stats(1, 2, 0, 0, 0)).0,
            FlowStatus::PartialCompleted
        );
        assert_eq!(
            outcome(&stats(0, 1, 0, 1, 1)).0,
            FlowStatus::PartialCompleted
        );
        assert_eq!(outcome(&stats(3, 0, 0, 1, 0)).0, FlowStatus::Timeout);
        assert_eq!(outcome(&stats(0, 0, 0, 2, 1)).0, FlowStatus::Failed);
    }

    /// The window the reports' retry cannot see: Meta's report arrives once the message holds
    /// its id but before the recipient does. It moves the message and finds no recipient; the
    /// recipient must still end where the message is.
    #[tokio::test]
    async fn a_report_between_the_messages_id_and_the_recipients_reaches_the_recipient() {
        use parley_persistence::campaigns::{self, CampaignFields};
        use parley_persistence::conversations::NewMessage;
        use parley_persistence::flows::{NewFlow, NewRecipient};
        use parley_persistence::{CampaignStatus, MessageStatus, deliveries};

        let (deps, _dir, _model) = crate::test_support::runtime_deps().await;
        let handles = Arc::new(Handles::new(&deps));
        let db = &handles.db;
        let now = clock::now();
        let (ws, channel_id, identity_id, _) = crate::test_support::world(db).await;
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
        let recipient = NewRecipient {
            identity_id,
            contact: "p0".into(),
        };
        let flow = flows::create(db, new_flow, vec![recipient], now)
            .await
            .expect("flow");
        let recipient = flows::due_recipients(db, flow.id, now, 1)
            .await
            .expect("due")
            .remove(0);
        assert!(flows::claim(db, recipient.id, now).await.expect("claim"));
        let conversation = conversations::start(db, ws, identity_id, channel_id, None, now)
            .await
            .expect("conversation")
            .conversation();
        let message = NewMessage::to_person("Hi".into(), MessageStatus::Pending);
        let message = conversations::append_message(db, &conversation, message, now)
            .await
            .expect("message");
        deliveries::record_send(db, message.id, MessageStatus::Sent, Some("wamid.1"), None)
            .await
            .expect("send recorded");

        let read = StatusReport {
            wamid: "wamid.1".into(),
            status: MessageStatus::Read,
            error: None,
        };
        assert!(
            super::super::apply_report(&handles, channel_id, &read)
                .await
                .expect("report")
        );
        let status = || async {
            flows::recipients(db, flow.id, None, 10)
                .await
                .expect("recipients")
                .items[0]
                .status
        };
        assert_eq!(status().await, RecipientStatus::Sending);

        let accepted = SendOutcome::Accepted {
            message_id: message.id,
            platform_message_id: "wamid.1".into(),
            status: RecipientStatus::Sent,
        };
        record_outcome(&handles, recipient.id, accepted)
            .await
            .expect("recorded");
        assert_eq!(status().await, RecipientStatus::Read);
    }
}
