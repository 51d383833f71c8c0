//! How much latency a chat turn adds over the model's own time.
//!
//! Starts Parley in-process on SQLite (or `PARLEY_BENCH_DATABASE_URL`) with the testkit fake
//! model answering instantly, then measures in the same run:
//! - baseline: the same Chat Completions request posted straight to the fake model;
//! - chat: `POST /conversation/{id}/chat/{channel}` through Parley, round-robin over identities.
//!
//! Run: `cargo run --release -p parley-benches --bin chat_latency -- [turns] [identities]`

use std::time::{Duration, Instant};

use anyhow::Context;
use parley::config::Settings;
use parley::startup::Application;
use parley::tenancy::{BootstrapRequest, bootstrap};
use parley_benches::{Percentiles, ms};
use parley_testkit::FakeModel;
use serde_json::{Value, json};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let turns: usize = args
        .next()
        .map_or(Ok(500), |a| a.parse())
        .context("turns")?;
    let identities: usize = args
        .next()
        .map_or(Ok(20), |a| a.parse())
        .context("identities")?;
    parley_actors::llm::install_crypto_provider();

    let dir = tempfile::tempdir()?;
    let model = FakeModel::start().await;
    let settings = Settings {
        bind: "127.0.0.1:0".parse()?,
        database_url: std::env::var("PARLEY_BENCH_DATABASE_URL").ok(),
        data_dir: dir.path().to_path_buf(),
        llm_base_url: Some(model.base_url()),
        llm_model: Some("fake".to_owned()),
        ..Settings::default()
    };
    let db_url = settings.effective_database_url();
    let app = Application::build(settings).await?;
    let base = format!("http://{}", app.local_addr()?);
    let db = parley_persistence::connect(&db_url).await?;
    let owner = bootstrap(
        &db,
        &BootstrapRequest {
            workspace: "Bench".to_owned(),
            business: "Bench".to_owned(),
            email: None,
        },
    )
    .await?;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(app.run_until(async {
        let _ = stopped.await;
    }));

    let http = reqwest::Client::new();
    let key = owner.api_key.clone();
    let post = |path: String, body: Value| {
        let request = http
            .post(format!("{base}{path}"))
            .bearer_auth(&key)
            .json(&body);
        async move {
            let response = request.send().await?;
            let status = response.status();
            let body: Value = response.json().await?;
            anyhow::ensure!(status.is_success(), "{status}: {body}");
            Ok::<Value, anyhow::Error>(body)
        }
    };
    let worker = post("/workers".into(), json!({"name": "Bench"})).await?["data"]["worker_id"]
        .as_str()
        .context("worker id")?
        .to_owned();
    post(
        format!("/workers/{worker}/assistants"),
        json!({"name": "Echo", "instructions": "You help {{identity.name}}. {{#if memory.profile.name}}Name: {{memory.profile.name}}{{/if}}"}),
    )
    .await?;
    let channel = post(
        "/channels/waba".into(),
        json!({"name": "Bench line", "integration": "sandbox"}),
    )
    .await?["data"]["id"]
        .as_str()
        .context("channel id")?
        .to_owned();
    post(format!("/channels/{channel}/worker/{worker}"), json!({})).await?;
    for n in 0..identities {
        let put = http
            .put(format!("{base}/identity/bench-{n}"))
            .bearer_auth(&key)
            .json(&json!({"name": format!("Person {n}")}))
            .send()
            .await?;
        anyhow::ensure!(put.status().is_success(), "identity: {}", put.status());
    }

    // Baseline: the request a turn makes, straight to the model.
    let direct_body = json!({"model": "fake", "stream": false, "messages": [
        {"role": "system", "content": "You help Person 0."}, {"role": "user", "content": "hello"}]});
    let direct = |body: Value| {
        let request = http
            .post(format!("{}/chat/completions", model.base_url()))
            .json(&body);
        async move {
            request
                .send()
                .await?
                .bytes()
                .await
                .map_err(anyhow::Error::from)
        }
    };
    let chat = |n: usize| {
        post(
            format!("/conversation/bench-{}/chat/{channel}", n % identities),
            json!({"message": format!("hello {n}")}),
        )
    };

    for n in 0..identities.max(20) {
        direct(direct_body.clone()).await?;
        chat(n).await?;
    }
    let mut baseline = Vec::with_capacity(turns);
    let mut turn_times = Vec::with_capacity(turns);
    // Interleaved, so that both see the same machine weather.
    for n in 0..turns {
        let started = Instant::now();
        direct(direct_body.clone()).await?;
        baseline.push(started.elapsed());
        let started = Instant::now();
        chat(n).await?;
        turn_times.push(started.elapsed());
    }

    let base_p = Percentiles::of(&baseline).context("samples")?;
    let turn_p = Percentiles::of(&turn_times).context("samples")?;
    let added = |a: Duration, b: Duration| a.saturating_sub(b);
    println!(
        "chat_latency: {turns} turns over {identities} identities, database {}",
        if db_url.starts_with("sqlite") {
            "SQLite"
        } else {
            "PostgreSQL"
        }
    );
    println!("{:<32} {:>12} {:>12} {:>12}", "", "p50", "p99", "mean");
    println!(
        "{:<32} {:>12} {:>12} {:>12}",
        "model alone (baseline)",
        ms(base_p.p50),
        ms(base_p.p99),
        ms(base_p.mean)
    );
    println!(
        "{:<32} {:>12} {:>12} {:>12}",
        "chat turn through Parley",
        ms(turn_p.p50),
        ms(turn_p.p99),
        ms(turn_p.mean)
    );
    println!(
        "{:<32} {:>12} {:>12} {:>12}",
        "added by Parley",
        ms(added(turn_p.p50, base_p.p50)),
        ms(added(turn_p.p99, base_p.p99)),
        ms(added(turn_p.mean, base_p.mean))
    );
    println!(
        "ratio chat/model: p50 {:.1}x, p99 {:.1}x",
        turn_p.p50.as_secs_f64() / base_p.p50.as_secs_f64().max(1e-9),
        turn_p.p99.as_secs_f64() / base_p.p99.as_secs_f64().max(1e-9)
    );

    let _ = stop.send(());
    server.await??;
    Ok(())
}
