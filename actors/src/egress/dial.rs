//! HTTP/1.1 connections to a tenant URL that their owner drives itself: an event endpoint's
//! lane keeps its own and polls each one inside its own task while a request is on it.
//!
//! A pooled client (reqwest's, hyper's) runs every connection as a task of its own: each
//! request goes to that task and each answer comes back, two wake-ups across tasks and, on a
//! multi-threaded runtime, most often across threads. For the small posts of event webhooks
//! that was about half of what a post cost (`post_cost` in the forty-seventh session's notes:
//! 72–84 µs of CPU a post with the connection a task of its own, 42–49 µs driven by the task
//! that posts, receiver included, on two cores).
//!
//! The egress policy holds as for [`Egress::client`]: the URL's text is checked at every
//! connection ([`Egress::check_url`]), a name's addresses are checked before connecting,
//! redirects are answers like any other (never followed), and TLS is rustls with the
//! platform's certificate verifier, as reqwest has it. No proxy is used.

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures_util::FutureExt;
use http_body_util::{BodyExt, Full, Limited};
use hyper::client::conn::http1;
use hyper::header::{HOST, HeaderMap, HeaderValue};
use hyper::{Request, StatusCode};
use hyper_util::rt::TokioIo;
use reqwest::Url;
use rustls::pki_types::{CertificateDer, ServerName};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;

use super::{Egress, Refused};

/// Most of an answer's body read (and thrown away) so that its connection can take the next
/// request; a longer body closes the connection instead.
const MOST_READ: usize = 64 * 1024;

/// Opens connections to tenant URLs under the egress policy.
#[derive(Clone)]
pub struct Dialer {
    egress: Arc<Egress>,
    /// TLS with the platform's verifier, or why it could not be set up (then only `http` URLs
    /// are reached).
    tls: Result<tokio_rustls::TlsConnector, String>,
    connect_timeout: Duration,
}

impl std::fmt::Debug for Dialer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dialer")
            .field("connect_timeout", &self.connect_timeout)
            .finish_non_exhaustive()
    }
}

/// What the connection is carried on: TCP, or TLS over it.
trait Stream: AsyncRead + AsyncWrite + Send + Unpin {}

impl<T: AsyncRead + AsyncWrite + Send + Unpin> Stream for T {}

/// Hyper's side of a connection, polled by whoever posts on it.
type Driver = Pin<Box<http1::Connection<TokioIo<Box<dyn Stream>>, Full<Bytes>>>>;

/// One connection to one URL's host; it makes progress only while [`Connection::post`] runs.
pub struct Connection {
    sender: http1::SendRequest<Full<Bytes>>,
    driver: Driver,
    /// The `Host` header of its requests.
    host: HeaderValue,
    /// Whether it took a request already (a connection used before may have been closed by
    /// the server while it waited).
    used: bool,
    /// Hyper finished with it (the server closed it, or it failed).
    ended: bool,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("host", &self.host)
            .field("used", &self.used)
            .field("ended", &self.ended)
            .finish_non_exhaustive()
    }
}

/// How the server answered a post.
#[derive(Clone, Debug)]
pub struct Posted {
    /// The answer's status.
    pub status: StatusCode,
    /// The answer's headers.
    pub headers: HeaderMap,
}

impl Egress {
    /// A dialer for tenant URLs that gives up on a connection after `connect_timeout`.
    pub fn dialer(self: &Arc<Self>, connect_timeout: Duration) -> Dialer {
        self.dialer_trusting(connect_timeout, Vec::new())
    }

    /// A dialer that trusts `roots` beside the platform's.
    fn dialer_trusting(
        self: &Arc<Self>,
        connect_timeout: Duration,
        roots: Vec<CertificateDer<'static>>,
    ) -> Dialer {
        let tls = tls(roots).map_err(|error| {
            tracing::warn!(%error, "TLS could not be set up: `https` tenant URLs cannot be reached");
            error.to_string()
        });
        Dialer {
            egress: self.clone(),
            tls,
            connect_timeout,
        }
    }
}

/// Rustls with the platform's verifier (trusting `roots` too) and ring, offering HTTP/1.1
/// only.
fn tls(roots: Vec<CertificateDer<'static>>) -> Result<tokio_rustls::TlsConnector, rustls::Error> {
    crate::llm::install_crypto_provider();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier =
        rustls_platform_verifier::Verifier::new_with_extra_roots(roots, provider.clone())?;
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(verifier))
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(tokio_rustls::TlsConnector::from(Arc::new(config)))
}

