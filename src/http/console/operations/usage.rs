//! The workspace's usage this month against its quotas: model tokens this month, messages sent
//! today, and every figure of the month by metric.

use askama::Template;
use axum::Router;
use axum::extract::State;
use axum::response::Response;
use axum::routing::get;
use parley_persistence::clock;
use parley_persistence::usage::{self, GroupBy, quotas};

use crate::http::AppState;

use super::super::session::Console;
use super::super::view::Shell;
use super::super::{Failure, page};

pub(super) fn router() -> Router<AppState> {
    Router::new().route("/console/usage", get(usage_page))
}

/// One quota and where the workspace stands against it.
struct QuotaLine {
    name: &'static str,
    used: i64,
    /// `None`: no limit.
    limit: Option<i64>,
    /// Used, in percent of the limit (at most 100), for the meter.
    percent: i64,
    period: &'static str,
}

impl QuotaLine {
    fn new(name: &'static str, used: i64, limit: Option<i64>, period: &'static str) -> Self {
        let percent = match limit {
            Some(limit) if limit > 0 => (used.saturating_mul(100) / limit).min(100),
            Some(_) => 100,
            None => 0,
        };
        Self {
            name,
            used,
            limit,
            percent,
            period,
        }
    }
}

#[derive(Template)]
#[template(path = "console/usage.html")]
struct UsagePage {
    shell: Shell,
    month: String,
    quotas: Vec<QuotaLine>,
    figures: Vec<(&'static str, i64)>,
    requests_per_second: Option<u32>,
}

async fn usage_page(State(state): State<AppState>, console: Console) -> Result<Response, Failure> {
    let workspace_id = console.caller.workspace_id;
    let today = clock::now().date_naive();
    let db = &state.db;
    let month = usage::read(
        db,
        Some(workspace_id),
        usage::month_start(today),
        today,
        GroupBy::Day,
    )
    .await?;
    let limits = quotas::get(db, workspace_id).await?;
    let tokens = month.totals["model_prompt_tokens"] + month.totals["model_completion_tokens"];
    let sent_today = usage::day_messages(db, workspace_id, today, None).await?;
    let mut lines = vec![
        QuotaLine::new(
            "Model tokens",
            tokens,
            limits.model_tokens_per_month,
            "this month",
        ),
        QuotaLine::new(
            "Messages sent",
            sent_today,
            limits.messages_per_day,
            "today",
        ),
    ];
    for (category, limit) in &limits.messages_per_day_by_category {
        let used = usage::day_messages(db, workspace_id, today, Some(*category)).await?;
        lines.push(QuotaLine::new(
            category.as_str(),
            used,
            Some(*limit),
            "today",
        ));
    }
    Ok(page(&UsagePage {
        shell: Shell::new(&console, "usage"),
        month: today.format("%B %Y").to_string(),
        quotas: lines,
        figures: month.totals.into_iter().collect(),
        requests_per_second: limits.requests_per_second_per_key,
    }))
}
