//! End-to-end tests of the API's edges (`../shared/API.md`), on both
//! backends: auth, bad input that answers a problem naming the field and
//! changes nothing (G11), and pagination. (Isolation, the egress guard at registration and idempotent
//! publish are in `api_isolation.rs`.)
//!
//! Table-driven tests check every case and then report all mismatches at
//! once, so one run shows every way the server departs from the contract.

use std::collections::HashSet;
use std::time::Duration;

use hooklane_tests::edges::*;
use hooklane_tests::{eventually, on_both_backends, test_env, Backend, Receiver, Server, TOKEN};
use serde_json::{json, Value};

// ---------------------------------------------------------------- auth

async fn a_missing_wrong_or_non_bearer_token_gets_401_problem_and_creates_nothing(
    backend: Backend,
) {
    let server = Server::start_on(backend, test_env(&[])).await;
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

async fn healthz_and_the_openapi_3_1_document_answer_without_a_token(backend: Backend) {
    let server = Server::start_on(backend, test_env(&[])).await;
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

async fn bad_subscription_inputs_answer_a_problem_naming_the_field_and_create_nothing(
    backend: Backend,
) {
    let server = Server::start_on(backend, test_env(&[])).await;
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

async fn bad_event_inputs_answer_a_problem_naming_the_field_and_publish_nothing(backend: Backend) {
    let server = Server::start_on(backend, test_env(&[])).await;
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

async fn patch_with_an_empty_object_answers_400_and_changes_nothing(backend: Backend) {
    let server = Server::start_on(backend, test_env(&[])).await;
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

async fn patch_with_an_unknown_field_answers_400_naming_it_and_changes_nothing(backend: Backend) {
    let server = Server::start_on(backend, test_env(&[])).await;
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

async fn a_bad_limit_or_cursor_answers_400_naming_it(backend: Backend) {
    let server = Server::start_on(backend, test_env(&[])).await;
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

async fn paging_five_subscriptions_by_two_gives_2_2_1_items_each_once(backend: Backend) {
    let server = Server::start_on(backend, test_env(&[])).await;
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

/// The scheme's name is case-insensitive (RFC 9110 §11.1), and each 401
/// says what is wrong with what was sent.
async fn a_lower_case_bearer_is_taken_and_each_401_says_why(backend: Backend) {
    let server = Server::start_on(backend, test_env(&[])).await;
    for scheme in ["bearer", "BEARER", "Bearer"] {
        let auth = format!("{scheme} {TOKEN}");
        let a = send(&server, "GET", SUBS, None, Some(&auth)).await;
        assert_eq!(a.status, 200, "{scheme}: {:?}", a.body);
    }
    let (_, key) = server
        .call(
            "POST",
            "/v1/tenants/acme/api-keys",
            Some(json!({"name": "k"})),
        )
        .await;
    let (id, key) = (
        key["id"].as_str().expect("id"),
        key["key"].as_str().expect("key"),
    );
    let revoke = format!("/v1/tenants/acme/api-keys/{id}");
    assert_eq!(server.call("DELETE", &revoke, None).await.0, 204);
    let revoked = format!("Bearer {key}");
    let operator_on_portal = format!("Bearer {TOKEN}");
    let portal_subs = format!("/portal/api{SUBS}");
    let mut failures = Vec::new();
    for (what, path, auth, says) in [
        ("no header", SUBS, None, "send Authorization: Bearer"),
        ("Basic", SUBS, Some("Basic dXNlcjpwYXNz"), "Bearer scheme"),
        (
            "a wrong token",
            SUBS,
            Some("Bearer wrong-token-0123456789abcdef"),
            "not this deployment's API token",
        ),
        ("a revoked key", SUBS, Some(revoked.as_str()), "revoked"),
        (
            "a tampered session",
            SUBS,
            Some("Bearer hlp_e30.AAAA"),
            "portal session is not valid",
        ),
        (
            "the API token on the portal's API",
            portal_subs.as_str(),
            Some(operator_on_portal.as_str()),
            "takes a tenant key",
        ),
    ] {
        let a = send(&server, "GET", path, None, auth).await;
        let detail = a.body["detail"].as_str().unwrap_or_default();
        if a.status != 401 || !detail.contains(says) {
            failures.push(format!(
                "{what}: {} {detail:?}, wanted 401 saying {says:?}",
                a.status
            ));
        }
    }
    assert_none_failed(&failures);
}

on_both_backends!(
    a_missing_wrong_or_non_bearer_token_gets_401_problem_and_creates_nothing,
    a_lower_case_bearer_is_taken_and_each_401_says_why,
    healthz_and_the_openapi_3_1_document_answer_without_a_token,
    bad_subscription_inputs_answer_a_problem_naming_the_field_and_create_nothing,
    bad_event_inputs_answer_a_problem_naming_the_field_and_publish_nothing,
    patch_with_an_empty_object_answers_400_and_changes_nothing,
    patch_with_an_unknown_field_answers_400_naming_it_and_changes_nothing,
    a_bad_limit_or_cursor_answers_400_naming_it,
    paging_five_subscriptions_by_two_gives_2_2_1_items_each_once,
);
