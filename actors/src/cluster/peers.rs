//! Reaching the node that owns something (DESIGN §2 "Routing"): every call goes to one route
//! of the owner's, `POST /_cluster/call`, as `{"call": <kind>, "body": <call>}` with the
//! cluster's shared secret; the owner answers JSON (or, for a streamed call, one JSON line per
//! piece and a last line with the answer). A node that no longer owns what it is asked about
//! answers 503 `not_owner`; the caller then reads the leases again and tries once more. This
//! is the only such retry.

use std::time::Duration;

use futures_util::StreamExt;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;
use uuid::Uuid;

use super::Placement;

/// The header a node's request to another carries: the cluster's shared secret.
pub const PEER_SECRET_HEADER: &str = "x-parley-cluster-secret";

/// The one route a node answers the others on.
pub const PEER_ROUTE: &str = "/_cluster/call";

/// The error code of a node that does not own what it was asked about (503).
pub const NOT_OWNER: &str = "not_owner";

/// The header a 503 `not_owner` carries, so that the caller knows it without reading the body.
pub const NOT_OWNER_HEADER: &str = "x-parley-not-owner";

/// Why the owner could not answer.
#[derive(Clone, Debug, thiserror::Error)]
pub enum PeerError {
    /// No node holds the partition now (a takeover is under way), or this is a single node.
    #[error("no node owns it right now")]
    NoOwner,
    /// The owner could not be reached or failed.
    #[error("the owning node did not answer: {0}")]
    Unreachable(String),
}

/// Work that runs on the node that owns an id: what crosses to it, and what comes back. Each
/// kind is a variant of the peer route's one call enum (`runtime::peer::PeerCall`), named by
/// [`Call::KIND`].
pub trait Call: Serialize + Send + Sync {
    /// Its variant's name in the peer route's call enum.
    const KIND: &'static str;
    /// What the caller hears.
    type Answer: Send;
    /// The answer as it crosses between nodes.
    type Wire: Serialize + DeserializeOwned + Send;
    /// How long the owner may take to answer (each try); `None`: as long as the work takes.
    const WAIT: Option<Duration> = None;
    /// The id whose owner runs it.
    fn owner_key(&self) -> Uuid;
    /// The answer as the owner sends it.
    fn into_wire(answer: Self::Answer) -> Self::Wire;
    /// The answer as the caller hears it.
    fn from_wire(wire: Self::Wire) -> Self::Answer;
    /// Whether `answer` says the node that ran it does not own the id (the partition moved).
    fn is_not_owner(answer: &Self::Answer) -> bool;
    /// The answer when no owner could be reached.
    fn unreachable(error: PeerError) -> Self::Answer;
}

/// A call whose owner tells the caller pieces while it runs (a streamed turn's tokens).
pub trait StreamedCall: Call {
    /// One piece.
    type Line: Serialize + DeserializeOwned + Send + 'static;
}

/// One line of a streamed call's answer.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StreamLine<L, W> {
    /// A piece, as it comes.
    Line(L),
    /// The answer; the last line.
    End(W),
}

/// What travels to the peer route.
#[derive(Serialize)]
struct Envelope<'a, C> {
    call: &'static str,
    body: &'a C,
}

/// The HTTP client of the other nodes and the secret they share.
#[derive(Debug)]
pub(super) struct Peers {
    client: reqwest::Client,
    secret: String,
}

impl Peers {
    pub(super) fn new(secret: &str) -> Self {
        let client = reqwest::Client::builder()
            .tcp_nodelay(true)
            .pool_idle_timeout(Duration::from_secs(60))
            .build()
            .unwrap_or_default();
        Self {
            client,
            secret: secret.to_owned(),
        }
    }

    /// Whether `given` is the cluster's shared secret.
    pub(super) fn accepts(&self, given: &[u8]) -> bool {
        use subtle::ConstantTimeEq;
        bool::from(self.secret.as_bytes().ct_eq(given))
    }
}

impl Placement {
    /// Runs `call` on the owner of its id and answers what it answered.
    pub(super) async fn at_owner<C: Call>(&self, call: &C) -> C::Answer {
        let answer = match self.owner_response(call).await {
            Ok(response) => response
                .json::<C::Wire>()
                .await
                .map_err(|e| PeerError::Unreachable(e.to_string())),
            Err(error) => Err(error),
        };
        crate::measure::cluster_forward(C::KIND, answer.is_ok());
        answer.map_or_else(C::unreachable, C::from_wire)
    }

