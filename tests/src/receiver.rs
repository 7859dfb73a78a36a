//! A loopback webhook receiver for tests: one server, one path per
//! endpoint; each path answers from its script (then its default) and every
//! request is recorded with its arrival time, whatever its method. `Reply::Hang` accepts the
//! request and never answers; `Reply::Gated` holds it until the test opens
//! its gate.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::any;
use axum::Router;

/// How one request is answered.
#[derive(Debug, Clone)]
pub enum Reply {
    /// This status.
    Status(u16),
    /// This status with a `Retry-After` value.
    RetryAfter(u16, String),
    /// This status with a body.
    Body(u16, String),
    /// This status with this text as the body and in an `x-echo` header (a
    /// receiver that echoes what it was sent).
    Echo(u16, String),
    /// This status with a `Location` header.
    Redirect(u16, String),
    /// Accept and never answer.
    Hang,
    /// Hold the request until the gate opens, then answer this status.
    Gated(Gate, u16),
    /// Answer this status after this long (a receiver that does work
    /// before answering).
    Slow(std::time::Duration, u16),
}

/// A gate a test opens once: requests answered `Reply::Gated` wait for it.
#[derive(Debug, Clone)]
pub struct Gate {
    open: Arc<tokio::sync::watch::Sender<bool>>,
    reached: Arc<std::sync::atomic::AtomicUsize>,
}

impl Default for Gate {
    fn default() -> Self {
        Self {
            open: Arc::new(tokio::sync::watch::channel(false).0),
            reached: Arc::default(),
        }
    }
}

impl Gate {
    /// A closed gate.
    pub fn new() -> Self {
        Self::default()
    }

    /// Opens the gate: every held request gets its answer.
    pub fn open(&self) {
        self.open.send_replace(true);
    }

    /// How many requests have reached the gate.
    pub fn reached(&self) -> usize {
        self.reached.load(std::sync::atomic::Ordering::SeqCst)
    }

    async fn pass(&self) {
        self.reached
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let mut rx = self.open.subscribe();
        let _ = rx.wait_for(|open| *open).await;
    }
}

/// One request as it arrived.
#[derive(Debug, Clone)]
pub struct Recorded {
    /// The endpoint path (without the leading slash).
    pub path: String,
    /// When it arrived.
    pub at: Instant,
    /// Its headers.
    pub headers: HeaderMap,
    /// Its body.
    pub body: Bytes,
}

impl Recorded {
    /// A header's value as text ("" when absent).
    pub fn header(&self, name: &str) -> String {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_owned()
    }
}

#[derive(Default)]
struct Inner {
    scripts: HashMap<String, VecDeque<Reply>>,
    defaults: HashMap<String, Reply>,
    records: Vec<Recorded>,
    hanging: usize,
    /// Requests being answered now, and the most ever at once, per path.
    in_flight: HashMap<String, (usize, usize)>,
    /// Every request's arrival and, once answered or dropped, its end.
    spans: Vec<(Instant, Option<Instant>)>,
}

/// The receiver: `url(name)` is an endpoint.
#[derive(Clone)]
pub struct Receiver {
    /// `http://127.0.0.1:PORT`.
    pub base: String,
    inner: Arc<Mutex<Inner>>,
}

