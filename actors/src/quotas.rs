//! Quotas: what a workspace may use, held where the work is decided — before a model call
//! (tokens this month) and before a business-initiated send (messages today) — against the
//! cluster's figures in `usage_daily`, never a node's own.
//!
//! A workspace without quotas costs nothing but a cached lookup. With a quota, each check reads
//! one sum over the workspace's day buckets (an index range of its primary key). Work already
//! in flight when a quota is reached finishes: a quota can be passed by what was under way, never
//! by new work. The first refusal of a quota in a period tells `usage.quota_reached` (once per
//! node and period).

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, NaiveDate, Utc};
use parley_persistence::usage::{self, Category, quotas::Quotas as Limits};
use parley_persistence::{DatabaseConnection, EventType, GroupCommit, PersistenceError, clock};
use serde_json::json;

use crate::events::Events;
use crate::remembered::Remembered;

/// How long a workspace's quotas are kept before they are read again (a change made on this
/// node is seen at once; one made on another within this). Past half of it the next check
/// reads them again in the background ([`Remembered`]), so a workspace in steady use never
/// waits for the read: a streamed turn every 0.4 s read them on its path one turn in five.
const QUOTAS_FRESH_FOR: Duration = Duration::from_secs(2);

/// A quota that refuses more work until it resets.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error, serde::Serialize, serde::Deserialize)]
#[error("The workspace's quota {quota} is used up ({used} of {limit}); it resets at {resets_at}")]
pub struct Exceeded {
    /// Its name: `model_tokens_per_month`, `messages_per_day` or
    /// `messages_per_day.{category}`.
    pub quota: String,
    /// The limit.
    pub limit: i64,
    /// What was used.
    pub used: i64,
    /// When the period ends.
    pub resets_at: DateTime<Utc>,
}

impl Exceeded {
    /// Seconds until it resets (at least 1).
    pub fn retry_after_secs(&self) -> u64 {
        u64::try_from((self.resets_at - clock::now()).num_seconds())
            .unwrap_or(0)
            .max(1)
    }
}

/// Why a quota check failed.
#[derive(Debug, thiserror::Error)]
pub enum QuotaError {
    /// Used up.
    #[error(transparent)]
    Exceeded(#[from] Exceeded),
    /// The database could not say.
    #[error(transparent)]
    Storage(#[from] PersistenceError),
}

/// The quotas of every workspace, as checks need them; cheap to clone.
#[derive(Clone, Debug)]
pub struct Quotas {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    db: DatabaseConnection,
    writer: GroupCommit,
    events: Events,
    cached: Remembered<i64, Arc<Limits>>,
    /// The quotas told reached, by workspace, name and period start.
    told: Mutex<HashSet<(i64, String, NaiveDate)>>,
}

impl Quotas {
    /// Quotas read from `db`, their events written through `writer`.
    pub fn new(db: DatabaseConnection, writer: GroupCommit, events: Events) -> Self {
        Self {
            inner: Arc::new(Inner {
                db,
                writer,
                events,
                cached: Remembered::new(QUOTAS_FRESH_FOR),
                told: Mutex::default(),
            }),
        }
    }

    /// The quotas of `workspace_id`.
    ///
    /// # Errors
    /// The database's.
    pub async fn of(&self, workspace_id: i64) -> Result<Arc<Limits>, PersistenceError> {
        let read = || {
            let db = self.inner.db.clone();
            async move {
                let limits = usage::quotas::get(&db, workspace_id).await?;
                Ok::<_, PersistenceError>(Some(Arc::new(limits)))
            }
        };
        let limits = self.inner.cached.recall(&workspace_id, read).await?;
        // A read answers something for every workspace (no quotas is a value too).
        Ok(limits.unwrap_or_default())
    }

    /// Forgets what is kept of `workspace_id`'s quotas (they were just set).
    pub fn forget(&self, workspace_id: i64) {
        self.inner.cached.forget(|w, _| *w == workspace_id);
        if let Ok(mut told) = self.inner.told.lock() {
            told.retain(|(w, _, _)| *w != workspace_id);
        }
    }

    /// Whether `workspace_id` may call the model: its tokens this month are under its quota.
    ///
    /// # Errors
    /// [`QuotaError::Exceeded`] past it.
    pub async fn tokens(&self, workspace_id: i64) -> Result<(), QuotaError> {
        let Some(limit) = self.of(workspace_id).await?.model_tokens_per_month else {
            return Ok(());
        };
        let today = clock::now().date_naive();
        let used = usage::month_tokens(&self.inner.db, workspace_id, today).await?;
        if used < limit {
            return Ok(());
        }
        let exceeded = Exceeded {
            quota: "model_tokens_per_month".to_owned(),
            limit,
            used,
            resets_at: midnight(usage::next_month(today)),
        };
        self.reached(workspace_id, &exceeded, usage::month_start(today))
            .await;
        Err(exceeded.into())
    }

    /// Whether `workspace_id` may send one more message of `category` today: under its daily
    /// quota for every category, and under the category's own.
    ///
    /// # Errors
    /// [`QuotaError::Exceeded`] past either.
    pub async fn messages(&self, workspace_id: i64, category: Category) -> Result<(), QuotaError> {
        let limits = self.of(workspace_id).await?;
        let today = clock::now().date_naive();
        let checks = [
            (limits.messages_per_day, None, "messages_per_day".to_owned()),
            (
                limits.messages_per_day_by_category.get(&category).copied(),
                Some(category),
                format!("messages_per_day.{}", category.as_str()),
            ),
        ];
        for (limit, of, quota) in checks {
            let Some(limit) = limit else {
                continue;
            };
            let used = usage::day_messages(&self.inner.db, workspace_id, today, of).await?;
            if used >= limit {
                let exceeded = Exceeded {
                    quota,
                    limit,
                    used,
                    resets_at: midnight(today.succ_opt().unwrap_or(today)),
                };
                self.reached(workspace_id, &exceeded, today).await;
                return Err(exceeded.into());
            }
        }
        Ok(())
    }

    /// Tells `usage.quota_reached` the first time `exceeded` refuses work in its period.
    async fn reached(&self, workspace_id: i64, exceeded: &Exceeded, period: NaiveDate) {
        let first = self
            .inner
            .told
            .lock()
            .is_ok_and(|mut told| told.insert((workspace_id, exceeded.quota.clone(), period)));
        if !first {
            return;
        }
        crate::measure::quota_reached(&exceeded.quota);
        tracing::warn!(workspace_id, quota = %exceeded.quota, used = exceeded.used, limit = exceeded.limit, "a workspace reached a quota");
        let event = self
            .inner
            .events
            .event(workspace_id, EventType::UsageQuotaReached, || {
                json!({"quota": exceeded.quota, "limit": exceeded.limit, "used": exceeded.used,
                       "resets_at": exceeded.resets_at})
            });
        let Some(event) = event else {
            return;
        };
        let written = self
            .inner
            .events
            .write_with(&self.inner.writer, vec![event], |_| {
                Box::pin(async { Ok::<(), PersistenceError>(()) })
            })
            .await;
        if let Err(error) = written {
            tracing::warn!(%error, workspace_id, "the quota's event could not be stored");
        }
    }
}

/// The start of `day`, UTC.
fn midnight(day: NaiveDate) -> DateTime<Utc> {
    day.and_hms_opt(0, 0, 0).unwrap_or_default().and_utc()
}
