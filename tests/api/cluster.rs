//! Several `parley serve` processes on one PostgreSQL database (DESIGN §2 "Cluster"): the
//! partitions are shared, webhooks and chats reach any node and are answered once by the
//! owner, a node killed (`kill -9`) or frozen (`SIGSTOP`) loses its partitions to the others
//! within the lease time and sends nothing twice, and a node stopped gracefully hands its
//! partitions back at once. The in-process test server only provides the database, the fakes
//! and the fixtures; its own sweeps are out of the way.
//!
//! These run on PostgreSQL (`PARLEY_TEST_DATABASE_URL`); on SQLite they say so and pass, and
//! the refusal to cluster on SQLite is tested instead.

use std::collections::HashSet;
use std::process::Command;
use std::time::{Duration, Instant};

use parley_testkit::graph::text_message;
use parley_testkit::process::Served;
use reqwest::Method;
use serde_json::{Value, json};

use crate::flows::{campaign, people, per_person};
use crate::helpers::{
    APP_SECRET, TestApp, expect_status, exposition, order_update, samples_sum, spawn_app_with,
};

const SECRET: &str = "the-cluster-secret-of-these-tests";
const OPERATOR: &str = "operator-token-of-the-cluster-tests";
const NUMBER: &str = "100001";
const PARTITIONS: usize = 16;

/// The in-process server of these tests, its sweeps out of the way: only the nodes work.
async fn quiet_app() -> TestApp {
    spawn_app_with(|s| {
        s.actors.inbound_sweep_ms = 3_600_000;
        s.actors.scheduler_sweep_ms = 3_600_000;
        s.actors.event_delivery_sweep_ms = 3_600_000;
        s.media.sweep_ms = 3_600_000;
    })
    .await
}

fn on_postgres() -> bool {
    if std::env::var("PARLEY_TEST_DATABASE_URL").is_ok() {
        return true;
    }
    eprintln!("skipped: a cluster needs PostgreSQL (set PARLEY_TEST_DATABASE_URL)");
    false
}

/// A node: `parley serve` with the cluster on, its own data directory, the test's database,
/// fakes and secret key.
type Node = Served;

fn start_node(app: &TestApp, lease_ttl_secs: u64) -> Node {
    let key = std::fs::read_to_string(app.data_dir().join("secret.key")).expect("key");
    let ttl = lease_ttl_secs.to_string();
    let (model, graph) = (app.model.base_url(), app.graph.base_url());
    let partitions = PARTITIONS.to_string();
    let envs = [
        ("PARLEY_DATABASE_URL", app.database_url.as_str()),
        ("PARLEY_SECRET_KEY", key.trim()),
        ("PARLEY_CLUSTER", "true"),
        ("PARLEY_CLUSTER_SECRET", SECRET),
        ("PARLEY_CLUSTER_PARTITIONS", partitions.as_str()),
        ("PARLEY_CLUSTER_HEARTBEAT_MS", "300"),
        ("PARLEY_CLUSTER_LEASE_TTL_SECS", ttl.as_str()),
        ("PARLEY_OPERATOR_TOKEN", OPERATOR),
        ("PARLEY_LLM_BASE_URL", model.as_str()),
        ("PARLEY_LLM_MODEL", "fake-model"),
        ("PARLEY_WHATSAPP_GRAPH_URL", graph.as_str()),
        ("PARLEY_WHATSAPP_APP_SECRET", APP_SECRET),
        ("PARLEY_WHATSAPP_RETRY_BACKOFF_MS", "10"),
        ("PARLEY_WHATSAPP_PAIR_BURST", "1000"),
        ("PARLEY_EGRESS_ALLOW", "127.0.0.0/8"),
        ("PARLEY_SCHEDULER_MIN_INTERVAL_SECS", "1"),
        ("PARLEY_SCHEDULER_RUNS_KEPT", "1000"),
        ("PARLEY_LOG", "info"),
    ];
    let echo = std::env::var("PARLEY_CLUSTER_TEST_LOGS")
        .ok()
        .map(|_| "node: ");
    let binary = std::path::Path::new(env!("CARGO_BIN_EXE_parley"));
    Served::start(binary, &envs, echo)
}

/// The cluster's nodes as `node`'s `GET /admin/actors` answers them.
async fn nodes_of(node: &Node) -> Vec<Value> {
    node.cluster_nodes(&reqwest::Client::new(), OPERATOR)
        .await
        .expect("admin/actors")
}

