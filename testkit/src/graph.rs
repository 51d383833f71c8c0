//! A fake of the Graph API endpoints Parley uses: `/{number}/messages` and
//! `/{number}/marketing_messages` (with a per-number rate that answers 130429 and a per-recipient
//! spacing that answers 131056), `/{waba}/message_templates` (list and create) and
//! `/{waba}/subscribed_apps`. It records what it received, can inject errors and latency, and
//! can post signed webhooks (messages and statuses) to Parley.

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::serve::ListenerExt;
use hmac::{Hmac, KeyInit, Mac};
use serde_json::{Value, json};
use sha2::Sha256;
use tokio::sync::oneshot;

mod media;

/// A message the fake accepted.
#[derive(Clone, Debug)]
pub struct SentMessage {
    /// The number it was sent from.
    pub phone_number_id: String,
    /// `messages` or `marketing_messages`.
    pub edge: String,
    /// The request body.
    pub body: Value,
    /// The `wamid` it answered.
    pub wamid: String,
    /// The bearer token used.
    pub token: String,
    /// When the fake accepted it.
    pub at: Instant,
}

impl SentMessage {
    /// The recipient (`to`).
    pub fn to(&self) -> &str {
        self.body["to"].as_str().unwrap_or_default()
    }

    /// The text body of a text message.
    pub fn text(&self) -> Option<&str> {
        self.body["text"]["body"].as_str()
    }
}

#[derive(Debug, Default)]
struct GraphState {
    sent: Vec<SentMessage>,
    rejected: Vec<(Value, i64)>,
    errors: VecDeque<i64>,
    templates: HashMap<String, Vec<Value>>,
    template_errors: VecDeque<i64>,
    subscriptions: Vec<(String, Value)>,
    window: HashMap<String, (Instant, u32)>,
    last_to: HashMap<(String, String), Instant>,
    per_second: Option<u32>,
    received_past_limit: usize,
    pair_spacing: Option<Duration>,
    latency: Duration,
    listing_latency: Duration,
    answer_after: Duration,
    invalid_tokens: Vec<String>,
    foreign_numbers: Vec<String>,
    number_errors: VecDeque<i64>,
    number_checks: Vec<String>,
    counter: u64,
    /// Sends being answered now, and the most there have been at once.
    sends_in_flight: usize,
    most_sends_in_flight: usize,
    reports: Option<Reports>,
    /// Where the fake answers (`http://127.0.0.1:port`), for the download URLs it gives.
    origin: String,
    media: HashMap<String, media::FakeMedia>,
    download_failures: usize,
    download_pause: Duration,
    downloads: usize,
    uploads: Vec<media::Upload>,
    upload_errors: VecDeque<i64>,
}

impl GraphState {
    /// Counts one message of `number` (sent or received: Meta's throughput counts both) in its
    /// one-second window; `false` when the window is full, and the message is not counted.
    fn take_from_window(&mut self, number: &str, now: Instant) -> bool {
        let Some(limit) = self.per_second else {
            return true;
        };
        let window = self.window.entry(number.to_owned()).or_insert((now, 0));
        if now.duration_since(window.0) >= Duration::from_secs(1) {
            *window = (now, 0);
        }
        if window.1 >= limit {
            return false;
        }
        window.1 += 1;
        true
    }
}

/// Delivery reports the fake posts back for every message it accepts.
#[derive(Clone, Debug)]
struct Reports {
    url: String,
    app_secret: String,
    delay: Duration,
    statuses: Vec<String>,
    /// One client for every report: a client per report loaded the system's certificates and
    /// opened a connection each time, which at a thousand sends a second was most of the
    /// machine's time (the fake's, not the server's).
    http: reqwest::Client,
}

#[derive(Debug, Default)]
struct Shared(Mutex<GraphState>);

