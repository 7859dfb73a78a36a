//! Test support for hooklane's end-to-end tests: start `serve` in-process
//! on port 0 (or as a child process, for crash tests) over a temporary
//! database, and a loopback receiver that records what arrives and answers
//! as each test scripts it (a status, a sequence of statuses, or never).

pub mod aws;
mod both;
pub mod child;
pub mod dns;
pub mod edges;
pub mod faults;
pub mod receiver;
pub mod stack;

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use hooklane_core::config::Config;
pub use hooklane_core::engine::Outside;
use serde_json::Value;

pub use receiver::{Gate, Receiver, Recorded, Reply};

/// The API token every test server uses.
pub const TOKEN: &str = "test-token-0123456789abcdef";

/// What stops an in-process server.
type Stop = std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>;
/// An in-process server run.
type Serving = std::pin::Pin<Box<dyn std::future::Future<Output = anyhow::Result<()>> + Send>>;

/// A running `serve` with a client for its API.
pub struct Server {
    /// `http://127.0.0.1:PORT`.
    pub base: String,
    /// An HTTP client.
    pub http: reqwest::Client,
    /// The temporary directory holding the database.
    pub dir: tempfile::TempDir,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
}

/// Settings for a compressed, loopback-friendly test server.
pub fn test_env(extra: &[(&str, &str)]) -> HashMap<String, String> {
    let mut env: HashMap<String, String> = [
        ("HOOKLANE_API_TOKEN", TOKEN),
        ("HOOKLANE_ALLOW_HTTP", "true"),
        ("HOOKLANE_ALLOW_PRIVATE_TARGETS", "true"),
        ("HOOKLANE_RETRY_SCHEDULE", "0s,1s,2s"),
        ("HOOKLANE_ATTEMPT_TIMEOUT", "10s"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    for (k, v) in extra {
        env.insert(k.to_string(), v.to_string());
    }
    env
}

/// The environment variable every randomized test takes its seed from.
pub const SEED_VAR: &str = "HOOKLANE_TEST_SEED";

/// A seed for a test's pseudo-random draws (`what` names them): from
/// `HOOKLANE_TEST_SEED` to replay a run, or else the clock. Printed either
/// way, with how to replay it (shown when the test fails).
pub fn seed(what: &str) -> u64 {
    let seed = std::env::var(SEED_VAR)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(7)
        });
    eprintln!("{what}: seed {seed} (replay with {SEED_VAR}={seed})");
    seed
}

/// Sends the server's logs to the test's captured output (shown when a
/// test fails); `RUST_LOG` picks the level (default `warn`).
pub fn init_logs() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_test_writer()
        .try_init();
}

/// Raises the open-file limit so hundreds of held connections fit.
pub fn raise_fd_limit() {
    let _ = rlimit::increase_nofile_limit(65_536);
}

/// Where a test server keeps its state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// SQLite in a temporary directory.
    Embedded,
    /// DynamoDB and SQS FIFO on the local AWS-compatible server.
    Aws,
}

impl Server {
    /// Starts `serve` (embedded) in this process with the given settings.
    pub async fn start(env: HashMap<String, String>) -> Self {
        Self::start_on(Backend::Embedded, env).await
    }

    /// Starts `serve` in this process on the given backend.
    pub async fn start_on(backend: Backend, env: HashMap<String, String>) -> Self {
        Self::start_with(backend, env, Outside::default()).await
    }

    /// Starts `serve` (embedded) with the given name resolution and clock.
    pub async fn start_outside(env: HashMap<String, String>, outside: Outside) -> Self {
        Self::start_with(Backend::Embedded, env, outside).await
    }

    /// Starts `serve` on the given backend with the given name resolution
    /// and clock.
    pub async fn start_with(
        backend: Backend,
        env: HashMap<String, String>,
        outside: Outside,
    ) -> Self {
        let sdk = match backend {
            Backend::Aws => Some(aws::sdk().await),
            Backend::Embedded => None,
        };
        let aws_env = aws::env_of(&env);
        Self::launch(env, move |listener, config, db, stop| {
            Box::pin(async move {
                match sdk {
                    None => {
                        hooklane_core::embedded::serve_with(listener, config, &db, outside, stop)
                            .await
                    }
                    Some(sdk) => {
                        let resources = hooklane_aws::Resources {
                            prefix: aws::unique_prefix(),
                            visibility: config.attempt_timeout * 6,
                        };
                        hooklane_aws::queue_poller::serve(
                            listener,
                            (config, aws_env, outside),
                            sdk,
                            None,
                            Some(resources),
                            stop,
                        )
                        .await
                    }
                }
            })
        })
        .await
    }

    /// Starts `serve --backend aws` in this process over resources that
    /// already exist, through the given SDK configuration (a fault proxy's
    /// endpoint, say).
    pub async fn start_aws_with(
        env: HashMap<String, String>,
        sdk: aws_config::SdkConfig,
        settings: hooklane_aws::Settings,
    ) -> Self {
        let aws_env = aws::env_of(&env);
        Self::launch(env, move |listener, config, _db, stop| {
            Box::pin(async move {
                let both = (config, aws_env, Outside::default());
                hooklane_aws::queue_poller::serve(listener, both, sdk, Some(settings), None, stop)
                    .await
            })
        })
        .await
    }