/// Polls `nodes` of `node` until `check` holds; answers them.
async fn wait_nodes(node: &Node, within: Duration, check: impl Fn(&[Value]) -> bool) -> Vec<Value> {
    let deadline = Instant::now() + within;
    loop {
        let nodes = nodes_of(node).await;
        if check(&nodes) {
            return nodes;
        }
        assert!(
            Instant::now() < deadline,
            "the nodes never settled: {nodes:#?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn partitions(node: &Value) -> Vec<i64> {
    node["partitions"]
        .as_array()
        .map(|p| p.iter().filter_map(Value::as_i64).collect())
        .unwrap_or_default()
}

/// Every partition held by an alive node, each by exactly one, `count` nodes alive.
fn settled(nodes: &[Value], count: usize) -> bool {
    let alive: Vec<&Value> = nodes.iter().filter(|n| n["alive"] == true).collect();
    let mut held: Vec<i64> = alive.iter().flat_map(|n| partitions(n)).collect();
    held.sort_unstable();
    alive.len() == count
        && held == (0..i64::try_from(PARTITIONS).unwrap_or(16)).collect::<Vec<_>>()
        && alive
            .iter()
            .all(|n| partitions(n).len() <= PARTITIONS.div_ceil(count))
}

/// Which of `nodes` owns `id`, by the partitions each says it holds.
fn owner_of<'a>(nodes: &'a [Node], answer: &[Value], id: uuid::Uuid) -> &'a Node {
    let partition = i64::from(parley_actors::cluster::partition_of(
        id,
        u32::try_from(PARTITIONS).unwrap_or(16),
    ));
    let url = answer
        .iter()
        .find(|n| partitions(n).contains(&partition))
        .and_then(|n| n["url"].as_str())
        .expect("an owner");
    nodes.iter().find(|n| n.url == url).expect("a node of ours")
}

/// The node of `nodes` that owns `id`'s partition, and the other.
fn owner_and_other<'a>(
    nodes: &'a [Node],
    answer: &[Value],
    id: uuid::Uuid,
) -> (&'a Node, &'a Node) {
    let owner = owner_of(nodes, answer, id);
    let other = nodes
        .iter()
        .find(|n| n.url != owner.url)
        .expect("the other node");
    (owner, other)
}

/// Two nodes on `app`'s database with 3 s leases, once they share the partitions; with the
/// nodes as the first says they are.
async fn two_settled_nodes(app: &TestApp) -> ([Node; 2], Vec<Value>) {
    let nodes = [start_node(app, 3), start_node(app, 3)];
    let answer = wait_nodes(&nodes[0], Duration::from_secs(20), |n| settled(n, 2)).await;
    (nodes, answer)
}

fn request(node: &Node, method: Method, path: &str, key: &str) -> reqwest::RequestBuilder {
    reqwest::Client::new()
        .request(method, format!("{}{path}", node.url))
        .bearer_auth(key)
}

