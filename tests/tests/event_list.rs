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

/// The catalog lists what an operator registered, what subscriptions
/// name exactly and what recent events carry, each once; only the
/// operator registers; bad input names its field and changes nothing.
async fn the_event_type_catalog_merges_registrations_subscriptions_and_events(backend: Backend) {
    let server = Server::start_on(backend, test_env(&[])).await;
    let types = "/v1/tenants/acme/event-types";
    let paid = format!("{types}/invoice.paid");
    let body = json!({"description": "An invoice was paid", "example": {"invoice": "in_1", "amount": 4200}});
    let (status, entry) = server.call("PUT", &paid, Some(body)).await;
    assert_eq!(status, 200, "{entry}");
    assert_eq!(entry["example"]["amount"], 4200, "{entry}");
    for (path, body, field) in [
        (
            paid.clone(),
            json!({"description": "x".repeat(1001)}),
            "description",
        ),
        (format!("{types}/invoice.*"), json!({}), "name"),
        (paid.clone(), json!({"schema": {}}), "schema"),
    ] {
        let (status, problem) = server.call("PUT", &path, Some(body)).await;
        assert!(matches!(status, 400 | 422), "{path}: {status} {problem}");
        assert_eq!(problem["field"], field, "{problem}");
    }
    let url = "https://example.com/hook";
    let sub = json!({"url": url, "event_types": ["invoice.created", "order.*"]});
    assert_eq!(
        server
            .call("POST", "/v1/tenants/acme/subscriptions", Some(sub))
            .await
            .0,
        201
    );
    server.publish("acme", "order.shipped", json!({})).await;
    server.publish("other", "secret.type", json!({})).await;
    let (status, list) = server.call("GET", types, None).await;
    assert_eq!(status, 200, "{list}");
    let names: Vec<&str> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["name"].as_str())
        .collect();
    assert_eq!(
        names,
        ["invoice.created", "invoice.paid", "order.shipped"],
        "{list}"
    );
    let item = |name: &str| {
        list["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["name"] == name)
            .unwrap()
            .clone()
    };
    assert_eq!(item("invoice.paid")["description"], "An invoice was paid");
    assert_eq!(item("invoice.paid")["registered"], true);
    assert_eq!(item("invoice.created")["subscriptions"], 1);
    assert_eq!(item("invoice.created")["registered"], false);
    assert!(item("order.shipped")["last_seen_at"].is_string(), "{list}");

    // A tenant key reads the catalog and may not write it.
    let (_, key) = server
        .call(
            "POST",
            "/v1/tenants/acme/api-keys",
            Some(json!({"name": "k"})),
        )
        .await;
    let key = key["key"].as_str().unwrap();
    assert_eq!(server.call_as(key, "GET", types, None).await.0, 200);
    let (status, _) = server
        .call_as(key, "PUT", &paid, Some(json!({"description": "mine"})))
        .await;
    assert_eq!(status, 403);
    assert_eq!(server.call_as(key, "DELETE", &paid, None).await.0, 403);
    assert_eq!(server.call("DELETE", &paid, None).await.0, 204);
    assert_eq!(server.call("DELETE", &paid, None).await.0, 404);
    let (_, list) = server.call("GET", types, None).await;
    assert!(!list.to_string().contains("invoice.paid"), "{list}");
}

on_both_backends!(
    a_tenants_events_list_newest_first_by_type_and_time,
    the_event_type_catalog_merges_registrations_subscriptions_and_events,
);