impl Shared {
    fn lock(&self) -> MutexGuard<'_, GraphState> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// A running fake Graph API; stops when dropped.
#[derive(Debug)]
pub struct FakeGraph {
    addr: SocketAddr,
    shared: Arc<Shared>,
    http: reqwest::Client,
    _shutdown: oneshot::Sender<()>,
}

impl FakeGraph {
    /// Starts the fake on a free loopback port.
    ///
    /// # Panics
    /// When no loopback port can be bound.
    pub async fn start() -> Self {
        let shared = Arc::new(Shared::default());
        let app = Router::new()
            .route("/v23.0/{node}/messages", post(send_message))
            .route("/v23.0/{node}/marketing_messages", post(send_marketing))
            .route(
                "/v23.0/{node}/message_templates",
                get(list_templates).post(create_template),
            )
            .route("/v23.0/{node}/subscribed_apps", post(subscribe))
            .route("/v23.0/{node}", get(number))
            .route("/media-download/{id}", get(media::download))
            .route("/v23.0/{node}/media", post(media::upload))
            .with_state(shared.clone());
        #[allow(clippy::expect_used)]
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind a loopback port");
        #[allow(clippy::expect_used)]
        let addr = listener.local_addr().expect("bound address");
        shared.lock().origin = format!("http://{addr}");
        let (tx, rx) = oneshot::channel::<()>();
        tokio::spawn(async move {
            // Each answer leaves at once (no Nagle wait behind a delayed ACK of its head).
            let listener = listener.tap_io(|tcp| {
                let _ = tcp.set_nodelay(true);
            });
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(async {
                    let _ = rx.await;
                })
                .await;
        });
        Self {
            addr,
            shared,
            http: reqwest::Client::new(),
            _shutdown: tx,
        }
    }

    /// The base URL to configure, version included.
    pub fn base_url(&self) -> String {
        format!("http://{}/v23.0", self.addr)
    }

    /// Every message accepted, in order.
    pub fn sent(&self) -> Vec<SentMessage> {
        self.shared.lock().sent.clone()
    }

    /// How many messages were accepted: for polling without copying them all.
    pub fn sent_count(&self) -> usize {
        self.shared.lock().sent.len()
    }

    /// Every send refused, with the error code answered.
    pub fn rejected(&self) -> Vec<(Value, i64)> {
        self.shared.lock().rejected.clone()
    }

    /// Answers the next sends with these Meta error codes, one per send.
    pub fn fail_next_sends(&self, codes: impl IntoIterator<Item = i64>) {
        self.shared.lock().errors.extend(codes);
    }

    /// Answers the next template calls with these Meta error codes.
    pub fn fail_next_template_calls(&self, codes: impl IntoIterator<Item = i64>) {
        self.shared.lock().template_errors.extend(codes);
    }

    /// Refuses sends beyond `per_second` per number in any one-second window (130429).
    pub fn limit_per_second(&self, per_second: u32) {
        self.shared.lock().per_second = Some(per_second);
    }

    /// Refuses a send to a recipient sooner than `spacing` after the previous one (131056).
    pub fn limit_pair_spacing(&self, spacing: Duration) {
        self.shared.lock().pair_spacing = Some(spacing);
    }

    /// The most sends the fake was answering at one time.
    pub fn most_sends_in_flight(&self) -> usize {
        self.shared.lock().most_sends_in_flight
    }

    /// Delay before every answer.
    pub fn set_latency(&self, latency: Duration) {
        self.shared.lock().latency = latency;
    }

    /// Delay before every answer to a template listing (a Meta that is slow to list them).
    pub fn delay_template_listing(&self, delay: Duration) {
        self.shared.lock().listing_latency = delay;
    }

    /// Delay between accepting a message (its delivery reports are under way from then) and
    /// answering the send, as Meta's reports can overtake its answer.
    pub fn answer_sends_after(&self, delay: Duration) {
        self.shared.lock().answer_after = delay;
    }

    /// Treats `token` as expired (error 190).
    pub fn invalidate_token(&self, token: &str) {
        self.shared.lock().invalid_tokens.push(token.to_owned());
    }

    /// Answers the number check of `phone_number_id` as Meta does for a number the token
    /// does not hold (error 100).
    pub fn not_held(&self, phone_number_id: &str) {
        self.shared
            .lock()
            .foreign_numbers
            .push(phone_number_id.to_owned());
    }

    /// Answers the next number checks with these Meta error codes (a code of 1 is Meta's
    /// "unknown error", answered with a 500).
    pub fn fail_next_number_checks(&self, codes: impl IntoIterator<Item = i64>) {
        self.shared.lock().number_errors.extend(codes);
    }

    /// Every number check received, by phone number id.
    pub fn number_checks(&self) -> Vec<String> {
        self.shared.lock().number_checks.clone()
    }

