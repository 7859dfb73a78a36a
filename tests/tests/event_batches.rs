//! `POST /event-batches` on both backends: events accepted in the order
//! given, an event refused alone without refusing the rest, idempotency per
//! event id, and the bounds (100 events, 1 MiB) refusing the whole batch.

use std::time::Duration;

use hooklane_tests::edges::send_raw;
use hooklane_tests::{eventually, on_both_backends, test_env, Backend, Receiver, Server};
use serde_json::{json, Value};

const BATCHES: &str = "/v1/tenants/acme/event-batches";

async fn batch(server: &Server, events: Vec<Value>) -> (u16, Value) {
    server
        .call("POST", BATCHES, Some(json!({ "events": events })))
        .await
}

/// The `data.n` of each request the receiver got, in arrival order.
fn arrived(rx: &Receiver) -> Vec<i64> {
    rx.requests("hook")
        .iter()
        .filter_map(|r| serde_json::from_slice::<Value>(&r.body).ok())
        .filter_map(|b| b["data"]["n"].as_i64())
        .collect()
}

async fn subscribed(backend: Backend) -> (Server, Receiver) {
    let server = Server::start_on(backend, test_env(&[])).await;
    let rx = Receiver::start().await;
    server.subscribe("acme", &rx.url("hook"), &["*"]).await;
    (server, rx)
}

async fn a_batch_is_accepted_in_the_order_given_and_delivered_in_it(backend: Backend) {
    let (server, rx) = subscribed(backend).await;
    // Half with ids of the publisher's, in descending order: the order
    // given still wins over the ids' (the archive reads acceptance order
    // back as time, then id).
    let events = (0..20)
        .map(|n| match n % 2 {
            0 => json!({ "type": "order.placed", "data": { "n": n } }),
            _ => json!({ "id": format!("ord_{:02}", 99 - n), "type": "order.placed", "data": { "n": n } }),
        })
        .collect();
    let (status, body) = batch(&server, events).await;
    assert_eq!(status, 200, "{body}");
    let items = body["items"].as_array().expect("items");
    assert_eq!(items.len(), 20);
    for item in items {
        assert_eq!(item["status"], 202, "{item}");
        assert_eq!(item["type"], "order.placed");
        assert!(item["id"].as_str().is_some());
    }
    let created: Vec<&str> = items
        .iter()
        .map(|i| i["created_at"].as_str().expect("created_at"))
        .collect();
    assert!(
        created.windows(2).all(|w| w[0] < w[1]),
        "accepted in order, each a millisecond after the one before: {created:?}"
    );
    assert!(
        eventually(Duration::from_secs(60), || arrived(&rx).len() >= 20).await,
        "all 20 arrive: {:?}",
        arrived(&rx)
    );
    // One lane: acceptance order is delivery order.
    assert_eq!(arrived(&rx), (0..20).collect::<Vec<_>>());
}

async fn an_event_refused_alone_does_not_refuse_the_rest(backend: Backend) {
    let (server, rx) = subscribed(backend).await;
    let big = "x".repeat(300 * 1024);
    let events = vec![
        json!({ "type": "a.b", "data": { "n": 1 } }),
        json!({ "type": "not a type!", "data": { "n": 2 } }),
        json!({ "type": "a.b" }),
        json!({ "type": "a.b", "data": { "n": 4 }, "colour": "red" }),
        json!({ "type": "a.b", "data": { "n": 5, "big": big } }),
        json!({ "type": "a.b", "data": { "n": 6 } }),
    ];
    let (status, body) = batch(&server, events).await;
    assert_eq!(status, 200, "{body}");
    let items = body["items"].as_array().expect("items");
    let statuses: Vec<u64> = items
        .iter()
        .map(|i| i["status"].as_u64().expect("status"))
        .collect();
    assert_eq!(statuses, vec![202, 422, 400, 400, 413, 202]);
    assert_eq!(items[1]["problem"]["field"], "type");
    assert_eq!(items[2]["problem"]["field"], "data");
    assert_eq!(items[3]["problem"]["field"], "colour");
    assert_eq!(items[4]["problem"]["status"], 413);
    // `data` no reader can use (a lone surrogate) is refused with its
    // event alone.
    let raw = br#"{"events":[{"type":"a.b","data":{"n":7}},{"type":"a.b","data":"\uD800"}]}"#;
    let a = send_raw(&server, "POST", BATCHES, raw).await;
    assert_eq!(a.status, 200, "{}", a.body);
    assert_eq!(a.body["items"][0]["status"], 202, "{}", a.body);
    assert_eq!(a.body["items"][1]["status"], 422, "{}", a.body);
    assert_eq!(a.body["items"][1]["problem"]["field"], "data", "{}", a.body);
    assert!(
        eventually(Duration::from_secs(60), || arrived(&rx).len() >= 3).await,
        "the three accepted events arrive"
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        arrived(&rx),
        vec![1, 6, 7],
        "only the accepted events arrive"
    );
}

