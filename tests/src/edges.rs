//! Helpers for the tests of the API's edges: raw requests with any
//! `Authorization`, problem checks that report every mismatch at once, and
//! the production-like settings of the egress guard.

use std::future::Future;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::{test_env, Server, TOKEN};

pub const SUBS: &str = "/v1/tenants/acme/subscriptions";
pub const EVENTS: &str = "/v1/tenants/acme/events";

/// One answer, with the content type kept for problem checks.
pub struct Answer {
    /// The status code.
    pub status: u16,
    /// The `content-type` header.
    pub content_type: String,
    /// The body as JSON (Null when empty).
    pub body: Value,
}

/// Sends a request with a raw body (sent as `application/json`) and the
/// given `Authorization` header value, if any.
pub async fn send(
    server: &Server,
    method: &str,
    path: &str,
    body: Option<Vec<u8>>,
    authorization: Option<&str>,
) -> Answer {
    let method = reqwest::Method::from_bytes(method.as_bytes()).expect("method");
    let mut req = server
        .http
        .request(method, format!("{}{}", server.base, path));
    if let Some(auth) = authorization {
        req = req.header("authorization", auth);
    }
    if let Some(b) = body {
        req = req.header("content-type", "application/json").body(b);
    }
    let resp = req.send().await.expect("request");
    let status = resp.status().as_u16();
    let content_type = resp
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    let bytes = resp.bytes().await.expect("body");
    let body = if bytes.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&bytes)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into()))
    };
    Answer {
        status,
        content_type,
        body,
    }
}

/// An authorized request with a raw body.
pub async fn send_raw(server: &Server, method: &str, path: &str, body: &[u8]) -> Answer {
    let auth = format!("Bearer {TOKEN}");
    send(server, method, path, Some(body.to_vec()), Some(&auth)).await
}

/// An authorized request with a JSON body (or none).
pub async fn send_json(server: &Server, method: &str, path: &str, body: Option<Value>) -> Answer {
    let auth = format!("Bearer {TOKEN}");
    let bytes = body.map(|b| serde_json::to_vec(&b).expect("json"));
    send(server, method, path, bytes, Some(&auth)).await
}

/// What is wrong with `a` as a problem answer of `status` naming `field`
/// (`None` checks no field), or `None` when it is right.
pub fn problem_mismatch(a: &Answer, status: u16, field: Option<&str>) -> Option<String> {
    let mut wrong = Vec::new();
    if a.status != status {
        wrong.push(format!("status {} (expected {status})", a.status));
    }
    if !a.content_type.starts_with("application/problem+json") {
        wrong.push(format!(
            "content-type {:?} (expected application/problem+json)",
            a.content_type
        ));
    }
    for key in ["type", "title", "detail"] {
        if !a.body[key].is_string() {
            wrong.push(format!("no string `{key}`"));
        }
    }
    if a.body["status"] != json!(a.status) {
        wrong.push(format!(
            "body status {} does not match the HTTP status",
            a.body["status"]
        ));
    }
    if let Some(f) = field {
        if a.body["field"] != json!(f) {
            wrong.push(format!("field {} (expected {f:?})", a.body["field"]));
        }
    }
    if wrong.is_empty() {
        None
    } else {
        Some(format!("{}; body: {}", wrong.join(", "), a.body))
    }
}

/// Panics with every collected failure.
pub fn assert_none_failed(failures: &[String]) {
    assert!(
        failures.is_empty(),
        "{} case(s) failed:\n  {}",
        failures.len(),
        failures.join("\n  ")
    );
}

/// The items of a tenant's subscription list.
pub async fn subscription_items(server: &Server, tenant: &str) -> Vec<Value> {
    let (status, body) = server
        .call("GET", &format!("/v1/tenants/{tenant}/subscriptions"), None)
        .await;
    assert_eq!(status, 200, "list subscriptions: {body}");
    body["items"].as_array().expect("items").clone()
}

/// Polls an async condition every 50 ms until it holds or `within` passes.
pub async fn poll_until<F, Fut>(within: Duration, mut check: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = Instant::now() + within;
    loop {
        if check().await {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The production egress guard: https only, no private targets.
pub fn production_env() -> std::collections::HashMap<String, String> {
    test_env(&[
        ("HOOKLANE_ALLOW_PRIVATE_TARGETS", "false"),
        ("HOOKLANE_ALLOW_HTTP", "false"),
    ])
}
