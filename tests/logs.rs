//! The log lines an operator follows: a request's id shows on the lines its actors write, with
//! the actor's path. Its own test binary, because it installs the process's log subscriber.

#![allow(unreachable_pub)]

// The shared helpers; this binary uses a few of them.
#[allow(dead_code)]
#[path = "api/helpers.rs"]
mod helpers;

use std::io::Write;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::MakeWriter;

use crate::helpers::{expect_status, spawn_app};

/// Every line the subscriber writes, kept in memory.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Captured {
    fn lines(&self) -> Vec<Value> {
        let bytes = self.0.lock().map(|b| b.clone()).unwrap_or_default();
        String::from_utf8_lossy(&bytes)
            .lines()
            .filter_map(|line| serde_json::from_str(line).ok())
            .collect()
    }
}

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if let Ok(mut bytes) = self.0.lock() {
            bytes.extend_from_slice(buf);
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> MakeWriter<'a> for Captured {
    type Writer = Captured;

    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}

#[tokio::test]
async fn a_chat_requests_id_shows_on_its_conversation_actors_lines() {
    let captured = Captured::default();
    tracing_subscriber::fmt()
        .json()
        .with_span_list(true)
        .with_env_filter(EnvFilter::new("info,parley_actors=debug"))
        .with_writer(captured.clone())
        .init();
    let app = spawn_app().await;
    let (_, channel) = app.chat_channel("Echo.", json!({})).await;
    app.put_identity("crm-1", json!({"name": "Ana"})).await;

    let response = app
        .request(
            reqwest::Method::POST,
            &format!("/conversation/crm-1/chat/{channel}"),
            Some(&app.owner.api_key),
        )
        .header("x-request-id", "trace-me-123")
        .json(&json!({"message": "hello"}))
        .send()
        .await
        .expect("request");
    expect_status(response, 200).await;

    let lines = captured.lines();
    let actor_lines: Vec<&Value> = lines
        .iter()
        .filter(|line| {
            line["spans"].as_array().is_some_and(|spans| {
                spans.iter().any(|s| {
                    s["name"] == "conversation"
                        && s["actor"]
                            .as_str()
                            .is_some_and(|p| p.starts_with("root/conversations/identity:"))
                })
            })
        })
        .collect();
    assert!(
        !actor_lines.is_empty(),
        "no line of the conversation actor: {lines:#?}"
    );
    for line in actor_lines {
        let ids: Vec<&Value> = line["spans"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|s| s.get("request_id"))
            .collect();
        assert_eq!(ids, [&json!("trace-me-123")], "{line}");
    }
}
