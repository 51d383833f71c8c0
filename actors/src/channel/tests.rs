//! The channel actor's own rules, with a sandbox channel.

use parley_persistence::clock;
use parley_persistence::conversations::{self, NewMessage};

use parley_persistence::MessageStatus;
use serde_json::json;
use uuid::Uuid;

use super::*;
use crate::test_support::{channel_deps, deps, world};

fn text(identity_id: Uuid) -> SendRequest {
    SendRequest {
        message_id: None,
        keep_when_unavailable: false,
        channel_retries: true,
        outgoing: Outgoing {
            to: "351912345678".to_owned(),
            identity_id: Some(identity_id),
            content: OutboundContent::Text {
                body: "Hello again".to_owned(),
                context: None,
            },
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
        .expect("conversation")
        .conversation();
    conversations::append_message(db, &conversation, NewMessage::from_person("hi".into()), at)
        .await
        .expect("message");
}

async fn send(actor: &ActorRef<ChannelMsg>, request: SendRequest) -> Result<Accepted, SendError> {
    ractor::call_t!(actor, ChannelMsg::Send, 5_000, request).expect("answer")
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
    let args = ChannelArgs {
        channel,
        deps: Arc::new(channel_deps(&deps)),
    };
    let (actor, _) = Actor::spawn(None, ChannelActor, args).await.expect("spawn");

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
        Ok(MessageStatus::Delivered)
    );
    let mut template = text(quiet);
    template.outgoing.content = OutboundContent::Template(crate::whatsapp::TemplateMessage {
        name: "order_update".to_owned(),
        language: "en_US".to_owned(),
        components: json!([]),
    });
    assert_eq!(
        send(&actor, template).await.map(|a| a.status),
        Ok(MessageStatus::Delivered)
    );
    actor.stop(None);
}
