//! One turn of a conversation: store the person's message(s) in the current conversation,
//! build the prompt (rendered instructions, whole-turn history), run the model with the
//! built-in tools in a bounded loop, store and answer the reply.

pub(super) mod place;
mod prompt;
mod reply;
mod tool_round;
mod toolbox;
mod understand;

use parley_persistence::entities::{conversation, stage};
use parley_persistence::{ConversationMode, clock};
use tokio::sync::mpsc;
use tracing::Instrument;

use self::place::{Found, Place, find_thread, remember_stored, store_inbound};
use self::prompt::prompt;
use self::reply::ReplyPlan;
use self::tool_round::{Ran, ToolRound};
use self::toolbox::Toolbox;
use super::context::Context;
use super::route::Routed;
use super::{ConversationDeps, ToolCallRecord, TurnError, TurnEvent, TurnOutcome, TurnRequest};
use crate::llm::{
    ChatMessage, ChatRequest, Completion, LlmError, RequestSent, TokenSink, ToolSpec, Usage,
};
use crate::mcp::CallContext;
use crate::outbound::Parcel;
use crate::quotas::QuotaError;

/// How long after a streamed turn's request has gone to the model the person's messages are
/// stored. The request's trip to the model is the first token's; a commit started at once
/// (and, on PostgreSQL, its server process) took the cores it needed on a 2-core machine. A
/// streamed model takes far longer than this to its first token, so the store still ends
/// long before the reply's. A synchronous chat turn stores at once: its model may answer
/// within the delay, and the turn waits for both.
const STREAMED_STORE_AFTER: std::time::Duration = std::time::Duration::from_millis(2);

/// Runs one turn for `batch` (one message, or a debounced burst on one channel).
pub(crate) async fn run(
    deps: &ConversationDeps,
    context: &mut Context,
    stages: &[stage::Model],
    routed: &Routed,
    batch: &[TurnRequest],
) -> Result<TurnOutcome, TurnError> {
    let found = match find_thread(deps, &mut *context, routed, batch).await? {
        Place::Found(found) => *found,
        Place::Answered(answered) => return Ok(*answered),
    };
    if found.conversation.mode == ConversationMode::Human {
        return hold(deps, context, routed, &found, batch).await;
    }
    if let Err(error) = deps.quotas.tokens(found.conversation.workspace_id).await {
        return over_quota(deps, context, routed, &found, batch, error).await;
    }
    let early = understand::store_first(deps, routed, &found, batch).await?;
    let understood = early.as_ref().map(|(_, understood)| understood);
    let messages = prompt(
        deps,
        &mut *context,
        stages,
        routed,
        &found,
        batch,
        understood,
    )
    .await?;
    let context_of_call = CallContext {
        workspace_id: context.identity.workspace_id,
        assistant_id: Some(routed.assistant.id),
        identity_id: Some(context.identity.id),
        conversation_id: Some(found.conversation.id),
    };
    let toolbox = Toolbox::assemble(&deps.mcp, routed, stages, context_of_call)
        .instrument(tracing::debug_span!("toolbox"))
        .await;
    let streams: Vec<mpsc::Sender<TurnEvent>> =
        batch.iter().filter_map(|r| r.events().cloned()).collect();
    let turn = Turn {
        deps,
        routed,
        toolbox: &toolbox,
        streams: &streams,
    };

    // The person's messages are stored while the model reads them (the prompt does not need
    // their rows): a turn does not wait for a commit before its first token. The store starts
    // once the model's request has gone, so that on a busy machine it does not hold the request
    // up; in a streamed turn, a moment after ([`STREAMED_STORE_AFTER`]). Both finish before
    // anything else happens, so a reply is never stored before what it answers, and a model
    // that fails leaves the person's messages stored.
    let first_request = turn.request(0, &messages);
    let (sent, request_gone) = RequestSent::channel();
    let (stored, first) = tokio::join!(
        async {
            if let Some((stored, _)) = early {
                return Ok(stored);
            }
            let _ = request_gone.await;
            if !streams.is_empty() {
                tokio::time::sleep(STREAMED_STORE_AFTER).await;
            }
            store_inbound(deps, &found, batch).await
        },
        call_model(deps, turn.workspace_id(), &first_request, &streams, sent),
    );
    let new_ids = remember_stored(context, routed, &found, stored?);
    let plan = ReplyPlan::new(batch, new_ids.last().copied(), context.identity.id);
    let answer = Answer {
        context,
        stages,
        conversation: &found.conversation,
        plan: &plan,
        messages,
    };
    turn.answer(answer, first).await
}

