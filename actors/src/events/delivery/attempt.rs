//! One attempt of one delivery (sign and post the stored body, and say how its row is to be
//! settled), and the recording of many attempts' outcomes in one transaction (the rows, and
//! each endpoint's failing streak: disabled on 410 or after five days of failures).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use parley_persistence::entities::{event_delivery, event_webhook};
use parley_persistence::event_deliveries::{self, Settled};
use parley_persistence::usage;
use parley_persistence::{
    DatabaseConnection, DeliveryStatus, PersistenceError, clock, event_webhooks,
};
use uuid::Uuid;

use super::super::sign;
use super::DeliveryDeps;
use crate::events::Events;

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

/// What an attempt came to, recorded by the actor with the others that ended about then.
#[derive(Debug)]
pub(crate) struct Outcome {
    pub(super) endpoint_id: Uuid,
    pub(super) workspace_id: i64,
    pub(super) delivery_id: Uuid,
    pub(super) settled: Settled,
    /// Why to disable the endpoint at once (410), if so.
    pub(super) disable: Option<&'static str>,
}

impl Attempt {
    /// Posts the delivery; answers how its row is to be settled.
    pub(super) async fn run(self) -> Outcome {
        let answer = self.post().await;
        let (settled, disable) = self.settle(&answer, clock::now());
        crate::measure::event_delivery(match settled.status {
            DeliveryStatus::Succeeded => "succeeded",
            DeliveryStatus::Pending => "retried",
            DeliveryStatus::Failed => "failed",
        });
        Outcome {
            endpoint_id: self.endpoint.id,
            workspace_id: self.endpoint.workspace_id,
            delivery_id: self.delivery.id,
            settled,
            disable,
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

/// Records `outcomes` in one transaction: the deliveries that succeeded with one statement per
/// status code, the others one by one, and each endpoint's failing streak (ended by a success;
/// five days of it, or a 410, disable the endpoint). Answers the endpoints disabled now, with
/// their workspaces.
///
/// # Errors
/// The database's; nothing is recorded then, and the deliveries are attempted again.
pub(super) async fn record(
    db: &DatabaseConnection,
    events: &Events,
    outcomes: &[Outcome],
    give_up_after: chrono::Duration,
) -> Result<Vec<(Uuid, i64)>, PersistenceError> {
    let now = clock::now();
    let txn = parley_persistence::begin_write(db).await?;
    let mut by_code: HashMap<Option<i32>, Vec<Uuid>> = HashMap::new();
    let mut endpoints: HashMap<Uuid, (i64, bool, Option<&'static str>)> = HashMap::new();
    for outcome in outcomes {
        let succeeded = outcome.settled.status == DeliveryStatus::Succeeded;
        let entry =
            endpoints
                .entry(outcome.endpoint_id)
                .or_insert((outcome.workspace_id, false, None));
        entry.1 |= succeeded;
        entry.2 = entry.2.or(outcome.disable);
        if succeeded {
            by_code
                .entry(outcome.settled.status_code)
                .or_default()
                .push(outcome.delivery_id);
        } else {
            event_deliveries::settle(&txn, outcome.delivery_id, outcome.settled.clone(), now)
                .await?;
        }
    }
    for (code, ids) in by_code {
        event_deliveries::succeeded(&txn, &ids, code, now).await?;
    }
    // Each delivery the endpoint took counts in its workspace's usage, with its record.
    let delivered: Vec<usage::Count> = outcomes
        .iter()
        .filter(|o| o.settled.status == DeliveryStatus::Succeeded)
        .map(|o| usage::Count::new(o.workspace_id, now, usage::Metric::EventDeliveries, 1))
        .collect();
    usage::add(&txn, &delivered).await?;
    let mut disabled = Vec::new();
    for (endpoint_id, (workspace_id, any_success, gone)) in endpoints {
        let now_disabled = if let Some(reason) = gone {
            event_webhooks::disable(&txn, endpoint_id, reason, None, now).await?
        } else if any_success {
            event_webhooks::succeeded(&txn, endpoint_id).await?;
            false
        } else {
            event_webhooks::failed(&txn, endpoint_id, now).await?;
            let reason = "every delivery failed for five days";
            let since = Some(now - give_up_after);
            event_webhooks::disable(&txn, endpoint_id, reason, since, now).await?
        };
        if now_disabled {
            disabled.push((endpoint_id, workspace_id));
        }
    }
    // The routes leave a disabled endpoint out before its disabling commits: no fact written
    // after the commit is written for it.
    for (_, workspace_id) in &disabled {
        events.reload(&txn, Some(*workspace_id)).await?;
    }
    txn.commit().await?;
    Ok(disabled)
}
