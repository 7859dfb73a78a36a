//! The benchmark rig: a fast loopback receiver (answers at once, hangs, or
//! is "down" and answers 503), `hooklane serve` as a child process on a
//! temporary database (so its CPU time and peak RSS are its own), and
//! publishers driving the API.

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;

/// The API token the rig uses.
pub const TOKEN: &str = "bench-token-0123456789abcdef";

/// What the receiver has seen.
#[derive(Default)]
pub struct Seen {
    /// Arrival time per `webhook-id` (first arrival only).
    pub arrivals: Mutex<HashMap<String, Instant>>,
    /// Requests answered 2xx.
    pub delivered: AtomicU64,
    /// Requests held open right now.
    pub hanging: AtomicU64,
    /// While set, every non-hanging path answers 503.
    pub down: AtomicBool,
    /// `/slow/{ms}/…`: each request's `data.k` and `data.n`, in arrival
    /// order (order per key is checked from it).
    pub keyed: Mutex<Vec<(String, u64)>>,
    /// `/slow/{ms}/…`: requests being answered now, and the most at once.
    pub in_flight: Mutex<(u64, u64)>,
    /// While set, `/slow/` requests wait before their work (a backlog
    /// builds up; clearing it releases the backlog at once).
    pub held: AtomicBool,
}

/// Starts the receiver: `/hang/*` never answers; `/slow/{ms}/*` answers
/// 204 after `ms` milliseconds (a receiver that does work first) and
/// records the body's `data.k` and `data.n`; anything else answers 204 (or
/// 503 while down).
pub async fn receiver() -> anyhow::Result<(SocketAddr, Arc<Seen>)> {
    let seen = Arc::new(Seen::default());
    let addr = serve_loopback(seen.clone(), answer).await?;
    Ok((addr, seen))
}

/// An answer of a loopback receiver.
pub type Answered = Result<Response<Full<Bytes>>, Infallible>;

/// Serves HTTP/1.1 on a loopback port, each request answered by `answer`
/// with `state` (a task per connection); the address.
pub async fn serve_loopback<S, Fut>(
    state: Arc<S>,
    answer: fn(Arc<S>, Request<Incoming>) -> Fut,
) -> anyhow::Result<SocketAddr>
where
    S: Send + Sync + 'static,
    Fut: std::future::Future<Output = Answered> + Send + 'static,
{
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let state = state.clone();
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |req| answer(state.clone(), req));
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    Ok(addr)
}

async fn answer(seen: Arc<Seen>, req: Request<Incoming>) -> Answered {
    if req.uri().path().starts_with("/hang/") {
        seen.hanging.fetch_add(1, Ordering::Relaxed);
        std::future::pending::<()>().await;
    }
    if let Some(rest) = req.uri().path().strip_prefix("/slow/") {
        let ms: u64 = rest
            .split('/')
            .next()
            .and_then(|m| m.parse().ok())
            .unwrap_or(0);
        return Ok(slow(seen, req, Duration::from_millis(ms)).await);
    }
    let status = if seen.down.load(Ordering::Relaxed) {
        StatusCode::SERVICE_UNAVAILABLE
    } else {
        let id = webhook_id(&req);
        if let Ok(mut a) = seen.arrivals.lock() {
            a.entry(id).or_insert_with(Instant::now);
        }
        seen.delivered.fetch_add(1, Ordering::Relaxed);
        StatusCode::NO_CONTENT
    };
    Ok(empty(status))
}

/// A request's `webhook-id` ("" when absent).
fn webhook_id(req: &Request<Incoming>) -> String {
    req.headers()
        .get("webhook-id")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned()
}

/// An answer with no body.
fn empty(status: StatusCode) -> Response<Full<Bytes>> {
    let mut resp = Response::new(Full::new(Bytes::new()));
    *resp.status_mut() = status;
    resp
}