impl Receiver {
    /// Starts a receiver on a loopback port.
    pub async fn start() -> Self {
        let inner = Arc::new(Mutex::new(Inner::default()));
        let app = Router::new()
            .route("/{name}", any(handle))
            .with_state(inner.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let base = format!("http://{}", listener.local_addr().expect("addr"));
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Self { base, inner }
    }

    /// The endpoint URL for `name`.
    pub fn url(&self, name: &str) -> String {
        format!("{}/{name}", self.base)
    }

    /// Sets what `name` answers once its script is used up (default 204).
    pub fn set_default(&self, name: &str, reply: Reply) {
        self.lock().defaults.insert(name.to_owned(), reply);
    }

    /// Queues replies `name` gives before its default.
    pub fn script(&self, name: &str, replies: Vec<Reply>) {
        self.lock()
            .scripts
            .entry(name.to_owned())
            .or_default()
            .extend(replies);
    }

    /// Every request `name` received, in arrival order.
    pub fn requests(&self, name: &str) -> Vec<Recorded> {
        self.lock()
            .records
            .iter()
            .filter(|r| r.path == name)
            .cloned()
            .collect()
    }

    /// How many requests `name` received.
    pub fn count(&self, name: &str) -> usize {
        self.lock()
            .records
            .iter()
            .filter(|r| r.path == name)
            .count()
    }

    /// Every request received.
    pub fn all(&self) -> Vec<Recorded> {
        self.lock().records.clone()
    }

    /// The most requests `name` held at once (counted from arrival to
    /// answer).
    pub fn peak_in_flight(&self, name: &str) -> usize {
        self.lock().in_flight.get(name).map_or(0, |(_, peak)| *peak)
    }

    /// The most requests held at once over every path, each counted from
    /// its arrival to `allowance` before the receiver saw it end: a client
    /// that gives up closes its connection a moment before the receiver
    /// notices, and a new request may arrive in that moment.
    pub fn peak_in_flight_overall(&self, allowance: Duration) -> usize {
        let now = Instant::now();
        let mut edges: Vec<(Instant, i32)> = Vec::new();
        for (start, end) in &self.lock().spans {
            let end = end.unwrap_or(now).checked_sub(allowance).unwrap_or(*start);
            if end > *start {
                edges.push((*start, 1));
                edges.push((end, -1));
            }
        }
        // Ends before starts at the same instant.
        edges.sort();
        let (mut open, mut peak) = (0i32, 0i32);
        for (_, step) in edges {
            open += step;
            peak = peak.max(open);
        }
        peak as usize
    }

    /// Requests accepted and still held open.
    pub fn hanging(&self) -> usize {
        self.lock().hanging
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

async fn handle(
    State(inner): State<Arc<Mutex<Inner>>>,
    Path(name): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let reply = {
        let mut g = inner.lock().unwrap_or_else(|e| e.into_inner());
        g.records.push(Recorded {
            path: name.clone(),
            at: Instant::now(),
            headers,
            body,
        });
        let scripted = g.scripts.get_mut(&name).and_then(|s| s.pop_front());
        let reply = scripted
            .or_else(|| g.defaults.get(&name).cloned())
            .unwrap_or(Reply::Status(204));
        if matches!(reply, Reply::Hang) {
            g.hanging += 1;
        }
        let (now, peak) = g.in_flight.entry(name.clone()).or_default();
        *now += 1;
        *peak = (*peak).max(*now);
        g.spans.push((Instant::now(), None));
        (reply, g.spans.len() - 1)
    };
    let (reply, span) = reply;
    let _answered = InFlight(inner.clone(), name, span);
    let code = |c: u16| StatusCode::from_u16(c).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    match reply {
        Reply::Status(c) => code(c).into_response(),
        Reply::RetryAfter(c, v) => (code(c), [("retry-after", v)]).into_response(),
        Reply::Body(c, b) => (code(c), b).into_response(),
        Reply::Echo(c, b) => (code(c), [("x-echo", b.clone())], b).into_response(),
        Reply::Redirect(c, to) => (code(c), [("location", to)]).into_response(),
        Reply::Slow(after, c) => {
            tokio::time::sleep(after).await;
            code(c).into_response()
        }
        Reply::Gated(gate, c) => {
            gate.pass().await;
            code(c).into_response()
        }
        Reply::Hang => {
            // Held until the client gives up; then the count goes down.
            let _guard = HangGuard(inner.clone());
            std::future::pending::<()>().await;
            StatusCode::OK.into_response()
        }
    }
}

/// Counts a request out of flight when it is answered (or dropped).
struct InFlight(Arc<Mutex<Inner>>, String, usize);

impl Drop for InFlight {
    fn drop(&mut self) {
        let mut g = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((now, _)) = g.in_flight.get_mut(&self.1) {
            *now = now.saturating_sub(1);
        }
        if let Some(span) = g.spans.get_mut(self.2) {
            span.1 = Some(Instant::now());
        }
    }
}

/// Decrements the hanging count when a held request is dropped.
struct HangGuard(Arc<Mutex<Inner>>);

impl Drop for HangGuard {
    fn drop(&mut self) {
        let mut g = self.0.lock().unwrap_or_else(|e| e.into_inner());
        g.hanging = g.hanging.saturating_sub(1);
    }
}
