//! Reading usage back: a workspace's (or the installation's) totals and buckets over days, and
//! the sums quotas are held against.

use std::collections::{BTreeMap, HashMap};

use chrono::NaiveDate;
use sea_orm::{
    ColumnTrait, ConnectionTrait, EntityTrait, FromQueryResult, QueryFilter, QuerySelect,
};
use uuid::Uuid;

use super::{Category, Metric, month_start, sum_of, summed};
use crate::Result;
use crate::entities::{assistant, channel, usage_daily};

/// How buckets are keyed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GroupBy {
    /// By UTC day.
    Day,
    /// By assistant (counts of none under `None`).
    Assistant,
    /// By channel (counts of none under `None`).
    Channel,
    /// By worker: the assistant's, else the channel's synced worker.
    Worker,
}

impl GroupBy {
    /// The grouping named `name`.
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "day" => Some(Self::Day),
            "assistant" => Some(Self::Assistant),
            "channel" => Some(Self::Channel),
            "worker" => Some(Self::Worker),
            _ => None,
        }
    }
}

/// Every metric by name, each from zero.
pub type Figures = BTreeMap<&'static str, i64>;

fn zeros() -> Figures {
    Metric::ALL.iter().map(|m| (m.as_str(), 0)).collect()
}

fn add_to(figures: &mut Figures, metric: &str, value: i64) {
    if let Some(known) = Metric::ALL.iter().find(|m| m.as_str() == metric) {
        *figures.entry(known.as_str()).or_default() += value;
    }
}

/// One bucket: its key (the one its grouping fills) and its figures.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Bucket {
    /// For `day`.
    pub day: Option<NaiveDate>,
    /// For `assistant`, `channel` or `worker`: the id, `None` for counts of none.
    pub id: Option<Uuid>,
    /// Every metric.
    pub figures: Figures,
}

/// What was used over some days.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Usage {
    /// Every metric, summed.
    pub totals: Figures,
    /// The buckets, in key order.
    pub buckets: Vec<Bucket>,
}

#[derive(FromQueryResult)]
struct Row {
    day: NaiveDate,
    assistant_id: Uuid,
    channel_id: Uuid,
    metric: String,
    value: i64,
}

/// The usage of `workspace_id` (or of every workspace) from `from` to `to`, both days
/// included, in buckets by `group_by`.
///
/// # Errors
/// The database's.
pub async fn read(
    db: &impl ConnectionTrait,
    workspace_id: Option<i64>,
    from: NaiveDate,
    to: NaiveDate,
    group_by: GroupBy,
) -> Result<Usage> {
    let mut query = usage_daily::Entity::find()
        .select_only()
        .column(usage_daily::Column::Day)
        .column(usage_daily::Column::AssistantId)
        .column(usage_daily::Column::ChannelId)
        .column(usage_daily::Column::Metric)
        .column_as(summed(), "value")
        .filter(usage_daily::Column::Day.between(from, to))
        .group_by(usage_daily::Column::Day)
        .group_by(usage_daily::Column::AssistantId)
        .group_by(usage_daily::Column::ChannelId)
        .group_by(usage_daily::Column::Metric);
    if let Some(id) = workspace_id {
        query = query.filter(usage_daily::Column::WorkspaceId.eq(id));
    }
    let rows = query.into_model::<Row>().all(db).await?;
    let workers = match group_by {
        GroupBy::Worker => workers_of(db, &rows).await?,
        _ => Workers::default(),
    };
    let mut totals = zeros();
    let mut by_day: BTreeMap<NaiveDate, Figures> = BTreeMap::new();
    let mut by_id: BTreeMap<Option<Uuid>, Figures> = BTreeMap::new();
    for row in &rows {
        add_to(&mut totals, &row.metric, row.value);
        let figures = match group_by {
            GroupBy::Day => by_day.entry(row.day).or_insert_with(zeros),
            GroupBy::Assistant => by_id.entry(some(row.assistant_id)).or_insert_with(zeros),
            GroupBy::Channel => by_id.entry(some(row.channel_id)).or_insert_with(zeros),
            GroupBy::Worker => by_id
                .entry(workers.of(row.assistant_id, row.channel_id))
                .or_insert_with(zeros),
        };
        add_to(figures, &row.metric, row.value);
    }
    let buckets = match group_by {
        GroupBy::Day => by_day
            .into_iter()
            .map(|(day, figures)| Bucket {
                day: Some(day),
                id: None,
                figures,
            })
            .collect(),
        _ => by_id
            .into_iter()
            .map(|(id, figures)| Bucket {
                day: None,
                id,
                figures,
            })
            .collect(),
    };
    Ok(Usage { totals, buckets })
}

