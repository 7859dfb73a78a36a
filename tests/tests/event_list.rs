//! `GET /v1/tenants/{tenant}/events` on both backends: a tenant's events
//! newest first, by type and time, paged by cursor, other tenants' never.

use hooklane_tests::{on_both_backends, test_env, Backend, Server};
use serde_json::{json, Value};

fn ids(page: &Value) -> Vec<String> {
    page["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|e| e["id"].as_str().expect("id").to_owned())
        .collect()
}

async fn a_tenants_events_list_newest_first_by_type_and_time(backend: Backend) {
    let server = Server::start_on(backend, test_env(&[])).await;
    let mut published = Vec::new();
    for ty in ["a.x", "a.y", "a.x"] {
        published.push(server.publish("t", ty, json!({"n": 1})).await);
        // Distinct acceptance times (the list orders by time, then id).
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    server.publish("other", "a.x", json!({})).await;
    let newest_first: Vec<String> = published.iter().rev().cloned().collect();
    let (status, all) = server.call("GET", "/v1/tenants/t/events", None).await;
    assert_eq!(status, 200, "{all}");
    assert_eq!(ids(&all), newest_first);
    assert_eq!(all["items"][0]["type"], "a.x");
    assert!(all["items"][0]["created_at"].is_string());
    assert_eq!(all["next_cursor"], Value::Null);
    let (_, xs) = server
        .call("GET", "/v1/tenants/t/events?type=a.x", None)
        .await;
    assert_eq!(ids(&xs), vec![published[2].clone(), published[0].clone()]);
    let (_, first) = server
        .call("GET", "/v1/tenants/t/events?limit=2", None)
        .await;
    assert_eq!(ids(&first), newest_first[..2].to_vec());
    let cursor = first["next_cursor"].as_str().expect("a next page");
    let next = format!("/v1/tenants/t/events?limit=2&cursor={}", urlencode(cursor));
    let (status, second) = server.call("GET", &next, None).await;
    assert_eq!(status, 200, "{second}");
    assert_eq!(ids(&second), newest_first[2..].to_vec());
    assert_eq!(second["next_cursor"], Value::Null);
    let later = "2999-01-01T00:00:00Z";
    let (_, none) = server
        .call("GET", &format!("/v1/tenants/t/events?since={later}"), None)
        .await;
    assert_eq!(ids(&none), Vec::<String>::new());
    let (_, early) = server
        .call(
            "GET",
            "/v1/tenants/t/events?until=2000-01-01T00:00:00Z",
            None,
        )
        .await;
    assert_eq!(ids(&early), Vec::<String>::new());
    for (query, field) in [
        ("since=yesterday", "since"),
        ("until=1", "until"),
        ("type=a..b", "type"),
        ("cursor=nope", "cursor"),
        ("limit=0", "limit"),
    ] {
        let (status, body) = server
            .call("GET", &format!("/v1/tenants/t/events?{query}"), None)
            .await;
        assert_eq!(
            (status, body["field"].as_str()),
            (400, Some(field)),
            "{query}: {body}"
        );
    }
}

fn urlencode(s: &str) -> String {
    url::form_urlencoded::byte_serialize(s.as_bytes()).collect()
}

on_both_backends!(a_tenants_events_list_newest_first_by_type_and_time);
