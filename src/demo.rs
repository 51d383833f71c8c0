//! `parley serve --demo`: fully offline. Embedded SQLite, a bootstrapped workspace whose key is
//! printed, a `sandbox` channel synced to a demo worker and assistant, a built-in
//! deterministic model served over the same OpenAI-compatible protocol ([`model`]), a built-in
//! MCP server with one tool ([`mcp_clock`]) registered and attached like any other, plus the curl
//! lines to try it.

mod kept;
mod mcp_clock;
mod model;
mod senses;

use anyhow::Context;
use parley_persistence::assistants::{self, AssistantFields};
use parley_persistence::channels::{self, ChannelChanges, NewChannel};
use parley_persistence::entities::channel;
use parley_persistence::mcp_servers::{self, McpServerFields};
use parley_persistence::sandbox_templates;
use parley_persistence::workers::{self, NewWorker};
use parley_persistence::{
    DatabaseConnection, Integration, McpTransport, Page, clock, tenancy, workspaces,
};
use serde_json::json;
use uuid::Uuid;

use self::kept::Kept;
use self::mcp_clock::DemoClock;
use self::model::DemoModel;
use crate::config::{Secret, Settings};
use crate::domain::{AssistantSettings, Name, Permissions};
use crate::startup::{Application, open_database};
use crate::tenancy::{BootstrapRequest, bootstrap, issue_api_key};

const WORKSPACE: &str = "Demo";
const CHANNEL: &str = "Demo sandbox";
const CLOCK: &str = "demo_clock";
const TEMPLATE: &str = "order_update";
const FIRST_PAGE: Page = Page {
    page: 1,
    limit: 100,
};
const INSTRUCTIONS: &str = "You are Parley's demo assistant. \
    {{#if memory.profile.name}}The person's name is {{memory.profile.name}}. {{/if}}\
    {{#if memory.profile.timezone}}Their timezone is {{memory.profile.timezone}}.{{/if}}";

/// What the demo prepared.
struct Demo {
    api_key: String,
    channel_id: Uuid,
    assistant_id: Option<Uuid>,
    /// The operator token it made, when none was configured.
    operator_token: Option<String>,
}

/// Serves the demo until `shutdown` resolves.
///
/// # Errors
/// Fails when the database, the demo model or the server cannot start.
pub async fn serve(
    mut settings: Settings,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let mut kept = Kept::load(&settings.data_dir);
    let model = DemoModel::start(kept::loopback(kept.model_port).await?)
        .context("starting the demo's built-in model")?;
    settings.llm.base_url = Some(model.base_url());
    settings.llm.model = Some("parley-demo".to_owned());
    settings.llm.api_key = None;
    let clock = DemoClock::start(kept::loopback(kept.clock_port).await?)
        .context("starting the demo's built-in MCP server")?;
    kept.model_port = Some(model.port());
    kept.clock_port = Some(clock.port());
    let operator_token = match &settings.server.operator_token {
        Some(configured) if !configured.expose().is_empty() => None,
        _ => {
            let token = match kept.operator_token.take() {
                Some(token) => token,
                None => kept::new_token()?,
            };
            settings.server.operator_token = Some(Secret(token.clone()));
            kept.operator_token = Some(token.clone());
            Some(token)
        }
    };
    // The demo's own MCP server listens on loopback, and so does whatever receiver the person
    // trying the demo runs for its event webhooks: this session's tenant URLs may reach this
    // machine (never outside `--demo`, whose policy refuses loopback).
    let clock_url = reqwest::Url::parse(&clock.url()).context("the demo clock's URL")?;
    let mut allowed = vec![settings.egress.allow.clone(), DEMO_LOOPBACK.to_owned()];
    if let (Some(host), Some(port)) = (clock_url.host_str(), clock_url.port_or_known_default()) {
        allowed.push(format!("{host}:{port}"));
    }
    settings.egress.allow = allowed
        .into_iter()
        .filter(|e| !e.is_empty())
        .collect::<Vec<_>>()
        .join(",");
    let db = open_database(&settings).await?;
    let mut demo = prepare(&db, &clock.url(), kept.api_key.as_deref())
        .await
        .context("preparing the demo workspace")?;
    demo.operator_token = operator_token;
    kept.api_key = Some(demo.api_key.clone());
    kept.save(&settings.data_dir)?;
    let app = Application::build(settings).await?;
    let base = format!("http://{}", app.local_addr()?);
    print_walkthrough(&base, &demo);
    let served = app.run_until(shutdown).await;
    drop((model, clock));
    served
}