#[tokio::test]
async fn two_nodes_share_the_partitions_and_answer_every_message_once_wherever_it_lands() {
    if !on_postgres() {
        return;
    }
    let app = quiet_app().await;
    let channel = app.live_channel(NUMBER).await;
    let (nodes, answer) = two_settled_nodes(&app).await;
    assert!(answer.iter().any(|n| n["this_node"] == true), "{answer:#?}");

    // Webhooks round-robin: each node stores what it receives; the channel's owner answers.
    let mut wamids = HashSet::new();
    for i in 0..20 {
        let wamid = format!("wamid.CLUSTER{i}");
        let payload = text_message(NUMBER, &format!("1650555{i:04}"), "Sheena", &wamid, "Hello");
        let node = &nodes[i % 2];
        let url = format!("{}/webhooks/waba/{channel}", node.url);
        assert_eq!(
            app.graph.post_webhook(&url, APP_SECRET, &payload).await,
            200
        );
        wamids.insert(wamid);
    }
    let sent = app.wait_for_sends(20).await;
    let replied: HashSet<String> = sent
        .iter()
        .filter_map(|s| s.body["context"]["message_id"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(replied, wamids, "every message answered");
    // Meta re-delivers one to the other node: still one reply each.
    let again = text_message(NUMBER, "16505550000", "Sheena", "wamid.CLUSTER0", "Hello");
    let url = format!("{}/webhooks/waba/{channel}", nodes[1].url);
    assert_eq!(app.graph.post_webhook(&url, APP_SECRET, &again).await, 200);

    // A chat at either node is answered by the identity's owner (forwarded from the other).
    app.put_identity(
        "chatter",
        json!({"name": "Chatter", "phone": "+351912000001"}),
    )
    .await;
    for node in &nodes {
        let answer = request(
            node,
            Method::POST,
            &format!("/conversation/chatter/chat/{channel}"),
            &app.owner.api_key,
        )
        .json(&json!({"message": "Where is my order?"}))
        .send()
        .await
        .expect("chat");
        let body = expect_status(answer, 200).await;
        assert_eq!(
            body["data"]["reply"], "You said: Where is my order?",
            "{body}"
        );
    }
    for node in &nodes {
        let answer = request(
            node,
            Method::GET,
            &format!("/conversation/chatter/streaming?channel_id={channel}&message=Hi"),
            &app.owner.api_key,
        )
        .send()
        .await
        .expect("stream");
        assert_eq!(answer.status(), 200);
        assert!(
            answer.headers()["content-type"]
                .to_str()
                .unwrap_or_default()
                .starts_with("text/event-stream")
        );
        let text = answer.text().await.expect("events");
        // The owner's tokens reach the caller wherever it asked, then the stored reply.
        assert!(text.contains("\"type\":\"token\""), "{text}");
        assert!(text.contains("\"type\":\"complete\""), "{text}");
    }
    for kind in ["turn", "streamed_turn"] {
        let mut asked = 0;
        for node in &nodes {
            asked += forwards(node, kind, Some("ok")).await;
        }
        assert!(
            asked > 0,
            "one node asked the owner for the {kind}s of the identity it did not own"
        );
    }
    assert_eq!(
        app.graph.sent().len(),
        20,
        "the re-delivered message was not answered again"
    );
}

#[tokio::test]
async fn a_sender_known_to_another_node_is_answered_there_and_a_new_sender_lives_with_the_channel()
{
    if !on_postgres() {
        return;
    }
    let app = quiet_app().await;
    let channel = app.live_channel(NUMBER).await;
    let (nodes, answer) = two_settled_nodes(&app).await;
    let channel_owner = owner_of(&nodes, &answer, channel.parse().expect("channel id"));

    // People the API created lie in any partition: keep those the channel's owner does not own.
    let mut elsewhere = Vec::new();
    for i in 0..24 {
        let phone = format!("+3519130000{i:02}");
        let made = app
            .put_identity(
                &format!("known-{i}"),
                json!({"name": "Known", "phone": phone}),
            )
            .await;
        let id: uuid::Uuid = made["id"].as_str().expect("id").parse().expect("uuid");
        if owner_of(&nodes, &answer, id).url != channel_owner.url {
            elsewhere.push((phone, id));
        }
    }
    assert!(
        !elsewhere.is_empty(),
        "no identity of 24 owned by the other node"
    );
    // Their messages land on both nodes. The channel's owner asks each identity's owner for
    // the turn, sends the reply it hands back, once, and records it sent.
    for (i, (phone, _)) in elsewhere.iter().enumerate() {
        let payload = text_message(
            NUMBER,
            &phone[1..],
            "Known",
            &format!("wamid.KNOWN{i}"),
            "Hi",
        );
        let url = format!("{}/webhooks/waba/{channel}", nodes[i % 2].url);
        assert_eq!(
            app.graph.post_webhook(&url, APP_SECRET, &payload).await,
            200
        );
    }
    let sent = app.wait_for_sends(elsewhere.len()).await;
    let mut replied: Vec<&str> = sent
        .iter()
        .filter_map(|s| s.body["context"]["message_id"].as_str())
        .collect();
    replied.sort_unstable();
    let mut asked: Vec<String> = (0..elsewhere.len())
        .map(|i| format!("wamid.KNOWN{i}"))
        .collect();
    asked.sort_unstable();
    assert_eq!(replied, asked, "each answered once");
    for (_, id) in &elsewhere {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let messages = app.stored_message_rows(&id.to_string()).await;
            let statuses: Vec<&str> = messages
                .iter()
                .filter_map(|m| m["status"].as_str())
                .collect();
            if statuses == ["received", "sent"] {
                break;
            }
            assert!(Instant::now() < deadline, "{id}: {statuses:?}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    assert!(
        forwards(channel_owner, "turn", Some("ok")).await > 0,
        "the turns were asked of their owner"
    );

    // A new sender's identity is born in a partition of the channel's owner: their turns
    // stay there.
    for i in 0..6 {
        let from = format!("1408555{i:04}");
        let payload = text_message(NUMBER, &from, "New", &format!("wamid.NEW{i}"), "Hi");
        let url = format!("{}/webhooks/waba/{channel}", nodes[i % 2].url);
        assert_eq!(
            app.graph.post_webhook(&url, APP_SECRET, &payload).await,
            200
        );
    }
    app.wait_for_sends(elsewhere.len() + 6).await;
    for i in 0..6 {
        let found = expect_status(app.get(&format!("/identity/+1408555{i:04}")).await, 200).await;
        let id = found["data"]["id"]
            .as_str()
            .expect("id")
            .parse()
            .expect("uuid");
        assert_eq!(
            owner_of(&nodes, &answer, id).url,
            channel_owner.url,
            "{found}"
        );
    }
}

#[tokio::test]
async fn a_new_senders_identity_lies_in_its_channels_partition_and_moves_with_it() {
    if !on_postgres() {
        return;
    }
    let app = quiet_app().await;
    let channel = app.live_channel(NUMBER).await;
    let channel_id: uuid::Uuid = channel.parse().expect("channel id");
    let (two, _) = two_settled_nodes(&app).await;
    let count = u32::try_from(PARTITIONS).unwrap_or(16);
    let partition = parley_actors::cluster::partition_of(channel_id, count);
    let says = |round: usize, i: usize| {
        let from = format!("1312555{i:04}");
        let wamid = format!("wamid.MOVE{round}x{i}");
        (text_message(NUMBER, &from, "Mover", &wamid, "Hi"), wamid)
    };

    // New senders' messages land on both nodes; each identity is born in the channel's
    // partition.
    for i in 0..6 {
        let url = format!("{}/webhooks/waba/{channel}", two[i % 2].url);
        let (payload, _) = says(0, i);
        assert_eq!(
            app.graph.post_webhook(&url, APP_SECRET, &payload).await,
            200
        );
    }
    app.wait_for_sends(6).await;
    for i in 0..6 {
        let found = expect_status(app.get(&format!("/identity/+1312555{i:04}")).await, 200).await;
        let id = found["data"]["id"]
            .as_str()
            .expect("id")
            .parse()
            .expect("uuid");
        assert_eq!(
            parley_actors::cluster::partition_of(id, count),
            partition,
            "{found}"
        );
    }

    // A third node joins and the partitions are shared again: the channel and its people
    // move together, so their next messages are answered without a turn asked elsewhere.
    let third = start_node(&app, 3);
    let nodes = [&two[0], &two[1], &third];
    wait_nodes(&third, Duration::from_secs(20), |n| settled(n, 3)).await;
    let mut before = 0;
    for node in nodes {
        before += forwards(node, "turn", None).await;
    }
    for i in 0..6 {
        let url = format!("{}/webhooks/waba/{channel}", nodes[i % 3].url);
        let (payload, _) = says(1, i);
        assert_eq!(
            app.graph.post_webhook(&url, APP_SECRET, &payload).await,
            200
        );
    }
    let sent = app.wait_for_sends(12).await;
    let mut replied: Vec<&str> = sent
        .iter()
        .filter_map(|s| s.body["context"]["message_id"].as_str())
        .filter(|wamid| wamid.starts_with("wamid.MOVE1"))
        .collect();
    replied.sort_unstable();
    let asked: Vec<String> = (0..6).map(|i| says(1, i).1).collect();
    assert_eq!(replied, asked, "each answered once");
    let mut after = 0;
    for node in nodes {
        after += forwards(node, "turn", None).await;
    }
    assert_eq!(after, before, "no turn was asked of another node");
}

/// How many times `node` asked another node `kind` and heard `outcome` (any outcome: `None`).
async fn forwards(node: &Node, kind: &str, outcome: Option<&str>) -> u64 {
    let metrics = exposition(request(node, Method::GET, "/metrics", OPERATOR)).await;
    let kind = format!("kind=\"{kind}\"");
    let outcome = outcome.map(|outcome| format!("outcome=\"{outcome}\""));
    let labels: Vec<&str> = std::iter::once(kind.as_str())
        .chain(outcome.as_deref())
        .collect();
    samples_sum(&metrics, "parley_cluster_forwards_total", &labels)
}

#[tokio::test]
async fn a_message_for_a_channel_owned_elsewhere_is_stored_by_its_owner_or_here_when_it_is_frozen()
{
    if !on_postgres() {
        return;
    }
    let app = quiet_app().await;
    let channel = app.live_channel(NUMBER).await;
    let (nodes, answer) = two_settled_nodes(&app).await;
    let (owner, other) = owner_and_other(&nodes, &answer, channel.parse().expect("channel id"));
    let url = format!("{}/webhooks/waba/{channel}", other.url);
    let (app, url) = (&app, url.as_str());
    let post = |wamid: &str| {
        let payload = text_message(NUMBER, "14085551234", "Rui", wamid, "Hi");
        async move { app.graph.post_webhook(url, APP_SECRET, &payload).await }
    };

    // The node that received the webhook asked the channel's owner to store the message;
    // the owner answered it.
    assert_eq!(post("wamid.OWNED1").await, 200);
    app.wait_for_sends(1).await;
    assert_eq!(forwards(other, "store_event", Some("ok")).await, 1);
    // Delivered again, it is known: stored once, answered once.
    assert_eq!(post("wamid.OWNED1").await, 200);

    // With the owner frozen, the webhook is not kept waiting on it: the receiving node stores
    // the message itself and answers 200, and the owner, woken, answers the message.
    owner.signal("-STOP");
    let status = post("wamid.OWNED2").await;
    owner.signal("-CONT");
    assert_eq!(status, 200);
    assert_eq!(forwards(other, "store_event", Some("error")).await, 1);
    let sent = app.wait_for_sends(2).await;
    let replied: Vec<&str> = sent
        .iter()
        .filter_map(|s| s.body["context"]["message_id"].as_str())
        .collect();
    assert_eq!(replied, ["wamid.OWNED1", "wamid.OWNED2"]);
    // Each answered once: the person's two messages and the two replies, nothing more.
    let found = expect_status(app.get("/identity/+14085551234").await, 200).await;
    let id = found["data"]["id"].as_str().expect("id").to_owned();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let rows = app.stored_message_rows(&id).await;
        let statuses: Vec<&str> = rows.iter().filter_map(|m| m["status"].as_str()).collect();
        if statuses == ["received", "sent", "received", "sent"] {
            break;
        }
        assert!(Instant::now() < deadline, "{statuses:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn a_key_revoked_or_a_stage_renamed_on_one_node_reaches_the_others() {
    if !on_postgres() {
        return;
    }
    let app = quiet_app().await;
    let (_, channel) = app
        .chat_channel("Stage: {{identity.stage}}.", json!({}))
        .await;
    let stage = app.stage("Lead").await;
    let ana = app.put_identity("crm-1", json!({"name": "Ana"})).await;
    app.set_stage("crm-1", "Lead").await;
    let (nodes, answer) = two_settled_nodes(&app).await;

    // The identity's owner caches the workspace's stages with its first turn; the stage is
    // renamed through the other node, and the owner's next turn says the new name.
    let owner = owner_of(
        &nodes,
        &answer,
        ana["id"].as_str().expect("id").parse().expect("uuid"),
    );
    let other = nodes
        .iter()
        .find(|n| n.url != owner.url)
        .expect("the other");
    let chat = |node: &Node, text: &str| {
        request(
            node,
            Method::POST,
            &format!("/conversation/crm-1/chat/{channel}"),
            &app.owner.api_key,
        )
        .json(&json!({"message": text}))
        .send()
    };
    expect_status(chat(owner, "one").await.expect("chat"), 200).await;
    assert_eq!(app.last_system_prompt(), "Stage: Lead.");
    let renamed = request(
        other,
        Method::PUT,
        &format!("/stages/{stage}"),
        &app.owner.api_key,
    )
    .json(&json!({"name": "Qualified"}))
    .send()
    .await
    .expect("rename");
    expect_status(renamed, 200).await;
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        expect_status(chat(owner, "again").await.expect("chat"), 200).await;
        if app.last_system_prompt() == "Stage: Qualified." {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the owner never heard of the rename"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    let created = expect_status(
        app.send_json(
            Method::POST,
            "/workspace/api-keys",
            &json!({"name": "CRM", "permissions": ["read"], "workspace_id": app.owner.workspace_id}),
        )
        .await,
        201,
    )
    .await;
    let (key, id) = (
        created["data"]["key"].as_str().expect("key").to_owned(),
        created["data"]["id"].as_str().expect("id").to_owned(),
    );
    // Node 1 remembers the key; node 0 revokes it.
    let used = request(&nodes[1], Method::GET, "/stages", &key)
        .send()
        .await
        .expect("stages");
    assert_eq!(used.status(), 200);
    let revoked = request(
        &nodes[0],
        Method::DELETE,
        &format!("/workspace/api-keys/{id}"),
        &app.owner.api_key,
    )
    .send()
    .await
    .expect("revoke");
    assert_eq!(revoked.status(), 200);
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let status = request(&nodes[1], Method::GET, "/stages", &key)
            .send()
            .await
            .expect("stages")
            .status();
        if status == 401 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "node 1 still takes the revoked key"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A flow of `count` people through the live channel, created at `node`; answers its uid.
async fn flow_at(app: &TestApp, node: &Node, channel: &str, count: usize) -> String {
    app.graph.add_template("waba-1", order_update());
    let campaign = campaign(app, channel, "Orders", per_person()).await;
    let people = people(app, count).await;
    let answer = request(node, Method::POST, "/flows", &app.owner.api_key)
        .json(
            &json!({"channelUid": channel, "campaignUid": campaign, "contactUids": people,
                      "configuration": {"pauseBetweenContactsMs": 20, "maxConcurrentMessages": 2}}),
        )
        .send()
        .await
        .expect("flow");
    expect_status(answer, 201).await["data"]["uid"]
        .as_str()
        .expect("uid")
        .to_owned()
}

/// Polls the flow at `node` until none of its recipients waits; answers its statistics.
async fn wait_settled(app: &TestApp, node: &Node, uid: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let answer = request(
            node,
            Method::GET,
            &format!("/flows/{uid}"),
            &app.owner.api_key,
        )
        .send()
        .await
        .expect("flow");
        let stats = expect_status(answer, 200).await["data"]["statistics"].clone();
        let done: u64 = ["sent", "delivered", "read", "failed", "skipped"]
            .iter()
            .filter_map(|k| stats[k].as_u64())
            .sum();
        if Some(done) == stats["total"].as_u64() {
            return stats;
        }
        assert!(Instant::now() < deadline, "the flow never settled: {stats}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// When each run of the task was due, from the database.
async fn runs_of(app: &TestApp, task_id: uuid::Uuid) -> Vec<chrono::DateTime<chrono::Utc>> {
    use parley_persistence::entities::scheduled_task_run;
    use sea_orm::{ColumnTrait, EntityTrait, QueryFilter};
    scheduled_task_run::Entity::find()
        .filter(scheduled_task_run::Column::TaskId.eq(task_id))
        .all(&app.db().await)
        .await
        .expect("runs")
        .into_iter()
        .map(|r| r.due_at)
        .collect()
}

/// Why each failed recipient of the flow failed, from the database.
async fn failed_errors(app: &TestApp, flow_id: uuid::Uuid) -> Vec<Option<String>> {
    use parley_persistence::entities::flow_recipient;
    use sea_orm::{ColumnTrait, EntityTrait, QueryFilter};
    flow_recipient::Entity::find()
        .filter(flow_recipient::Column::FlowId.eq(flow_id))
        .filter(flow_recipient::Column::Status.eq(parley_persistence::RecipientStatus::Failed))
        .all(&app.db().await)
        .await
        .expect("recipients")
        .into_iter()
        .map(|r| r.error)
        .collect()
}

/// Waits until the Graph fake took `count` messages.
async fn wait_sent(app: &TestApp, count: usize) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while app.graph.sent_count() < count {
        assert!(
            Instant::now() < deadline,
            "only {} sent",
            app.graph.sent_count()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Nobody got the template twice, and everyone either got it or is failed: only what was in
/// flight when its node died or froze (at most `maxConcurrentMessages`, 2) is failed
/// `interrupted`, whether or not Meta had taken it (a send that may have reached Meta is never
/// sent again).
fn reached_once_or_failed(app: &TestApp, total: u64, failed: u64, stats: &Value) {
    let sent = app.graph.sent();
    let mut seen = HashSet::new();
    for message in &sent {
        assert!(
            seen.insert(message.to().to_owned()),
            "{} was sent twice",
            message.to()
        );
    }
    let reached = seen.len() as u64;
    assert!(reached <= total, "{stats}");
    assert!(
        reached + failed >= total,
        "someone was neither reached nor failed: {stats}"
    );
    assert!(failed <= 2, "only what was in flight failed: {stats}");
}

#[tokio::test]
async fn a_killed_nodes_flow_is_taken_over_within_the_lease_and_nobody_is_sent_twice() {
    if !on_postgres() {
        return;
    }
    let app = quiet_app().await;
    let channel = app.live_channel(NUMBER).await;
    let (nodes, answer) = two_settled_nodes(&app).await;
    let mut nodes = Vec::from(nodes);
    let uid = flow_at(&app, &nodes[1], &channel, 150).await;
    let flow_id: uuid::Uuid = uid.parse().expect("uuid");
    // A task due every second runs through the kill too.
    let stage = app.stage("Ticked").await;
    let task = request(
        &nodes[0],
        Method::POST,
        "/scheduled-tasks",
        &app.owner.api_key,
    )
    .json(
        &json!({"name": "Tick", "task_type": "set_stage", "recurrence": "* * * * * *",
                      "payload": {"identity_id": "p0", "stage_id": stage}}),
    )
    .send()
    .await
    .expect("task");
    let task_id: uuid::Uuid = expect_status(task, 201).await["data"]["id"]
        .as_str()
        .expect("id")
        .parse()
        .expect("uuid");
    let owner_url = owner_of(&nodes, &answer, flow_id).url.clone();
    wait_sent(&app, 30).await;

    let index = nodes
        .iter()
        .position(|n| n.url == owner_url)
        .expect("owner");
    let mut killed = nodes.remove(index);
    killed.child.kill().expect("kill -9");
    killed.child.wait().expect("reaped");
    let survivor = &nodes[0];
    // Every partition is owned again within the lease time and a beat (and some slack).
    wait_nodes(survivor, Duration::from_millis(3_000 + 300 + 5_000), |n| {
        settled(n, 1)
    })
    .await;

    let stats = wait_settled(&app, survivor, &uid).await;
    let failed = stats["failed"].as_u64().expect("failed");
    reached_once_or_failed(&app, 150, failed, &stats);
    for error in failed_errors(&app, flow_id).await {
        assert_eq!(error.as_deref(), Some("interrupted"));
    }
    // The task ran on both sides of the kill, never twice for one occurrence.
    let runs = runs_of(&app, task_id).await;
    assert!(runs.len() >= 3, "the task kept running: {runs:?}");
    let occurrences: HashSet<_> = runs.iter().collect();
    assert_eq!(
        occurrences.len(),
        runs.len(),
        "an occurrence ran twice: {runs:?}"
    );

    // A message after the kill reaches the survivor, which answers it.
    let payload = text_message(NUMBER, "16505559999", "Late", "wamid.AFTER", "Still there?");
    let url = format!("{}/webhooks/waba/{channel}", survivor.url);
    assert_eq!(
        app.graph.post_webhook(&url, APP_SECRET, &payload).await,
        200
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    while !app
        .graph
        .sent()
        .iter()
        .any(|s| s.body["context"]["message_id"] == "wamid.AFTER")
    {
        assert!(Instant::now() < deadline, "the survivor never answered");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn a_node_frozen_past_its_lease_sends_nothing_when_it_wakes() {
    if !on_postgres() {
        return;
    }
    let app = quiet_app().await;
    let channel = app.live_channel(NUMBER).await;
    let nodes = [start_node(&app, 2), start_node(&app, 2)];
    let answer = wait_nodes(&nodes[0], Duration::from_secs(20), |n| settled(n, 2)).await;
    let uid = flow_at(&app, &nodes[0], &channel, 120).await;
    let owner = owner_of(&nodes, &answer, uid.parse().expect("uuid"));
    let other = nodes
        .iter()
        .find(|n| n.url != owner.url)
        .expect("the other");
    wait_sent(&app, 20).await;

    owner.signal("-STOP");
    wait_nodes(other, Duration::from_secs(15), |n| {
        n.iter()
            .find(|x| x["url"] == other.url.as_str())
            .is_some_and(|x| partitions(x).len() == PARTITIONS)
    })
    .await;
    let stats = wait_settled(&app, other, &uid).await;
    owner.signal("-CONT");
    // The woken node finds its leases gone and rejoins with a share of its own.
    wait_nodes(other, Duration::from_secs(20), |n| settled(n, 2)).await;

    let failed = stats["failed"].as_u64().expect("failed");
    reached_once_or_failed(&app, 120, failed, &stats);
}

#[tokio::test]
async fn a_node_stopped_gracefully_hands_its_partitions_back_at_once() {
    if !on_postgres() {
        return;
    }
    let app = quiet_app().await;
    // Leases of a minute: only a hand-back explains the other node owning everything soon.
    let nodes = [start_node(&app, 60), start_node(&app, 60)];
    wait_nodes(&nodes[0], Duration::from_secs(20), |n| settled(n, 2)).await;
    nodes[1].signal("-TERM");
    wait_nodes(&nodes[0], Duration::from_secs(20), |n| settled(n, 1)).await;
}

#[test]
fn a_cluster_on_sqlite_is_refused_with_a_sentence() {
    let dir = tempfile::tempdir().expect("data directory");
    let output = Command::new(env!("CARGO_BIN_EXE_parley"))
        .args(["serve", "--bind", "127.0.0.1:0"])
        .env_remove("PARLEY_DATABASE_URL")
        .env("PARLEY_DATA_DIR", dir.path())
        .env("PARLEY_CLUSTER", "true")
        .env("PARLEY_CLUSTER_SECRET", SECRET)
        .output()
        .expect("parley serve");
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("PARLEY_CLUSTER=true needs PostgreSQL"),
        "{stderr}"
    );
    // Refused before the database was touched: no database file, no migration run.
    let made: Vec<_> = std::fs::read_dir(dir.path())
        .expect("data directory")
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| name.contains("sqlite") || name.ends_with(".db"))
        .collect();
    assert!(made.is_empty(), "the database was opened: {made:?}");
}

/// The id in a record's `id`.
fn id_of(record: &Value) -> uuid::Uuid {
    record["id"]
        .as_str()
        .and_then(|id| id.parse().ok())
        .expect("an id")
}

#[tokio::test]
async fn the_console_of_a_node_that_does_not_own_the_person_hands_over_replies_and_gives_back() {
    if !on_postgres() {
        return;
    }
    let app = quiet_app().await;
    let channel = app.live_channel(NUMBER).await;
    let sheena = app
        .put_identity("crm-9", json!({"name": "Sheena", "phone": "+16505551234"}))
        .await;
    let (nodes, answer) = two_settled_nodes(&app).await;
    let owner = owner_of(&nodes, &answer, id_of(&sheena));
    let other = nodes
        .iter()
        .find(|n| n.url != owner.url)
        .expect("the other");
    // She writes (her window opens) and the assistant answers.
    let payload = text_message(NUMBER, "16505551234", "Sheena", "wamid.DESK1", "Hello?");
    let url = format!("{}/webhooks/waba/{channel}", other.url);
    assert_eq!(
        app.graph.post_webhook(&url, APP_SECRET, &payload).await,
        200
    );
    app.wait_for_sends(1).await;
    let listed = expect_status(app.get("/conversations").await, 200).await;
    let id = listed["data"][0]["id"].as_str().expect("a conversation");
    let page = format!("/console/conversations/{id}");
    let mode = async || {
        let read = expect_status(app.get(&format!("/conversations/{id}")).await, 200).await;
        read["data"]["mode"].clone()
    };

    // The console of the node that does not own her acts as the API does on any node.
    let mut tab = crate::console::Tab::at(&other.url);
    tab.sign_in(&app.owner.api_key).await;
    let handed = tab
        .act(&page, &format!("{page}/handoff"), &[("reason", "VIP")])
        .await;
    assert_eq!(handed.status, 303, "{}", handed.body);
    assert_eq!(mode().await, "human");
    let replied = tab
        .act(&page, &format!("{page}/reply"), &[("text", "I am Rui.")])
        .await;
    assert_eq!(replied.status, 303, "{}", replied.body);
    let sent = app.wait_for_sends(2).await;
    assert_eq!(sent[1].body["text"]["body"], "I am Rui.");
    let resumed = tab.act(&page, &format!("{page}/resume"), &[]).await;
    assert_eq!(resumed.status, 303, "{}", resumed.body);
    assert_eq!(mode().await, "assistant");
}

#[tokio::test]
async fn an_endpoint_one_node_disabled_gets_nothing_written_for_it_on_the_other() {
    if !on_postgres() {
        return;
    }
    use crate::event_webhooks::{Answer, Receiver};
    let app = quiet_app().await;
    let receiver = Receiver::start().await;
    receiver.otherwise(Some(Answer::Status(410)));
    let (_, channel) = app.chat_channel("Echo.", json!({})).await;
    let (nodes, answer) = two_settled_nodes(&app).await;
    let created = request(
        &nodes[0],
        Method::POST,
        "/workspace/webhooks",
        &app.owner.api_key,
    )
    .json(&json!({"url": receiver.url, "events": ["message.received"]}))
    .send()
    .await
    .expect("create");
    let endpoint = expect_status(created, 201).await["data"].clone();
    // Its lane runs on its owner, which disables it; the facts are written on the other.
    let lane = owner_of(&nodes, &answer, id_of(&endpoint));
    let writer = nodes.iter().find(|n| n.url != lane.url).expect("the other");
    let mut person = 0;
    while owner_of(
        &nodes,
        &answer,
        id_of(&app.put_identity(&format!("crm-{person}"), json!({})).await),
    )
    .url != writer.url
    {
        person += 1;
    }
    let deliveries = format!(
        "/workspace/webhooks/{}/deliveries",
        endpoint["id"].as_str().expect("id")
    );
    let chat = async |text: &str| {
        let said = request(
            writer,
            Method::POST,
            &format!("/conversation/crm-{person}/chat/{channel}"),
            &app.owner.api_key,
        )
        .json(&json!({"message": text}))
        .send()
        .await
        .expect("chat");
        expect_status(said, 200).await;
        let listed = expect_status(app.get(&deliveries).await, 200).await;
        listed["pagination"]["total"].as_u64().unwrap_or_default()
    };

    // The first fact written for it is answered 410 Gone: the lane's node disables it.
    let deadline = Instant::now() + Duration::from_secs(20);
    while chat("hello").await == 0 {
        assert!(Instant::now() < deadline, "nothing was written for it");
    }
    receiver.wait_for(1).await;
    let path = format!(
        "/workspace/webhooks/{}",
        endpoint["id"].as_str().expect("id")
    );
    loop {
        let read = expect_status(app.get(&path).await, 200).await;
        if read["data"]["enabled"] == false {
            break;
        }
        assert!(Instant::now() < deadline, "never disabled: {read}");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }

    // The writer's routes follow: soon a fact written there adds nothing for it.
    let mut written = chat("again").await;
    loop {
        let now = chat("and again").await;
        if now == written {
            break;
        }
        written = now;
        assert!(
            Instant::now() < deadline,
            "the other node still writes for the disabled endpoint"
        );
    }
    assert_eq!(
        receiver.received().len(),
        1,
        "a disabled endpoint hears nothing"
    );
}

/// How many fetches `node` says ended `stored`.
async fn fetches_stored(node: &Node) -> u64 {
    let metrics = exposition(request(node, Method::GET, "/metrics", OPERATOR)).await;
    samples_sum(
        &metrics,
        "parley_media_fetches_total",
        &["outcome=\"stored\""],
    )
}

#[tokio::test]
async fn a_channels_media_is_fetched_once_by_the_node_that_owns_the_channel() {
    use parley_testkit::graph::messages_payload;
    if !on_postgres() {
        return;
    }
    let app = quiet_app().await;
    let channel = app.live_channel(NUMBER).await;
    let (nodes, answer) = two_settled_nodes(&app).await;
    let (owner, other) = owner_and_other(&nodes, &answer, channel.parse().expect("channel id"));
    // Pictures land on both nodes, as Meta spreads its webhooks.
    for i in 0..6 {
        let id = format!("media-cluster-{i}");
        let sha256 = app.graph.add_generated_media(&id, 200_000, i, "image/jpeg");
        let from = format!("1408666{i:04}");
        let image = json!({"from": from, "id": format!("wamid.PIC{i}"), "timestamp": "1749416383",
                           "type": "image", "image": {"id": id, "mime_type": "image/jpeg", "sha256": sha256}});
        let payload = messages_payload(NUMBER, &from, "Pic", image);
        let node = if i % 2 == 0 { owner } else { other };
        let url = format!("{}/webhooks/waba/{channel}", node.url);
        assert_eq!(
            app.graph.post_webhook(&url, APP_SECRET, &payload).await,
            200
        );
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    while fetches_stored(owner).await < 6 {
        assert!(
            Instant::now() < deadline,
            "the owner never stored the six files"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        fetches_stored(other).await,
        0,
        "the other node fetched nothing"
    );
    assert_eq!(app.graph.downloads(), 6, "each file downloaded once");
    for i in 0..6 {
        let messages = app
            .wait_for_messages(&format!("+1408666{i:04}"), |all| {
                all.iter()
                    .any(|m| m["attachments"][0]["status"] == "stored")
            })
            .await;
        assert_eq!(messages[0]["attachments"][0]["size"], 200_000);
    }
}

/// Reads `stream` until it says `changed`; fails past `within`.
async fn hears_changed(stream: &mut reqwest::Response, within: Duration) {
    let deadline = tokio::time::Instant::now() + within;
    let mut heard = String::new();
    loop {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        match tokio::time::timeout(left, stream.chunk()).await {
            Ok(Ok(Some(chunk))) => {
                heard.push_str(&String::from_utf8_lossy(&chunk));
                if heard.contains("event: changed") {
                    return;
                }
            }
            Ok(Ok(None)) => panic!("the stream ended: {heard}"),
            Ok(Err(error)) => panic!("the stream failed: {error}"),
            Err(_) => panic!("no change heard within {within:?}: {heard}"),
        }
    }
}

#[tokio::test]
async fn a_console_session_works_on_every_node_and_a_message_on_one_wakes_the_pages_of_the_other() {
    if !on_postgres() {
        return;
    }
    let app = quiet_app().await;
    let channel = app.live_channel(NUMBER).await;
    let (nodes, _) = two_settled_nodes(&app).await;
    let (first, second) = (&nodes[0], &nodes[1]);

    // Signed in on one node, the same cookie is a session on the other.
    let mut on_first = crate::console::Tab::at(&first.url);
    on_first.sign_in(&app.owner.api_key).await;
    let mut on_second = on_first.at_other(&second.url);
    let inbox = on_second.get("/console/conversations").await;
    assert_eq!(inbox.status, 200, "{}", inbox.body);

    // A live inbox on each node; a person's message arrives through one: both hear it.
    let mut live_first = on_first.stream("/console/conversations/live").await;
    let mut live_second = on_second.stream("/console/conversations/live").await;
    assert_eq!(live_second.status(), 200);
    // Let both streams read their first mark before anything changes.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let payload = text_message(NUMBER, "16505551234", "Sheena", "wamid.LIVE1", "Hello?");
    let url = format!("{}/webhooks/waba/{channel}", first.url);
    assert_eq!(
        app.graph.post_webhook(&url, APP_SECRET, &payload).await,
        200
    );
    hears_changed(&mut live_first, Duration::from_secs(15)).await;
    hears_changed(&mut live_second, Duration::from_secs(15)).await;
}
