//! Operator commands that ask the running server with the operator token: the actor tree,
//! usage, and a workspace's quotas.

use anyhow::Context;
use serde_json::{Value, json};

use crate::config::Settings;

/// Answers `method path` (with `body`) asked of the server at `url` (default: the configured
/// bind address) with the operator token: the answer's `data`.
async fn ask(
    settings: &Settings,
    url: Option<String>,
    method: reqwest::Method,
    path: &str,
    body: Option<Value>,
) -> anyhow::Result<Value> {
    let token = settings
        .server
        .operator_token
        .as_ref()
        .filter(|t| !t.expose().is_empty())
        .context("set server.operator_token (PARLEY_OPERATOR_TOKEN) for operator commands")?;
    let base = url.unwrap_or_else(|| format!("http://{}", settings.server.bind));
    parley_actors::llm::install_crypto_provider();
    let mut request = reqwest::Client::new()
        .request(method, format!("{}{path}", base.trim_end_matches('/')))
        .bearer_auth(token.expose());
    if let Some(body) = body {
        request = request.json(&body);
    }
    let answer = request
        .send()
        .await
        .with_context(|| format!("asking {base} for {path}"))?;
    let status = answer.status();
    let body: Value = answer.json().await.context("reading the server's answer")?;
    if !status.is_success() {
        anyhow::bail!(
            "the server answered {status}: {}",
            body["message"].as_str().unwrap_or("no message")
        );
    }
    Ok(body["data"].clone())
}

/// `parley admin actors`: the installation-wide tree.
pub(super) async fn actors(settings: &Settings, url: Option<String>) -> anyhow::Result<()> {
    let tree = ask(settings, url, reqwest::Method::GET, "/admin/actors", None).await?;
    println!("root");
    for supervisor in tree["supervisors"].as_array().into_iter().flatten() {
        let resting = supervisor["resting"]
            .as_u64()
            .map(|n| format!(", {n} resting"))
            .unwrap_or_default();
        println!(
            "├── {:<20} {} live{resting}",
            supervisor["path"].as_str().unwrap_or_default(),
            supervisor["live"]
        );
    }
    Ok(())
}

/// What `parley admin usage` reads.
#[derive(Debug, clap::Args)]
pub(super) struct UsageArgs {
    /// One workspace (default: every workspace together).
    #[arg(long)]
    workspace: Option<i64>,
    /// First day, `YYYY-MM-DD` (default: the first of this month).
    #[arg(long)]
    from: Option<String>,
    /// Last day, included (default: today).
    #[arg(long)]
    to: Option<String>,
    /// `day`, `assistant`, `channel` or `worker`.
    #[arg(long, default_value = "day")]
    group_by: String,
    /// The server's base URL (default: `http://` and the configured bind address).
    #[arg(long)]
    url: Option<String>,
}

/// `parley admin usage`: the installation's (or a workspace's) usage, as JSON.
pub(super) async fn usage(settings: &Settings, args: UsageArgs) -> anyhow::Result<()> {
    let mut query = vec![format!("group_by={}", args.group_by)];
    query.extend(args.workspace.map(|w| format!("workspace_id={w}")));
    query.extend(args.from.map(|d| format!("from={d}")));
    query.extend(args.to.map(|d| format!("to={d}")));
    let path = format!("/admin/usage?{}", query.join("&"));
    let usage = ask(settings, args.url, reqwest::Method::GET, &path, None).await?;
    println!("{}", serde_json::to_string_pretty(&usage)?);
    Ok(())
}

/// What `parley admin quota` sets.
#[derive(Debug, clap::Args)]
pub(super) struct QuotaArgs {
    /// The workspace.
    #[arg(long)]
    workspace: i64,
    /// Model tokens per UTC month.
    #[arg(long)]
    model_tokens_per_month: Option<i64>,
    /// Messages sent per UTC day, every category together.
    #[arg(long)]
    messages_per_day: Option<i64>,
    /// Messages of one category per day, as `category=limit` (repeatable).
    #[arg(long = "messages-per-day-of", value_parser = category_limit)]
    messages_per_day_of: Vec<(String, i64)>,
    /// Requests per second per API key.
    #[arg(long)]
    requests_per_second_per_key: Option<i64>,
    /// The server's base URL (default: `http://` and the configured bind address).
    #[arg(long)]
    url: Option<String>,
}

fn category_limit(raw: &str) -> Result<(String, i64), String> {
    let (category, limit) = raw
        .split_once('=')
        .ok_or_else(|| "expected category=limit, e.g. marketing=1000".to_owned())?;
    let limit = limit
        .parse()
        .map_err(|_| format!("{limit} is not a whole number"))?;
    Ok((category.to_owned(), limit))
}

/// `parley admin quota`: sets a workspace's quotas (every one: one not given is lifted).
pub(super) async fn quota(settings: &Settings, args: QuotaArgs) -> anyhow::Result<()> {
    let by_category: serde_json::Map<String, Value> = args
        .messages_per_day_of
        .into_iter()
        .map(|(category, limit)| (category, json!(limit)))
        .collect();
    let body = json!({
        "model_tokens_per_month": args.model_tokens_per_month,
        "messages_per_day": args.messages_per_day,
        "messages_per_day_by_category": by_category,
        "requests_per_second_per_key": args.requests_per_second_per_key,
    });
    let path = format!("/admin/workspaces/{}/quotas", args.workspace);
    let set = ask(settings, args.url, reqwest::Method::PUT, &path, Some(body)).await?;
    println!("{}", serde_json::to_string_pretty(&set)?);
    Ok(())
}
