//! Usage: what each workspace used, counted in UTC day buckets and written in the transaction
//! of the fact counted (a model's answer, a message stored or sent, an event delivered, a file
//! kept), so that a count is never lost nor made twice by a crash between the two.
//!
//! A count with no assistant or no channel is kept under the nil UUID (see the migration), and
//! read back as `None`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};

use chrono::{DateTime, Datelike, NaiveDate, Utc};
use sea_orm::sea_query::{Alias, Expr, ExprTrait, Func, InsertStatement, OnConflict};
use sea_orm::{
    ColumnTrait, ConnectionTrait, EntityTrait, FromQueryResult, QueryFilter, QuerySelect,
    QueryTrait,
};
use uuid::Uuid;

use crate::Result;
use crate::entities::usage_daily;

pub mod quotas;
mod read;

pub use read::{
    Bucket, Figures, GroupBy, Usage, day_messages, installation_totals, month_tokens, read,
};

/// Whether counts are written: on, except in the benchmark that weighs metering itself.
static METERING: AtomicBool = AtomicBool::new(true);

/// Turns metering on or off for this process (`usage.metering`; on by default).
pub fn set_metering(on: bool) {
    METERING.store(on, Ordering::Relaxed);
}

/// Whether counts are written.
pub fn metering() -> bool {
    METERING.load(Ordering::Relaxed)
}

/// A pricing category of Meta's for a message sent (ordered as [`Category::ALL`]).
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum Category {
    /// A marketing template.
    Marketing,
    /// A utility template.
    Utility,
    /// An authentication template.
    Authentication,
    /// Free text (or media) in the person's 24-hour service window.
    Service,
}

impl Category {
    /// Every category, in the order the API lists them.
    pub const ALL: [Self; 4] = [
        Self::Marketing,
        Self::Utility,
        Self::Authentication,
        Self::Service,
    ];

    /// Its name (`marketing`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Marketing => "marketing",
            Self::Utility => "utility",
            Self::Authentication => "authentication",
            Self::Service => "service",
        }
    }

    /// The category of Meta's template category (`MARKETING`, `UTILITY`, `AUTHENTICATION`),
    /// any case; `None` for anything else.
    pub fn of_template(category: &str) -> Option<Self> {
        Self::ALL
            .into_iter()
            .filter(|c| *c != Self::Service)
            .find(|c| c.as_str().eq_ignore_ascii_case(category))
    }

    /// The category named `name` (`marketing`, …).
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|c| c.as_str() == name)
    }
}

/// What is counted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Metric {
    /// The model's prompt tokens.
    ModelPromptTokens,
    /// The model's completion tokens.
    ModelCompletionTokens,
    /// Messages Meta accepted (or the sandbox delivered), by pricing category.
    MessagesSent(Category),
    /// Messages people sent in.
    MessagesReceived,
    /// Tool calls answered by an MCP server.
    McpCalls,
    /// Event deliveries the endpoint took.
    EventDeliveries,
    /// Bytes of media kept.
    MediaBytes,
}

impl Metric {
    /// Every metric, in the order the API lists them.
    pub const ALL: [Self; 10] = [
        Self::ModelPromptTokens,
        Self::ModelCompletionTokens,
        Self::MessagesSent(Category::Marketing),
        Self::MessagesSent(Category::Utility),
        Self::MessagesSent(Category::Authentication),
        Self::MessagesSent(Category::Service),
        Self::MessagesReceived,
        Self::McpCalls,
        Self::EventDeliveries,
        Self::MediaBytes,
    ];

    /// Its stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ModelPromptTokens => "model_prompt_tokens",
            Self::ModelCompletionTokens => "model_completion_tokens",
            Self::MessagesSent(Category::Marketing) => "messages_sent_marketing",
            Self::MessagesSent(Category::Utility) => "messages_sent_utility",
            Self::MessagesSent(Category::Authentication) => "messages_sent_authentication",
            Self::MessagesSent(Category::Service) => "messages_sent_service",
            Self::MessagesReceived => "messages_received",
            Self::McpCalls => "mcp_calls",
            Self::EventDeliveries => "event_deliveries",
            Self::MediaBytes => "media_bytes",
        }
    }
}

/// One count to add.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Count {
    /// The workspace.
    pub workspace_id: i64,
    /// The UTC day.
    pub day: NaiveDate,
    /// The assistant it is of, if any.
    pub assistant_id: Option<Uuid>,
    /// The channel it is of, if any.
    pub channel_id: Option<Uuid>,
    /// What.
    pub metric: Metric,
    /// How much.
    pub value: i64,
}

impl Count {
    /// `value` of `metric` for `workspace_id` at `at`, of no assistant and no channel.
    pub fn new(workspace_id: i64, at: DateTime<Utc>, metric: Metric, value: i64) -> Self {
        Self {
            workspace_id,
            day: at.date_naive(),
            assistant_id: None,
            channel_id: None,
            metric,
            value,
        }
    }

    /// The same, of `channel_id`.
    pub fn on(mut self, channel_id: Uuid) -> Self {
        self.channel_id = Some(channel_id);
        self
    }

