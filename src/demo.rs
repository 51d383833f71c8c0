//! `parley serve --demo`: fully offline. Embedded SQLite, a bootstrapped workspace whose key is
//! printed, a `sandbox` channel synced to a demo worker and assistant, and a built-in
//! deterministic model served over the same OpenAI-compatible protocol (testkit's demo model),
//! plus the curl lines to try it.

use anyhow::Context;
use parley_persistence::assistants::{self, AssistantFields};
use parley_persistence::channels::{self, ChannelChanges, NewChannel};
use parley_persistence::workers::{self, NewWorker};
use parley_persistence::{DatabaseConnection, Page, clock, tenancy, workspaces};
use parley_testkit::FakeModel;
use serde_json::json;
use uuid::Uuid;

use crate::config::Settings;
use crate::domain::{AssistantSettings, Name, Permissions};
use crate::startup::{Application, open_database};
use crate::tenancy::{BootstrapRequest, bootstrap, issue_api_key};

const WORKSPACE: &str = "Demo";
const CHANNEL: &str = "Demo sandbox";
const INSTRUCTIONS: &str = "You are Parley's demo assistant. \
    {{#if memory.profile.name}}The person's name is {{memory.profile.name}}.{{/if}}";

/// What the demo prepared.
struct Demo {
    api_key: String,
    channel_id: Uuid,
}

/// Serves the demo until `shutdown` resolves.
///
/// # Errors
/// Fails when the database, the demo model or the server cannot start.
pub async fn serve(
    mut settings: Settings,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let model = FakeModel::start_demo().await;
    settings.llm_base_url = Some(model.base_url());
    settings.llm_model = Some("parley-demo".to_owned());
    settings.llm_api_key = None;
    let db = open_database(&settings).await?;
    let demo = prepare(&db).await.context("preparing the demo workspace")?;
    let app = Application::build(settings).await?;
    let base = format!("http://{}", app.local_addr()?);
    print_walkthrough(&base, &demo);
    let served = app.run_until(shutdown).await;
    drop(model);
    served
}

/// Creates (or finds) the demo workspace, worker, assistant and sandbox channel, and issues a
/// fresh key for this run.
async fn prepare(db: &DatabaseConnection) -> anyhow::Result<Demo> {
    let now = clock::now();
    let business = tenancy::find_or_create_business(db, WORKSPACE, now).await?;
    let owner =
        tenancy::find_or_create_user(db, business.id, Some("demo@parley.local"), now).await?;
    let existing = workspaces::list_for_member(
        db,
        business.id,
        owner.id,
        Page {
            page: 1,
            limit: 100,
        },
    )
    .await?
    .items
    .into_iter()
    .find(|w| w.name == WORKSPACE);
    let (workspace_id, api_key) = match existing {
        Some(workspace) => {
            let name = Name::try_from("demo").map_err(|e| anyhow::anyhow!("{e}"))?;
            let (_, secret) =
                issue_api_key(db, workspace.id, owner.id, &name, &Permissions::all(), None).await?;
            (workspace.id, secret.expose().to_owned())
        }
        None => {
            let done = bootstrap(
                db,
                &BootstrapRequest {
                    workspace: WORKSPACE.to_owned(),
                    business: WORKSPACE.to_owned(),
                    email: Some("demo@parley.local".to_owned()),
                },
            )
            .await?;
            (done.workspace_id, done.api_key)
        }
    };
    let found = channels::list(
        db,
        workspace_id,
        Page {
            page: 1,
            limit: 100,
        },
    )
    .await?
    .items
    .into_iter()
    .find(|c| c.name == CHANNEL && c.integration == "sandbox");
    let channel = match found {
        Some(channel) if channel.worker_id.is_some() => channel,
        other => {
            let channel = match other {
                Some(channel) => channel,
                None => {
                    let new = NewChannel {
                        name: CHANNEL.to_owned(),
                        integration: "sandbox".to_owned(),
                        active: true,
                        settings: json!({}),
                        phone_number_id: None,
                        business_account_id: None,
                        access_token_encrypted: None,
                        verify_token: Uuid::now_v7().simple().to_string(),
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
                settings: serde_json::to_value(AssistantSettings::default())?,
            };
            assistants::create(db, workspace_id, worker.id, fields, now).await?;
            let sync = ChannelChanges {
                worker_id: Some(Some(worker.id)),
                ..ChannelChanges::default()
            };
            channels::update(db, channel, sync, now).await?
        }
    };
    Ok(Demo {
        api_key,
        channel_id: channel.id,
    })
}

fn print_walkthrough(base: &str, demo: &Demo) {
    let key = &demo.api_key;
    let channel = demo.channel_id;
    println!(
        r#"
Parley demo is running offline at {base}
API key (all permissions): {key}

1. A person writes to the sandbox WhatsApp channel:
   curl -s -H 'Authorization: Bearer {key}' -H 'Content-Type: application/json' \
        -d '{{"from": "+351912345678", "name": "Maria", "text": "Hi! My name is Maria"}}' \
        {base}/channels/{channel}/sandbox/inbound

2. The assistant's reply, as sent through the channel:
   curl -s -H 'Authorization: Bearer {key}' {base}/channels/{channel}/sandbox/outbox

3. What it remembered, and a question on the HTTP chat:
   curl -s -H 'Authorization: Bearer {key}' {base}/memory/from/+351912345678
   curl -s -H 'Authorization: Bearer {key}' -H 'Content-Type: application/json' \
        -d '{{"message": "What is my name?"}}' {base}/conversation/+351912345678/chat/{channel}

Stop with ctrl-c.
"#
    );
}