    /// Adds an approved template to a business account.
    pub fn add_template(&self, waba_id: &str, template: Value) {
        self.shared
            .lock()
            .templates
            .entry(waba_id.to_owned())
            .or_default()
            .push(template);
    }

    /// Sets the status Meta gives the account's template `name` (`PAUSED`, `DISABLED`, …), as
    /// when Meta reviews it again after it was approved.
    pub fn set_template_status(&self, waba_id: &str, name: &str, status: &str) {
        let mut state = self.shared.lock();
        for template in state.templates.entry(waba_id.to_owned()).or_default() {
            if template["name"] == name {
                template["status"] = Value::String(status.to_owned());
            }
        }
    }

    /// Every `subscribed_apps` registration: `(waba id, body)`.
    pub fn subscriptions(&self) -> Vec<(String, Value)> {
        self.shared.lock().subscriptions.clone()
    }

    /// From now on, reports every accepted message back as Meta does: after `delay`, one signed
    /// status webhook per status in `statuses` (e.g. `["delivered", "read"]`) to `url` (Parley's
    /// `/webhooks/waba`, routed by phone number id).
    pub fn report_statuses(&self, url: &str, app_secret: &str, delay: Duration, statuses: &[&str]) {
        self.shared.lock().reports = Some(Reports {
            url: url.to_owned(),
            app_secret: app_secret.to_owned(),
            delay,
            statuses: statuses.iter().map(|s| (*s).to_owned()).collect(),
            http: self.http.clone(),
        });
    }

    /// Delivers a person's text message to `phone_number_id` as Meta does: counted in the
    /// number's throughput (inbound and outbound messages share it) and posted to `url` signed
    /// with `app_secret`; answers the status. A message past the number's throughput is still
    /// delivered (Meta refuses sends, not people), and counted as received past it.
    ///
    /// # Panics
    /// When the request cannot be sent.
    pub async fn deliver_text(
        &self,
        url: &str,
        app_secret: &str,
        phone_number_id: &str,
        (from, wamid, text): (&str, &str, &str),
    ) -> u16 {
        {
            let mut state = self.shared.lock();
            if !state.take_from_window(phone_number_id, Instant::now()) {
                state.received_past_limit += 1;
            }
        }
        let payload = text_message(phone_number_id, from, "Person", wamid, text);
        self.post_webhook(url, app_secret, &payload).await
    }

    /// Messages delivered by [`FakeGraph::deliver_text`] when the number's window was full.
    pub fn received_past_limit(&self) -> usize {
        self.shared.lock().received_past_limit
    }

    /// Posts `payload` to `url` signed with `app_secret`, as Meta does; answers the status.
    ///
    /// # Panics
    /// When the request cannot be sent.
    pub async fn post_webhook(&self, url: &str, app_secret: &str, payload: &Value) -> u16 {
        let body = payload.to_string();
        #[allow(clippy::expect_used)]
        let response = self
            .http
            .post(url)
            .header("content-type", "application/json")
            .header(
                "x-hub-signature-256",
                sign(app_secret.as_bytes(), body.as_bytes()),
            )
            .body(body)
            .send()
            .await
            .expect("webhook delivery");
        response.status().as_u16()
    }
}

/// `X-Hub-Signature-256` of `body` with `secret`.
pub fn sign(secret: &[u8], body: &[u8]) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret).unwrap_or_else(|_| unreachable!());
    mac.update(body);
    format!("sha256={}", hex::encode(mac.finalize().into_bytes()))
}

/// A webhook payload with one text message `text` from `from` (digits) named `name`.
pub fn text_message(
    phone_number_id: &str,
    from: &str,
    name: &str,
    wamid: &str,
    text: &str,
) -> Value {
    messages_payload(
        phone_number_id,
        from,
        name,
        json!({"from": from, "id": wamid, "timestamp": "1749416383", "type": "text", "text": {"body": text}}),
    )
}

/// A webhook payload with one message object of any type.
pub fn messages_payload(phone_number_id: &str, from: &str, name: &str, message: Value) -> Value {
    json!({"object": "whatsapp_business_account", "entry": [{"id": "waba", "changes": [{"field": "messages", "value": {
        "messaging_product": "whatsapp",
        "metadata": {"display_phone_number": "15550000000", "phone_number_id": phone_number_id},
        "contacts": [{"profile": {"name": name}, "wa_id": from}],
        "messages": [message]}}]}]})
}

