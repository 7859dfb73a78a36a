//! A fault-injecting proxy for the AWS tests. It listens on 127.0.0.1 and
//! forwards the SDK clients' calls to the local AWS-compatible server (on
//! the fast pair, each call to its own service's server), and
//! answers a share of them (`set_rate`, in calls per thousand) with a fault
//! a real service or network produces:
//! - throttling: 400 with the service's own JSON-protocol error
//!   (`ProvisionedThroughputExceededException` or `ThrottlingException`
//!   from DynamoDB, `RequestThrottled` or `ThrottlingException` from SQS);
//! - 500 `InternalFailure` and 503 `ServiceUnavailable`;
//! - a reset connection before the call is forwarded (nothing happened);
//! - a reset connection after it was forwarded and answered (the
//!   operation happened, and the caller sees it fail).
//!
//! Beside whole calls, it can fail a share of a batch call's entries
//! (`set_entry_rate`: see [`entries`]), throttle every call for as long as
//! a test says (`throttle_all`), answer slowly (`set_delay`, or
//! `set_latency` for a service's own time to answer), and fail,
//! hold or watch the calls whose bodies hold given text ([`targeted`]:
//! applied after the seeded faults and delay, to the calls those let
//! through).
//!
//! Which call gets a fault is drawn from a seeded sequence; the seed is
//! printed, and `HOOKLANE_TEST_SEED` sets it to replay a run.

mod entries;
mod targeted;

pub use targeted::Rule;

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use tokio::sync::Notify;

/// One kind of injected fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Fault {
    /// 400 with the service's throttling error.
    Throttle,
    /// 500 `InternalFailure`.
    Internal,
    /// 503 `ServiceUnavailable`.
    Unavailable,
    /// The connection is reset before the call is forwarded.
    ResetBefore,
    /// The call is forwarded and answered, then the connection is reset.
    ResetAfter,
}

/// The mix of faults, by weight. A reset after forwarding is the most
/// searching (a write that happened looks failed, and the SDK sends it
/// again), so it is drawn most often.
const KINDS: [Fault; 10] = [
    Fault::Throttle,
    Fault::Throttle,
    Fault::Internal,
    Fault::Unavailable,
    Fault::ResetBefore,
    Fault::ResetBefore,
    Fault::ResetAfter,
    Fault::ResetAfter,
    Fault::ResetAfter,
    Fault::ResetAfter,
];

struct State {
    upstream: crate::aws::Endpoints,
    client: reqwest::Client,
    per_mille: AtomicU32,
    entry_per_mille: AtomicU32,
    throttle_all: AtomicBool,
    /// The delay's least and most, in milliseconds, as `least << 32 | most`
    /// (one value, so that a call never reads one bound's old value beside
    /// the other's new one).
    delay_ms: AtomicU64,
    seed: u64,
    draws: AtomicU64,
    calls: Mutex<HashMap<String, u64>>,
    injected: Mutex<HashMap<(String, Fault), u64>>,
    entry_faults: Mutex<HashMap<String, u64>>,
    rules: targeted::Rules,
}

impl State {
    /// The next pseudo-random number (splitmix64 over a counter).
    fn draw(&self) -> u64 {
        let mut z = self.seed.wrapping_add(
            self.draws
                .fetch_add(1, Ordering::Relaxed)
                .wrapping_mul(0x9E37_79B9_7F4A_7C15),
        );
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn pick(&self, op: &str) -> Option<Fault> {
        if let Ok(mut calls) = self.calls.lock() {
            *calls.entry(op.to_owned()).or_default() += 1;
        }
        let rate = u64::from(self.per_mille.load(Ordering::Relaxed));
        let roll = self.draw();
        (roll % 1000 < rate).then(|| KINDS[((roll / 1000) % KINDS.len() as u64) as usize])
    }

    /// Whether one entry of a batch call (or one transaction) fails.
    fn entry_fails(&self) -> bool {
        let rate = u64::from(self.entry_per_mille.load(Ordering::Relaxed));
        rate > 0 && self.draw() % 1000 < rate
    }

    fn count(&self, map: &Mutex<HashMap<String, u64>>, op: &str, n: u64) {
        if let Ok(mut m) = map.lock() {
            *m.entry(op.to_owned()).or_default() += n;
        }
    }
}

/// The running proxy.
#[derive(Clone)]
pub struct FaultProxy {
    /// `http://127.0.0.1:PORT`: the endpoint to give the SDK clients.
    pub endpoint: String,
    state: Arc<State>,
}

impl FaultProxy {
    /// Starts a proxy to `upstream` (an `http://` endpoint serving every
    /// service) with no faults.
    pub async fn start(upstream: &str) -> Self {
        Self::start_on(crate::aws::Endpoints::both(upstream)).await
    }