    async fn launch(
        env: HashMap<String, String>,
        run: impl FnOnce(tokio::net::TcpListener, Config, PathBuf, Stop) -> Serving,
    ) -> Self {
        raise_fd_limit();
        init_logs();
        let config = Config::from_lookup(|k| env.get(k).cloned()).expect("test config");
        let dir = tempfile::tempdir().expect("temp dir");
        let db = dir.path().join("hooklane.db");
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let base = format!("http://{}", listener.local_addr().expect("addr"));
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let stop: Stop = Box::pin(async move {
            let _ = rx.await;
        });
        let serving = run(listener, config, db, stop);
        tokio::spawn(async move {
            if let Err(e) = serving.await {
                eprintln!("serve failed: {e:#}");
            }
        });
        let server = Self {
            base,
            http: reqwest::Client::new(),
            dir,
            shutdown: Some(tx),
        };
        server.wait_healthy().await;
        server
    }

    /// A client for a `serve` already running elsewhere (a child process);
    /// waits until it is healthy.
    pub async fn connect(base: &str) -> Self {
        let server = Self {
            base: base.to_owned(),
            http: reqwest::Client::new(),
            dir: tempfile::tempdir().expect("temp dir"),
            shutdown: None,
        };
        server.wait_healthy().await;
        server
    }

    /// Waits until `/healthz` answers.
    pub async fn wait_healthy(&self) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if let Ok(r) = self.http.get(format!("{}/healthz", self.base)).send().await {
                if r.status().is_success() {
                    return;
                }
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("server did not become healthy");
    }

    /// Sends an authorized request; returns status and JSON body (Null when
    /// empty).
    pub async fn call(&self, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
        self.call_as(TOKEN, method, path, body).await
    }

    /// Sends a request with `token` as its bearer token; returns status and
    /// JSON body (Null when empty).
    pub async fn call_as(
        &self,
        token: &str,
        method: &str,
        path: &str,
        body: Option<Value>,
    ) -> (u16, Value) {
        let method = reqwest::Method::from_bytes(method.as_bytes()).expect("method");
        let mut req = self
            .http
            .request(method, format!("{}{}", self.base, path))
            .bearer_auth(token);
        if let Some(b) = body {
            req = req.json(&b);
        }
        let resp = req.send().await.expect("request");
        let status = resp.status().as_u16();
        let bytes = resp.bytes().await.expect("body");
        let value = if bytes.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&bytes)
                .unwrap_or(Value::String(String::from_utf8_lossy(&bytes).into()))
        };
        (status, value)
    }

    /// Registers a subscription to `url` for `event_types`; returns it.
    pub async fn subscribe(&self, tenant: &str, url: &str, event_types: &[&str]) -> Value {
        let (status, body) = self
            .call(
                "POST",
                &format!("/v1/tenants/{tenant}/subscriptions"),
                Some(serde_json::json!({"url": url, "event_types": event_types})),
            )
            .await;
        assert_eq!(status, 201, "subscribe failed: {body}");
        body
    }

    /// Publishes an event; returns its id.
    pub async fn publish(&self, tenant: &str, event_type: &str, data: Value) -> String {
        let (status, body) = self
            .call(
                "POST",
                &format!("/v1/tenants/{tenant}/events"),
                Some(serde_json::json!({"type": event_type, "data": data})),
            )
            .await;
        assert_eq!(status, 202, "publish failed: {body}");
        body["id"].as_str().expect("event id").to_owned()
    }

    /// Sends an authorized request whose body is JSON text (numbers
    /// spelled as given); returns status and JSON answer.
    pub async fn call_text(&self, method: &str, path: &str, body: &str) -> (u16, Value) {
        let method = reqwest::Method::from_bytes(method.as_bytes()).expect("method");
        let resp = self
            .http
            .request(method, format!("{}{}", self.base, path))
            .bearer_auth(TOKEN)
            .header("content-type", "application/json")
            .body(body.to_owned())
            .send()
            .await
            .expect("request");
        let status = resp.status().as_u16();
        (status, resp.json().await.unwrap_or(Value::Null))
    }

    /// Reads the subscription at `path` until its `status` is `want`, for
    /// up to 30 s; returns the last status read.
    pub async fn status_of(&self, path: &str, want: &str) -> Value {
        let mut status = Value::Null;
        for _ in 0..300 {
            status = self.call("GET", path, None).await.1["status"].clone();
            if status == want {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        status
    }

    /// Publishes an event written as JSON text; returns its id.
    pub async fn publish_text(&self, tenant: &str, body: &str) -> String {
        let path = format!("/v1/tenants/{tenant}/events");
        let (status, answer) = self.call_text("POST", &path, body).await;
        assert_eq!(status, 202, "publish failed: {answer}");
        answer["id"].as_str().expect("event id").to_owned()
    }

    /// The database path (for a restart over the same file).
    pub fn db_path(&self) -> PathBuf {
        self.dir.path().join("hooklane.db")
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
    }
}

/// A clock the test moves forward: the system time plus an offset.
#[derive(Debug, Default)]
pub struct MovableClock {
    offset_ms: std::sync::atomic::AtomicI64,
}

impl MovableClock {
    /// Moves the clock forward by `by`.
    pub fn advance(&self, by: Duration) {
        self.offset_ms.fetch_add(
            i64::try_from(by.as_millis()).expect("a test-sized offset"),
            std::sync::atomic::Ordering::SeqCst,
        );
    }
}

impl hooklane_core::ports::Clock for MovableClock {
    fn now(&self) -> time::OffsetDateTime {
        let offset = self.offset_ms.load(std::sync::atomic::Ordering::SeqCst);
        time::OffsetDateTime::now_utc() + time::Duration::milliseconds(offset)
    }
}

/// Polls `check` every 20 ms until it holds or `within` passes; returns
/// whether it held.
pub async fn eventually(within: Duration, mut check: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + within;
    loop {
        if check() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