/// A webhook payload reporting `status` of `wamid` (with `error_code` for `failed`).
pub fn status_payload(
    phone_number_id: &str,
    wamid: &str,
    status: &str,
    error_code: Option<i64>,
) -> Value {
    let mut report =
        json!({"id": wamid, "status": status, "timestamp": "1749416400", "recipient_id": "1"});
    if let Some(code) = error_code {
        report["errors"] = json!([{"code": code, "title": "Message undeliverable", "message": "Message undeliverable"}]);
    }
    json!({"object": "whatsapp_business_account", "entry": [{"id": "waba", "changes": [{"field": "messages", "value": {
        "messaging_product": "whatsapp",
        "metadata": {"display_phone_number": "15550000000", "phone_number_id": phone_number_id},
        "statuses": [report]}}]}]})
}

fn bearer(headers: &HeaderMap) -> String {
    headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or_default()
        .to_owned()
}

fn meta_error(code: i64) -> Response {
    let (status, message) = match code {
        190 => (
            StatusCode::UNAUTHORIZED,
            "Error validating access token: Session has expired",
        ),
        130429 => (StatusCode::BAD_REQUEST, "(#130429) Rate limit hit"),
        131056 => (
            StatusCode::BAD_REQUEST,
            "(#131056) (Business Account, Consumer Account) pair rate limit hit",
        ),
        131047 => (StatusCode::BAD_REQUEST, "Re-engagement message"),
        131053 => (StatusCode::BAD_REQUEST, "Media upload error"),
        131026 => (StatusCode::BAD_REQUEST, "Message undeliverable"),
        100 => (StatusCode::BAD_REQUEST, "(#100) Invalid parameter"),
        _ => (
            StatusCode::INTERNAL_SERVER_ERROR,
            "An unknown error occurred",
        ),
    };
    let body = json!({"error": {"message": message, "type": "OAuthException", "code": code,
                                "error_data": {"messaging_product": "whatsapp", "details": message}, "fbtrace_id": "fake"}});
    (status, axum::Json(body)).into_response()
}

async fn send_message(
    state: State<Arc<Shared>>,
    node: Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    accept_send(state, node, headers, body, "messages").await
}

async fn send_marketing(
    state: State<Arc<Shared>>,
    node: Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    accept_send(state, node, headers, body, "marketing_messages").await
}

async fn accept_send(
    State(shared): State<Arc<Shared>>,
    Path(number): Path<String>,
    headers: HeaderMap,
    body: Bytes,
    edge: &str,
) -> Response {
    let latency = {
        let mut state = shared.lock();
        state.sends_in_flight += 1;
        state.most_sends_in_flight = state.most_sends_in_flight.max(state.sends_in_flight);
        state.latency
    };
    // Counted out however the answer ends (a client that hung up drops this future).
    let _answered = InFlight(&shared);
    tokio::time::sleep(latency).await;
    let Ok(body) = serde_json::from_slice::<Value>(&body) else {
        return meta_error(100);
    };
    let token = bearer(&headers);
    let (answer, answer_after) = accept_now(&shared, number, body, token, edge);
    if !answer_after.is_zero() {
        tokio::time::sleep(answer_after).await;
    }
    answer
}

/// One send being answered, counted out when dropped.
struct InFlight<'a>(&'a Shared);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.lock().sends_in_flight -= 1;
    }
}

/// Accepts or refuses a send (under the lock); answers the response and how long to wait
/// before giving it.
fn accept_now(
    shared: &Shared,
    number: String,
    body: Value,
    token: String,
    edge: &str,
) -> (Response, Duration) {
    let mut state = shared.lock();
    let refuse = |state: &mut GraphState, code: i64| {
        state.rejected.push((body.clone(), code));
        (meta_error(code), Duration::ZERO)
    };
    if token.is_empty() || state.invalid_tokens.contains(&token) {
        return refuse(&mut state, 190);
    }
    if let Some(code) = state.errors.pop_front() {
        return refuse(&mut state, code);
    }
    if body["messaging_product"] != "whatsapp" || body["to"].as_str().is_none_or(str::is_empty) {
        return refuse(&mut state, 100);
    }
    if edge == "marketing_messages" && body["type"] != "template" {
        return refuse(&mut state, 100);
    }
    let now = Instant::now();
    if !state.take_from_window(&number, now) {
        return refuse(&mut state, 130429);
    }
    let to = body["to"].as_str().unwrap_or_default().to_owned();
    if let Some(spacing) = state.pair_spacing {
        let key = (number.clone(), to.clone());
        if state
            .last_to
            .get(&key)
            .is_some_and(|at| now.duration_since(*at) < spacing)
        {
            return refuse(&mut state, 131056);
        }
        state.last_to.insert(key, now);
    }
    state.counter += 1;
    let wamid = format!("wamid.fake{:08}", state.counter);
    if let Some(reports) = state.reports.clone() {
        tokio::spawn(report(reports, number.clone(), wamid.clone()));
    }
    state.sent.push(SentMessage {
        phone_number_id: number,
        edge: edge.to_owned(),
        body,
        wamid: wamid.clone(),
        token,
        at: now,
    });
    let answer = axum::Json(json!({"messaging_product": "whatsapp", "contacts": [{"input": to, "wa_id": to}], "messages": [{"id": wamid}]}))
        .into_response();
    (answer, state.answer_after)
}

