//! Slow and idle clients: 1,000 connections that send nothing and 1,000
//! that send a request body one byte a second do not stop other clients
//! from being served, and the server's read timeouts end them: an idle
//! connection is closed once the header timeout passes, a slow body is
//! answered `408` once the body timeout passes, each long before it could
//! have finished on its own. The timeouts are shortened here
//! (`HOOKLANE_HEADER_TIMEOUT`, `HOOKLANE_BODY_TIMEOUT`); `serve` is the same
//! function on both backends.

use std::net::SocketAddr;
use std::time::Duration;

use futures::stream::{self, StreamExt};
use hooklane_tests::{eventually, raise_fd_limit, test_env, Receiver, Server, TOKEN};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const IDLE: usize = 1000;
const SLOW: usize = 1000;
/// The slow bodies' length: at a byte a second they would take this many
/// seconds, far past the body timeout and the test's own bounds.
const SLOW_BODY: usize = 120;
/// How long the test waits for the server to end every slow or idle
/// connection (the timeouts are 5 s each).
const WITHIN: Duration = Duration::from_secs(60);

/// How a held connection ended.
#[derive(Debug, PartialEq)]
enum End {
    /// The server closed it without an answer.
    Closed,
    /// The server answered with this status line, after this many body
    /// bytes.
    Answered(String, usize),
    /// The test's bound passed first.
    StillOpen,
}

async fn connect(addr: SocketAddr) -> TcpStream {
    for _ in 0..50 {
        if let Ok(s) = TcpStream::connect(addr).await {
            return s;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("could not connect to {addr}");
}

/// Sends nothing; waits for the server to close the connection.
async fn idle(mut stream: TcpStream) -> End {
    let mut buf = [0u8; 256];
    match tokio::time::timeout(WITHIN, stream.read(&mut buf)).await {
        Err(_) => End::StillOpen,
        Ok(Ok(0)) | Ok(Err(_)) => End::Closed,
        Ok(Ok(n)) => End::Answered(first_line(&buf[..n]), 0),
    }
}

/// Sends a publish's head, then its body one byte a second, until the
/// server answers or closes.
async fn slow_body(mut stream: TcpStream) -> End {
    let head = format!(
        "POST /v1/tenants/acme/events HTTP/1.1\r\nhost: hooklane\r\nauthorization: Bearer {TOKEN}\r\n\
         content-type: application/json\r\ncontent-length: {SLOW_BODY}\r\n\r\n"
    );
    if stream.write_all(head.as_bytes()).await.is_err() {
        return End::Closed;
    }
    let mut buf = [0u8; 1024];
    let mut sent = 0;
    let give_up = tokio::time::Instant::now() + WITHIN;
    while tokio::time::Instant::now() < give_up {
        tokio::select! {
            read = stream.read(&mut buf) => {
                return match read {
                    Ok(0) | Err(_) => End::Closed,
                    Ok(n) => End::Answered(first_line(&buf[..n]), sent),
                };
            }
            () = tokio::time::sleep(Duration::from_secs(1)) => {
                if sent < SLOW_BODY {
                    if stream.write_all(b" ").await.is_err() {
                        return End::Closed;
                    }
                    sent += 1;
                }
            }
        }
    }
    End::StillOpen
}

fn first_line(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes)
        .lines()
        .next()
        .unwrap_or("")
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_and_byte_a_second_clients_are_timed_out_and_hold_up_no_one_else() {
    raise_fd_limit();
    let server = Server::start(test_env(&[
        ("HOOKLANE_HEADER_TIMEOUT", "5s"),
        ("HOOKLANE_BODY_TIMEOUT", "5s"),
    ]))
    .await;
    let addr: SocketAddr = server
        .base
        .trim_start_matches("http://")
        .parse()
        .expect("the server's address");
    let rx = Receiver::start().await;

    let idle_streams: Vec<TcpStream> = stream::iter(0..IDLE)
        .map(|_| connect(addr))
        .buffer_unordered(100)
        .collect()
        .await;
    let idle_ends = tokio::spawn(futures::future::join_all(
        idle_streams.into_iter().map(idle),
    ));
    let slow_streams: Vec<TcpStream> = stream::iter(0..SLOW)
        .map(|_| connect(addr))
        .buffer_unordered(100)
        .collect()
        .await;
    let slow_ends = tokio::spawn(futures::future::join_all(
        slow_streams.into_iter().map(slow_body),
    ));

    // While all of them are held, another client is served as usual, and
    // what it publishes is delivered.
    server.subscribe("acme", &rx.url("ok"), &["*"]).await;
    for n in 0..20 {
        server.publish("acme", "slow.test", json!({ "n": n })).await;
    }
    assert!(
        eventually(Duration::from_secs(30), || rx.count("ok") >= 20).await,
        "every event published beside the slow clients was delivered"
    );

    let idle_ends = idle_ends.await.expect("idle clients");
    let slow_ends = slow_ends.await.expect("slow clients");
    let not_closed: Vec<&End> = idle_ends.iter().filter(|e| **e != End::Closed).collect();
    assert!(
        not_closed.is_empty(),
        "{} of {IDLE} idle connections were not closed by the header timeout: {:?}",
        not_closed.len(),
        not_closed.first()
    );
    let not_408: Vec<&End> = slow_ends
        .iter()
        .filter(|e| !matches!(e, End::Answered(line, sent) if line.contains(" 408 ") && *sent < SLOW_BODY))
        .collect();
    assert!(
        not_408.is_empty(),
        "{} of {SLOW} slow bodies were not answered 408 by the body timeout: {:?}",
        not_408.len(),
        not_408.first()
    );
}
