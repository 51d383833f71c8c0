//! One attempt of one delivery: sign and post the stored body, then settle the row (and the
//! endpoint: its failing streak, or disabled on 410 or after five days of failures).

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use parley_persistence::entities::{event_delivery, event_webhook};
use parley_persistence::event_deliveries::{self, Settled};
use parley_persistence::{DeliveryStatus, clock, event_webhooks};

use super::super::sign;
use super::DeliveryDeps;

/// One attempt of one delivery.
pub(super) struct Attempt {
    pub(super) deps: Arc<DeliveryDeps>,
    pub(super) client: reqwest::Client,
    pub(super) endpoint: event_webhook::Model,
    pub(super) delivery: event_delivery::Model,
}

/// How an endpoint answered.
enum Answer {
    /// 2xx.
    Success(u16),
    /// 410 Gone: it wants no more.
    Gone,
    /// Any other status; with how long it asked to wait (`Retry-After`).
    Refused(u16, Option<Duration>),
    /// No answer: why.
    Unreachable(String),
}

impl Attempt {
    /// Posts the delivery and settles it; answers whether the endpoint was disabled.
    pub(super) async fn run(self) -> bool {
        let answer = self.post().await;
        let now = clock::now();
        let db = &self.deps.db;
        let (settled, disable) = self.settle(&answer, now);
        crate::measure::event_delivery(match settled.status {
            DeliveryStatus::Succeeded => "succeeded",
            DeliveryStatus::Pending => "retried",
            DeliveryStatus::Failed => "failed",
        });
        let endpoint_id = self.endpoint.id;
        let recorded = async {
            event_deliveries::settle(db, self.delivery.id, settled, now).await?;
            if matches!(answer, Answer::Success(_)) {
                event_webhooks::succeeded(db, endpoint_id).await?;
                return Ok(false);
            }
            event_webhooks::failed(db, endpoint_id, now).await?;
            let give_up = now - self.deps.settings.give_up_after;
            let disabled = match disable {
                Some(reason) => event_webhooks::disable(db, endpoint_id, reason, None, now).await?,
                None => {
                    let reason = "every delivery failed for five days";
                    event_webhooks::disable(db, endpoint_id, reason, Some(give_up), now).await?
                }
            };
            Ok::<_, parley_persistence::PersistenceError>(disabled)
        };
        match recorded.await {
            Ok(disabled) => {
                if disabled {
                    tracing::warn!(%endpoint_id, "event webhook endpoint disabled");
                    let _ = self
                        .deps
                        .events
                        .reload(db, Some(self.endpoint.workspace_id))
                        .await;
                }
                disabled
            }
            Err(error) => {
                // Left pending: it is attempted again.
                tracing::warn!(%error, delivery_id = %self.delivery.id, "could not record an event delivery");
                false
            }
        }
    }

    /// Signs and posts the stored body.
    async fn post(&self) -> Answer {
        let secrets = match self.secrets() {
            Ok(secrets) => secrets,
            Err(error) => return Answer::Unreachable(error),
        };
        let secrets: Vec<&str> = secrets.iter().map(String::as_str).collect();
        let id = self.delivery.event_id.to_string();
        let timestamp = clock::now().timestamp();
        let body = &self.delivery.body;
        let request = self
            .client
            .post(&self.endpoint.url)
            .timeout(self.deps.settings.timeout)
            .header("content-type", "application/json")
            .header("user-agent", "Parley-Webhooks/1")
            .header("webhook-id", &id)
            .header("webhook-timestamp", timestamp.to_string())
            .header(
                "webhook-signature",
                sign::signature(&secrets, &id, timestamp, body),
            )
            .body(body.clone());
        match request.send().await {
            Ok(response) => {
                let status = response.status().as_u16();
                if response.status().is_success() {
                    Answer::Success(status)
                } else if status == 410 {
                    Answer::Gone
                } else {
                    let wait = response
                        .headers()
                        .get("retry-after")
                        .and_then(|v| v.to_str().ok())
                        .and_then(|v| v.trim().parse::<u64>().ok())
                        .map(Duration::from_secs);
                    Answer::Refused(status, wait)
                }
            }
            Err(error) if error.is_timeout() => Answer::Unreachable(format!(
                "no answer within {} s",
                self.deps.settings.timeout.as_secs()
            )),
            // An address the egress policy refuses reads as one that cannot be reached.
            Err(_) => Answer::Unreachable("the endpoint could not be reached".to_owned()),
        }
    }

    /// The secrets that sign now: the current one, and the previous one for a day after a
    /// rotation.
    fn secrets(&self) -> Result<Vec<String>, String> {
        let open = |sealed: &str| {
            self.deps
                .secrets
                .open(sealed)
                .map_err(|_| "the endpoint's secret could not be opened".to_owned())
        };
        let mut secrets = vec![open(&self.endpoint.secret)?];
        if let (Some(previous), Some(until)) = (
            &self.endpoint.previous_secret,
            self.endpoint.previous_secret_until,
        ) && until > clock::now()
        {
            secrets.push(open(previous)?);
        }
        Ok(secrets)
    }

    /// The row's new state after `answer`, and why to disable the endpoint, if it must be.
    fn settle(&self, answer: &Answer, now: DateTime<Utc>) -> (Settled, Option<&'static str>) {
        let failed = |code: Option<u16>, error: String| Settled {
            status: DeliveryStatus::Failed,
            status_code: code.map(i32::from),
            error: Some(error),
            next_attempt_at: now,
        };
        let (code, error, asked) = match answer {
            Answer::Success(code) => {
                let done = Settled {
                    status: DeliveryStatus::Succeeded,
                    status_code: Some(i32::from(*code)),
                    error: None,
                    next_attempt_at: now,
                };
                return (done, None);
            }
            Answer::Gone => {
                let why = "the endpoint answered 410 Gone: it is disabled".to_owned();
                return (
                    failed(Some(410), why),
                    Some("the endpoint answered 410 Gone"),
                );
            }
            Answer::Refused(code, asked) => {
                (Some(*code), format!("the endpoint answered {code}"), *asked)
            }
            Answer::Unreachable(why) => (None, why.clone(), None),
        };
        let done = usize::try_from(self.delivery.attempts).unwrap_or(0) + 1;
        let Some(wait) = self.deps.settings.schedule.get(done - 1) else {
            return (failed(code, format!("{error}; no retries left")), None);
        };
        // ±20 % jitter, so that a recovering endpoint is not hit by every retry at once.
        let jittered = wait.mul_f64(0.8 + fastrand::f64() * 0.4);
        let wait = asked.map_or(jittered, |asked| {
            jittered.max(asked.min(Duration::from_secs(86_400)))
        });
        let next = now + chrono::Duration::from_std(wait).unwrap_or(chrono::Duration::hours(1));
        let retry = Settled {
            status: DeliveryStatus::Pending,
            status_code: code.map(i32::from),
            error: Some(error),
            next_attempt_at: next,
        };
        (retry, None)
    }
}