async fn event_ids_are_idempotent_within_a_batch_and_across_batches(backend: Backend) {
    let (server, rx) = subscribed(backend).await;
    let first = json!({ "id": "ord_1", "type": "a.b", "data": { "n": 1 } });
    let (status, body) = batch(&server, vec![first.clone(), first.clone()]).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["items"][0]["status"], 202);
    assert_eq!(body["items"][1]["status"], 200, "{body}");
    assert_eq!(
        body["items"][0]["created_at"],
        body["items"][1]["created_at"]
    );
    // Again in a later batch, and through `POST /events`.
    let (_, again) = batch(&server, vec![first.clone()]).await;
    assert_eq!(again["items"][0]["status"], 200, "{again}");
    assert_eq!(again["items"][0]["id"], "ord_1");
    let (status, _) = server
        .call("POST", "/v1/tenants/acme/events", Some(first))
        .await;
    assert_eq!(status, 200);
    assert!(eventually(Duration::from_secs(60), || !arrived(&rx).is_empty()).await);
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(arrived(&rx), vec![1], "delivered once");
}

async fn a_body_that_is_not_a_batch_accepts_nothing(backend: Backend) {
    let (server, rx) = subscribed(backend).await;
    let event = |n: usize| json!({ "id": format!("b_{n}"), "type": "a.b", "data": { "n": n } });
    let mut failures = Vec::new();
    let check = |what: &str, status: u16, body: &Value, want: u16, field: Option<&str>| {
        (status != want || field.is_some_and(|f| body["field"] != f))
            .then(|| format!("{what}: {status} {body}"))
    };
    let (s, b) = batch(&server, (0..101).map(event).collect()).await;
    failures.extend(check("101 events", s, &b, 422, Some("events")));
    let (s, b) = batch(&server, vec![]).await;
    failures.extend(check("no events", s, &b, 422, Some("events")));
    let (s, b) = batch(&server, vec![event(200), json!("not an event")]).await;
    failures.extend(check(
        "an element not an object",
        s,
        &b,
        422,
        Some("events"),
    ));
    let (s, b) = server
        .call("POST", BATCHES, Some(json!({ "events": event(201) })))
        .await;
    failures.extend(check("events not an array", s, &b, 422, Some("events")));
    let (s, b) = server.call("POST", BATCHES, Some(json!({}))).await;
    failures.extend(check("no events member", s, &b, 400, Some("events")));
    // Over 1 MiB in all, though each event is under 256 KiB.
    let big = "x".repeat(200 * 1024);
    let heavy: Vec<Value> = (300..306)
        .map(|n| json!({ "id": format!("b_{n}"), "type": "a.b", "data": { "n": n, "big": big } }))
        .collect();
    let raw = serde_json::to_vec(&json!({ "events": heavy })).expect("json");
    assert!(raw.len() > 1024 * 1024);
    let a = send_raw(&server, "POST", BATCHES, &raw).await;
    if a.status != 413 {
        failures.push(format!("a 1.2 MiB batch: {}", a.status));
    }
    // Exactly at the bound of 100 events it is a batch.
    let (s, b) = batch(&server, (400..500).map(event).collect()).await;
    failures.extend(check("100 events", s, &b, 200, None));
    assert!(failures.is_empty(), "{failures:#?}");
    for id in ["b_0", "b_100", "b_200", "b_201", "b_300"] {
        let (status, _) = server
            .call("GET", &format!("/v1/tenants/acme/events/{id}"), None)
            .await;
        assert_eq!(status, 404, "{id} of a refused batch was accepted");
    }
    assert!(
        eventually(Duration::from_secs(120), || arrived(&rx).len() >= 100).await,
        "the 100-event batch arrives"
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(arrived(&rx), (400..500).collect::<Vec<i64>>());
}

on_both_backends!(
    a_batch_is_accepted_in_the_order_given_and_delivered_in_it,
    an_event_refused_alone_does_not_refuse_the_rest,
    event_ids_are_idempotent_within_a_batch_and_across_batches,
    a_body_that_is_not_a_batch_accepts_nothing,
);
