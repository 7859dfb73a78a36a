//! End-to-end tests of the API's edges (`../shared/API.md`): auth, bad input
//! that answers a problem naming the field and changes nothing (G11), the
//! egress guard at registration (G9), tenant isolation (G10), idempotent
//! publish (G12), pagination, and deletion.
//!
//! Table-driven tests check every case and then report all mismatches at
//! once, so one run shows every way the server departs from the contract.

use std::collections::HashSet;
use std::future::Future;
use std::time::{Duration, Instant};

use hooklane_tests::{eventually, test_env, Receiver, Reply, Server, TOKEN};
use serde_json::{json, Value};

const SUBS: &str = "/v1/tenants/acme/subscriptions";
const EVENTS: &str = "/v1/tenants/acme/events";

/// One answer, with the content type kept for problem checks.
struct Answer {
    status: u16,
    content_type: String,
    body: Value,
}

/// Sends a request with a raw body (sent as `application/json`) and the
/// given `Authorization` header value, if any.
async fn send(
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
async fn send_raw(server: &Server, method: &str, path: &str, body: &[u8]) -> Answer {
    let auth = format!("Bearer {TOKEN}");
    send(server, method, path, Some(body.to_vec()), Some(&auth)).await
}

/// An authorized request with a JSON body (or none).
async fn send_json(server: &Server, method: &str, path: &str, body: Option<Value>) -> Answer {
    let auth = format!("Bearer {TOKEN}");
    let bytes = body.map(|b| serde_json::to_vec(&b).expect("json"));
    send(server, method, path, bytes, Some(&auth)).await
}

/// What is wrong with `a` as a problem answer of `status` naming `field`
/// (`None` checks no field), or `None` when it is right.
fn problem_mismatch(a: &Answer, status: u16, field: Option<&str>) -> Option<String> {
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
fn assert_none_failed(failures: &[String]) {
    assert!(
        failures.is_empty(),
        "{} case(s) failed:\n  {}",
        failures.len(),
        failures.join("\n  ")
    );
}

/// The items of a tenant's subscription list.
async fn subscription_items(server: &Server, tenant: &str) -> Vec<Value> {
    let (status, body) = server
        .call("GET", &format!("/v1/tenants/{tenant}/subscriptions"), None)
        .await;
    assert_eq!(status, 200, "list subscriptions: {body}");
    body["items"].as_array().expect("items").clone()
}

/// Polls an async condition every 50 ms until it holds or `within` passes.
async fn poll_until<F, Fut>(within: Duration, mut check: F) -> bool
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
fn production_env() -> std::collections::HashMap<String, String> {
    test_env(&[
        ("HOOKLANE_ALLOW_PRIVATE_TARGETS", "false"),
        ("HOOKLANE_ALLOW_HTTP", "false"),
    ])
}

// ---------------------------------------------------------------- auth

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_wrong_or_non_bearer_token_gets_401_problem_and_creates_nothing() {
    let server = Server::start(test_env(&[])).await;
    let sub =
        serde_json::to_vec(&json!({"url": "https://example.com/hook", "event_types": ["a.*"]}))
            .expect("json");
    let event =
        serde_json::to_vec(&json!({"type": "a.b", "data": {}, "id": "unauth-1"})).expect("json");
    let token_scheme = format!("Token {TOKEN}");
    let basic_token = format!("Basic {TOKEN}");
    let auths: Vec<(&str, Option<&str>)> = vec![
        ("no Authorization header", None),
        (
            "a wrong bearer token",
            Some("Bearer wrong-token-0123456789abcdef"),
        ),
        ("an empty bearer token", Some("Bearer ")),
        ("the Basic scheme", Some("Basic dXNlcjpwYXNz")),
        ("the Basic scheme carrying the token", Some(&basic_token)),
        ("a Token scheme carrying the token", Some(&token_scheme)),
    ];
    let mut failures = Vec::new();
    for (what, auth) in &auths {
        let a = send(&server, "POST", SUBS, Some(sub.clone()), *auth).await;
        if let Some(m) = problem_mismatch(&a, 401, None) {
            failures.push(format!("POST {SUBS} with {what}: {m}"));
        }
        let a = send(&server, "GET", SUBS, None, *auth).await;
        if let Some(m) = problem_mismatch(&a, 401, None) {
            failures.push(format!("GET {SUBS} with {what}: {m}"));
        }
        let a = send(&server, "POST", EVENTS, Some(event.clone()), *auth).await;
        if let Some(m) = problem_mismatch(&a, 401, None) {
            failures.push(format!("POST {EVENTS} with {what}: {m}"));
        }
    }
    let items = subscription_items(&server, "acme").await;
    if !items.is_empty() {
        failures.push(format!(
            "unauthenticated POSTs created subscriptions: {items:?}"
        ));
    }
    let (status, body) = server
        .call("GET", "/v1/tenants/acme/events/unauth-1", None)
        .await;
    if status != 404 {
        failures.push(format!(
            "an unauthenticated publish created event unauth-1: GET answered {status} {body}"
        ));
    }
    assert_none_failed(&failures);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn healthz_and_the_openapi_3_1_document_answer_without_a_token() {
    let server = Server::start(test_env(&[])).await;
    let a = send(&server, "GET", "/healthz", None, None).await;
    assert_eq!(a.status, 200, "GET /healthz without a token: {}", a.body);
    let a = send(&server, "GET", "/openapi.json", None, None).await;
    assert_eq!(
        a.status, 200,
        "GET /openapi.json without a token: {}",
        a.body
    );
    assert!(
        a.content_type.starts_with("application/json"),
        "openapi content-type: {:?}",
        a.content_type
    );
    let version = a.body["openapi"].as_str().unwrap_or_default();
    assert!(
        version.starts_with("3.1"),
        "openapi version is {:?}, expected 3.1.x",
        a.body["openapi"]
    );
}

// ---------------------------------------------------- bad input (G11)

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_subscription_inputs_answer_a_problem_naming_the_field_and_create_nothing() {
    let server = Server::start(test_env(&[])).await;
    let url = "https://example.com/hook";
    let j = |v: Value| serde_json::to_vec(&v).expect("json");
    let cases: Vec<(&str, &str, Vec<u8>, u16, &str)> = vec![
        (
            "malformed JSON",
            SUBS,
            br#"{"url": "https://example.com/hook", "event_types": ["a.*"]"#.to_vec(),
            400,
            "body",
        ),
        (
            "a JSON array body",
            SUBS,
            j(json!([{"url": url, "event_types": ["a.*"]}])),
            400,
            "body",
        ),
        (
            "an unknown field",
            SUBS,
            j(json!({"url": url, "event_types": ["a.*"], "colour": "red"})),
            400,
            "colour",
        ),
        (
            "a missing url",
            SUBS,
            j(json!({"event_types": ["a.*"]})),
            400,
            "url",
        ),
        (
            "missing event_types",
            SUBS,
            j(json!({"url": url})),
            400,
            "event_types",
        ),
        (
            "a url that is not a string",
            SUBS,
            j(json!({"url": 42, "event_types": ["a.*"]})),
            400,
            "url",
        ),
        (
            "empty event_types",
            SUBS,
            j(json!({"url": url, "event_types": []})),
            422,
            "event_types",
        ),
        (
            "the filter a..b",
            SUBS,
            j(json!({"url": url, "event_types": ["a..b"]})),
            422,
            "event_types",
        ),
        (
            "the filter a.*.b",
            SUBS,
            j(json!({"url": url, "event_types": ["a.*.b"]})),
            422,
            "event_types",
        ),
        (
            "event_types that is not an array",
            SUBS,
            j(json!({"url": url, "event_types": "a.*"})),
            400,
            "event_types",
        ),
        (
            "the secret nope",
            SUBS,
            j(json!({"url": url, "event_types": ["a.*"], "secret": "nope"})),
            422,
            "secret",
        ),
        (
            "metadata with a non-string value",
            SUBS,
            j(json!({"url": url, "event_types": ["a.*"], "metadata": {"k": 1}})),
            400,
            "metadata",
        ),
        (
            "the url `not a url`",
            SUBS,
            j(json!({"url": "not a url", "event_types": ["a.*"]})),
            422,
            "url",
        ),
        (
            "an ftp url",
            SUBS,
            j(json!({"url": "ftp://example.com/x", "event_types": ["a.*"]})),
            422,
            "url",
        ),
        (
            "a bad tenant id in the path",
            "/v1/tenants/bad!tenant/subscriptions",
            j(json!({"url": url, "event_types": ["a.*"]})),
            400,
            "tenant",
        ),
    ];
    let mut failures = Vec::new();
    for (what, path, body, status, field) in &cases {
        let a = send_raw(&server, "POST", path, body).await;
        if let Some(m) = problem_mismatch(&a, *status, Some(field)) {
            failures.push(format!(
                "POST {path} with {what} ({}): {m}",
                String::from_utf8_lossy(body)
            ));
        }
    }
    let items = subscription_items(&server, "acme").await;
    if !items.is_empty() {
        failures.push(format!("bad inputs created subscriptions: {items:?}"));
    }
    assert_none_failed(&failures);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_event_inputs_answer_a_problem_naming_the_field_and_publish_nothing() {
    let server = Server::start(test_env(&[])).await;
    let receiver = Receiver::start().await;
    server.subscribe("acme", &receiver.url("all"), &["*"]).await;
    let j = |v: Value| serde_json::to_vec(&v).expect("json");
    let big = "x".repeat(300 * 1024);
    // (what, body, status, field, the id given, which must stay unknown)
    let cases: Vec<(&str, Vec<u8>, u16, &str, &str)> = vec![
        (
            "a missing type",
            j(json!({"data": {}, "id": "bad-missing-type"})),
            400,
            "type",
            "bad-missing-type",
        ),
        (
            "the type a..b",
            j(json!({"type": "a..b", "data": {}, "id": "bad-type"})),
            422,
            "type",
            "bad-type",
        ),
        (
            "missing data",
            j(json!({"type": "a.b", "id": "bad-missing-data"})),
            400,
            "data",
            "bad-missing-data",
        ),
        (
            "an unknown field",
            j(json!({"type": "a.b", "data": {}, "id": "bad-extra", "extra": 1})),
            400,
            "extra",
            "bad-extra",
        ),
        (
            "the id `has space`",
            j(json!({"type": "a.b", "data": {}, "id": "has space"})),
            422,
            "id",
            "has%20space",
        ),
        (
            "malformed JSON",
            br#"{"type": "a.b", "data": {}, "id": "bad-malformed""#.to_vec(),
            400,
            "body",
            "bad-malformed",
        ),
        (
            "a body over 256 KiB",
            j(json!({"type": "a.b", "data": big, "id": "bad-too-big"})),
            413,
            "body",
            "bad-too-big",
        ),
    ];
    let mut failures = Vec::new();
    for (what, body, status, field, id) in &cases {
        let a = send_raw(&server, "POST", EVENTS, body).await;
        if let Some(m) = problem_mismatch(&a, *status, Some(field)) {
            let shown: String = String::from_utf8_lossy(body).chars().take(120).collect();
            failures.push(format!("POST {EVENTS} with {what} ({shown}): {m}"));
        }
        let (s, b) = server.call("GET", &format!("{EVENTS}/{id}"), None).await;
        if s != 404 {
            failures.push(format!(
                "after {what}, GET {EVENTS}/{id} answered {s} (expected 404): {b}"
            ));
        }
    }
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let got = receiver.requests("all");
    if !got.is_empty() {
        failures.push(format!(
            "the receiver got {} deliveries from refused events: {:?}",
            got.len(),
            got.iter()
                .map(|r| String::from_utf8_lossy(&r.body)
                    .chars()
                    .take(120)
                    .collect::<String>())
                .collect::<Vec<_>>()
        ));
    }
    assert_none_failed(&failures);
    // The receiver was wired: a good event does arrive.
    server.publish("acme", "a.b", json!({})).await;
    assert!(
        eventually(Duration::from_secs(10), || receiver.count("all") == 1).await,
        "a valid event after the refused ones was not delivered (control)"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn patch_with_an_empty_object_answers_400_and_changes_nothing() {
    let server = Server::start(test_env(&[])).await;
    let sub = server
        .subscribe("acme", "https://example.com/hook", &["a.*"])
        .await;
    let path = format!("{SUBS}/{}", sub["id"].as_str().expect("id"));
    let a = send_json(&server, "PATCH", &path, Some(json!({}))).await;
    if let Some(m) = problem_mismatch(&a, 400, Some("body")) {
        panic!("PATCH {path} with {{}}: {m}");
    }
    let (status, now) = server.call("GET", &path, None).await;
    assert_eq!(status, 200, "GET after PATCH: {now}");
    assert_eq!(now["url"], json!("https://example.com/hook"));
    assert_eq!(now["event_types"], json!(["a.*"]));
    assert_eq!(now["updated_at"], sub["updated_at"], "updated_at moved");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn patch_with_an_unknown_field_answers_400_naming_it_and_changes_nothing() {
    let server = Server::start(test_env(&[])).await;
    let sub = server
        .subscribe("acme", "https://example.com/hook", &["a.*"])
        .await;
    let path = format!("{SUBS}/{}", sub["id"].as_str().expect("id"));
    let body = json!({
        "url": "https://example.org/elsewhere",
        "event_types": ["b.*"],
        "description": "changed",
        "colour": "red",
    });
    let a = send_json(&server, "PATCH", &path, Some(body.clone())).await;
    if let Some(m) = problem_mismatch(&a, 400, Some("colour")) {
        panic!("PATCH {path} with {body}: {m}");
    }
    let (status, now) = server.call("GET", &path, None).await;
    assert_eq!(status, 200, "GET after PATCH: {now}");
    assert_eq!(now["url"], json!("https://example.com/hook"), "url changed");
    assert_eq!(now["event_types"], json!(["a.*"]), "event_types changed");
    assert_eq!(now["description"], Value::Null, "description changed");
}

// ---------------------------------------------------------- pagination

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_limit_or_cursor_answers_400_naming_it() {
    let server = Server::start(test_env(&[])).await;
    server
        .subscribe("acme", "https://example.com/hook", &["a.*"])
        .await;
    let cases = [
        ("limit=0", "limit"),
        ("limit=251", "limit"),
        ("limit=abc", "limit"),
        ("cursor=garbage!!", "cursor"),
    ];
    let mut failures = Vec::new();
    for (query, field) in cases {
        let path = format!("{SUBS}?{query}");
        let a = send_json(&server, "GET", &path, None).await;
        if let Some(m) = problem_mismatch(&a, 400, Some(field)) {
            failures.push(format!("GET {path}: {m}"));
        }
    }
    assert_none_failed(&failures);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paging_five_subscriptions_by_two_gives_2_2_1_items_each_once() {
    let server = Server::start(test_env(&[])).await;
    let mut created = HashSet::new();
    for i in 0..5 {
        let sub = server
            .subscribe("acme", &format!("https://example.com/hook/{i}"), &["a.*"])
            .await;
        created.insert(sub["id"].as_str().expect("id").to_owned());
    }
    let mut sizes = Vec::new();
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    for page in 0..4 {
        let path = match &cursor {
            None => format!("{SUBS}?limit=2"),
            Some(c) => format!("{SUBS}?limit=2&cursor={c}"),
        };
        let (status, body) = server.call("GET", &path, None).await;
        assert_eq!(status, 200, "page {page} ({path}): {body}");
        let items = body["items"].as_array().expect("items");
        sizes.push(items.len());
        seen.extend(
            items
                .iter()
                .map(|s| s["id"].as_str().expect("id").to_owned()),
        );
        match &body["next_cursor"] {
            Value::Null => {
                cursor = None;
                break;
            }
            Value::String(c) => cursor = Some(c.clone()),
            other => panic!("next_cursor is {other}, expected a string or null"),
        }
    }
    assert!(cursor.is_none(), "still a next_cursor after 4 pages");
    assert_eq!(sizes, vec![2, 2, 1], "page sizes");
    let unique: HashSet<String> = seen.iter().cloned().collect();
    assert_eq!(
        unique.len(),
        seen.len(),
        "duplicates across pages: {seen:?}"
    );
    assert_eq!(
        unique, created,
        "the pages did not list exactly the 5 created"
    );
}

// ------------------------------------------------- egress guard (G9)

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_production_guard_refuses_private_loopback_and_plain_http_urls_at_registration() {
    let server = Server::start(production_env()).await;
    let urls = [
        "https://127.0.0.1/x",
        "https://localhost/x",
        "https://10.0.0.5/",
        "https://172.16.3.4/",
        "https://192.168.1.1/",
        "https://169.254.169.254/latest/meta-data",
        "https://100.64.0.1/",
        "https://[::1]/",
        "https://[fd00::1]/",
        "https://[fe80::1]/",
        "https://[::ffff:127.0.0.1]/",
        "https://[::ffff:10.0.0.1]/",
        "https://2130706433/",
        "https://0177.0.0.1/",
        "https://0x7f000001/",
        "https://0.0.0.0/",
        "http://example.com/",
    ];
    let mut failures = Vec::new();
    for url in urls {
        let a = send_json(
            &server,
            "POST",
            SUBS,
            Some(json!({"url": url, "event_types": ["a.*"]})),
        )
        .await;
        if let Some(m) = problem_mismatch(&a, 422, Some("url")) {
            failures.push(format!("POST {SUBS} with url {url}: {m}"));
        }
    }
    let items = subscription_items(&server, "acme").await;
    if !items.is_empty() {
        let urls: Vec<&Value> = items.iter().map(|s| &s["url"]).collect();
        failures.push(format!("refused urls were stored: {urls:?}"));
    }
    assert_none_failed(&failures);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_production_guard_accepts_a_public_https_url() {
    let server = Server::start(production_env()).await;
    // example.com may not resolve here; an unresolvable host is accepted
    // at registration by design (checked again at connect time).
    let (status, body) = server
        .call(
            "POST",
            SUBS,
            Some(json!({"url": "https://example.com/hook", "event_types": ["a.*"]})),
        )
        .await;
    assert_eq!(status, 201, "https://example.com/hook refused: {body}");
    assert_eq!(subscription_items(&server, "acme").await.len(), 1);
}

// --------------------------------------------- tenant isolation (G10)

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_tenant_gets_404_for_every_route_on_a_subscription_and_changes_nothing() {
    let server = Server::start(test_env(&[])).await;
    let sub = server
        .subscribe("acme", "https://example.com/hook", &["a.*"])
        .await;
    let id = sub["id"].as_str().expect("id");
    let theirs = format!("/v1/tenants/globex/subscriptions/{id}");
    let calls: Vec<(&str, String, Option<Value>)> = vec![
        ("GET", theirs.clone(), None),
        (
            "PATCH",
            theirs.clone(),
            Some(json!({"url": "https://example.org/stolen", "description": "hijacked"})),
        ),
        ("DELETE", theirs.clone(), None),
        ("POST", format!("{theirs}/rotate-secret"), None),
        ("GET", format!("{theirs}/attempts"), None),
    ];
    let mut failures = Vec::new();
    for (method, path, body) in calls {
        let a = send_json(&server, method, &path, body).await;
        if let Some(m) = problem_mismatch(&a, 404, None) {
            failures.push(format!("{method} {path}: {m}"));
        }
    }
    let globex = subscription_items(&server, "globex").await;
    if !globex.is_empty() {
        failures.push(format!("globex lists subscriptions: {globex:?}"));
    }
    let (status, now) = server.call("GET", &format!("{SUBS}/{id}"), None).await;
    if status != 200 {
        failures.push(format!(
            "acme's GET of its subscription answered {status}: {now}"
        ));
    } else {
        for key in ["url", "event_types", "description", "status", "updated_at"] {
            if now[key] != sub[key] {
                failures.push(format!(
                    "acme's subscription {key} changed: {} -> {}",
                    sub[key], now[key]
                ));
            }
        }
    }
    assert_none_failed(&failures);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscription_receives_only_its_own_tenants_events() {
    let server = Server::start(test_env(&[])).await;
    let receiver = Receiver::start().await;
    server
        .subscribe("acme", &receiver.url("acme"), &["a.*"])
        .await;
    server
        .subscribe("globex", &receiver.url("globex"), &["a.*"])
        .await;
    let theirs = server
        .publish("globex", "a.b", json!({"from": "globex"}))
        .await;
    assert!(
        eventually(Duration::from_secs(10), || receiver.count("globex") == 1).await,
        "globex's own receiver did not get globex's event (control)"
    );
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let leaked = receiver.requests("acme");
    assert!(
        leaked.is_empty(),
        "acme's receiver got globex's event {theirs}: webhook-ids {:?}",
        leaked
            .iter()
            .map(|r| r.header("webhook-id"))
            .collect::<Vec<_>>()
    );
    let ours = server.publish("acme", "a.b", json!({"from": "acme"})).await;
    assert!(
        eventually(Duration::from_secs(10), || receiver.count("acme") == 1).await,
        "acme's receiver did not get acme's event"
    );
    assert_eq!(receiver.requests("acme")[0].header("webhook-id"), ours);
    assert_eq!(receiver.count("globex"), 1, "globex got acme's event");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_tenant_cannot_see_or_replay_parked_deliveries_or_read_the_event() {
    let server = Server::start(test_env(&[])).await;
    let receiver = Receiver::start().await;
    receiver.set_default("acme", Reply::Status(400));
    let sub = server
        .subscribe("acme", &receiver.url("acme"), &["a.*"])
        .await;
    let sub_id = sub["id"].as_str().expect("id").to_owned();
    let event_id = server.publish("acme", "a.b", json!({"n": 1})).await;
    let acme_parked = || async {
        let (status, body) = server
            .call("GET", "/v1/tenants/acme/dead-letters", None)
            .await;
        status == 200
            && body["items"]
                .as_array()
                .is_some_and(|items| items.iter().any(|d| d["event_id"] == json!(event_id)))
    };
    assert!(
        poll_until(Duration::from_secs(15), acme_parked).await,
        "acme's 400 delivery of {event_id} was never listed in acme's dead letters"
    );
    let attempts_before = receiver.count("acme");

    let mut failures = Vec::new();
    let (status, body) = server
        .call("GET", "/v1/tenants/globex/dead-letters", None)
        .await;
    if status != 200 || body["items"] != json!([]) {
        failures.push(format!(
            "globex's GET /dead-letters answered {status} {body} (expected 200 with no items)"
        ));
    }
    let path = "/v1/tenants/globex/dead-letters/replay";
    let a = send_json(
        &server,
        "POST",
        path,
        Some(json!({"subscription_id": sub_id})),
    )
    .await;
    if let Some(m) = problem_mismatch(&a, 404, None) {
        failures.push(format!("POST {path} with acme's subscription_id: {m}"));
    }
    let a = send_json(
        &server,
        "POST",
        path,
        Some(json!({"event_ids": [event_id]})),
    )
    .await;
    if a.status != 202 || a.body["replayed"] != json!(0) {
        failures.push(format!(
            "POST {path} with acme's event id answered {} {} (expected 202 replayed 0)",
            a.status, a.body
        ));
    }
    let event_path = format!("/v1/tenants/globex/events/{event_id}");
    let a = send_json(&server, "GET", &event_path, None).await;
    if let Some(m) = problem_mismatch(&a, 404, None) {
        failures.push(format!("GET {event_path}: {m}"));
    }
    // Nothing was replayed onto acme's lane, and acme still sees its parked
    // delivery.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    if receiver.count("acme") != attempts_before {
        failures.push(format!(
            "acme's endpoint got {} more attempts after globex's replay calls",
            receiver.count("acme") - attempts_before
        ));
    }
    if !acme_parked().await {
        failures.push("acme's parked delivery left its dead-letter list".to_owned());
    }
    assert_none_failed(&failures);
}

// --------------------------------------------- idempotent publish (G12)

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn publishing_the_same_id_twice_answers_the_original_and_delivers_once() {
    let server = Server::start(test_env(&[])).await;
    let receiver = Receiver::start().await;
    server
        .subscribe("acme", &receiver.url("idem"), &["a.*"])
        .await;
    let body = json!({"type": "a.b", "data": {}, "id": "order-42"});
    let (first_status, first) = server.call("POST", EVENTS, Some(body.clone())).await;
    assert_eq!(first_status, 202, "first publish: {first}");
    let (second_status, second) = server.call("POST", EVENTS, Some(body)).await;
    assert_eq!(second_status, 200, "second publish: {second}");
    assert_eq!(first["id"], json!("order-42"));
    assert_eq!(second["id"], json!("order-42"));
    assert_eq!(
        second["created_at"], first["created_at"],
        "created_at differs"
    );
    assert!(
        eventually(Duration::from_secs(10), || receiver.count("idem") >= 1).await,
        "order-42 was never delivered"
    );
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let got = receiver.requests("idem");
    assert_eq!(
        got.len(),
        1,
        "expected one delivery, got webhook-ids {:?}",
        got.iter()
            .map(|r| r.header("webhook-id"))
            .collect::<Vec<_>>()
    );
    assert_eq!(got[0].header("webhook-id"), "order-42");
}

// ------------------------------------------------------------ deletion

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_subscription_answers_404_to_get_and_to_a_second_delete() {
    let server = Server::start(test_env(&[])).await;
    let sub = server
        .subscribe("acme", "https://example.com/hook", &["a.*"])
        .await;
    let path = format!("{SUBS}/{}", sub["id"].as_str().expect("id"));
    let (status, body) = server.call("DELETE", &path, None).await;
    assert_eq!(status, 204, "first DELETE {path}: {body}");
    let mut failures = Vec::new();
    for method in ["GET", "DELETE"] {
        let a = send_json(&server, method, &path, None).await;
        if let Some(m) = problem_mismatch(&a, 404, None) {
            failures.push(format!("{method} {path} after DELETE: {m}"));
        }
    }
    assert_none_failed(&failures);
}
