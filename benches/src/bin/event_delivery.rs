//! Event webhook delivery rate, next to a baseline in the same run.
//!
//! - Baselines: the same number of Standard Webhooks posts (the same body, signed with the same
//!   code) made directly to a receiver that answers 200 at once, four in flight, as Parley
//!   allows per endpoint: on four connections the posting task drives, as the lanes post since
//!   the forty-seventh session, and through reqwest's pool, as the lanes posted before and as
//!   the issue measured its baseline (a connection a task of its own: about twice the CPU a
//!   post).
//! - Parley: that many pending deliveries for one endpoint (written straight to the run's
//!   database, as facts would write them, due a minute later), then made due (one `UPDATE`)
//!   and the delivery actor woken; the clock stops when the receiver has them all. The rate is
//!   reported from their falling due, and beside it with the `UPDATE` counted: that statement
//!   is the bench's (Parley never makes a backlog due at once) and on PostgreSQL it takes a
//!   sizeable part of a short run.
//!
//! Run: `cargo run --release -p parley-benches --bin event_delivery -- [events]`

use std::time::{Duration, Instant};

use anyhow::Context;
use parley_benches::{BenchServer, CountingReceiver, Posting, post_directly};
use parley_persistence::entities::event_delivery;
use parley_persistence::event_deliveries::{self, NewEvent};
use parley_persistence::{DeliveryStatus, EventType, clock};
use sea_orm::sea_query::Expr;
use sea_orm::{ColumnTrait, EntityTrait, PaginatorTrait, QueryFilter};
use serde_json::json;
use uuid::Uuid;

/// Requests in flight per endpoint, Parley's and the baseline's.
const IN_FLIGHT: usize = 4;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let events: usize = std::env::args()
        .nth(1)
        .map(|a| a.parse())
        .transpose()
        .context("events")?
        .unwrap_or(5000);
    parley_actors::llm::install_crypto_provider();
    let body = json!({"type": "message.received", "timestamp": clock::now(),
                      "data": {"message_id": Uuid::now_v7(), "content": "hello"}})
    .to_string();

    let baseline = post_directly(events, &body, IN_FLIGHT, Posting::Driven)
        .await?
        .rate;
    let pooled = post_directly(events, &body, IN_FLIGHT, Posting::Pooled)
        .await?
        .rate;
    let parley = through_parley(events, &body).await?;
    let rate = |took: Duration| events as f64 / took.as_secs_f64();
    let delivering = parley.took.saturating_sub(parley.making_due);
    println!(
        "event_delivery: {events} events to one endpoint answering 200 at once, {IN_FLIGHT} in flight"
    );
    println!(
        "{:<44} {:>12}",
        "direct signed POSTs, driven connections",
        format!("{baseline:.0} ev/s")
    );
    println!(
        "{:<44} {:>12}",
        "direct signed POSTs, reqwest's pool",
        format!("{pooled:.0} ev/s")
    );
    println!(
        "{:<44} {:>12}",
        "Parley's delivery lanes, from falling due",
        format!("{:.0} ev/s", rate(delivering))
    );
    println!(
        "{:<44} {:>12}   (the bench's making them due: {:.1} ms)",
        "  with the bench's making them due",
        format!("{:.0} ev/s", rate(parley.took)),
        parley.making_due.as_secs_f64() * 1000.0
    );
    println!(
        "ratio Parley/direct: {:.2} (with the bench's making them due: {:.2})",
        rate(delivering) / baseline,
        rate(parley.took) / baseline
    );
    println!(
        "ratio Parley/direct through reqwest's pool: {:.2} (with the bench's making them due: {:.2})",
        rate(delivering) / pooled,
        rate(parley.took) / pooled
    );
    Ok(())
}

/// A run through Parley: from the clock's start to the receiver's having every delivery, and
/// the part of it the bench itself spent making the deliveries due (one `UPDATE` of every row,
/// which no delivery can start before: its rows are not due until it commits).
struct ThroughParley {
    took: Duration,
    making_due: Duration,
}

/// Events through Parley's delivery lanes, timed.
async fn through_parley(events: usize, body: &str) -> anyhow::Result<ThroughParley> {
    let receiver = CountingReceiver::start().await?;
    let server = BenchServer::start(|_| {}).await?;
    let endpoint = server
        .post(
            "/workspace/webhooks",
            &json!({"url": receiver.url, "events": ["*"]}),
        )
        .await?;
    let endpoint_id: Uuid = endpoint["id"].as_str().context("id")?.parse()?;
    let db = parley_persistence::connect(server.database_url()).await?;
    // Written a minute ahead, so that no sweep starts on them before the clock does.
    let later = clock::now() + chrono::Duration::minutes(1);
    for chunk in (0..events).collect::<Vec<_>>().chunks(500) {
        let txn = parley_persistence::begin_write(&db).await?;
        for _ in chunk {
            let event = NewEvent {
                id: Uuid::now_v7(),
                event_type: EventType::MessageReceived,
                workspace_id: server.workspace_id,
                body: body.to_owned(),
            };
            let addressed = event_deliveries::Addressed::new(event, [endpoint_id]);
            event_deliveries::insert(&txn, &addressed, later).await?;
        }
        txn.commit().await?;
    }
    // One delivery stays not due; the API's retry makes it due and wakes the delivery actor
    // (a retry of a delivery already due is refused: it waits for its attempt).
    let listed = server
        .send(
            reqwest::Method::GET,
            &format!("/workspace/webhooks/{endpoint_id}/deliveries?limit=1"),
            &json!({}),
        )
        .await?;
    let any: Uuid = listed["data"][0]["id"]
        .as_str()
        .context("a delivery")?
        .parse()?;
    // The clock starts before they fall due: making them due is part of the measured time.
    let started = Instant::now();
    event_delivery::Entity::update_many()
        .col_expr(
            event_delivery::Column::NextAttemptAt,
            Expr::value(clock::now()),
        )
        .filter(event_delivery::Column::EndpointId.eq(endpoint_id))
        .filter(event_delivery::Column::Id.ne(any))
        .exec(&db)
        .await?;
    let making_due = started.elapsed();
    server
        .post(
            &format!("/workspace/webhooks/{endpoint_id}/deliveries/{any}/retry"),
            &json!({}),
        )
        .await?;
    receiver.wait_for(events).await?;
    let took = started.elapsed();
    all_recorded(&db, endpoint_id, events).await?;
    anyhow::ensure!(
        receiver.count() == events,
        "{} posts for {events} deliveries: some went out twice",
        receiver.count()
    );
    db.close().await?;
    server.stop().await?;
    Ok(ThroughParley { took, making_due })
}

/// Waits (ten seconds at most) until the endpoint's `events` deliveries are recorded as
/// succeeded. A recording that failed would leave deliveries pending to go out again, and
/// their second posts would reach the receiver's count sooner than the first posts of the
/// rest: a rate with such posts in it is not a rate.
async fn all_recorded(
    db: &parley_persistence::DatabaseConnection,
    endpoint_id: Uuid,
    events: usize,
) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let succeeded = event_delivery::Entity::find()
            .filter(event_delivery::Column::EndpointId.eq(endpoint_id))
            .filter(event_delivery::Column::Status.eq(DeliveryStatus::Succeeded))
            .count(db)
            .await?;
        if succeeded == events as u64 {
            return Ok(());
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "{succeeded} of {events} deliveries recorded as succeeded"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}