/// Creates (or finds) the demo workspace, worker, assistant and sandbox channel, attaches the
/// clock at `clock_url` to the assistant, and keeps the last run's key (`kept_key`) while it
/// still works.
async fn prepare(
    db: &DatabaseConnection,
    clock_url: &str,
    kept_key: Option<&str>,
) -> anyhow::Result<Demo> {
    let (workspace_id, api_key) = demo_workspace(db, kept_key).await?;
    let channel = demo_channel(db, workspace_id).await?;
    demo_clock(db, workspace_id, &channel, clock_url).await?;
    demo_template(db, &channel).await?;
    let assistant_id = match channel.worker_id {
        Some(worker_id) => assistants::list_for_worker(db, workspace_id, worker_id)
            .await?
            .first()
            .map(|a| a.id),
        None => None,
    };
    Ok(Demo {
        api_key,
        channel_id: channel.id,
        assistant_id,
        operator_token: None,
    })
}

/// Whether `key` is a live key of the workspace: known, not revoked, not expired.
async fn still_works(
    db: &DatabaseConnection,
    workspace_id: i64,
    key: &str,
) -> anyhow::Result<bool> {
    let hash = crate::domain::hash_api_key(key);
    let found = parley_persistence::api_keys::find_by_hash(db, &hash).await?;
    Ok(found.is_some_and(|(key, _)| {
        key.workspace_id == workspace_id
            && key.revoked_at.is_none()
            && key.expires_at.is_none_or(|at| at > clock::now())
    }))
}

/// The demo workspace (bootstrapped on the first run) and its key with every permission: the
/// last run's while it still works, else a new one.
async fn demo_workspace(
    db: &DatabaseConnection,
    kept_key: Option<&str>,
) -> anyhow::Result<(i64, String)> {
    let now = clock::now();
    let business = tenancy::find_or_create_business(db, WORKSPACE, now).await?;
    let owner =
        tenancy::find_or_create_user(db, business.id, Some("demo@parley.local"), now).await?;
    let existing = workspaces::list_for_member(db, business.id, owner.id, FIRST_PAGE)
        .await?
        .items
        .into_iter()
        .find(|w| w.name == WORKSPACE);
    if let Some(workspace) = existing {
        if let Some(key) = kept_key
            && still_works(db, workspace.id, key).await?
        {
            return Ok((workspace.id, key.to_owned()));
        }
        let name = Name::try_from("demo").map_err(|e| anyhow::anyhow!("{e}"))?;
        let (_, secret) =
            issue_api_key(db, workspace.id, owner.id, &name, &Permissions::all(), None).await?;
        return Ok((workspace.id, secret.expose().to_owned()));
    }
    let done = bootstrap(
        db,
        &BootstrapRequest {
            workspace: WORKSPACE.to_owned(),
            business: WORKSPACE.to_owned(),
            email: Some("demo@parley.local".to_owned()),
        },
    )
    .await?;
    Ok((done.workspace_id, done.api_key))
}

/// The demo's sandbox channel, synced to a worker with the demo assistant.
async fn demo_channel(
    db: &DatabaseConnection,
    workspace_id: i64,
) -> anyhow::Result<channel::Model> {
    let now = clock::now();
    let found = channels::list(db, workspace_id, FIRST_PAGE)
        .await?
        .items
        .into_iter()
        .find(|c| c.name == CHANNEL && c.integration == Integration::Sandbox);
    let channel = match found {
        Some(channel) if channel.worker_id.is_some() => return Ok(channel),
        Some(channel) => channel,
        None => {
            let new = NewChannel {
                name: CHANNEL.to_owned(),
                integration: Integration::Sandbox,
                active: true,
                settings: json!({}),
                phone_number_id: None,
                business_account_id: None,
                access_token_encrypted: None,
                verify_token: Uuid::now_v7().simple().to_string(),
                verified: None,
            };
            channels::create(db, workspace_id, new, now).await?
        }
    };
    let worker = workers::create(
        db,
        workspace_id,
        NewWorker {
            name: "Demo worker".to_owned(),
            description: Some("Answers the demo sandbox".to_owned()),
            timezone: None,
        },
        now,
    )
    .await?;
    let fields = AssistantFields {
        name: "Demo assistant".to_owned(),
        instructions: INSTRUCTIONS.to_owned(),
        languages: json!(["en"]),
        provider: "PROVIDER_ONE".to_owned(),
        model: None,
        // The demo's model tells pictures and recordings back, so the demo shows them understood.
        settings: serde_json::to_value(AssistantSettings {
            vision: true,
            transcribe: true,
            ..AssistantSettings::default()
        })?,
    };
    assistants::create(db, workspace_id, worker.id, fields, now).await?;
    let sync = ChannelChanges {
        worker_id: Some(Some(worker.id)),
        ..ChannelChanges::default()
    };
    Ok(channels::update(db, channel, sync, now).await?)
}

/// The clock's MCP server record (its port changes every run, so its URL is updated) attached
/// to the assistants of the channel's worker.
async fn demo_clock(
    db: &DatabaseConnection,
    workspace_id: i64,
    channel: &channel::Model,
    url: &str,
) -> anyhow::Result<()> {
    let now = clock::now();
    let fields = McpServerFields {
        name: CLOCK.to_owned(),
        transport: McpTransport::Http,
        url: url.to_owned(),
        headers: json!([]),
    };
    let found = mcp_servers::list(db, workspace_id, FIRST_PAGE)
        .await?
        .items
        .into_iter()
        .find(|s| s.name == CLOCK);
    let server = match found {
        Some(server) => mcp_servers::update(db, server, fields, now).await?,
        None => mcp_servers::create(db, workspace_id, fields, now).await?,
    };
    let Some(worker_id) = channel.worker_id else {
        return Ok(());
    };
    for assistant in assistants::list_for_worker(db, workspace_id, worker_id).await? {
        mcp_servers::attach(db, workspace_id, assistant.id, server.id, now).await?;
    }
    Ok(())
}

