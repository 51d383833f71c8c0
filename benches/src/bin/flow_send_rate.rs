//! How close campaign flows come to a number's full Meta throughput without provoking Meta's
//! limits.
//!
//! Starts Parley in-process (SQLite, or `PARLEY_BENCH_DATABASE_URL`) with the testkit fake Graph
//! API enforcing the cap per number (130429 above it; sends and received messages count alike,
//! as Meta counts them) and the pair rate (131056), and reporting every accepted message
//! delivered after 50 ms through signed status webhooks. A live channel configured for the cap
//! sends a campaign to N identities (default 5,000) split over F flows started at once (default
//! 1), each with `maxConcurrentMessages` 10 and no pause; with `--people R`, R people a second
//! write to the channel's assistant meanwhile and its replies go out through the same number.
//! Reports:
//! - the channel's send rate from the first flow send to the last, over the cap (the ratio); over
//!   the same span its sends with the replies, and every message of the number (sent and
//!   received, as Meta counts them) over the cap; and the most messages the fake counted in one
//!   of its one-second windows;
//! - how many 130429 and 131056 answers the flows provoked;
//! - the replies to the people: webhook post to the fake accepting the reply, p50 and p99;
//! - the time until every flow ended `completed` (every delivery report in);
//! - the bench process's peak resident memory (Parley, the fakes and the client share it) and
//!   its growth during the flows.
//!
//! Run: `cargo run --release -p parley-benches --bin flow_send_rate -- [recipients] [--cap 80]
//! [--flows 1] [--people 0]`; Meta's 1,000 msg/s tier: `-- 20000 --cap 1000 --flows 10
//! --people 20`.

use std::time::{Duration, Instant};

use anyhow::Context;
use futures_util::StreamExt;
use parley_benches::{BenchServer, Percentiles, memory_kib, ms};
use parley_testkit::graph::SentMessage;
use serde_json::{Value, json};

const SECRET: &str = "bench-secret";
const TOKEN: &str = "EAAB-bench-token";
const NUMBER: &str = "106540352242922";

/// What a run is asked for.
struct Args {
    recipients: usize,
    cap: u32,
    flows: usize,
    people_per_sec: u32,
}

