//! One attempt of one delivery: sign and post the stored body, and say how its row is to be
//! settled (its [`Outcome`], recorded with others').

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use chrono::{DateTime, Utc};
use hyper::header::{CONTENT_TYPE, HeaderMap, HeaderValue, USER_AGENT};
use parley_persistence::entities::{event_delivery, event_webhook};
use parley_persistence::event_deliveries::Settled;
use parley_persistence::{DeliveryStatus, clock};
use uuid::Uuid;

use super::super::sign::Signer;
use super::DeliveryDeps;
use super::outcomes::Outcome;
use crate::domain::SecretBox;
use crate::egress::{Connection, Dialer, Posted};

/// An endpoint as its lane posts to it: its address and its secrets, opened once.
#[derive(Debug)]
pub(super) struct Target {
    pub(super) id: Uuid,
    pub(super) workspace_id: i64,
    url: String,
    /// `url` parsed once, or why it cannot be.
    parsed: Result<reqwest::Url, String>,
    /// What its requests ask for: `url`'s path and query.
    path: String,
    /// The sealed secrets it was opened from: a rotation makes a new target.
    sealed: (String, Option<String>, Option<DateTime<Utc>>),
    /// The signers, or why the secrets could not be opened.
    signers: Result<Signers, String>,
}

/// Who signs: the current secret, and both while a rotated-out secret still signs.
#[derive(Debug)]
struct Signers {
    current: Signer,
    /// Until when the previous secret signs too, and the signer of both.
    with_previous: Option<(DateTime<Utc>, Signer)>,
}

impl Target {
    /// `endpoint`'s address, and its secrets opened with `secrets`.
    pub(super) fn new(endpoint: &event_webhook::Model, secrets: &SecretBox) -> Self {
        let open = |sealed: &str| {
            secrets
                .open(sealed)
                .map_err(|_| "the endpoint's secret could not be opened".to_owned())
        };
        let signers = open(&endpoint.secret).and_then(|current| {
            let with_previous = match (&endpoint.previous_secret, endpoint.previous_secret_until) {
                (Some(previous), Some(until)) => {
                    let previous = open(previous)?;
                    Some((until, Signer::new(&[&current, &previous])))
                }
                _ => None,
            };
            Ok(Signers {
                current: Signer::new(&[&current]),
                with_previous,
            })
        });
        let parsed = reqwest::Url::parse(&endpoint.url)
            .map_err(|_| "the endpoint's URL could not be read".to_owned());
        let path = parsed.as_ref().map_or_else(
            |_| "/".to_owned(),
            |url| match url.query() {
                Some(query) => format!("{}?{query}", url.path()),
                None => url.path().to_owned(),
            },
        );
        Self {
            id: endpoint.id,
            workspace_id: endpoint.workspace_id,
            url: endpoint.url.clone(),
            parsed,
            path,
            sealed: Self::sealed(endpoint),
            signers,
        }
    }

    /// Whether `endpoint` still posts and signs as this target does.
    pub(super) fn same_as(&self, endpoint: &event_webhook::Model) -> bool {
        self.url == endpoint.url && self.sealed == Self::sealed(endpoint)
    }

    fn sealed(endpoint: &event_webhook::Model) -> (String, Option<String>, Option<DateTime<Utc>>) {
        (
            endpoint.secret.clone(),
            endpoint.previous_secret.clone(),
            endpoint.previous_secret_until,
        )
    }