impl Dialer {
    /// Connects to `url`'s host (TLS for `https`), when the policy allows it.
    ///
    /// # Errors
    /// [`Refused`] (as an error of kind `PermissionDenied`) for a destination the policy
    /// refuses; what resolving, connecting or the TLS handshake failed with otherwise.
    pub async fn connect(&self, url: &Url) -> io::Result<Connection> {
        self.egress.check_url(url).map_err(refused)?;
        let host = url
            .host_str()
            .ok_or_else(|| io::Error::other("the URL names no host"))?;
        let port = url
            .port_or_known_default()
            .ok_or_else(|| io::Error::other("the URL names no port"))?;
        let bare = host.trim_start_matches('[').trim_end_matches(']');
        let addrs = match bare.parse::<IpAddr>() {
            Ok(ip) => vec![SocketAddr::new(ip, port)],
            Err(_) => self.egress.resolve(bare, port).await.map_err(|error| {
                match error.downcast::<Refused>() {
                    Ok(_) => refused(Refused),
                    Err(error) => io::Error::other(error),
                }
            })?,
        };
        let tcp = tokio::time::timeout(self.connect_timeout, first_to_answer(&addrs))
            .await
            .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "connecting timed out"))??;
        let stream: Box<dyn Stream> = match url.scheme() {
            "http" => Box::new(tcp),
            "https" => {
                let tls = self
                    .tls
                    .as_ref()
                    .map_err(|why| io::Error::other(why.clone()))?;
                let name = ServerName::try_from(bare.to_owned()).map_err(io::Error::other)?;
                Box::new(tls.connect(name, tcp).await?)
            }
            other => return Err(io::Error::other(format!("no `{other}` URLs"))),
        };
        let (sender, driver) = http1::handshake(TokioIo::new(stream))
            .await
            .map_err(io::Error::other)?;
        let host = match url.port() {
            Some(port) => format!("{host}:{port}"),
            None => host.to_owned(),
        };
        Ok(Connection {
            sender,
            driver: Box::pin(driver),
            host: HeaderValue::from_str(&host).map_err(io::Error::other)?,
            used: false,
            ended: false,
        })
    }
}

/// A refusal, as an I/O error.
fn refused(refused: Refused) -> io::Error {
    io::Error::new(io::ErrorKind::PermissionDenied, refused)
}

/// The first of `addrs` that takes the connection, tried in order.
async fn first_to_answer(addrs: &[SocketAddr]) -> io::Result<TcpStream> {
    let mut last = io::Error::other("no address to connect to");
    for addr in addrs {
        match TcpStream::connect(addr).await {
            Ok(tcp) => {
                tcp.set_nodelay(true)?;
                return Ok(tcp);
            }
            Err(error) => last = error,
        }
    }
    Err(last)
}

impl Connection {
    /// Whether it took a request before.
    pub fn used(&self) -> bool {
        self.used
    }

    /// Whether it can take a request: the server has not closed it since its last answer
    /// (what arrived while nobody polled it is read now, without waiting).
    pub fn is_open(&mut self) -> bool {
        if !self.ended && (&mut self.driver).now_or_never().is_some() {
            self.ended = true;
        }
        !self.ended && !self.sender.is_closed()
    }

    /// Posts `body` with `headers` to `path` (with its query) and reads the answer, driving
    /// the connection meanwhile. The connection takes another request afterwards only if
    /// [`Connection::is_open`] says so.
    ///
    /// # Errors
    /// `InvalidInput` when `path` cannot be a request's target; hyper's, when the request
    /// could not be sent or no answer came back.
    pub async fn post(
        &mut self,
        path: &str,
        mut headers: HeaderMap,
        body: Bytes,
    ) -> io::Result<Posted> {
        self.used = true;
        headers.insert(HOST, self.host.clone());
        let mut request = Request::post(path)
            .body(Full::new(body))
            .map_err(|error| io::Error::new(io::ErrorKind::InvalidInput, error))?;
        *request.headers_mut() = headers;
        let sender = &mut self.sender;
        let answer = async move {
            let response = sender.send_request(request).await?;
            let (parts, body) = response.into_parts();
            // A body too long to read ends the connection; the status stands.
            let whole = Limited::new(body, MOST_READ).collect().await.is_ok();
            Ok::<_, hyper::Error>((parts, whole))
        };
        tokio::pin!(answer);
        let driven = tokio::select! {
            biased;
            answer = &mut answer => answer,
            _ = &mut self.driver => {
                // The connection ended (the server closed it after answering, or it failed):
                // the answer is complete or failed by now.
                self.ended = true;
                answer.await
            }
        };
        let (parts, whole) = driven.map_err(io::Error::other)?;
        self.ended |= !whole;
        Ok(Posted {
            status: parts.status,
            headers: parts.headers,
        })
    }
}

#[cfg(test)]
mod tests;
