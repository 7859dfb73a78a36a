//! Scoped access end to end, on both backends (G14, `../shared/API.md`
//! "Access: tenant keys and the portal"): a tenant key or portal session
//! reaches its own tenant only (404 elsewhere, 403 on the api-keys
//! routes), a read-only one answers 403 to every write and changes
//! nothing, a revoked key and an expired or tampered session answer 401.

use hooklane_tests::{on_both_backends, test_env, Backend, Server};
use serde_json::{json, Value};

/// The portal key the servers here sign sessions with, so a test can sign
/// one of its own (an expired one).
const PORTAL_KEY: &str = "portal-key-for-tests-0123456789abcdef";

async fn start(backend: Backend) -> Server {
    Server::start_on(backend, test_env(&[("HOOKLANE_PORTAL_KEY", PORTAL_KEY)])).await
}

/// A new key of `tenant`: its id and text.
async fn key(server: &Server, tenant: &str, read_only: bool) -> (String, String) {
    let (status, body) = server
        .call(
            "POST",
            &format!("/v1/tenants/{tenant}/api-keys"),
            Some(json!({"name": "ci", "read_only": read_only})),
        )
        .await;
    assert_eq!(status, 201, "{body}");
    let text = body["key"].as_str().expect("key text").to_owned();
    assert!(text.starts_with("hlk_"), "{text}");
    (body["id"].as_str().expect("id").to_owned(), text)
}

/// Every route of `tenant` a key may try, with a body where it takes one.
fn writes(tenant: &str, sub: &str) -> Vec<(&'static str, String, Option<Value>)> {
    let t = format!("/v1/tenants/{tenant}");
    vec![
        (
            "POST",
            format!("{t}/subscriptions"),
            Some(json!({"url": "https://example.com/h", "event_types": ["a.*"]})),
        ),
        (
            "PATCH",
            format!("{t}/subscriptions/{sub}"),
            Some(json!({"description": "changed"})),
        ),
        ("DELETE", format!("{t}/subscriptions/{sub}"), None),
        (
            "POST",
            format!("{t}/subscriptions/{sub}/rotate-secret"),
            None,
        ),
        ("POST", format!("{t}/subscriptions/{sub}/enable"), None),
        (
            "POST",
            format!("{t}/events"),
            Some(json!({"type": "a.b", "data": {}})),
        ),
        (
            "POST",
            format!("{t}/event-batches"),
            Some(json!({"events": [{"type": "a.b", "data": {}}]})),
        ),
        ("POST", format!("{t}/dead-letters/replay"), Some(json!({}))),
        ("POST", format!("{t}/portal-sessions"), Some(json!({}))),
    ]
}

fn reads(tenant: &str, sub: &str) -> Vec<String> {
    let t = format!("/v1/tenants/{tenant}");
    vec![
        format!("{t}/subscriptions"),
        format!("{t}/subscriptions/{sub}"),
        format!("{t}/subscriptions/{sub}/attempts"),
        format!("{t}/dead-letters"),
    ]
}