    /// Starts a proxy in front of a stand-in with no faults: each call goes
    /// to its own service's endpoint (DynamoDB's calls by their
    /// `X-Amz-Target`, every other call to SQS's and SNS's).
    pub async fn start_on(upstream: crate::aws::Endpoints) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let endpoint = format!("http://{}", listener.local_addr().expect("addr"));
        // `HOOKLANE_TEST_SEED` replays a run's draws (which call each
        // draw lands on still depends on the calls' order).
        let seed = crate::seed(&format!("fault proxy {endpoint} -> {}", upstream.dynamodb));
        let trim = |e: &str| e.trim_end_matches('/').to_owned();
        let state = Arc::new(State {
            upstream: crate::aws::Endpoints {
                dynamodb: trim(&upstream.dynamodb),
                sqs: trim(&upstream.sqs),
            },
            client: reqwest::Client::builder()
                .no_proxy()
                .build()
                .expect("client"),
            per_mille: AtomicU32::new(0),
            entry_per_mille: AtomicU32::new(0),
            throttle_all: AtomicBool::new(false),
            delay_ms: AtomicU64::new(0),
            seed,
            draws: AtomicU64::new(0),
            calls: Mutex::new(HashMap::new()),
            injected: Mutex::new(HashMap::new()),
            entry_faults: Mutex::new(HashMap::new()),
            rules: targeted::Rules::default(),
        });
        tokio::spawn(accept(listener, state.clone()));
        Self { endpoint, state }
    }

    /// Sets the share of calls that get a fault, per thousand.
    pub fn set_rate(&self, per_mille: u32) {
        self.state.per_mille.store(per_mille, Ordering::Relaxed);
    }

    /// Sets the share of a batch call's entries that fail on their own
    /// (`SendMessageBatch`, `BatchGetItem`, `BatchWriteItem`) and of
    /// transactions cancelled for throttling, per thousand.
    pub fn set_entry_rate(&self, per_mille: u32) {
        self.state
            .entry_per_mille
            .store(per_mille, Ordering::Relaxed);
    }

    /// Throttles every call, of both services, while `on`.
    pub fn throttle_all(&self, on: bool) {
        self.state.throttle_all.store(on, Ordering::Relaxed);
    }

    /// Delays each forwarded call by up to `max` (drawn per call).
    pub fn set_delay(&self, max: Duration) {
        self.set_latency(Duration::ZERO, max);
    }

    /// Delays each forwarded call by `min` to `max` (drawn per call, from
    /// the seeded sequence): a service's own time to answer, which a
    /// local server on loopback does not have.
    pub fn set_latency(&self, min: Duration, max: Duration) {
        let ms = |d: Duration| (d.as_millis() as u64).min(u64::from(u32::MAX));
        let packed = ms(min) << 32 | ms(max.max(min));
        self.state.delay_ms.store(packed, Ordering::Relaxed);
    }

    /// Fails (500, not forwarded) every call whose body holds all of
    /// `needles`, until the returned rule is lifted.
    pub fn fail_when(&self, needles: &[&str]) -> Arc<Rule> {
        self.state.rules.add(needles, targeted::Action::Fail)
    }

    /// Holds every call whose body holds all of `needles` until the
    /// returned rule is lifted, then forwards it.
    pub fn hold_when(&self, needles: &[&str]) -> Arc<Rule> {
        self.state.rules.add(needles, targeted::Action::Hold)
    }

    /// Counts the calls whose body holds all of `needles`, and their
    /// answers, changing nothing.
    pub fn watch(&self, needles: &[&str]) -> Arc<Rule> {
        self.state.rules.add(needles, targeted::Action::Watch)
    }

    /// Entries (or transactions) failed on their own so far, by operation.
    pub fn entry_faults(&self) -> HashMap<String, u64> {
        self.state
            .entry_faults
            .lock()
            .map(|m| m.clone())
            .unwrap_or_default()
    }

