//! The HTTP server loop: accepts connections within a bound (in all, and per client address),
//! and closes the ones that do not pull their weight (headers that never finish, keep-alives
//! that stay idle), so that a client holding thousands of sockets cannot starve everyone else. On shutdown it stops accepting,
//! lets each connection finish its current response, and waits for them up to a grace period.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use axum::extract::ConnectInfo;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, watch};
use tower::ServiceExt;

/// How connections are held to account.
#[derive(Clone, Copy, Debug)]
pub struct ConnectionLimits {
    /// Longest wait for a request's headers to arrive in full.
    pub header_read_timeout: Duration,
    /// Longest a keep-alive connection may stay without a request.
    pub idle_timeout: Duration,
    /// Most connections open at once; further clients wait in the listen backlog.
    pub max_connections: usize,
    /// Most connections one client address may hold open (0: no limit); one more is closed
    /// at once.
    pub max_per_address: usize,
    /// Most connections of one address that have not sent a whole request yet (0: no limit);
    /// one more is closed at once.
    pub max_unfinished_per_address: usize,
}

/// What each client address holds: open connections, and those without a request yet.
#[derive(Default)]
struct Addresses(Mutex<HashMap<IpAddr, (usize, usize)>>);

/// A connection's place in its address's counts, given back when it ends.
struct Held {
    addresses: Arc<Addresses>,
    ip: IpAddr,
    /// Whether it has not sent a whole request yet.
    unfinished: std::sync::atomic::AtomicBool,
}

impl Addresses {
    /// Counts a new connection of `ip`, unless the address holds its share already.
    fn admit(self: &Arc<Self>, ip: IpAddr, limits: &ConnectionLimits) -> Option<Held> {
        let mut counts = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let (open, unfinished) = counts.entry(ip).or_default();
        let over = |count: usize, max: usize| max > 0 && count >= max;
        if over(*open, limits.max_per_address)
            || over(*unfinished, limits.max_unfinished_per_address)
        {
            return None;
        }
        *open += 1;
        *unfinished += 1;
        Some(Held {
            addresses: self.clone(),
            ip,
            unfinished: std::sync::atomic::AtomicBool::new(true),
        })
    }

    fn release(&self, ip: IpAddr, unfinished: bool) {
        let mut counts = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some((open, pending)) = counts.get_mut(&ip) {
            *open = open.saturating_sub(1);
            if unfinished {
                *pending = pending.saturating_sub(1);
            }
            if *open == 0 {
                counts.remove(&ip);
            }
        }
    }
}

impl Held {
    /// The connection's first request began: it no longer counts as unfinished.
    fn started(&self) {
        if self.unfinished.swap(false, Ordering::AcqRel) {
            let mut counts = self
                .addresses
                .0
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if let Some((_, pending)) = counts.get_mut(&self.ip) {
                *pending = pending.saturating_sub(1);
            }
        }
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        let unfinished = self.unfinished.load(Ordering::Acquire);
        self.addresses.release(self.ip, unfinished);
    }
}

