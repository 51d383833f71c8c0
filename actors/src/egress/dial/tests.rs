use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use hyper::service::service_fn;
use rustls::pki_types::pem::PemObject;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use super::*;

/// A server that answers every request 200 on connections it counts, and keeps each request's
/// `Host` header and body.
async fn counting_server() -> (Url, Arc<AtomicUsize>, Arc<Mutex<Vec<(String, Bytes)>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = Url::parse(&format!(
        "http://{}/hook?x=1",
        listener.local_addr().expect("addr")
    ))
    .expect("url");
    let (accepted, seen) = (
        Arc::new(AtomicUsize::new(0)),
        Arc::new(Mutex::new(Vec::new())),
    );
    let (counted, kept) = (accepted.clone(), seen.clone());
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            counted.fetch_add(1, Ordering::SeqCst);
            let kept = kept.clone();
            let service = service_fn(move |request: Request<hyper::body::Incoming>| {
                let kept = kept.clone();
                async move {
                    let host = request.headers()[HOST].to_str().unwrap_or("").to_owned();
                    let path = request.uri().to_string();
                    let body = request.into_body().collect().await?.to_bytes();
                    kept.lock()
                        .expect("lock")
                        .push((format!("{host} {path}"), body));
                    Ok::<_, hyper::Error>(hyper::Response::new(Full::new(Bytes::from("ok"))))
                }
            });
            tokio::spawn(
                hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(tcp), service),
            );
        }
    });
    (url, accepted, seen)
}

fn loopback() -> Arc<Egress> {
    Arc::new(Egress::parse("127.0.0.1").expect("allow"))
}

#[tokio::test]
async fn posts_go_one_after_another_on_one_connection() {
    let (url, accepted, seen) = counting_server().await;
    let dialer = loopback().dialer(Duration::from_secs(5));
    let mut connection = dialer.connect(&url).await.expect("connect");
    assert!(!connection.used());
    for n in 0..3 {
        assert!(connection.is_open());
        let posted = connection
            .post(
                "/hook?x=1",
                HeaderMap::new(),
                Bytes::from(format!("event {n}")),
            )
            .await
            .expect("post");
        assert_eq!(posted.status, StatusCode::OK);
    }
    assert!(connection.used());
    assert_eq!(accepted.load(Ordering::SeqCst), 1);
    let host = format!("{} /hook?x=1", url.authority());
    let seen = seen.lock().expect("lock").clone();
    let expected: Vec<(String, Bytes)> = (0..3)
        .map(|n| (host.clone(), Bytes::from(format!("event {n}"))))
        .collect();
    assert_eq!(seen, expected);
}

#[tokio::test]
async fn a_connection_the_server_closed_is_not_open() {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url =
        Url::parse(&format!("http://{}/", listener.local_addr().expect("addr"))).expect("url");
    tokio::spawn(async move {
        let (mut tcp, _) = listener.accept().await.expect("accept");
        let mut request = vec![0; 4096];
        let _ = tcp.read(&mut request).await;
        let _ = tcp
            .write_all(b"HTTP/1.1 204 No Content\r\ncontent-length: 0\r\n\r\n")
            .await;
        // Closed as an idle keep-alive connection is closed: with no word.
        drop(tcp);
    });
    let dialer = loopback().dialer(Duration::from_secs(5));
    let mut connection = dialer.connect(&url).await.expect("connect");
    let posted = connection
        .post("/", HeaderMap::new(), Bytes::new())
        .await
        .expect("post");
    assert_eq!(posted.status, StatusCode::NO_CONTENT);
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while connection.is_open() {
        assert!(
            std::time::Instant::now() < deadline,
            "the close was never seen"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test]
async fn inside_destinations_are_refused_by_address_and_by_name() {
    let (url, accepted, _) = counting_server().await;
    let dialer = Arc::new(Egress::default()).dialer(Duration::from_secs(5));
    let port = url.port().expect("port");
    for refused in [
        format!("http://127.0.0.1:{port}/hook"),
        format!("http://localhost:{port}/hook"),
    ] {
        let error = dialer
            .connect(&Url::parse(&refused).expect("url"))
            .await
            .expect_err("refused");
        assert_eq!(error.kind(), io::ErrorKind::PermissionDenied, "{refused}");
        assert_eq!(error.to_string(), super::super::REFUSED);
    }
    assert_eq!(accepted.load(Ordering::SeqCst), 0);
}

/// A test CA, and a certificate it signed for `localhost` and 127.0.0.1 with its key (made
/// with openssl for these tests only; valid until 2126).
const TEST_CA: &[u8] = include_bytes!("test_ca.pem");
const TEST_LOCALHOST: &[u8] = include_bytes!("test_localhost.pem");
const TEST_LOCALHOST_KEY: &[u8] = include_bytes!("test_localhost.key");

/// A TLS server with [`TEST_LOCALHOST`]'s certificate that answers 200, and what it served.
async fn tls_server() -> (u16, Arc<Mutex<Vec<(String, Bytes)>>>) {
    use rustls::pki_types::PrivateKeyDer;
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(TEST_LOCALHOST)
        .collect::<Result<_, _>>()
        .expect("certificate");
    let key = PrivateKeyDer::from_pem_slice(TEST_LOCALHOST_KEY).expect("key");
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("versions")
    .with_no_client_auth()
    .with_single_cert(certs, key)
    .expect("server config");
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let kept = seen.clone();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let (acceptor, kept) = (acceptor.clone(), kept.clone());
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let service = service_fn(move |request: Request<hyper::body::Incoming>| {
                    let kept = kept.clone();
                    async move {
                        let host = request.headers()[HOST].to_str().unwrap_or("").to_owned();
                        let body = request.into_body().collect().await?.to_bytes();
                        kept.lock().expect("lock").push((host, body));
                        Ok::<_, hyper::Error>(hyper::Response::new(Full::new(Bytes::new())))
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(tls), service)
                    .await;
            });
        }
    });
    (port, seen)
}

#[tokio::test]
async fn https_posts_to_a_trusted_certificate_and_to_no_other() {
    let (port, seen) = tls_server().await;
    let url = Url::parse(&format!("https://localhost:{port}/hook")).expect("url");
    let ca = CertificateDer::from_pem_slice(TEST_CA).expect("ca");
    let trusting = loopback().dialer_trusting(Duration::from_secs(5), vec![ca]);
    let mut connection = trusting.connect(&url).await.expect("connect");
    let posted = connection
        .post("/hook", HeaderMap::new(), Bytes::from("secret event"))
        .await
        .expect("post");
    assert_eq!(posted.status, StatusCode::OK);
    assert_eq!(
        *seen.lock().expect("lock"),
        vec![(format!("localhost:{port}"), Bytes::from("secret event"))]
    );
    // With the platform's roots only, the test CA is not trusted: no connection, no post.
    let platform = loopback().dialer(Duration::from_secs(5));
    assert!(platform.connect(&url).await.is_err());
    assert_eq!(seen.lock().expect("lock").len(), 1);
}

#[tokio::test]
async fn https_is_spoken_as_tls() {
    // A plain HTTP server does not answer a TLS handshake: the connection fails, nothing is
    // sent in the clear.
    let (url, _, seen) = counting_server().await;
    let mut https = url.clone();
    https.set_scheme("https").expect("scheme");
    let dialer = loopback().dialer(Duration::from_secs(5));
    assert!(dialer.connect(&https).await.is_err());
    assert!(seen.lock().expect("lock").is_empty());
}