/// A person has the conversation: the WhatsApp messages of the batch are stored for them and
/// nothing is answered; an API caller's or a follow-up's turn is refused.
async fn hold(
    deps: &ConversationDeps,
    context: &mut Context,
    routed: &Routed,
    found: &Found,
    batch: &[TurnRequest],
) -> Result<TurnOutcome, TurnError> {
    let kept: Vec<TurnRequest> = batch
        .iter()
        .filter(|r| r.wamid().is_some())
        .cloned()
        .collect();
    if !kept.is_empty() {
        let stored = store_inbound(deps, found, &kept).await?;
        remember_stored(context, routed, found, stored);
    }
    Err(TurnError::HumanMode)
}

/// The workspace's token quota is used up: no model is called. A person's WhatsApp messages
/// are stored and the conversation is handed to a person with the quota as the reason (never
/// silently dropped); an API caller hears the quota.
async fn over_quota(
    deps: &ConversationDeps,
    context: &mut Context,
    routed: &Routed,
    found: &Found,
    batch: &[TurnRequest],
    error: QuotaError,
) -> Result<TurnOutcome, TurnError> {
    let exceeded = match error {
        QuotaError::Exceeded(exceeded) => exceeded,
        QuotaError::Storage(error) => return Err(error.into()),
    };
    if batch.iter().all(|r| r.wamid().is_none()) {
        return Err(TurnError::QuotaExceeded(exceeded));
    }
    let reason = format!("{}: {exceeded}", crate::flow::QUOTA_REASON);
    let handed = super::handoff::hand_over(
        deps,
        &mut *context,
        &found.conversation,
        Some(reason),
        "quota",
    )
    .await?;
    let held = Found {
        conversation: handed,
        started: found.started,
        resumed: found.resumed.clone(),
    };
    hold(deps, context, routed, &held, batch).await
}

/// What every model call of a turn shares.
struct Turn<'a> {
    deps: &'a ConversationDeps,
    routed: &'a Routed,
    toolbox: &'a Toolbox,
    streams: &'a [mpsc::Sender<TurnEvent>],
}

/// What a turn answers with: where the reply is stored and the conversation so far.
struct Answer<'a> {
    context: &'a mut Context,
    stages: &'a [stage::Model],
    conversation: &'a conversation::Model,
    plan: &'a ReplyPlan,
    messages: Vec<ChatMessage>,
}

