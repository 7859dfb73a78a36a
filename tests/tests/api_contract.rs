//! The choices the OpenAPI document states where API.md is silent, through
//! the running server: `null` only where it is allowed, unknown query
//! parameters refused, cursors in the documented forms, event ids `.` and
//! `..` refused, and every 404 naming the id at fault. Each refusal changes
//! nothing.

use hooklane_tests::{test_env, Server, TOKEN};
use serde_json::{json, Value};

const SUBS: &str = "/v1/tenants/acme/subscriptions";
const EVENTS: &str = "/v1/tenants/acme/events";
const URL: &str = "https://example.com/hook";

/// An authorized request with a raw body; the status and JSON answer.
async fn send(server: &Server, method: &str, path: &str, body: Option<&str>) -> (u16, Value) {
    let method = reqwest::Method::from_bytes(method.as_bytes()).expect("method");
    let mut req = server
        .http
        .request(method, format!("{}{path}", server.base))
        .bearer_auth(TOKEN);
    if let Some(b) = body {
        req = req
            .header("content-type", "application/json")
            .body(b.to_owned());
    }
    let resp = req.send().await.expect("request");
    let status = resp.status().as_u16();
    let text = resp.text().await.expect("body");
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_requests_answer_the_documented_status_naming_the_field_and_change_nothing() {
    let server = Server::start(test_env(&[])).await;
    let sub = server.subscribe("acme", URL, &["a.*"]).await;
    let id = sub["id"].as_str().expect("id").to_owned();
    let one = format!("{SUBS}/{id}");
    let create = |extra: &str| format!(r#"{{"url":"{URL}","event_types":["a.*"]{extra}}}"#);
    let cases: Vec<(&str, String, Option<String>, u16, &str)> = vec![
        (
            "POST",
            SUBS.into(),
            Some(create(r#","secret":null"#)),
            400,
            "secret",
        ),
        (
            "POST",
            SUBS.into(),
            Some(create(r#","metadata":null"#)),
            400,
            "metadata",
        ),
        (
            "POST",
            SUBS.into(),
            Some(r#"{"url":null,"event_types":["a.*"]}"#.into()),
            400,
            "url",
        ),
        (
            "POST",
            SUBS.into(),
            Some(create(r#","url":"https://example.org/""#)),
            400,
            "url",
        ),
        (
            "POST",
            SUBS.into(),
            Some(create(&format!(r#","description":"{}""#, "é".repeat(1025)))),
            422,
            "description",
        ),
        (
            "PATCH",
            one.clone(),
            Some(r#"{"event_types":null}"#.into()),
            400,
            "event_types",
        ),
        (
            "POST",
            EVENTS.into(),
            Some(r#"{"type":"a.b","data":{},"id":null}"#.into()),
            400,
            "id",
        ),
        (
            "POST",
            EVENTS.into(),
            Some(r#"{"type":"a.b","data":{},"id":"."}"#.into()),
            422,
            "id",
        ),
        (
            "POST",
            EVENTS.into(),
            Some(r#"{"type":"a.b","data":{},"id":".."}"#.into()),
            422,
            "id",
        ),
        ("GET", format!("{SUBS}?colour=red"), None, 400, "colour"),
        (
            "GET",
            format!("{SUBS}?cursor=c3ViXzAx"),
            None,
            400,
            "cursor",
        ),
        (
            "GET",
            format!("{one}/attempts?cursor=-1"),
            None,
            400,
            "cursor",
        ),
        (
            "GET",
            format!("{one}/attempts?cursor=9234567890123456789"),
            None,
            400,
            "cursor",
        ),
        (
            "GET",
            "/v1/tenants/acme/dead-letters?limit=%2B5".into(),
            None,
            400,
            "limit",
        ),
        (
            "GET",
            "/v1/tenants/acme/subscriptions/sub_nope".into(),
            None,
            404,
            "id",
        ),
        (
            "GET",
            "/v1/tenants/acme/subscriptions/nope".into(),
            None,
            404,
            "id",
        ),
        ("GET", format!("{EVENTS}/nope"), None, 404, "id"),
        (
            "POST",
            "/v1/tenants/acme/dead-letters/replay".into(),
            Some(r#"{"subscription_id":"nope"}"#.into()),
            422,
            "subscription_id",
        ),
        (
            "POST",
            "/v1/tenants/acme/dead-letters/replay".into(),
            Some(r#"{"subscription_id":"sub_nope"}"#.into()),
            404,
            "subscription_id",
        ),
        (
            "POST",
            "/v1/tenants/acme/dead-letters/replay".into(),
            Some(r#"{"event_ids":null}"#.into()),
            400,
            "event_ids",
        ),
    ];
    let mut failures = Vec::new();
    for (method, path, body, status, field) in &cases {
        let (got, problem) = send(&server, method, path, body.as_deref()).await;
        if got != *status || problem["field"] != *field {
            failures.push(format!(
                "{method} {path} {}: {got} {problem} (expected {status} naming {field})",
                body.as_deref().unwrap_or("")
            ));
        }
    }
    let (_, list) = server.call("GET", SUBS, None).await;
    if list["items"].as_array().map(Vec::len) != Some(1)
        || list["items"][0]["event_types"] != json!(["a.*"])
    {
        failures.push(format!(
            "refused requests changed the subscriptions: {list}"
        ));
    }
    for refused in [".", "..", "nope"] {
        let (status, _) = send(&server, "GET", &format!("{EVENTS}/{refused}"), None).await;
        if status == 200 {
            failures.push(format!("event {refused:?} exists"));
        }
    }
    assert!(
        failures.is_empty(),
        "{} case(s) failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn description_null_clears_it_and_cursors_page_in_the_documented_forms() {
    let server = Server::start(test_env(&[])).await;
    let (status, sub) = send(
        &server,
        "POST",
        SUBS,
        Some(&format!(
            r#"{{"url":"{URL}","event_types":["a.*"],"description":"first"}}"#
        )),
    )
    .await;
    assert_eq!(status, 201, "{sub}");
    let one = format!("{SUBS}/{}", sub["id"].as_str().expect("id"));
    let (status, patched) = send(&server, "PATCH", &one, Some(r#"{"description":null}"#)).await;
    assert_eq!(
        (status, &patched["description"]),
        (200, &Value::Null),
        "{patched}"
    );
    let (_, read) = server.call("GET", &one, None).await;
    assert!(read["description"].is_null(), "{read}");

    server.subscribe("acme", URL, &["b.*"]).await;
    let (status, page) = send(&server, "GET", &format!("{SUBS}?limit=1&cursor="), None).await;
    assert_eq!(status, 200, "an empty cursor is the first page: {page}");
    let cursor = page["next_cursor"]
        .as_str()
        .expect("a second page")
        .to_owned();
    assert!(
        cursor.starts_with("sub_"),
        "a subscription cursor is an id: {cursor}"
    );
    let (status, next) = send(
        &server,
        "GET",
        &format!("{SUBS}?limit=1&cursor={cursor}"),
        None,
    )
    .await;
    assert_eq!(status, 200, "{next}");
    assert_eq!(next["items"].as_array().map(Vec::len), Some(1));
    assert_ne!(next["items"][0]["id"], page["items"][0]["id"]);
    assert!(next["next_cursor"].is_null(), "{next}");
}