/// The sandbox channel's `order_update` template (approved, as sandbox templates are), which
/// the walkthrough's campaign sends.
async fn demo_template(db: &DatabaseConnection, channel: &channel::Model) -> anyhow::Result<()> {
    let known = sandbox_templates::list(db, channel.id)
        .await?
        .iter()
        .any(|t| t["name"] == TEMPLATE);
    if !known {
        let components = json!([{"type": "BODY", "text": "Hi {{1}}, your order {{2}} has shipped.",
                                 "example": {"body_text": [["Maria", "A-17"]]}}]);
        sandbox_templates::create(
            db,
            channel.id,
            TEMPLATE,
            "en_US",
            "UTILITY",
            components,
            clock::now(),
        )
        .await?;
    }
    Ok(())
}

/// What the demo's egress policy allows beyond the operator's list: this machine, so that
/// event webhook receivers (and MCP servers) run beside the demo can be tried.
const DEMO_LOOPBACK: &str = "127.0.0.0/8,::1";

fn print_walkthrough(base: &str, demo: &Demo) {
    let key = &demo.api_key;
    let channel = demo.channel_id;
    let assistant = demo
        .assistant_id
        .map_or_else(|| "(none)".to_owned(), |id| id.to_string());
    let operator = match &demo.operator_token {
        Some(token) => format!(
            "Operator token: {token}\n  the actor tree: PARLEY_OPERATOR_TOKEN={token} parley admin actors --url {base}\n  metrics: curl -s -H 'Authorization: Bearer {token}' {base}/metrics"
        ),
        None => "Operator token: the configured one (server.operator_token)".to_owned(),
    };
    println!(
        r#"
Parley demo is running offline at {base}
API key (all permissions, kept across restarts): {key}
API docs (try every endpoint; Authorize with the key): {base}/docs
Operator console (sign in with the key): {base}/console
Sandbox channel: {channel}
Demo assistant: {assistant}
{operator}

1. A person writes to the sandbox WhatsApp channel:
   curl -s -H 'Authorization: Bearer {key}' -H 'Content-Type: application/json' \
        -d '{{"from": "+351912000111", "name": "Maria", "text": "Hi! My name is Maria"}}' \
        {base}/channels/{channel}/sandbox/inbound

2. The assistant's reply, as sent through the channel:
   curl -s -H 'Authorization: Bearer {key}' {base}/channels/{channel}/sandbox/outbox

3. What it remembered, and a question on the HTTP chat:
   curl -s -H 'Authorization: Bearer {key}' {base}/memory/from/+351912000111
   curl -s -H 'Authorization: Bearer {key}' -H 'Content-Type: application/json' \
        -d '{{"message": "What is my name?"}}' {base}/conversation/+351912000111/chat/{channel}

4. A tool from an MCP server: the demo's clock is registered and attached to the assistant.
   curl -s -H 'Authorization: Bearer {key}' {base}/workspace/mcps
   curl -s -H 'Authorization: Bearer {key}' -H 'Content-Type: application/json' \
        -d '{{"message": "My timezone is Asia/Tokyo"}}' {base}/conversation/+351912000111/chat/{channel}
   curl -s -H 'Authorization: Bearer {key}' -H 'Content-Type: application/json' \
        -d '{{"message": "What time is it?"}}' {base}/conversation/+351912000111/chat/{channel}

5. Event webhooks: this demo session lets receivers on this machine (127.0.0.1, ::1) take its
   events (outside --demo, loopback is refused); e.g. with a receiver on port 9000:
   curl -s -H 'Authorization: Bearer {key}' -H 'Content-Type: application/json' {base}/workspace/webhooks \
        -d '{{"url": "http://127.0.0.1:9000/hook", "events": ["*"]}}'

6. A campaign of the channel's order_update template, sent by a flow (see the README):
   curl -s -H 'Authorization: Bearer {key}' -H 'Content-Type: application/json' {base}/campaigns \
        -d '{{"channelUid": "{channel}", "name": "Orders", "status": "ACTIVE", "templateName": "order_update",
             "templateParamsStrategy": "USE_CONTACT_ASSOCIATION", "templateParameters": {{"1": "name", "2": "default"}}}}'
   curl -s -H 'Authorization: Bearer {key}' -H 'Content-Type: application/json' {base}/flows \
        -d '{{"channelUid": "{channel}", "campaignUid": "<uid from above>", "contactUids": ["+351912000111"]}}'

Stop with ctrl-c.
"#
    );
}
