//! Requests per second per API key, the workspace's quota `requests_per_second_per_key` (set by
//! the operator), held with `governor` when the key authenticates. Every answer to a limited
//! key carries the IETF draft's `RateLimit-Policy` and `RateLimit` headers; past the limit the
//! answer is 429 `quota_exceeded` with `Retry-After`. A node holds its own count (on a cluster
//! each node allows the rate).

use std::collections::HashMap;
use std::num::NonZeroU32;
use std::sync::{Arc, Mutex, PoisonError};

use axum::extract::Request;
use axum::http::HeaderValue;
use axum::middleware::Next;
use axum::response::Response;
use governor::clock::{Clock, DefaultClock};
use governor::middleware::StateInformationMiddleware;
use governor::state::keyed::DashMapStateStore;
use governor::{Quota, RateLimiter};
use parley_actors::quotas::Exceeded;
use parley_persistence::clock;
use uuid::Uuid;

use crate::http::error::ApiError;

type KeyLimiter =
    RateLimiter<Uuid, DashMapStateStore<Uuid>, DefaultClock, StateInformationMiddleware>;

/// A workspace's limiter and the rate it was built for.
type Limited = (u32, Arc<KeyLimiter>);

/// Keys remembered per workspace before the limiter forgets the quiet ones.
const REMEMBERED_KEYS: usize = 10_000;

/// The limiters of the workspaces with a rate quota, each with the rate it was built for.
#[derive(Clone, Debug, Default)]
pub(crate) struct KeyLimits {
    by_workspace: Arc<Mutex<HashMap<i64, Limited>>>,
}

/// Where a key stands after a request: what the headers tell.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Standing {
    per_second: u32,
    remaining: u32,
    reset_secs: u64,
}

impl KeyLimits {
    /// Counts one request of `key_id` against `per_second` for the workspace: its standing,
    /// or 429 `quota_exceeded` past it (with the standing for the headers).
    pub(crate) fn admit(
        &self,
        workspace_id: i64,
        per_second: u32,
        key_id: Uuid,
    ) -> Result<Standing, (ApiError, Standing)> {
        let Some(rate) = NonZeroU32::new(per_second) else {
            let standing = Standing {
                per_second,
                remaining: 0,
                reset_secs: 1,
            };
            return Err((refusal(per_second, 1), standing));
        };
        let limiter = {
            let mut all = self
                .by_workspace
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            let entry = all
                .entry(workspace_id)
                .or_insert_with(|| (0, limiter(rate)));
            if entry.0 != per_second {
                *entry = (per_second, limiter(rate));
            }
            entry.1.clone()
        };
        if limiter.len() > REMEMBERED_KEYS {
            limiter.retain_recent();
        }
        match limiter.check_key(&key_id) {
            Ok(snapshot) => Ok(Standing {
                per_second,
                remaining: snapshot.remaining_burst_capacity(),
                reset_secs: 1,
            }),
            Err(not_until) => {
                let wait = not_until.wait_time_from(DefaultClock::default().now());
                let secs = (wait.as_secs_f64().ceil() as u64).max(1);
                let standing = Standing {
                    per_second,
                    remaining: 0,
                    reset_secs: secs,
                };
                Err((refusal(per_second, secs), standing))
            }
        }
    }
}

fn limiter(rate: NonZeroU32) -> Arc<KeyLimiter> {
    Arc::new(
        RateLimiter::dashmap(Quota::per_second(rate))
            .with_middleware::<StateInformationMiddleware>(),
    )
}

fn refusal(per_second: u32, secs: u64) -> ApiError {
    let limit = i64::from(per_second);
    ApiError::QuotaExceeded(Exceeded {
        quota: "requests_per_second_per_key".to_owned(),
        limit,
        used: limit,
        resets_at: clock::now() + chrono::Duration::seconds(i64::try_from(secs).unwrap_or(1)),
    })
}

/// Where the authentication of a request leaves its key's standing, for the response's headers.
#[derive(Clone, Debug, Default)]
pub(crate) struct StandingSlot(Arc<Mutex<Option<Standing>>>);

impl StandingSlot {
    /// Keeps `standing` for the response.
    pub(crate) fn set(&self, standing: Standing) {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = Some(standing);
    }
}

/// Gives every request a slot for its key's standing and, when its key is limited, tells the
/// standing in the response's `RateLimit-Policy` and `RateLimit` headers.
pub(crate) async fn headers(mut request: Request, next: Next) -> Response {
    let slot = StandingSlot::default();
    request.extensions_mut().insert(slot.clone());
    let mut response = next.run(request).await;
    let standing = *slot.0.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(standing) = standing {
        let policy = format!("\"per-key\";q={};w=1", standing.per_second);
        let now = format!(
            "\"per-key\";r={};t={}",
            standing.remaining, standing.reset_secs
        );
        for (name, value) in [("ratelimit-policy", policy), ("ratelimit", now)] {
            if let Ok(value) = HeaderValue::from_str(&value) {
                response.headers_mut().insert(name, value);
            }
        }
    }
    response
}