    /// The same, of `assistant_id` (if any).
    pub fn by(mut self, assistant_id: Option<Uuid>) -> Self {
        self.assistant_id = assistant_id;
        self
    }

    fn key(&self) -> (i64, NaiveDate, Uuid, Uuid, Metric) {
        (
            self.workspace_id,
            self.day,
            self.assistant_id.unwrap_or_default(),
            self.channel_id.unwrap_or_default(),
            self.metric,
        )
    }
}

/// Adds `counts` in one statement (those of one key summed first; zeros left out), in the
/// transaction `db` is; inside a writer's batch, with the batch's others just before its commit
/// (see `group_commit::deferred`). Nothing is written while metering is off.
///
/// # Errors
/// The database's.
pub async fn add(db: &impl ConnectionTrait, counts: &[Count]) -> Result<()> {
    if let Some(upsert) = to_write(counts) {
        db.execute(&upsert).await?;
    }
    Ok(())
}

/// The statement that adds `counts` where the caller writes (see [`add`]), for a caller that
/// writes it with its fact's own statements in one call (`crate::one_call`); `None` when
/// nothing is to be written there: metering is off, the counts are kept back for the end of the
/// writer's batch the caller runs in, or they are all zero.
pub fn to_write(counts: &[Count]) -> Option<InsertStatement> {
    if !metering() || crate::group_commit::keep_counts(counts) {
        return None;
    }
    upsert(counts)
}

/// The `UPSERT` of `counts`, those of one key summed; `None` when all are zero.
fn upsert(counts: &[Count]) -> Option<InsertStatement> {
    let mut summed: HashMap<(i64, NaiveDate, Uuid, Uuid, Metric), i64> = HashMap::new();
    for count in counts.iter().filter(|c| c.value != 0) {
        *summed.entry(count.key()).or_default() += count.value;
    }
    if summed.is_empty() {
        return None;
    }
    // A stable order: two writers adding the same keys lock their rows in the same order.
    let mut rows: Vec<_> = summed.into_iter().collect();
    rows.sort_by(|a, b| {
        (a.0.0, a.0.1, a.0.2, a.0.3, a.0.4.as_str()).cmp(&(
            b.0.0,
            b.0.1,
            b.0.2,
            b.0.3,
            b.0.4.as_str(),
        ))
    });
    let rows = rows.into_iter().map(
        |((workspace_id, day, assistant_id, channel_id, metric), value)| usage_daily::ActiveModel {
            workspace_id: sea_orm::Set(workspace_id),
            day: sea_orm::Set(day),
            assistant_id: sea_orm::Set(assistant_id),
            channel_id: sea_orm::Set(channel_id),
            metric: sea_orm::Set(metric.as_str().to_owned()),
            value: sea_orm::Set(value),
        },
    );
    let upsert = usage_daily::Entity::insert_many(rows)
        .on_conflict(
            OnConflict::columns([
                usage_daily::Column::WorkspaceId,
                usage_daily::Column::Day,
                usage_daily::Column::AssistantId,
                usage_daily::Column::ChannelId,
                usage_daily::Column::Metric,
            ])
            .value(
                usage_daily::Column::Value,
                Expr::col((usage_daily::Entity, usage_daily::Column::Value))
                    .add(Expr::cust("excluded.value")),
            )
            .to_owned(),
        )
        .into_query();
    Some(upsert)
}

/// The first day of the UTC month `day` is in.
pub fn month_start(day: NaiveDate) -> NaiveDate {
    day.with_day(1).unwrap_or(day)
}

/// The first day of the month after `day`'s.
pub fn next_month(day: NaiveDate) -> NaiveDate {
    let (year, month) = match day.month() {
        12 => (day.year() + 1, 1),
        m => (day.year(), m + 1),
    };
    NaiveDate::from_ymd_opt(year, month, 1).unwrap_or(day)
}

/// `SUM(value)` as a 64-bit integer on both databases (PostgreSQL's sum of a `bigint` is a
/// `numeric`).
fn summed() -> Expr {
    Func::cast_as(
        Func::sum(Expr::col(usage_daily::Column::Value)),
        Alias::new("BIGINT"),
    )
    .into()
}

/// The sums of `metrics` for `workspace_id` from `from` to `to` (both days included).
async fn sum_of(
    db: &impl ConnectionTrait,
    workspace_id: i64,
    from: NaiveDate,
    to: NaiveDate,
    metrics: &[Metric],
) -> Result<i64> {
    #[derive(FromQueryResult)]
    struct Sum {
        total: Option<i64>,
    }
    let names: Vec<&str> = metrics.iter().map(|m| m.as_str()).collect();
    let sum = usage_daily::Entity::find()
        .select_only()
        .column_as(summed(), "total")
        .filter(usage_daily::Column::WorkspaceId.eq(workspace_id))
        .filter(usage_daily::Column::Day.between(from, to))
        .filter(usage_daily::Column::Metric.is_in(names))
        .into_model::<Sum>()
        .one(db)
        .await?;
    Ok(sum.and_then(|s| s.total).unwrap_or(0))
}

#[cfg(test)]
mod tests;