    /// Runs `call` on the owner of its id, handing each piece it tells to `sink` as it comes.
    pub(super) async fn streamed_at_owner<C: StreamedCall>(
        &self,
        call: &C,
        sink: &mpsc::Sender<C::Line>,
    ) -> C::Answer {
        let answer = match self.owner_response(call).await {
            Ok(response) => read_lines::<C>(response, sink).await,
            Err(error) => Err(error),
        };
        crate::measure::cluster_forward(C::KIND, answer.is_ok());
        answer.map_or_else(C::unreachable, C::from_wire)
    }

    /// The owner's successful response to `call`; after a refused connection or `not_owner`,
    /// the leases are read again and the new owner is tried once.
    async fn owner_response<C: Call>(&self, call: &C) -> Result<reqwest::Response, PeerError> {
        let Some(cluster) = self.inner.cluster.as_ref() else {
            return Err(PeerError::NoOwner);
        };
        let peers = &cluster.peers;
        let id = call.owner_key();
        let body = Envelope {
            call: C::KIND,
            body: call,
        };
        for attempt in 0..2 {
            let url = self.owner_url_fresh(id).await?;
            let mut request = peers
                .client
                .post(format!("{}{PEER_ROUTE}", url.trim_end_matches('/')))
                .header(PEER_SECRET_HEADER, &peers.secret)
                .json(&body);
            if let Some(wait) = C::WAIT {
                request = request.timeout(wait);
            }
            let sent = request.send().await;
            let response = match sent {
                Ok(response) => response,
                // The owner as last read is gone (a takeover under way); one that took too
                // long is there, only slow, and is not asked twice.
                Err(error) if attempt == 0 && !error.is_timeout() => {
                    self.refresh_owners().await;
                    continue;
                }
                Err(error) => return Err(PeerError::Unreachable(error.to_string())),
            };
            let status = response.status();
            if status.is_success() {
                return Ok(response);
            }
            let not_owner = response.headers().contains_key(NOT_OWNER_HEADER);
            if status.as_u16() == 503 && not_owner && attempt == 0 {
                crate::measure::cluster_not_owner_retry();
                self.refresh_owners().await;
                continue;
            }
            let text = response.text().await.unwrap_or_default();
            return Err(PeerError::Unreachable(format!("{status}: {text}")));
        }
        Err(PeerError::NoOwner)
    }

    /// The owner's URL for `id`, the leases read again once when it is unknown.
    async fn owner_url_fresh(&self, id: Uuid) -> Result<String, PeerError> {
        if let Some(url) = self.read(|t| t.owner_of(id).map(str::to_owned)) {
            return Ok(url);
        }
        self.refresh_owners().await;
        self.read(|t| t.owner_of(id).map(str::to_owned))
            .ok_or(PeerError::NoOwner)
    }
}

/// Reads a streamed answer line by line, each piece to `sink`, until the last line.
async fn read_lines<C: StreamedCall>(
    response: reqwest::Response,
    sink: &mpsc::Sender<C::Line>,
) -> Result<C::Wire, PeerError> {
    let mut bytes = response.bytes_stream();
    let mut buffer: Vec<u8> = Vec::new();
    loop {
        while let Some(end) = buffer.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = buffer.drain(..=end).collect();
            match serde_json::from_slice::<StreamLine<C::Line, C::Wire>>(&line) {
                Ok(StreamLine::Line(piece)) => {
                    // A caller that stopped listening still gets the answer.
                    let _ = sink.send(piece).await;
                }
                Ok(StreamLine::End(answer)) => return Ok(answer),
                Err(error) => return Err(PeerError::Unreachable(error.to_string())),
            }
        }
        match bytes.next().await {
            Some(Ok(chunk)) => buffer.extend_from_slice(&chunk),
            Some(Err(error)) => return Err(PeerError::Unreachable(error.to_string())),
            None => {
                return Err(PeerError::Unreachable(
                    "the owner's answer ended before its last line".to_owned(),
                ));
            }
        }
    }
}
