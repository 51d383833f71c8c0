//! The demo's built-in MCP server: one tool, `current_time`, answering the time in a
//! timezone (the person's, when the model knows it), served on a loopback port over the
//! specification's `http` contract (`GET /mcp/tools`, `POST /mcp/call`) exactly as an external
//! server would be: the demo registers it and attaches it to its assistant through the same
//! records the API manages.

use std::net::SocketAddr;

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use serde_json::{Value, json};
use tokio::sync::oneshot;

/// The tool's name on the server (the model sees `<server slug>__current_time`).
pub(crate) const TOOL: &str = "current_time";

/// A running demo MCP server; stops when dropped.
pub(crate) struct DemoClock {
    addr: SocketAddr,
    _shutdown: oneshot::Sender<()>,
}

impl DemoClock {
    /// Starts serving on `listener`.
    ///
    /// # Errors
    /// Fails when the listener's address cannot be read.
    pub(crate) fn start(listener: tokio::net::TcpListener) -> std::io::Result<Self> {
        let app = Router::new()
            .route("/mcp/tools", get(tools))
            .route("/mcp/call", post(call));
        let addr = listener.local_addr()?;
        let (tx, rx) = oneshot::channel::<()>();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(async {
                    let _ = rx.await;
                })
                .await;
        });
        Ok(Self {
            addr,
            _shutdown: tx,
        })
    }

    /// The loopback port it listens on.
    pub(crate) fn port(&self) -> u16 {
        self.addr.port()
    }

    /// The URL to register.
    pub(crate) fn url(&self) -> String {
        format!("http://{}/mcp", self.addr)
    }
}

async fn tools() -> Json<Value> {
    Json(json!({"tools": [{
        "name": TOOL,
        "description": "The current date and time in a timezone.",
        "input_schema": {
            "type": "object",
            "properties": {
                "timezone": {"type": "string", "description": "IANA name, e.g. Europe/Lisbon; UTC when absent"}
            }
        }
    }]}))
}

async fn call(Json(body): Json<Value>) -> Response {
    if body["name"] != TOOL {
        let error = json!({"error": format!("no tool named {}", body["name"])});
        return (StatusCode::NOT_FOUND, Json(error)).into_response();
    }
    let zone = body["arguments"]["timezone"].as_str().unwrap_or("UTC");
    match time_in(zone, Utc::now()) {
        Ok(result) => Json(json!({ "result": result })).into_response(),
        Err(error) => (StatusCode::BAD_REQUEST, Json(json!({ "error": error }))).into_response(),
    }
}

/// What the tool answers for `zone` at `now`.
fn time_in(zone: &str, now: DateTime<Utc>) -> Result<Value, String> {
    let tz: Tz = zone
        .parse()
        .map_err(|_| format!("{zone} is not an IANA timezone"))?;
    let local = now.with_timezone(&tz);
    Ok(json!({
        "timezone": tz.name(),
        "time": local.to_rfc3339(),
        "text": format!("{} in {}", local.format("%H:%M on %A %-d %B %Y"), tz.name()),
    }))
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone;

    use super::*;

    #[test]
    fn the_time_is_told_in_the_asked_zone() {
        let now = Utc
            .with_ymd_and_hms(2026, 7, 1, 12, 0, 0)
            .single()
            .expect("a time");
        let told = time_in("Europe/Lisbon", now).expect("a zone");
        assert_eq!(told["time"], "2026-07-01T13:00:00+01:00");
        assert_eq!(
            told["text"],
            "13:00 on Wednesday 1 July 2026 in Europe/Lisbon"
        );
        assert!(time_in("Mars/Olympus", now).is_err());
    }
}