    /// Who signs at `now`: the current secret, and the previous one for a day after a
    /// rotation.
    fn signer(&self, now: DateTime<Utc>) -> Result<&Signer, String> {
        let signers = self.signers.as_ref().map_err(Clone::clone)?;
        Ok(match &signers.with_previous {
            Some((until, both)) if *until > now => both,
            _ => &signers.current,
        })
    }
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

/// How the endpoint's answer reads.
fn answer_of(posted: &Posted) -> Answer {
    let status = posted.status.as_u16();
    if posted.status.is_success() {
        Answer::Success(status)
    } else if status == 410 {
        Answer::Gone
    } else {
        let wait = posted
            .headers
            .get("retry-after")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map(Duration::from_secs);
        Answer::Refused(status, wait)
    }
}

/// One attempt of one delivery.
pub(super) struct Attempt {
    pub(super) deps: Arc<DeliveryDeps>,
    pub(super) dialer: Dialer,
    pub(super) target: Arc<Target>,
    pub(super) delivery: event_delivery::Model,
}

/// An attempt that ended: its outcome, and its connection when it can take the next one.
pub(super) struct Ended {
    pub(super) outcome: Outcome,
    pub(super) connection: Option<Connection>,
    /// The endpoint as the attempt posted to it.
    pub(super) target: Arc<Target>,
}

impl Attempt {
    /// Posts the delivery on `connection` (or a new one); answers how its row is to be
    /// settled.
    pub(super) async fn run(mut self, connection: Option<Connection>) -> Ended {
        let body = std::mem::take(&mut self.delivery.body);
        let (answer, connection) = self.post(connection, body).await;
        let (settled, disable) = self.settle(&answer, clock::now());
        crate::measure::event_delivery(match settled.status {
            DeliveryStatus::Succeeded => "succeeded",
            DeliveryStatus::Pending => "retried",
            DeliveryStatus::Failed => "failed",
        });
        let outcome = Outcome {
            endpoint_id: self.target.id,
            workspace_id: self.target.workspace_id,
            delivery_id: self.delivery.id,
            settled,
            disable,
        };
        Ended {
            outcome,
            connection,
            target: self.target,
        }
    }

    /// Signs and posts the stored `body` within the timeout; answers how the endpoint
    /// answered, and the connection when it stays open.
    async fn post(
        &self,
        connection: Option<Connection>,
        body: String,
    ) -> (Answer, Option<Connection>) {
        let now = clock::now();
        let signer = match self.target.signer(now) {
            Ok(signer) => signer,
            Err(error) => return (Answer::Unreachable(error), None),
        };
        let url = match &self.target.parsed {
            Ok(url) => url,
            Err(error) => return (Answer::Unreachable(error.clone()), None),
        };
        let id = self.delivery.event_id.to_string();
        let timestamp = now.timestamp();
        let signature = signer.sign(&id, timestamp, &body);
        let mut headers = HeaderMap::with_capacity(6);
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        headers.insert(USER_AGENT, HeaderValue::from_static("Parley-Webhooks/1"));
        // The id is a UUID and the signature base64, valid header values; were one not, the
        // delivery would fail rather than go out unsigned.
        let (Ok(signature), Ok(id)) = (HeaderValue::try_from(signature), HeaderValue::try_from(id))
        else {
            let why = "the delivery could not be signed".to_owned();
            return (Answer::Unreachable(why), None);
        };
        headers.insert("webhook-signature", signature);
        headers.insert("webhook-id", id);
        headers.insert("webhook-timestamp", HeaderValue::from(timestamp));
        let timeout = self.deps.settings.timeout;
        let sent = self.send(connection, url, headers, Bytes::from(body));
        match tokio::time::timeout(timeout, sent).await {
            Ok(Ok((posted, mut connection))) => {
                let open = connection.is_open();
                (answer_of(&posted), open.then_some(connection))
            }
            Ok(Err(error)) => {
                // An address the egress policy refuses reads as one that cannot be reached.
                tracing::debug!(%error, endpoint_id = %self.target.id, "an event post failed");
                let why = "the endpoint could not be reached".to_owned();
                (Answer::Unreachable(why), None)
            }
            Err(_) => {
                let why = format!("no answer within {} s", timeout.as_secs());
                (Answer::Unreachable(why), None)
            }
        }
    }

    /// Posts on `connection` while it is open, or on a new one. A connection that answered
    /// before and fails before answering this time is given up for a new one, once: the
    /// server may have closed it as it waited (the receiver tells a post made twice by its
    /// `webhook-id`).
    async fn send(
        &self,
        connection: Option<Connection>,
        url: &reqwest::Url,
        headers: HeaderMap,
        body: Bytes,
    ) -> std::io::Result<(Posted, Connection)> {
        let mut kept = connection.and_then(|mut c| c.is_open().then_some(c));
        loop {
            let mut connection = match kept.take() {
                Some(connection) => connection,
                None => self.dialer.connect(url).await?,
            };
            let used = connection.used();
            match connection
                .post(&self.target.path, headers.clone(), body.clone())
                .await
            {
                Ok(posted) => return Ok((posted, connection)),
                Err(_) if used => {}
                Err(error) => return Err(error),
            }
        }
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