async fn a_tenant_key_reaches_its_own_tenant_only(backend: Backend) {
    let server = start(backend).await;
    let a_sub = server
        .subscribe("a", "https://example.com/a", &["a.*"])
        .await;
    let b_sub = server
        .subscribe("b", "https://example.com/b", &["a.*"])
        .await;
    let (a, b) = (a_sub["id"].as_str().unwrap(), b_sub["id"].as_str().unwrap());
    let (_, text) = key(&server, "a", false).await;
    let mut wrong = Vec::new();
    for path in reads("a", a) {
        let (status, body) = server.call_as(&text, "GET", &path, None).await;
        if status != 200 {
            wrong.push(format!("GET {path}: {status} {body}"));
        }
    }
    for path in reads("b", b) {
        let (status, _) = server.call_as(&text, "GET", &path, None).await;
        if status != 404 {
            wrong.push(format!("GET {path} of another tenant: {status}, not 404"));
        }
    }
    for (method, path, body) in writes("b", b) {
        let (status, _) = server.call_as(&text, method, &path, body).await;
        if status != 404 {
            wrong.push(format!(
                "{method} {path} of another tenant: {status}, not 404"
            ));
        }
    }
    let own_keys: [(&str, String, Option<Value>); 3] = [
        ("GET", "/v1/tenants/a/api-keys".into(), None),
        (
            "POST",
            "/v1/tenants/a/api-keys".into(),
            Some(json!({"name": "x"})),
        ),
        (
            "DELETE",
            "/v1/tenants/a/api-keys/key_01h0000000000000000000000a".into(),
            None,
        ),
    ];
    for (method, path, body) in own_keys {
        let (status, _) = server.call_as(&text, method, &path, body).await;
        if status != 403 {
            wrong.push(format!(
                "{method} {path} with a tenant key: {status}, not 403"
            ));
        }
    }
    for path in ["/metrics", "/status"] {
        let (status, _) = server.call_as(&text, "GET", path, None).await;
        if status != 403 {
            wrong.push(format!("GET {path} with a tenant key: {status}, not 403"));
        }
    }
    let secret = format!("/v1/tenants/a/subscriptions/{a}/secret");
    let (status, body) = server.call_as(&text, "GET", &secret, None).await;
    if status != 200 || body["secret"] != a_sub["secret"] {
        wrong.push(format!("its own subscription's secret: {status} {body}"));
    }
    // It writes to its own tenant.
    let (status, body) = server
        .call_as(
            &text,
            "POST",
            "/v1/tenants/a/events",
            Some(json!({"type": "a.b", "data": {}})),
        )
        .await;
    if status != 202 {
        wrong.push(format!("publish with its own key: {status} {body}"));
    }
    // Tenant b still has its one subscription.
    let (_, list) = server
        .call("GET", "/v1/tenants/b/subscriptions", None)
        .await;
    if list["items"].as_array().map(Vec::len) != Some(1) {
        wrong.push(format!("tenant b changed: {list}"));
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

async fn a_read_only_key_or_session_answers_403_to_every_write(backend: Backend) {
    let server = start(backend).await;
    let sub = server
        .subscribe("a", "https://example.com/a", &["a.*"])
        .await;
    let id = sub["id"].as_str().unwrap();
    let (_, text) = key(&server, "a", true).await;
    let (status, session) = server
        .call(
            "POST",
            "/v1/tenants/a/portal-sessions",
            Some(json!({"read_only": true})),
        )
        .await;
    assert_eq!(status, 201, "{session}");
    let session = session_token(&session);
    let mut wrong = Vec::new();
    for token in [&text, &session] {
        for (method, path, body) in writes("a", id) {
            let (status, _) = server.call_as(token, method, &path, body).await;
            if status != 403 {
                wrong.push(format!("{method} {path} read-only: {status}, not 403"));
            }
        }
        for path in reads("a", id) {
            let (status, _) = server.call_as(token, "GET", &path, None).await;
            if status != 200 {
                wrong.push(format!("GET {path} read-only: {status}, not 200"));
            }
        }
    }
    let (_, after) = server
        .call("GET", &format!("/v1/tenants/a/subscriptions/{id}"), None)
        .await;
    if after != sub_without_secret(&sub) {
        wrong.push(format!("the subscription changed: {after}"));
    }
    let (_, list) = server
        .call("GET", "/v1/tenants/a/subscriptions", None)
        .await;
    if list["items"].as_array().map(Vec::len) != Some(1) {
        wrong.push(format!("subscriptions changed: {list}"));
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// A subscription as `GET` shows it: the creation's answer without its
/// secret.
fn sub_without_secret(created: &Value) -> Value {
    let mut shown = created.clone();
    if let Some(o) = shown.as_object_mut() {
        o.remove("secret");
    }
    shown
}

fn session_token(minted: &Value) -> String {
    let url = minted["url"].as_str().expect("url");
    let (_, token) = url.split_once("/portal/#session=").expect("a portal link");
    assert!(token.starts_with("hlp_"), "{url}");
    token.to_owned()
}

async fn a_revoked_key_answers_401_from_the_next_request(backend: Backend) {
    let server = start(backend).await;
    let (id, text) = key(&server, "a", false).await;
    let (_, listed) = server.call("GET", "/v1/tenants/a/api-keys", None).await;
    assert_eq!(
        listed["items"].as_array().map(Vec::len),
        Some(1),
        "{listed}"
    );
    assert_eq!(listed["items"][0]["id"], id.as_str());
    assert!(
        listed["items"][0].get("key").is_none(),
        "listed with its text: {listed}"
    );
    let path = "/v1/tenants/a/subscriptions";
    assert_eq!(server.call_as(&text, "GET", path, None).await.0, 200);
    let revoke = format!("/v1/tenants/a/api-keys/{id}");
    assert_eq!(server.call("DELETE", &revoke, None).await.0, 204);
    assert_eq!(server.call_as(&text, "GET", path, None).await.0, 401);
    assert_eq!(server.call("DELETE", &revoke, None).await.0, 404);
    assert_eq!(
        server
            .call("DELETE", "/v1/tenants/b/api-keys/key_x", None)
            .await
            .0,
        404
    );
    let (_, listed) = server.call("GET", "/v1/tenants/a/api-keys", None).await;
    assert_eq!(listed["items"], json!([]));
}

async fn a_session_reaches_its_tenant_until_it_expires_and_not_when_tampered(backend: Backend) {
    let server = start(backend).await;
    let (_, key_text) = key(&server, "a", false).await;
    // A tenant key mints a session for its own tenant only.
    let minted = server
        .call_as(
            &key_text,
            "POST",
            "/v1/tenants/a/portal-sessions",
            Some(json!({"expires_in": 600})),
        )
        .await;
    assert_eq!(minted.0, 201, "{}", minted.1);
    let other = server
        .call_as(
            &key_text,
            "POST",
            "/v1/tenants/b/portal-sessions",
            Some(json!({})),
        )
        .await;
    assert_eq!(other.0, 404);
    let token = session_token(&minted.1);
    let subs = "/v1/tenants/a/subscriptions";
    assert_eq!(server.call_as(&token, "GET", subs, None).await.0, 200);
    let created = server
        .call_as(
            &token,
            "POST",
            subs,
            Some(json!({"url": "https://example.com/s", "event_types": ["a.*"]})),
        )
        .await;
    assert_eq!(created.0, 201, "{}", created.1);
    assert_eq!(
        server
            .call_as(&token, "GET", "/v1/tenants/b/subscriptions", None)
            .await
            .0,
        404
    );
    // A session cannot mint another.
    let again = server
        .call_as(
            &token,
            "POST",
            "/v1/tenants/a/portal-sessions",
            Some(json!({})),
        )
        .await;
    assert_eq!(again.0, 403);
    // Tampered: the payload says tenant b; expired: signed by the right key.
    let now = time::OffsetDateTime::now_utc().unix_timestamp();
    let key = PORTAL_KEY.as_bytes();
    let sign = |tenant: &str, expires| {
        hooklane_core::access::sign_session(
            key,
            &hooklane_core::access::Session {
                tenant: tenant.into(),
                read_only: false,
                expires,
                minted_by: None,
            },
        )
    };
    let forged = sign("b", now + 600);
    let (b_payload, _) = forged[4..].split_once('.').expect("payload.tag");
    let (_, a_tag) = token.split_once('.').expect("payload.tag");
    let tampered = format!("hlp_{b_payload}.{a_tag}");
    for (what, bad, says) in [
        ("tampered", tampered, "not valid"),
        ("expired", sign("a", now - 1), "has expired"),
    ] {
        for path in [subs, "/v1/tenants/b/subscriptions"] {
            let (status, body) = server.call_as(&bad, "GET", path, None).await;
            assert_eq!(status, 401, "a {what} session on {path}");
            let detail = body["detail"].as_str().unwrap_or_default();
            assert!(detail.contains(says), "a {what} session: {body}");
        }
    }
    // The session's life is bounded.
    for bad in [
        json!({"expires_in": 59}),
        json!({"expires_in": 604_801}),
        json!({"expires_in": "1"}),
    ] {
        let (status, body) = server
            .call("POST", "/v1/tenants/a/portal-sessions", Some(bad))
            .await;
        assert!(matches!(status, 400 | 422), "{status} {body}");
        assert_eq!(body["field"], "expires_in", "{body}");
    }
}

async fn the_portal_prefix_takes_tenant_credentials_only(backend: Backend) {
    let server = start(backend).await;
    let (_, text) = key(&server, "a", false).await;
    let (own, portal) = (
        "/v1/tenants/a/subscriptions",
        "/portal/api/v1/tenants/a/subscriptions",
    );
    assert_eq!(server.call("GET", own, None).await.0, 200);
    assert_eq!(
        server.call("GET", portal, None).await.0,
        401,
        "the operator token"
    );
    assert_eq!(server.call_as(&text, "GET", portal, None).await.0, 200);
    let body = json!({"url": "https://example.com/p", "event_types": ["*"]});
    assert_eq!(
        server.call_as(&text, "POST", portal, Some(body)).await.0,
        201
    );
    let other = "/portal/api/v1/tenants/b/subscriptions";
    assert_eq!(server.call_as(&text, "GET", other, None).await.0, 404);
    let keys = "/portal/api/v1/tenants/a/api-keys";
    assert_eq!(server.call_as(&text, "GET", keys, None).await.0, 403);
}

async fn a_session_a_key_minted_ends_with_the_key(backend: Backend) {
    let server = start(backend).await;
    let (id, text) = key(&server, "a", false).await;
    let (status, minted) = server
        .call_as(&text, "POST", "/v1/tenants/a/portal-sessions", None)
        .await;
    assert_eq!(status, 201, "{minted}");
    let session = session_token(&minted);
    let by_operator = server
        .call("POST", "/v1/tenants/a/portal-sessions", Some(json!({})))
        .await;
    let operator_minted = session_token(&by_operator.1);
    let subs = "/v1/tenants/a/subscriptions";
    assert_eq!(server.call_as(&session, "GET", subs, None).await.0, 200);
    let revoke = format!("/v1/tenants/a/api-keys/{id}");
    assert_eq!(server.call("DELETE", &revoke, None).await.0, 204);
    let (status, body) = server.call_as(&session, "GET", subs, None).await;
    assert_eq!(status, 401, "{body}");
    assert!(
        body["detail"]
            .as_str()
            .is_some_and(|d| d.contains("made this portal session was revoked")),
        "{body}"
    );
    assert_eq!(
        server.call_as(&operator_minted, "GET", subs, None).await.0,
        200
    );
}

async fn bad_key_and_session_requests_name_the_field_and_change_nothing(backend: Backend) {
    let server = start(backend).await;
    let keys = "/v1/tenants/a/api-keys";
    let sessions = "/v1/tenants/a/portal-sessions";
    let long = "x".repeat(201);
    let cases = [
        (keys, json!({}), "name"),
        (keys, json!({"name": ""}), "name"),
        (keys, json!({"name": "   "}), "name"),
        (keys, json!({"name": long}), "name"),
        (keys, json!({"name": "k", "read_only": "yes"}), "read_only"),
        (keys, json!({"name": "k", "scope": "all"}), "scope"),
        (sessions, json!({"read_only": 1}), "read_only"),
        (sessions, json!({"tenant": "b"}), "tenant"),
        (sessions, json!({"theme": "purple"}), "theme"),
        (sessions, json!({"brand_color": "red"}), "brand_color"),
        (sessions, json!({"brand_color": "#12345g"}), "brand_color"),
    ];
    let mut wrong = Vec::new();
    for (path, body, field) in cases {
        let (status, answer) = server.call("POST", path, Some(body.clone())).await;
        if !matches!(status, 400 | 422) || answer["field"] != field {
            wrong.push(format!("{path} {body}: {status} {answer}"));
        }
    }
    let (status, answer) = server.call("DELETE", &format!("{keys}/nope"), None).await;
    if status != 404 || answer["field"] != "id" {
        wrong.push(format!("DELETE {keys}/nope: {status} {answer}"));
    }
    let (_, listed) = server.call("GET", keys, None).await;
    if listed["items"] != json!([]) {
        wrong.push(format!("keys were made: {listed}"));
    }
    let looks = json!({"theme": "dark", "brand_color": "#2747B5"});
    let (status, minted) = server.call("POST", sessions, Some(looks)).await;
    let url = minted["url"].as_str().unwrap_or_default();
    if status != 201 || !url.contains("/portal/?theme=dark&brand=2747b5#session=hlp_") {
        wrong.push(format!("a themed link: {status} {minted}"));
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

on_both_backends!(
    bad_key_and_session_requests_name_the_field_and_change_nothing,
    a_session_a_key_minted_ends_with_the_key,
    the_portal_prefix_takes_tenant_credentials_only,
    a_tenant_key_reaches_its_own_tenant_only,
    a_read_only_key_or_session_answers_403_to_every_write,
    a_revoked_key_answers_401_from_the_next_request,
    a_session_reaches_its_tenant_until_it_expires_and_not_when_tampered,
);
