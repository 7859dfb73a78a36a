//! The payload as published (G13), on both backends: `data` reaches the
//! receiver, the archive (`GET /events/{id}`), a replay from dead letters
//! and a backfill after suspension byte for byte as the publisher wrote it
//! (numbers of any size and spelling, key order, whitespace and escapes),
//! in the body `{"type","timestamp","data"}`, up to the largest body
//! accepted (256 KiB, 413 a byte past it). And `data` nested too deep
//! to parse, or escaping a lone surrogate, answers 422 naming `data`.

use std::time::Duration;

use hooklane_tests::{
    eventually, on_both_backends, test_env, Backend, Receiver, Reply, Server, TOKEN,
};
use serde_json::{json, Value};

const WAIT: Duration = Duration::from_secs(30);
const EVENTS: &str = "/v1/tenants/acme/events";

/// `data` as a publisher might write it: integers past 2^64, a decimal with
/// a trailing zero, an exponent, negative zero, keys out of order,
/// whitespace, and escapes a parser would decode.
fn raw_data(n: usize) -> String {
    format!(
        r#"{{"z":1,"big":123456789012345678901234567890,"id":18446744073709551617,"f":1.10,"e":1E+2,"neg":-0.0,"n":{n},
  "s":"caf\u00e9 \"q\" a\/b \ud83d\ude00","nested":[ 1 , {{"b":2,"a":1}} ],"ws" :  true}}"#
    )
}