impl Turn<'_> {
    /// The workspace whose model calls these are.
    fn workspace_id(&self) -> i64 {
        self.routed.assistant.workspace_id
    }

    /// The tools offered in `round`: none in the last, so the model has to answer in words.
    fn offer(&self, round: u32) -> &[ToolSpec] {
        if round < self.deps.settings.max_tool_rounds {
            &self.toolbox.specs
        } else {
            &[]
        }
    }

    /// The model's request for `round`.
    fn request<'m>(&'m self, round: u32, messages: &'m [ChatMessage]) -> ChatRequest<'m> {
        ChatRequest {
            model: self.routed.assistant.model.as_deref(),
            messages,
            tools: self.offer(round),
            temperature: self.routed.settings.temperature,
            max_tokens: self.routed.settings.max_tokens,
        }
    }

    /// Runs the rounds from the model's `first` answer: tool calls while the model asks for
    /// them, then the stored reply (or the fallback when the model fails).
    async fn answer(
        &self,
        mut answer: Answer<'_>,
        first: Result<Completion, LlmError>,
    ) -> Result<TurnOutcome, TurnError> {
        let deps = self.deps;
        let mut first = Some(first);
        let mut usage = Usage::default();
        let mut records = Vec::new();
        // The last round's calls, stored while the model reads their results.
        let mut ran: Option<Ran> = None;
        for round in 0..=deps.settings.max_tool_rounds {
            let answered = match first.take() {
                Some(answered) => answered,
                None => {
                    let request = self.request(round, &answer.messages);
                    let (context, conversation) = (&mut *answer.context, answer.conversation);
                    self.ask_storing(context, conversation, &request, ran.take())
                        .await?
                }
            };
            let completion = match answered {
                Ok(completion) => completion,
                Err(error) => {
                    // The fallback (if any) is stored without passing through the kept history.
                    answer.context.missed(clock::now());
                    let (conversation, routed) = (answer.conversation, self.routed);
                    let fallen = reply::fall_back(
                        deps,
                        conversation,
                        routed,
                        self.streams,
                        error,
                        answer.plan,
                    );
                    return fallen.await.map(|outcome| TurnOutcome {
                        usage,
                        tool_calls: records,
                        ..outcome
                    });
                }
            };
            usage += completion.usage;
            if completion.tool_calls.is_empty() || self.offer(round).is_empty() {
                return self.reply(&mut answer, completion, records, usage).await;
            }
            let call = ToolRound {
                deps,
                context: &mut *answer.context,
                stages: answer.stages,
                conversation: answer.conversation,
                toolbox: self.toolbox,
            };
            let mut round = call.run(&completion, &mut answer.messages).await?;
            records.append(&mut round.records);
            ran = Some(round);
        }
        Err(TurnError::Storage(
            "the tool loop ended without a reply".to_owned(),
        ))
    }

    /// Asks the model `request` while the last tool round (if any) is stored, once the request
    /// has gone, as the person's messages are with the first request: both finish before the
    /// turn goes on, so the reply is never stored before the round, and a model that fails
    /// leaves the round stored.
    async fn ask_storing(
        &self,
        context: &mut Context,
        conversation: &conversation::Model,
        request: &ChatRequest<'_>,
        ran: Option<Ran>,
    ) -> Result<Result<Completion, LlmError>, TurnError> {
        let Some(ran) = ran else {
            let ws = self.workspace_id();
            let sent = RequestSent::default();
            return Ok(call_model(self.deps, ws, request, self.streams, sent).await);
        };
        let (sent, request_gone) = RequestSent::channel();
        let (stored, answered) = tokio::join!(
            async {
                let _ = request_gone.await;
                ran.store(self.deps, conversation)
                    .instrument(tracing::debug_span!("store_round"))
                    .await
            },
            call_model(self.deps, self.workspace_id(), request, self.streams, sent),
        );
        for stored in stored? {
            context.wrote(&stored);
        }
        Ok(answered)
    }

    /// Stores the model's final answer as the reply.
    async fn reply(
        &self,
        answer: &mut Answer<'_>,
        completion: Completion,
        tool_calls: Vec<ToolCallRecord>,
        usage: Usage,
    ) -> Result<TurnOutcome, TurnError> {
        let stored = answer
            .plan
            .store(&self.deps.writer, answer.conversation, &completion)
            .instrument(tracing::debug_span!("store_reply"))
            .await?;
        answer.context.wrote(&stored);
        self.deps.inbox_moved(stored.workspace_id);
        Ok(TurnOutcome {
            conversation_id: answer.conversation.id,
            message_id: stored.id,
            reply: completion.content,
            tool_calls,
            usage,
            fallback: false,
            parcel: Parcel::of(&stored),
        })
    }
}

/// Calls the model, streaming its tokens to every listener when there are listeners.
#[tracing::instrument(name = "call_model", level = "debug", skip_all)]
async fn call_model(
    deps: &ConversationDeps,
    workspace_id: i64,
    request: &ChatRequest<'_>,
    streams: &[mpsc::Sender<TurnEvent>],
    sent: RequestSent,
) -> Result<Completion, LlmError> {
    // One of the workspace's slots, held while the call is in flight.
    let _slot = deps.model_slots.take(workspace_id).await;
    if streams.is_empty() {
        return deps.llm.complete_telling(request, sent).await;
    }
    deps.llm
        .stream_telling(request, &Listeners(streams), sent)
        .await
}

/// The turn's listeners as the model's token sink: each fragment goes to every one of them as
/// it arrives, with no task in between.
struct Listeners<'a>(&'a [mpsc::Sender<TurnEvent>]);

impl TokenSink for Listeners<'_> {
    async fn token(&self, fragment: String) {
        for listener in self.0 {
            // A listener that went away does not stop the turn.
            let _ = listener.send(TurnEvent::Token(fragment.clone())).await;
        }
    }
}