/// Posts the configured statuses of `wamid`, signed, after the configured delay.
async fn report(reports: Reports, number: String, wamid: String) {
    tokio::time::sleep(reports.delay).await;
    for status in &reports.statuses {
        let body = status_payload(&number, &wamid, status, None).to_string();
        let _ = reports
            .http
            .post(&reports.url)
            .header("content-type", "application/json")
            .header(
                "x-hub-signature-256",
                sign(reports.app_secret.as_bytes(), body.as_bytes()),
            )
            .body(body)
            .send()
            .await;
    }
}

async fn list_templates(
    State(shared): State<Arc<Shared>>,
    Path(waba): Path<String>,
    headers: HeaderMap,
) -> Response {
    let delay = shared.lock().listing_latency;
    tokio::time::sleep(delay).await;
    let mut state = shared.lock();
    if bearer(&headers).is_empty() {
        return meta_error(190);
    }
    if let Some(code) = state.template_errors.pop_front() {
        return meta_error(code);
    }
    let data = state.templates.get(&waba).cloned().unwrap_or_default();
    axum::Json(json!({"data": data, "paging": {"cursors": {"before": "a", "after": "b"}}}))
        .into_response()
}

async fn create_template(
    State(shared): State<Arc<Shared>>,
    Path(waba): Path<String>,
    body: Bytes,
) -> Response {
    let mut state = shared.lock();
    if let Some(code) = state.template_errors.pop_front() {
        return meta_error(code);
    }
    let Ok(body) = serde_json::from_slice::<Value>(&body) else {
        return meta_error(100);
    };
    let valid = ["name", "language", "category"]
        .iter()
        .all(|f| body[f].as_str().is_some_and(|v| !v.is_empty()))
        && body["components"].as_array().is_some_and(|c| !c.is_empty());
    if !valid {
        return meta_error(100);
    }
    state.counter += 1;
    let id = format!("{}", 900_000 + state.counter);
    let mut stored = body.clone();
    stored["id"] = json!(id);
    stored["status"] = json!("PENDING");
    state.templates.entry(waba).or_default().push(stored);
    axum::Json(json!({"id": id, "status": "PENDING", "category": body["category"]})).into_response()
}

async fn number(
    State(shared): State<Arc<Shared>>,
    Path(number): Path<String>,
    headers: HeaderMap,
) -> Response {
    let token = bearer(&headers);
    if !token.is_empty() {
        let origin = shared.lock().origin.clone();
        if let Some(answer) = media::lookup(&shared, &number, &origin) {
            return answer;
        }
        if media::looks_like_media(&number) {
            return meta_error(100);
        }
    }
    let mut state = shared.lock();
    state.number_checks.push(number.clone());
    if token.is_empty() || state.invalid_tokens.contains(&token) {
        return meta_error(190);
    }
    if let Some(code) = state.number_errors.pop_front() {
        return meta_error(code);
    }
    if state.foreign_numbers.contains(&number) {
        return meta_error(100);
    }
    axum::Json(
        json!({"id": number, "display_phone_number": "+1 555-010-0000",
                      "verified_name": "Acme Support"}),
    )
    .into_response()
}

async fn subscribe(
    State(shared): State<Arc<Shared>>,
    Path(waba): Path<String>,
    body: Bytes,
) -> Response {
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    shared.lock().subscriptions.push((waba, body));
    axum::Json(json!({"success": true})).into_response()
}