impl Args {
    fn parse() -> anyhow::Result<Self> {
        let mut args = Self {
            recipients: 5_000,
            cap: 80,
            flows: 1,
            people_per_sec: 0,
        };
        let mut given = std::env::args().skip(1);
        while let Some(arg) = given.next() {
            let mut value = |name: &str| {
                given
                    .next()
                    .with_context(|| format!("{name} needs a value"))
            };
            match arg.as_str() {
                "--cap" => args.cap = value("--cap")?.parse().context("--cap")?,
                "--flows" => args.flows = value("--flows")?.parse().context("--flows")?,
                "--people" => {
                    args.people_per_sec = value("--people")?.parse().context("--people")?;
                }
                n => args.recipients = n.parse().context("recipients")?,
            }
        }
        anyhow::ensure!(
            args.flows >= 1 && args.cap >= 1,
            "--flows and --cap start at 1"
        );
        Ok(args)
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse()?;
    let cap = args.cap;
    let server = BenchServer::start(|settings| {
        settings.whatsapp.app_secret = Some(SECRET.into());
        settings.whatsapp.rate_per_sec = cap;
    })
    .await?;
    server.graph.limit_per_second(cap);
    server.graph.limit_pair_spacing(Duration::from_secs(6));
    server.graph.report_statuses(
        &format!("{}/webhooks/waba", server.base),
        SECRET,
        Duration::from_millis(50),
        &["delivered"],
    );
    server.graph.add_template(
        "waba-bench",
        json!({"name": "order_update", "language": "en_US", "status": "APPROVED", "category": "UTILITY",
               "id": "7001", "components": [{"type": "BODY", "text": "Hi {{1}}, your order {{2}} has shipped."}]}),
    );
    let (_, channel) = server
        .assistant_channel(
            "Answer in one line.",
            &json!({"name": "Bench line", "accessToken": TOKEN, "phoneNumberId": NUMBER,
                    "businessId": "waba-bench"}),
        )
        .await?;
    let campaign = server
        .post(
            "/campaigns",
            &json!({"channelUid": channel, "name": "Bench", "status": "ACTIVE",
                    "templateName": "order_update", "templateParamsStrategy": "USE_CONTACT_ASSOCIATION",
                    "templateParameters": {"1": "name", "2": "external_id"}}),
        )
        .await?;
    let campaign = campaign["uid"].as_str().context("campaign uid")?.to_owned();
    let contacts = identities(&server, args.recipients).await?;
    let per_flow = contacts.len().div_ceil(args.flows);

    let rss_before = memory_kib("VmRSS");
    let started = Instant::now();
    let flows: Vec<anyhow::Result<String>> = futures_util::stream::iter(contacts.chunks(per_flow))
        .map(|chunk| {
            let body = json!({"channelUid": channel, "campaignUid": campaign, "contactUids": chunk,
                              "configuration": {"pauseBetweenContactsMs": 0, "maxConcurrentMessages": 10,
                                                "timeoutMs": 60_000}});
            let server = &server;
            async move {
                let flow = server.post("/flows", &body).await?;
                Ok(flow["uid"].as_str().context("flow uid")?.to_owned())
            }
        })
        .buffer_unordered(args.flows)
        .collect()
        .await;
    let flows: Vec<String> = flows.into_iter().collect::<anyhow::Result<_>>()?;
    let created = started.elapsed();
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let following = async {
        let followed = follow(&server, &flows, started).await;
        let _ = stop.send(true);
        followed
    };
    let people = people_write(&server, &channel, args.people_per_sec, stopped);
    let (followed, posted) = tokio::join!(following, people);
    let ((ended, records), posted) = (followed?, posted?);
    // The replies to the last people are on their way still.
    wait_for_replies(&server, posted.len()).await?;

    let sent = server.graph.sent();
    let templates: Vec<&SentMessage> = sent
        .iter()
        .filter(|m| m.body["type"] == "template")
        .collect();
    let rejected = server.graph.rejected();
    let count = |code: i64| rejected.iter().filter(|(_, c)| *c == code).count();
    let (first, last) = (
        templates
            .iter()
            .map(|m| m.at)
            .min()
            .context("no flow sends")?,
        templates
            .iter()
            .map(|m| m.at)
            .max()
            .context("no flow sends")?,
    );
    let span = last.duration_since(first).as_secs_f64();
    let rate = templates.len() as f64 / span;
    // Meta's cap counts every message of the number, sent and received: the flows share it
    // with the replies and with the people's own messages.
    let within = |at: Instant| first <= at && at <= last;
    let channel_sends = sent.iter().filter(|m| within(m.at)).count();
    let received = posted.iter().filter(|(_, at)| within(*at)).count();
    let number_rate = (channel_sends + received) as f64 / span;
    let replies = reply_latencies(&sent, &posted)?;
    println!(
        "flow_send_rate: {} recipients in {} flows, maxConcurrentMessages 10, no pause, Meta's cap {cap} msg/s per number, {} people/s writing, {}",
        args.recipients,
        flows.len(),
        args.people_per_sec,
        server.database_kind()
    );
    let line = |what: &str, value: String| println!("{what:<52} {value:>14}");
    line(
        "flows created (contacts resolved, stored)",
        format!("{:.2} s", created.as_secs_f64()),
    );
    line("flow sends accepted by Meta", templates.len().to_string());
    line(
        "channel send rate, first flow send to last",
        format!("{rate:.1} msg/s"),
    );
    line(
        "ratio over the cap",
        format!("{:.3}", rate / f64::from(cap)),
    );
    line(
        "channel's sends (flows and replies), same span",
        format!("{:.1} msg/s", channel_sends as f64 / span),
    );
    line(
        "the number's messages (sent and received) over the cap",
        format!("{:.3}", number_rate / f64::from(cap)),
    );
    line(
        "most messages in one of the fake's windows",
        busiest_second(&sent, &posted).to_string(),
    );
    line("130429 answers provoked", count(130_429).to_string());
    line("131056 answers provoked", count(131_056).to_string());
    line(
        "people's messages received past the cap",
        server.graph.received_past_limit().to_string(),
    );
    if let Some(replies) = replies {
        line(
            &format!("replies to {} people: p50 / p99", posted.len()),
            format!("{} / {}", ms(replies.p50), ms(replies.p99)),
        );
    }
    let unfinished: Vec<&str> = records
        .iter()
        .filter_map(|r| r["status"].as_str())
        .filter(|s| *s != "completed")
        .collect();
    line(
        "flows ended",
        format!(
            "{} after {:.1} s",
            if unfinished.is_empty() {
                "completed".to_owned()
            } else {
                format!("{unfinished:?}")
            },
            ended.as_secs_f64()
        ),
    );
    line(
        "peak RSS of the bench process",
        format!("{} MiB", memory_kib("VmHWM") / 1024),
    );
    line(
        "RSS growth during the flows",
        format!(
            "{} MiB",
            memory_kib("VmHWM").saturating_sub(rss_before) / 1024
        ),
    );
    server.stop().await
}

/// People writing to the channel's assistant at `per_sec` until `stopped`, each message
/// delivered through the fake Graph API (so that it counts in the number's throughput);
/// answers who wrote and when.
async fn people_write(
    server: &BenchServer,
    channel: &str,
    per_sec: u32,
    mut stopped: tokio::sync::watch::Receiver<bool>,
) -> anyhow::Result<Vec<(String, Instant)>> {
    let mut posted = Vec::new();
    if per_sec == 0 {
        return Ok(posted);
    }
    let url = format!("{}/webhooks/waba/{channel}", server.base);
    let mut tick = tokio::time::interval(Duration::from_secs_f64(1.0 / f64::from(per_sec)));
    let mut posts = futures_util::stream::FuturesUnordered::new();
    let mut n = 0_u32;
    loop {
        tokio::select! {
            _ = tick.tick() => {
                let from = format!("1415555{n:04}");
                let wamid = format!("wamid.person{n}");
                n += 1;
                let url = &url;
                posts.push(async move {
                    let at = Instant::now();
                    let status = server
                        .graph
                        .deliver_text(url, SECRET, NUMBER, (&from, &wamid, "Where is my order?"))
                        .await;
                    anyhow::ensure!(status == 200, "webhook answered {status}");
                    Ok((from, at))
                });
            }
            Some(done) = posts.next(), if !posts.is_empty() => posted.push(done?),
            _ = stopped.changed() => break,
        }
    }
    while let Some(done) = posts.next().await {
        posted.push(done?);
    }
    Ok(posted)
}

/// Waits (at most a minute) until `people` replies were sent.
async fn wait_for_replies(server: &BenchServer, people: usize) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let replies = server
            .graph
            .sent()
            .iter()
            .filter(|m| m.body["type"] == "text")
            .count();
        if replies >= people {
            return Ok(());
        }
        anyhow::ensure!(Instant::now() < deadline, "{replies} of {people} replies");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Each person's time from their message's post to the fake accepting the reply to them.
fn reply_latencies(
    sent: &[SentMessage],
    posted: &[(String, Instant)],
) -> anyhow::Result<Option<Percentiles>> {
    let replied: std::collections::HashMap<&str, Instant> = sent
        .iter()
        .filter(|m| m.body["type"] == "text")
        .map(|m| (m.to(), m.at))
        .collect();
    let latencies: Vec<Duration> = posted
        .iter()
        .map(|(from, at)| {
            replied
                .get(from.as_str())
                .map(|r| r.saturating_duration_since(*at))
                .with_context(|| format!("no reply to {from}"))
        })
        .collect::<anyhow::Result<_>>()?;
    Ok(Percentiles::of(&latencies))
}

/// The most messages, sent and received, in any one second from one of them (what the fake's
/// windows bound).
fn busiest_second(sent: &[SentMessage], received: &[(String, Instant)]) -> usize {
    let mut times: Vec<Instant> = sent
        .iter()
        .map(|m| m.at)
        .chain(received.iter().map(|(_, at)| *at))
        .collect();
    times.sort();
    let mut most = 0;
    let mut from = 0;
    for (to, at) in times.iter().enumerate() {
        while at.duration_since(times[from]) >= Duration::from_secs(1) {
            from += 1;
        }
        most = most.max(to + 1 - from);
    }
    most
}

/// `count` identities with distinct phones, made 16 at a time; answers their external ids.
async fn identities(server: &BenchServer, count: usize) -> anyhow::Result<Vec<String>> {
    let made: Vec<anyhow::Result<String>> = futures_util::stream::iter(0..count)
        .map(|i| async move {
            let external = format!("bench-{i}");
            server
                .send(
                    reqwest::Method::PUT,
                    &format!("/identity/{external}"),
                    &json!({"name": format!("Person {i}"), "phone": format!("+35191{i:07}")}),
                )
                .await?;
            Ok(external)
        })
        .buffered(16)
        .collect()
        .await;
    made.into_iter().collect()
}

/// Polls the flows until every one ended; answers when (since `started`) and their records.
async fn follow(
    server: &BenchServer,
    uids: &[String],
    started: Instant,
) -> anyhow::Result<(Duration, Vec<Value>)> {
    loop {
        let mut records = Vec::with_capacity(uids.len());
        for uid in uids {
            let flow = server
                .send(reqwest::Method::GET, &format!("/flows/{uid}"), &json!({}))
                .await?["data"]
                .clone();
            records.push(flow);
        }
        let running = records
            .iter()
            .any(|f| ["queued", "running"].contains(&f["status"].as_str().unwrap_or_default()));
        if !running {
            return Ok((started.elapsed(), records));
        }
        anyhow::ensure!(
            started.elapsed() < Duration::from_secs(900),
            "the flows never ended: {records:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
