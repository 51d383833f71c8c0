//! The built-in tools offered to the model on every turn (unless the assistant disables
//! memory): `remember`, `forget` and `set_stage`; and `handoff_to_human` when the assistant's
//! `settings.handoff` is on. Their effects persist at once and update the actor's cached
//! context; their results go back to the model as JSON.

use parley_persistence::entities::stage;
use parley_persistence::{DatabaseConnection, clock, identities, memory};
use serde_json::{Value, json};
use uuid::Uuid;

use super::context::Context;
use crate::domain::MemoryKey;
use crate::llm::{ToolCall, ToolSpec};

/// The built-in tools' names, which MCP tools never take.
pub const BUILTIN_TOOLS: [&str; 4] = ["remember", "forget", "set_stage", HANDOFF_TOOL];

/// The tool that hands the conversation to a person.
pub(crate) const HANDOFF_TOOL: &str = "handoff_to_human";

/// The handoff tool's specification.
pub(crate) fn handoff_spec() -> ToolSpec {
    ToolSpec {
        name: HANDOFF_TOOL.to_owned(),
        description: "Hand this conversation to a person of the business when the person asks \
                      for one or you cannot help. Your reply in this turn is still sent (tell \
                      them a person will answer); after it, you do not answer until the \
                      conversation is given back to you."
            .to_owned(),
        parameters: json!({
            "type": "object",
            "properties": {
                "reason": {"type": "string", "description": "why a person should take over, for them"}
            },
            "required": ["reason"]
        }),
    }
}

/// What the model hears once the conversation is handed over.
pub(crate) fn handed_over() -> Value {
    json!({"ok": true, "handed_to_human": true, "next": "Tell the person that someone from the team will answer them here."})
}

/// The handoff tool's `reason`, trimmed and at most 1024 characters.
pub(crate) fn handoff_reason(call: &ToolCall) -> Option<String> {
    let arguments: Value = serde_json::from_str(&call.function.arguments).ok()?;
    let reason = arguments["reason"].as_str()?.trim();
    (!reason.is_empty()).then(|| reason.chars().take(1024).collect())
}

/// The tools' specifications; the workspace's `stages` are listed for the model.
pub(crate) fn specs(stages: &[stage::Model]) -> Vec<ToolSpec> {
    let names: Vec<&str> = stages.iter().map(|s| s.name.as_str()).collect();
    let stages = if names.is_empty() {
        "The workspace has no stages yet.".to_owned()
    } else {
        format!("Available stages: {}.", names.join(", "))
    };
    vec![
        ToolSpec {
            name: "remember".to_owned(),
            description: "Remember a fact about the person for later conversations on any \
                          channel. Keys are dotted lower-case paths such as profile.name, \
                          preferences.language or custom.favourite_colour."
                .to_owned(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "key": {"type": "string", "description": "dotted lower-case key"},
                    "value": {"description": "the fact: a string or a JSON value"},
                    "confidence": {"type": "number", "minimum": 0, "maximum": 1}
                },
                "required": ["key", "value"]
            }),
        },
        ToolSpec {
            name: "forget".to_owned(),
            description: "Forget a remembered fact about the person.".to_owned(),
            parameters: json!({
                "type": "object",
                "properties": {"key": {"type": "string"}},
                "required": ["key"]
            }),
        },
        ToolSpec {
            name: "set_stage".to_owned(),
            description: format!("Move the person to another journey stage. {stages}"),
            parameters: json!({
                "type": "object",
                "properties": {"stage": {"type": "string", "description": "stage name or id"}},
                "required": ["stage"]
            }),
        },
    ]
}