/// Publishes `{"type": event_type, "data": <data as given>}` as raw bytes;
/// returns the event id and the body every receiver must get.
async fn publish_raw(server: &Server, event_type: &str, data: &str) -> (String, String) {
    let body = format!(r#"{{"type":"{event_type}","data":{data}}}"#);
    let (status, accepted) = send(server, "POST", EVENTS, Some(body)).await;
    assert_eq!(status, 202, "publish: {accepted}");
    let accepted: Value = serde_json::from_str(&accepted).expect("json");
    let expected = format!(
        r#"{{"type":"{event_type}","timestamp":"{}","data":{data}}}"#,
        accepted["created_at"].as_str().expect("created_at")
    );
    (accepted["id"].as_str().expect("id").to_owned(), expected)
}

/// An authorized request with a raw body; the answer's status and text.
async fn send(server: &Server, method: &str, path: &str, body: Option<String>) -> (u16, String) {
    let method = reqwest::Method::from_bytes(method.as_bytes()).expect("method");
    let mut req = server
        .http
        .request(method, format!("{}{path}", server.base))
        .bearer_auth(TOKEN);
    if let Some(b) = body {
        req = req.header("content-type", "application/json").body(b);
    }
    let resp = req.send().await.expect("request");
    let status = resp.status().as_u16();
    (status, resp.text().await.expect("body"))
}

/// The bodies `name` received for event `id`, as text.
fn bodies(rx: &Receiver, name: &str, id: &str) -> Vec<String> {
    rx.requests(name)
        .iter()
        .filter(|r| r.header("webhook-id") == id)
        .map(|r| String::from_utf8_lossy(&r.body).into_owned())
        .collect()
}

/// Asserts that `GET /events/{id}` shows `data` exactly as published.
async fn assert_archived_as_published(server: &Server, id: &str, data: &str) {
    let (status, text) = send(server, "GET", &format!("{EVENTS}/{id}"), None).await;
    assert_eq!(status, 200, "{text}");
    let spliced = format!(r#","data":{data},"deliveries":"#);
    assert!(
        text.contains(&spliced),
        "GET /events/{id} does not show data as published:\n{text}\nexpected to contain\n{spliced}"
    );
}

async fn the_receiver_and_the_archive_get_data_byte_for_byte_as_published(backend: Backend) {
    let server = Server::start_on(backend, test_env(&[])).await;
    let rx = Receiver::start().await;
    server.subscribe("acme", &rx.url("a"), &["*"]).await;
    let data = raw_data(1);
    let (id, expected) = publish_raw(&server, "invoice.paid", &data).await;
    assert!(eventually(WAIT, || rx.count("a") == 1).await, "delivered");
    assert_eq!(bodies(&rx, "a", &id), [expected]);
    assert_archived_as_published(&server, &id, &data).await;
}

async fn a_replayed_dead_letter_carries_data_as_published(backend: Backend) {
    let server = Server::start_on(backend, test_env(&[])).await;
    let rx = Receiver::start().await;
    rx.script("a", vec![Reply::Status(400)]);
    let sub = server.subscribe("acme", &rx.url("a"), &["*"]).await;
    let data = raw_data(2);
    let (id, expected) = publish_raw(&server, "order.created", &data).await;
    assert!(
        eventually(WAIT, || rx.count("a") == 1).await,
        "first attempt"
    );
    let mut replayed = 0;
    for _ in 0..400 {
        let (status, body) = server
            .call(
                "POST",
                "/v1/tenants/acme/dead-letters/replay",
                Some(json!({"subscription_id": sub["id"]})),
            )
            .await;
        assert_eq!(status, 202, "{body}");
        replayed = body["replayed"].as_u64().unwrap_or(0);
        if replayed == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(replayed, 1, "the parked delivery was replayed");
    assert!(eventually(WAIT, || rx.count("a") == 2).await, "replayed");
    assert_eq!(bodies(&rx, "a", &id), [expected.clone(), expected]);
    assert_archived_as_published(&server, &id, &data).await;
}

async fn a_backfill_after_suspension_carries_data_as_published(backend: Backend) {
    let rx = Receiver::start().await;
    rx.set_default("dead", Reply::Status(500));
    let env = test_env(&[
        ("HOOKLANE_RETRY_SCHEDULE", "0s"),
        (
            "HOOKLANE_SUSPEND_POLICY",
            "retryable=2/0s,permanent=2/0s,fatal=1/0s",
        ),
        ("HOOKLANE_BACKFILL_RATE", "50"),
    ]);
    let server = Server::start_on(backend, env).await;
    let sub = server.subscribe("acme", &rx.url("dead"), &["*"]).await;
    let path = format!(
        "/v1/tenants/acme/subscriptions/{}",
        sub["id"].as_str().unwrap()
    );
    let mut published = Vec::new();
    for n in 0..2 {
        published.push(publish_raw(&server, "order.created", &raw_data(10 + n)).await);
        assert!(eventually(WAIT, || rx.count("dead") == n + 1).await);
    }
    let mut suspended = false;
    for _ in 0..600 {
        suspended = server.call("GET", &path, None).await.1["status"] == "suspended";
        if suspended {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(suspended, "suspended after two failed deliveries");
    for n in 2..4 {
        published.push(publish_raw(&server, "order.created", &raw_data(10 + n)).await);
    }
    rx.set_default("dead", Reply::Status(204));
    let (status, enabled) = server.call("POST", &format!("{path}/enable"), None).await;
    assert_eq!(status, 200, "{enabled}");
    // The two parked before the suspension come again, the two held during
    // it come once.
    let backfilled = || {
        published
            .iter()
            .enumerate()
            .all(|(n, (id, _))| bodies(&rx, "dead", id).len() == if n < 2 { 2 } else { 1 })
    };
    assert!(eventually(WAIT, backfilled).await, "every event backfilled");
    for (id, expected) in &published {
        let got = bodies(&rx, "dead", id);
        assert!(!got.is_empty(), "{id} was never delivered");
        for body in got {
            assert_eq!(&body, expected, "event {id}");
        }
    }
}

/// Letters and digits in a pseudo-random order: they deflate to about
/// three quarters, so the event stays near 256 KiB however it is stored.
fn incompressible(len: usize) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    let mut x: u64 = 0x2545_F491_4F6C_DD1D;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            ALPHABET[(x % ALPHABET.len() as u64) as usize] as char
        })
        .collect()
}

/// A publish body of exactly 256 KiB, the most accepted, of data that
/// compresses poorly: delivered whole to two subscriptions (one of them after a
/// retry, read again) and archived whole. On AWS the event is larger than
/// what rides in a queue message beside the delivery's fields (about
/// 190 KiB stored deflated).
async fn an_event_of_256_kib_is_delivered_and_archived_whole(backend: Backend) {
    let server = Server::start_on(
        backend,
        test_env(&[("HOOKLANE_RETRY_SCHEDULE", "0s,1s,1s")]),
    )
    .await;
    let rx = Receiver::start().await;
    rx.script("retried", vec![Reply::Status(500)]);
    server.subscribe("acme", &rx.url("once"), &["*"]).await;
    server.subscribe("acme", &rx.url("retried"), &["*"]).await;
    let frame = r#"{"type":"big.one","data":{"blob":""}}"#.len();
    let blob = incompressible(hooklane_core::api::body::MAX_BODY - frame);
    let data = format!(r#"{{"blob":"{blob}"}}"#);
    let (id, expected) = publish_raw(&server, "big.one", &data).await;
    assert!(
        eventually(WAIT, || rx.count("once") == 1 && rx.count("retried") == 2).await,
        "delivered: {} and {}",
        rx.count("once"),
        rx.count("retried")
    );
    assert_eq!(bodies(&rx, "once", &id), std::slice::from_ref(&expected));
    assert_eq!(bodies(&rx, "retried", &id), [expected.clone(), expected]);
    assert_archived_as_published(&server, &id, &data).await;
    let over = format!(r#"{{"type":"big.one","data":{{"blob":"{blob}x"}}}}"#);
    let (status, _) = send(&server, "POST", EVENTS, Some(over)).await;
    assert_eq!(status, 413, "a byte more is refused");
}

on_both_backends!(
    an_event_of_256_kib_is_delivered_and_archived_whole,
    the_receiver_and_the_archive_get_data_byte_for_byte_as_published,
    a_replayed_dead_letter_carries_data_as_published,
    a_backfill_after_suspension_carries_data_as_published,
);

/// The deepest `data` accepted (`hooklane_core::api::body::MAX_DEPTH`).
const MAX_DEPTH: usize = hooklane_core::api::body::MAX_DEPTH;

fn nested(depth: usize) -> String {
    format!("{}0{}", "[".repeat(depth), "]".repeat(depth))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn data_too_deep_or_with_a_lone_surrogate_answers_422_naming_data_and_publishes_nothing() {
    let server = Server::start(test_env(&[])).await;
    let rx = Receiver::start().await;
    server.subscribe("acme", &rx.url("all"), &["*"]).await;
    let cases = [
        ("one level too deep", nested(MAX_DEPTH + 1)),
        ("100,000 levels", nested(100_000)),
        (
            "objects too deep",
            format!(
                "{}0{}",
                r#"{"a":"#.repeat(MAX_DEPTH + 1),
                "}".repeat(MAX_DEPTH + 1)
            ),
        ),
        ("a lone high surrogate", r#"{"s":"\ud83d"}"#.to_owned()),
        ("a lone low surrogate", r#""\ude00x""#.to_owned()),
    ];
    let mut failures = Vec::new();
    for (n, (what, data)) in cases.iter().enumerate() {
        let body = format!(r#"{{"type":"a.b","id":"refused-{n}","data":{data}}}"#);
        let (status, text) = send(&server, "POST", EVENTS, Some(body)).await;
        let problem: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        if status != 422 || problem["field"] != "data" {
            failures.push(format!("{what}: {status} {text:.300}"));
        }
        let (status, _) = send(&server, "GET", &format!("{EVENTS}/refused-{n}"), None).await;
        if status != 404 {
            failures.push(format!("{what}: the refused event exists ({status})"));
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");

    // At the limit, and numbers no double can hold, are accepted and
    // delivered as published; the deepest body is within the nesting a
    // strict parser (serde_json's default) reads.
    for data in [
        nested(MAX_DEPTH),
        "[1e400, -1e-400, 1.000000000000000000001]".to_owned(),
    ] {
        let (id, expected) = publish_raw(&server, "a.b", &data).await;
        assert!(eventually(WAIT, || !bodies(&rx, "all", &id).is_empty()).await);
        assert_eq!(bodies(&rx, "all", &id), [expected]);
        assert_archived_as_published(&server, &id, &data).await;
    }
    let deepest = &rx.requests("all")[0].body;
    serde_json::from_slice::<Value>(deepest).expect("a strict parser reads the deepest body");
    assert_eq!(rx.count("all"), 2, "nothing refused was delivered");
}