    /// Calls seen so far whose operation name starts with `prefix`
    /// (`DynamoDB`, `AmazonSQS`, or "" for all).
    pub fn calls(&self, prefix: &str) -> u64 {
        self.state
            .calls
            .lock()
            .map(|m| {
                m.iter()
                    .filter(|(op, _)| op.starts_with(prefix))
                    .map(|(_, n)| n)
                    .sum()
            })
            .unwrap_or(0)
    }

    /// Faults injected so far, by (operation, kind).
    pub fn injected(&self) -> HashMap<(String, Fault), u64> {
        self.state
            .injected
            .lock()
            .map(|m| m.clone())
            .unwrap_or_default()
    }

    /// Faults injected so far into calls whose operation name starts with
    /// `prefix` (`DynamoDB` or `AmazonSQS`).
    pub fn injected_into(&self, prefix: &str) -> u64 {
        self.injected()
            .iter()
            .filter(|((op, _), _)| op.starts_with(prefix))
            .map(|(_, n)| n)
            .sum()
    }
}

async fn accept(listener: tokio::net::TcpListener, state: Arc<State>) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        };
        // Dropping the connection then resets it (RST) rather than closing
        // it in order: what a crashed or overloaded front end does.
        let _ = stream.set_zero_linger();
        let _ = stream.set_nodelay(true);
        let state = state.clone();
        tokio::spawn(async move {
            let kill = Arc::new(Notify::new());
            let k = kill.clone();
            let service = hyper::service::service_fn(move |req| {
                let (state, kill) = (state.clone(), k.clone());
                async move { Ok::<_, Infallible>(handle(&state, &kill, req).await) }
            });
            let conn = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service);
            tokio::select! {
                _ = conn => {}
                _ = kill.notified() => {}
            }
        });
    }
}

/// The operation (`DynamoDB_20120810.PutItem`, `AmazonSQS.SendMessage`).
fn operation(req: &Request<Incoming>) -> String {
    req.headers()
        .get("x-amz-target")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("unknown")
        .to_owned()
}

async fn handle(state: &State, kill: &Notify, req: Request<Incoming>) -> Response<Full<Bytes>> {
    let op = operation(&req);
    let fault = match state.throttle_all.load(Ordering::Relaxed) {
        true => Some(Fault::Throttle),
        false => state.pick(&op),
    };
    if let Some(f) = fault {
        if let Ok(mut m) = state.injected.lock() {
            *m.entry((op.clone(), f)).or_default() += 1;
        }
    }
    match fault {
        Some(Fault::Throttle) => return error(&op, 400, state.draw()),
        Some(Fault::Internal) => return error(&op, 500, 0),
        Some(Fault::Unavailable) => return error(&op, 503, 0),
        Some(Fault::ResetBefore) => return reset(kill).await,
        _ => {}
    }
    let packed = state.delay_ms.load(Ordering::Relaxed);
    let (low, high) = (packed >> 32, packed & u64::from(u32::MAX));
    if high > 0 {
        let ms = low + state.draw() % (high - low + 1);
        tokio::time::sleep(Duration::from_millis(ms)).await;
    }
    let (parts, body) = req.into_parts();
    let Ok(body) = body.collect().await.map(|b| b.to_bytes()) else {
        return reset(kill).await;
    };
    let Ok(matched) = state.rules.apply(&body).await else {
        return error(&op, 500, 0);
    };
    let mut held_back = 0;
    let plan = entries::plan(&op, &body, || {
        let fails = state.entry_fails();
        held_back += u64::from(fails);
        fails
    });
    if held_back > 0 {
        state.count(&state.entry_faults, &op, held_back);
    }
    let (body, held) = match plan {
        None => (Some(body.to_vec()), None),
        Some(entries::Plan::Cancel(answer)) => return json_answer(400, answer),
        Some(entries::Plan::Forward { body, held }) => (body, Some(held)),
    };
    let answer = match body {
        Some(body) => match forward(state, parts, body).await {
            Ok(answer) => Some(answer),
            Err(why) => {
                // The upstream failed (not an injected fault): the caller
                // sees what the network did, a connection that ends
                // without answer.
                eprintln!("fault proxy: forwarding {op} failed: {why}");
                return reset(kill).await;
            }
        },
        None => None,
    };
    targeted::Rules::answered(&matched);
    if fault == Some(Fault::ResetAfter) {
        return reset(kill).await;
    }
    match (answer, held) {
        (Some((200, _, bytes)), Some(held)) => {
            json_answer(200, entries::answer(Some(&bytes), held))
        }
        (None, Some(held)) => json_answer(200, entries::answer(None, held)),
        (Some((status, headers, bytes)), _) => relay(status, &headers, bytes),
        (None, None) => unreachable!("nothing forwarded only when something was held back"),
    }
}