/// Runs one call against the identity of `context`, answering the result for the model.
/// Failures the model can fix (bad arguments, unknown stage) are results, not errors.
///
/// # Errors
/// Fails only on a database error.
pub(crate) async fn execute(
    db: &DatabaseConnection,
    context: &mut Context,
    stages: &[stage::Model],
    conversation_id: Uuid,
    call: &ToolCall,
) -> parley_persistence::Result<Value> {
    let arguments: Value = match serde_json::from_str(&call.function.arguments) {
        Ok(Value::Object(map)) => Value::Object(map),
        Ok(_) => return Ok(refusal("arguments must be a JSON object")),
        Err(e) => return Ok(refusal(&format!("arguments are not valid JSON: {e}"))),
    };
    match call.function.name.as_str() {
        "remember" => remember(db, context, conversation_id, &arguments).await,
        "forget" => forget(db, context, &arguments).await,
        "set_stage" => set_stage(db, context, stages, conversation_id, &arguments).await,
        other => Ok(refusal(&format!("unknown tool '{other}'"))),
    }
}

fn refusal(message: &str) -> Value {
    json!({"ok": false, "error": message})
}

fn key_of(arguments: &Value) -> Result<MemoryKey, Value> {
    let raw = arguments["key"]
        .as_str()
        .ok_or_else(|| refusal("key is required"))?;
    MemoryKey::try_from(raw).map_err(|e| refusal(&format!("key {e}")))
}

async fn remember(
    db: &DatabaseConnection,
    context: &mut Context,
    conversation_id: Uuid,
    arguments: &Value,
) -> parley_persistence::Result<Value> {
    let key = match key_of(arguments) {
        Ok(key) => key,
        Err(refused) => return Ok(refused),
    };
    let value = arguments["value"].clone();
    if value.is_null() {
        return Ok(refusal("value is required"));
    }
    let mut metadata = json!({"source": "conversation", "conversation_id": conversation_id});
    if let Some(confidence) = arguments["confidence"].as_f64() {
        if !(0.0..=1.0).contains(&confidence) {
            return Ok(refusal("confidence must be between 0 and 1"));
        }
        metadata["confidence"] = json!(confidence);
    }
    let identity = &context.identity;
    let (entry, _) = memory::upsert(
        db,
        identity.workspace_id,
        identity.id,
        key.as_str(),
        value,
        metadata,
        clock::now(),
    )
    .await?;
    context.memory.insert(entry.key.clone(), entry);
    Ok(json!({"ok": true, "remembered": key.as_str()}))
}

async fn forget(
    db: &DatabaseConnection,
    context: &mut Context,
    arguments: &Value,
) -> parley_persistence::Result<Value> {
    let key = match key_of(arguments) {
        Ok(key) => key,
        Err(refused) => return Ok(refused),
    };
    let existed = memory::delete(db, context.identity.id, key.as_str()).await?;
    context.memory.remove(key.as_str());
    Ok(json!({"ok": true, "forgotten": key.as_str(), "existed": existed}))
}

async fn set_stage(
    db: &DatabaseConnection,
    context: &mut Context,
    stages: &[stage::Model],
    conversation_id: Uuid,
    arguments: &Value,
) -> parley_persistence::Result<Value> {
    let Some(wanted) = arguments["stage"].as_str().map(str::trim) else {
        return Ok(refusal("stage is required"));
    };
    let Some(stage) = find_stage(stages, wanted) else {
        return Ok(refusal(&format!("unknown stage '{wanted}'")));
    };
    let (updated, _) = identities::set_stage(
        db,
        context.identity.clone(),
        stage,
        json!({"source": "conversation", "conversation_id": conversation_id}),
        clock::now(),
    )
    .await?;
    context.identity = updated;
    Ok(json!({"ok": true, "stage": stage.name}))
}

/// A stage by id, exact name, or name ignoring case.
fn find_stage<'a>(stages: &'a [stage::Model], wanted: &str) -> Option<&'a stage::Model> {
    if let Ok(id) = Uuid::parse_str(wanted) {
        return stages.iter().find(|s| s.id == id);
    }
    stages
        .iter()
        .find(|s| s.name == wanted)
        .or_else(|| stages.iter().find(|s| s.name.eq_ignore_ascii_case(wanted)))
}