/// Serves `router` on `listener` until `shutdown` resolves, then gives open connections
/// `grace` to finish their current response. Answers whether every connection finished.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    limits: ConnectionLimits,
    shutdown: impl Future<Output = ()> + Send,
    grace: Duration,
) -> bool {
    let permits = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let (stopping_tx, stopping) = watch::channel(false);
    let open = Arc::new(AtomicUsize::new(0));
    let addresses = Arc::new(Addresses::default());
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let permit = tokio::select! {
            permit = permits.clone().acquire_owned() => match permit {
                Ok(permit) => permit,
                Err(_) => break,
            },
            () = &mut shutdown => break,
        };
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    // Out of file descriptors and the like: back off instead of spinning.
                    tracing::warn!(%error, "accepting a connection failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        // An address holding its share already: this one is closed at once (and its permit
        // given back), so others are not kept waiting behind it.
        let Some(held) = addresses.admit(peer.ip(), &limits) else {
            tracing::debug!(%peer, "connection refused: its address holds its share");
            drop(stream);
            continue;
        };
        // Answers are written whole or streamed on purpose (SSE tokens): none should wait for
        // the peer's delayed ACK of the write before it (Nagle), up to 40 ms on Linux.
        if let Err(error) = stream.set_nodelay(true) {
            tracing::debug!(%error, %peer, "TCP_NODELAY could not be set");
        }
        let connection = Connection {
            router: router.clone(),
            limits,
            stopping: stopping.clone(),
            open: open.clone(),
            held,
        };
        tokio::spawn(async move {
            connection.run(stream, peer).await;
            drop(permit);
        });
    }
    tracing::info!("shutting down: finishing in-flight requests");
    let _ = stopping_tx.send(true);
    let deadline = Instant::now() + grace;
    while open.load(Ordering::Acquire) > 0 {
        if Instant::now() >= deadline {
            tracing::warn!(
                ?grace,
                open = open.load(Ordering::Acquire),
                "in-flight requests cut off at the shutdown deadline"
            );
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    true
}

/// One client connection.
struct Connection {
    router: Router,
    limits: ConnectionLimits,
    stopping: watch::Receiver<bool>,
    open: Arc<AtomicUsize>,
    /// Its place in its address's counts.
    held: Held,
}

impl Connection {
    async fn run(mut self, stream: TcpStream, peer: SocketAddr) {
        self.open.fetch_add(1, Ordering::AcqRel);
        let activity = Arc::new(Activity::default());
        let router = self.router.clone();
        let seen = activity.clone();
        let held = Arc::new(self.held);
        let first = held.clone();
        let service = hyper::service::service_fn(move |mut request: hyper::Request<Incoming>| {
            request.extensions_mut().insert(ConnectInfo(peer));
            first.started();
            seen.begin();
            let done = seen.clone();
            let response = router.clone().oneshot(request.map(Body::new));
            async move {
                let response = response.await;
                done.end();
                response
            }
        });
        let mut http = hyper::server::conn::http1::Builder::new();
        http.timer(TokioTimer::new())
            .header_read_timeout(self.limits.header_read_timeout)
            .keep_alive(true);
        let connection = http
            .serve_connection(TokioIo::new(stream), service)
            .with_upgrades();
        let mut connection = std::pin::pin!(connection);
        let idle = self.limits.idle_timeout;
        let mut closing = false;
        loop {
            let quiet_for = activity.quiet_for();
            let wake = idle
                .saturating_sub(quiet_for)
                .max(Duration::from_millis(10));
            tokio::select! {
                outcome = connection.as_mut() => {
                    if let Err(error) = outcome {
                        tracing::debug!(%error, %peer, "connection closed");
                    }
                    break;
                }
                changed = self.stopping.changed(), if !closing => {
                    if changed.is_err() || *self.stopping.borrow() {
                        closing = true;
                        connection.as_mut().graceful_shutdown();
                    }
                }
                () = tokio::time::sleep(wake), if !closing => {
                    if activity.in_flight() == 0 && activity.quiet_for() >= idle {
                        closing = true;
                        connection.as_mut().graceful_shutdown();
                    }
                }
            }
        }
        self.open.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Requests in flight on a connection and when the last one began.
struct Activity {
    in_flight: AtomicUsize,
    /// Milliseconds since `epoch` at the last request's start.
    last: AtomicU64,
    epoch: Instant,
}

impl Default for Activity {
    fn default() -> Self {
        Self {
            in_flight: AtomicUsize::new(0),
            last: AtomicU64::new(0),
            epoch: Instant::now(),
        }
    }
}

impl Activity {
    fn begin(&self) {
        self.in_flight.fetch_add(1, Ordering::AcqRel);
        self.touch();
    }

    fn end(&self) {
        self.in_flight.fetch_sub(1, Ordering::AcqRel);
        self.touch();
    }

    fn touch(&self) {
        let now = u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last.store(now, Ordering::Release);
    }

    fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::Acquire)
    }

    fn quiet_for(&self) -> Duration {
        let last = Duration::from_millis(self.last.load(Ordering::Acquire));
        self.epoch.elapsed().saturating_sub(last)
    }
}