/// The nil UUID (a count of none) as `None`.
fn some(id: Uuid) -> Option<Uuid> {
    (!id.is_nil()).then_some(id)
}

/// The workers of the assistants and channels counted.
#[derive(Default)]
struct Workers {
    of_assistant: HashMap<Uuid, Uuid>,
    of_channel: HashMap<Uuid, Uuid>,
}

impl Workers {
    fn of(&self, assistant_id: Uuid, channel_id: Uuid) -> Option<Uuid> {
        self.of_assistant
            .get(&assistant_id)
            .or_else(|| self.of_channel.get(&channel_id))
            .copied()
    }
}

async fn workers_of(db: &impl ConnectionTrait, rows: &[Row]) -> Result<Workers> {
    let mut assistants: Vec<Uuid> = rows.iter().filter_map(|r| some(r.assistant_id)).collect();
    let mut channels: Vec<Uuid> = rows.iter().filter_map(|r| some(r.channel_id)).collect();
    for ids in [&mut assistants, &mut channels] {
        ids.sort_unstable();
        ids.dedup();
    }
    let mut workers = Workers::default();
    for chunk in assistants.chunks(500) {
        for found in assistant::Entity::find()
            .filter(assistant::Column::Id.is_in(chunk.iter().copied()))
            .all(db)
            .await?
        {
            workers.of_assistant.insert(found.id, found.worker_id);
        }
    }
    for chunk in channels.chunks(500) {
        for found in channel::Entity::find()
            .filter(channel::Column::Id.is_in(chunk.iter().copied()))
            .all(db)
            .await?
        {
            if let Some(worker) = found.worker_id {
                workers.of_channel.insert(found.id, worker);
            }
        }
    }
    Ok(workers)
}

/// The model tokens (prompt and completion) `workspace_id` used in the UTC month of `today`,
/// up to and including it.
///
/// # Errors
/// The database's.
pub async fn month_tokens(
    db: &impl ConnectionTrait,
    workspace_id: i64,
    today: NaiveDate,
) -> Result<i64> {
    let metrics = [Metric::ModelPromptTokens, Metric::ModelCompletionTokens];
    sum_of(db, workspace_id, month_start(today), today, &metrics).await
}

/// The messages `workspace_id` sent on `day`: of one category, or of all.
///
/// # Errors
/// The database's.
pub async fn day_messages(
    db: &impl ConnectionTrait,
    workspace_id: i64,
    day: NaiveDate,
    category: Option<Category>,
) -> Result<i64> {
    let metrics: Vec<Metric> = match category {
        Some(category) => vec![Metric::MessagesSent(category)],
        None => Category::ALL
            .into_iter()
            .map(Metric::MessagesSent)
            .collect(),
    };
    sum_of(db, workspace_id, day, day, &metrics).await
}

/// Every metric summed over every workspace and day: the installation's figures.
///
/// # Errors
/// The database's.
pub async fn installation_totals(db: &impl ConnectionTrait) -> Result<Figures> {
    #[derive(FromQueryResult)]
    struct Total {
        metric: String,
        value: i64,
    }
    let rows = usage_daily::Entity::find()
        .select_only()
        .column(usage_daily::Column::Metric)
        .column_as(summed(), "value")
        .group_by(usage_daily::Column::Metric)
        .into_model::<Total>()
        .all(db)
        .await?;
    let mut totals = zeros();
    for row in rows {
        add_to(&mut totals, &row.metric, row.value);
    }
    Ok(totals)
}