/// A JSON-protocol answer the proxy makes up.
fn json_answer(status: u16, body: Vec<u8>) -> Response<Full<Bytes>> {
    Response::builder()
        .status(status)
        .header("content-type", "application/x-amz-json-1.0")
        .header("x-amzn-requestid", "fault-proxy")
        .body(Full::new(Bytes::from(body)))
        .expect("a valid response")
}

/// Resets the connection: the caller never gets an answer.
async fn reset(kill: &Notify) -> Response<Full<Bytes>> {
    kill.notify_one();
    std::future::pending().await
}

/// The JSON-protocol error the service itself would send.
fn error(op: &str, status: u16, roll: u64) -> Response<Full<Bytes>> {
    let dynamodb = op.starts_with("DynamoDB");
    let code = match (status, dynamodb, roll % 2) {
        (400, true, 0) => "ProvisionedThroughputExceededException",
        (400, false, 0) => "RequestThrottled",
        (400, _, _) => "ThrottlingException",
        (500, true, _) => "InternalServerError",
        (500, false, _) => "InternalFailure",
        _ => "ServiceUnavailable",
    };
    let namespace = if dynamodb {
        "com.amazonaws.dynamodb.v20120810"
    } else {
        "com.amazonaws.sqs"
    };
    let body = format!(
        r#"{{"__type":"{namespace}#{code}","message":"injected by the test's fault proxy"}}"#
    );
    let fault_side = if status == 400 { "Sender" } else { "Receiver" };
    let mut resp = Response::builder()
        .status(status)
        .header("content-type", "application/x-amz-json-1.0")
        .header("x-amzn-requestid", "fault-proxy");
    if !dynamodb {
        // SQS's JSON protocol also names the error the query way.
        resp = resp.header("x-amzn-query-error", format!("{code};{fault_side}"));
    }
    resp.body(Full::new(Bytes::from(body)))
        .expect("a valid response")
}

/// Forwards the call with `body`; returns the whole answer.
async fn forward(
    state: &State,
    parts: hyper::http::request::Parts,
    body: Vec<u8>,
) -> Result<(u16, hyper::HeaderMap, Bytes), String> {
    let path = parts
        .uri
        .path_and_query()
        .map(|p| p.as_str())
        .unwrap_or("/");
    let dynamodb = parts
        .headers
        .get("x-amz-target")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|t| t.starts_with("DynamoDB_"));
    let upstream = match dynamodb {
        true => &state.upstream.dynamodb,
        false => &state.upstream.sqs,
    };
    let mut out = state
        .client
        .request(parts.method.clone(), format!("{upstream}{path}"));
    for (name, value) in &parts.headers {
        if !hop_by_hop(name.as_str()) {
            out = out.header(name, value);
        }
    }
    let resp = out
        .body(body)
        .send()
        .await
        .map_err(|e| format!("sending: {e}"))?;
    let status = resp.status().as_u16();
    let headers = resp.headers().clone();
    let bytes = resp
        .bytes()
        .await
        .map_err(|e| format!("reading the answer: {e}"))?;
    Ok((status, headers, bytes))
}

/// Relays the service's answer as it was.
fn relay(status: u16, headers: &hyper::HeaderMap, bytes: Bytes) -> Response<Full<Bytes>> {
    let mut relay = Response::builder().status(status);
    for (name, value) in headers {
        if !hop_by_hop(name.as_str()) {
            relay = relay.header(name, value);
        }
    }
    relay.body(Full::new(bytes)).expect("a valid response")
}

fn hop_by_hop(name: &str) -> bool {
    matches!(
        name,
        "host" | "connection" | "keep-alive" | "transfer-encoding" | "content-length" | "upgrade"
    )
}
