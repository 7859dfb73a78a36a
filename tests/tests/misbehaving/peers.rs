//! Receivers that misbehave on the wire, for `misbehaving_receivers.rs`:
//! each a loopback listener that reads a request's head and body, then
//! answers in its own wrong way (or, over TLS, presents a certificate made
//! here). Every write loop is bounded in bytes and time.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpListener;

/// The most an endless body writes, and for how long, before giving up.
const ENDLESS: (usize, Duration) = (256 << 20, Duration::from_secs(30));

/// What a peer does after reading a request.
#[derive(Clone, Copy, Debug)]
pub enum Wrong {
    /// `200 OK` with a two-byte body, one byte a second from the first.
    Trickle,
    /// `200 OK` with a chunked body that never ends.
    Endless,
    /// `500` with a 10 MB body.
    TenMegabytes,
    /// `503` whose 1,000-byte body stops after 7 bytes: the peer closes.
    ClosesMidBody,
    /// Closes without a byte of an answer.
    ClosesAtOnce,
    /// A status line that is not HTTP.
    BadStatusLine,
    /// `204`, as a working receiver answers (the TLS peers' control).
    Fine,
}

/// A running peer: its address and how many requests it has read.
pub struct Peer {
    pub addr: SocketAddr,
    pub requests: Arc<AtomicUsize>,
}

/// Starts a plain-TCP peer.
pub async fn plain(wrong: Wrong) -> Peer {
    serve(wrong, None).await
}

/// Starts a TLS peer presenting `cert` (with `key`), answering `Fine`.
pub async fn tls(cert: &rcgen::Certificate, key: &KeyPair) -> Peer {
    let chain = vec![CertificateDer::from(cert.der().to_vec())];
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::aws_lc_rs::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("protocol versions")
    .with_no_client_auth()
    .with_single_cert(chain, key)
    .expect("server certificate");
    serve(
        Wrong::Fine,
        Some(tokio_rustls::TlsAcceptor::from(Arc::new(config))),
    )
    .await
}

async fn serve(wrong: Wrong, tls: Option<tokio_rustls::TlsAcceptor>) -> Peer {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let requests = Arc::new(AtomicUsize::new(0));
    let count = requests.clone();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let (count, tls) = (count.clone(), tls.clone());
            tokio::spawn(async move {
                match tls {
                    None => answer(stream, wrong, &count).await,
                    // A handshake the client refuses ends here.
                    Some(acceptor) => {
                        if let Ok(stream) = acceptor.accept(stream).await {
                            answer(stream, wrong, &count).await;
                        }
                    }
                }
            });
        }
    });
    Peer { addr, requests }
}

/// Reads one request (head, then a `content-length` body), then answers.
async fn answer<S: AsyncRead + AsyncWrite + Unpin>(mut s: S, wrong: Wrong, count: &AtomicUsize) {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    let body_at = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        match s.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    };
    let head = String::from_utf8_lossy(&buf[..body_at]).to_ascii_lowercase();
    let length: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    while buf.len() < body_at + length {
        match s.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
    count.fetch_add(1, Ordering::SeqCst);
    let _ = misbehave(&mut s, wrong).await;
}

async fn misbehave<S: AsyncWrite + Unpin>(s: &mut S, wrong: Wrong) -> std::io::Result<()> {
    match wrong {
        Wrong::Trickle => {
            for b in b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok" {
                s.write_all(&[*b]).await?;
                s.flush().await?;
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
        Wrong::Endless => {
            s.write_all(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n")
                .await?;
            let chunk = format!("400\r\n{}\r\n", "x".repeat(1024));
            let started = std::time::Instant::now();
            let mut sent = 0;
            while sent < ENDLESS.0 && started.elapsed() < ENDLESS.1 {
                s.write_all(chunk.as_bytes()).await?;
                sent += 1024;
            }
        }
        Wrong::TenMegabytes => {
            s.write_all(b"HTTP/1.1 500 Internal Server Error\r\ncontent-length: 10485760\r\n\r\n")
                .await?;
            let block = vec![b'e'; 64 << 10];
            for _ in 0..160 {
                s.write_all(&block).await?;
            }
        }
        Wrong::ClosesMidBody => {
            s.write_all(b"HTTP/1.1 503 Service Unavailable\r\ncontent-length: 1000\r\n\r\npartial")
                .await?;
        }
        Wrong::ClosesAtOnce => {}
        Wrong::BadStatusLine => {
            s.write_all(b"HTTP/1.1 two-hundred OK\r\ncontent-length: 0\r\n\r\n")
                .await?;
        }
        Wrong::Fine => {
            s.write_all(b"HTTP/1.1 204 No Content\r\n\r\n").await?;
        }
    }
    s.flush().await?;
    s.shutdown().await
}

/// The certificates a TLS test needs: a CA the server under test trusts
/// (`ca_pem`, for `SSL_CERT_FILE`), and certificates for `127.0.0.1`.
pub struct Certificates {
    pub ca_pem: String,
    ca: Issuer<'static, KeyPair>,
}

impl Certificates {
    pub fn new() -> Self {
        let key = KeyPair::generate().expect("key");
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("params");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(DnType::CommonName, "hooklane test CA");
        let ca_pem = params.self_signed(&key).expect("CA").pem();
        Self {
            ca_pem,
            ca: Issuer::new(params, key),
        }
    }

    /// A certificate for `name`, valid `from` to `until` (from now), signed
    /// by the trusted CA, or by itself when `self_signed`.
    pub fn leaf(
        &self,
        name: &str,
        (from, until): (time::Duration, time::Duration),
        self_signed: bool,
    ) -> (rcgen::Certificate, KeyPair) {
        let key = KeyPair::generate().expect("key");
        let mut params = CertificateParams::new(vec![name.to_owned()]).expect("params");
        let now = time::OffsetDateTime::now_utc();
        params.not_before = now + from;
        params.not_after = now + until;
        let cert = if self_signed {
            params.self_signed(&key)
        } else {
            params.signed_by(&key, &self.ca)
        };
        (cert.expect("certificate"), key)
    }
}