/// Answers a `/slow/` request after `after`, recording it.
async fn slow(seen: Arc<Seen>, req: Request<Incoming>, after: Duration) -> Response<Full<Bytes>> {
    use http_body_util::BodyExt as _;
    if let Ok(mut f) = seen.in_flight.lock() {
        f.0 += 1;
        f.1 = f.1.max(f.0);
    }
    let id = webhook_id(&req);
    let body = req
        .into_body()
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    let data =
        serde_json::from_slice::<serde_json::Value>(&body).unwrap_or_default()["data"].clone();
    for _ in 0..600_000 {
        if !seen.held.load(Ordering::Relaxed) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    tokio::time::sleep(after).await;
    let now = Instant::now();
    if let Ok(mut a) = seen.arrivals.lock() {
        a.entry(id).or_insert(now);
    }
    if let (Some(k), Some(n)) = (data["k"].as_str(), data["n"].as_u64()) {
        if let Ok(mut keyed) = seen.keyed.lock() {
            keyed.push((k.to_owned(), n));
        }
    }
    seen.delivered.fetch_add(1, Ordering::Relaxed);
    if let Ok(mut f) = seen.in_flight.lock() {
        f.0 -= 1;
    }
    empty(StatusCode::NO_CONTENT)
}

/// `hooklane serve` as a child process.
pub struct Serve {
    child: Child,
    /// `http://127.0.0.1:PORT`.
    pub base: String,
    _dir: tempfile::TempDir,
}

impl Serve {
    /// Starts `bin serve` on the embedded backend with the rig's settings
    /// plus `extra` variables.
    pub async fn start(bin: &str, extra: &[(&str, &str)]) -> anyhow::Result<Self> {
        Self::spawn(bin, extra, None).await
    }

    /// Starts `bin serve --backend aws --create-resources` (the AWS
    /// endpoint and credentials come in `extra`).
    /// `serve --backend aws` on the resources named `prefix` (created, or
    /// found as an earlier process left them).
    pub async fn start_aws_on(
        bin: &str,
        extra: &[(&str, &str)],
        prefix: &str,
    ) -> anyhow::Result<Self> {
        Self::spawn(bin, extra, Some(prefix)).await
    }

    /// `aws`: on the AWS backend, with the resources of that prefix.
    async fn spawn(bin: &str, extra: &[(&str, &str)], aws: Option<&str>) -> anyhow::Result<Self> {
        let dir = tempfile::tempdir()?;
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let mut cmd = Command::new(bin);
        cmd.args(["serve", "--listen", &format!("127.0.0.1:{port}"), "--db"])
            .arg(dir.path().join("bench.db"));
        if let Some(prefix) = aws {
            cmd.args([
                "--backend",
                "aws",
                "--create-resources",
                "--resource-prefix",
                prefix,
            ]);
        }
        cmd.env("HOOKLANE_API_TOKEN", TOKEN)
            .env("HOOKLANE_ALLOW_HTTP", "true")
            .env("HOOKLANE_ALLOW_PRIVATE_TARGETS", "true")
            .env("HOOKLANE_BREAKER", "failures=1000000")
            .env(
                "HOOKLANE_SUSPEND_POLICY",
                "retryable=1000000/1000h,permanent=1000000/1000h,fatal=1000000/1000h",
            )
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        for (k, v) in extra {
            cmd.env(k, v);
        }
        let child = cmd.spawn().with_context(|| {
            format!("starting {bin} (build it: cargo build --release --features aws)")
        })?;
        let serve = Self {
            child,
            base: format!("http://127.0.0.1:{port}"),
            _dir: dir,
        };
        let client = reqwest::Client::new();
        for _ in 0..200 {
            if client
                .get(format!("{}/healthz", serve.base))
                .send()
                .await
                .is_ok()
            {
                return Ok(serve);
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        anyhow::bail!("serve did not become healthy")
    }

    /// CPU seconds (user + system) the process has used.
    pub fn cpu_seconds(&self) -> f64 {
        let stat =
            std::fs::read_to_string(format!("/proc/{}/stat", self.child.id())).unwrap_or_default();
        let after_name = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
        let fields: Vec<&str> = after_name.split_whitespace().collect();
        let ticks = |i: usize| {
            fields
                .get(i)
                .and_then(|v| v.parse::<f64>().ok())
                .unwrap_or(0.0)
        };
        // utime and stime are fields 14 and 15 of /proc/PID/stat (1-based),
        // 11 and 12 after the command name; clock ticks are 1/100 s here.
        (ticks(11) + ticks(12)) / 100.0
    }

    /// Peak resident set size in MB (`VmHWM`).
    pub fn peak_rss_mb(&self) -> f64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .unwrap_or_default();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
            .map(|kb| kb / 1024.0)
            .unwrap_or(0.0)
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A client of the rig's API.
#[derive(Clone)]
pub struct Api {
    http: reqwest::Client,
    base: String,
}

impl Api {
    /// A client for `serve`.
    pub fn new(serve: &Serve) -> Self {
        Self {
            http: reqwest::Client::builder()
                .pool_max_idle_per_host(256)
                .build()
                .unwrap_or_default(),
            base: serve.base.clone(),
        }
    }

    /// Registers `url` for `event_types` in tenant `bench`.
    pub async fn subscribe(&self, url: &str, event_types: &[&str]) -> anyhow::Result<()> {
        self.subscribe_with(serde_json::json!({"url": url, "event_types": event_types}))
            .await
    }

    /// Registers a subscription from a whole request body (lanes, rate
    /// limit) in tenant `bench`.
    pub async fn subscribe_with(&self, body: serde_json::Value) -> anyhow::Result<()> {
        let resp = self
            .http
            .post(format!("{}/v1/tenants/bench/subscriptions", self.base))
            .bearer_auth(TOKEN)
            .json(&body)
            .send()
            .await?;
        anyhow::ensure!(resp.status() == 201, "subscribe answered {}", resp.status());
        Ok(())
    }

    /// Publishes events (id, type, data) in one `POST /event-batches`;
    /// returns when it was answered, each event accepted.
    pub async fn publish_batch(
        &self,
        events: Vec<(String, String, serde_json::Value)>,
    ) -> anyhow::Result<()> {
        let events: Vec<serde_json::Value> = events
            .into_iter()
            .map(|(id, ty, data)| serde_json::json!({"id": id, "type": ty, "data": data}))
            .collect();
        let n = events.len();
        let resp = self
            .http
            .post(format!("{}/v1/tenants/bench/event-batches", self.base))
            .bearer_auth(TOKEN)
            .json(&serde_json::json!({ "events": events }))
            .send()
            .await?;
        anyhow::ensure!(resp.status() == 200, "a batch answered {}", resp.status());
        let body: serde_json::Value = resp.json().await?;
        let accepted = body["items"].as_array().map_or(0, |items| {
            items.iter().filter(|i| i["status"] == 202).count()
        });
        anyhow::ensure!(
            accepted == n,
            "{accepted} of {n} events of a batch accepted"
        );
        Ok(())
    }

    /// Publishes one event with a given id; returns when it was answered.
    pub async fn publish(
        &self,
        id: &str,
        event_type: &str,
        data: &serde_json::Value,
    ) -> anyhow::Result<()> {
        let resp = self
            .http
            .post(format!("{}/v1/tenants/bench/events", self.base))
            .bearer_auth(TOKEN)
            .json(&serde_json::json!({"id": id, "type": event_type, "data": data}))
            .send()
            .await?;
        anyhow::ensure!(resp.status() == 202, "publish answered {}", resp.status());
        Ok(())
    }

    /// Publishes a request body given as bytes (`{"type","data","id"}`).
    pub async fn publish_raw(&self, body: Bytes) -> anyhow::Result<()> {
        let resp = self
            .http
            .post(format!("{}/v1/tenants/bench/events", self.base))
            .bearer_auth(TOKEN)
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await?;
        anyhow::ensure!(resp.status() == 202, "publish answered {}", resp.status());
        Ok(())
    }

    /// The `/metrics` text.
    pub async fn metrics_text(&self) -> anyhow::Result<String> {
        Ok(self
            .http
            .get(format!("{}/metrics", self.base))
            .bearer_auth(TOKEN)
            .send()
            .await?
            .text()
            .await?)
    }

    /// A counter from `/metrics`.
    pub async fn metric(&self, name: &str) -> anyhow::Result<u64> {
        let text = self.metrics_text().await?;
        Ok(text
            .lines()
            .find_map(|l| l.strip_prefix(name).map(str::trim))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0))
    }
}

/// A 1 KiB `data` object.
pub fn kib_payload() -> serde_json::Value {
    serde_json::json!({ "blob": "x".repeat(1000) })
}

/// A 1 KiB JSON payload shaped like a real webhook's (an invoice with its
/// lines), different for each `n`: ids are random base62, so a store that
/// compresses payloads is measured on what real payloads give, not on
/// repeated text. Serialized, it is 1,000 to 1,050 bytes.
pub fn invoice_payload(n: u64) -> serde_json::Value {
    let mut state = n.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    const B62: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
    let mut id = |prefix: &str, len: usize| {
        let tail: String = (0..len)
            .map(|_| char::from(B62[(next() % 62) as usize]))
            .collect();
        format!("{prefix}_{tail}")
    };
    let customer = id("cus", 14);
    let invoice = id("in", 24);
    let lines: Vec<serde_json::Value> = (0..3)
        .map(|i| {
            serde_json::json!({
                "id": id("il", 24),
                "price": id("price", 24),
                "description": format!("Seat license, tier {i}"),
                "quantity": 1 + i,
                "amount": 1_900 * (1 + i),
                "period": {"start": 1_796_000_000 + i, "end": 1_798_592_000 + i},
            })
        })
        .collect();
    serde_json::json!({
        "id": invoice,
        "object": "invoice",
        "customer": customer,
        "customer_email": format!("billing+{n}@example.com"),
        "currency": "usd",
        "amount_due": 11_400,
        "amount_paid": 11_400,
        "status": "paid",
        "subscription": id("sub", 24),
        "payment_intent": id("pi", 24),
        "hosted_invoice_url": format!("https://pay.example.com/i/{}", id("live", 40)),
        "lines": lines,
        "metadata": {"order": format!("ord_{n:08}"), "region": "eu-west-1"},
    })
}

/// Every first arrival the receiver saw.
pub fn arrival_times(seen: &Seen) -> anyhow::Result<Vec<Instant>> {
    Ok(seen
        .arrivals
        .lock()
        .map_err(|_| anyhow::anyhow!("lock"))?
        .values()
        .copied()
        .collect())
}

/// Median, lowest and highest of samples (sorted in place); of an even
/// count (four runs), the median is the mean of the middle two.
pub fn median_range(samples: &mut [f64]) -> (f64, f64, f64) {
    let (mut median, _, _) = spread(samples);
    let n = samples.len();
    if n > 0 && n.is_multiple_of(2) {
        median = (samples[n / 2 - 1] + samples[n / 2]) / 2.0;
    }
    let lo = samples.first().copied().unwrap_or_default();
    let hi = samples.last().copied().unwrap_or_default();
    (median, lo, hi)
}

/// The `q` quantile of sorted, non-empty samples.
pub fn quantile(sorted: &[f64], q: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * q).round() as usize]
}

/// Median, 10th and 90th percentile of samples (sorted in place).
pub fn spread(samples: &mut [f64]) -> (f64, f64, f64) {
    if samples.is_empty() {
        return (0.0, 0.0, 0.0);
    }
    samples.sort_by(|a, b| a.total_cmp(b));
    (
        quantile(samples, 0.5),
        quantile(samples, 0.1),
        quantile(samples, 0.9),
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_invoice_payload_is_about_a_kibibyte_and_differs_per_event() {
        for n in 0..50 {
            let len = super::invoice_payload(n).to_string().len();
            assert!((1_000..=1_050).contains(&len), "event {n}: {len} bytes");
        }
        assert_ne!(super::invoice_payload(1), super::invoice_payload(2));
    }

    #[test]
    fn the_median_of_an_even_count_is_the_mean_of_the_middle_two() {
        assert_eq!(
            super::median_range(&mut [4.0, 1.0, 3.0, 2.0]),
            (2.5, 1.0, 4.0)
        );
        assert_eq!(super::median_range(&mut [3.0, 1.0, 2.0]), (2.0, 1.0, 3.0));
        assert_eq!(super::median_range(&mut []), (0.0, 0.0, 0.0));
    }
}
