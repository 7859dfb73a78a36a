//! One subscription's deliveries end to end through `serve`: signatures
//! (checked by an independent Standard Webhooks implementation), the retry
//! ladder, classification, `Retry-After`, parking, replay, rotation, the
//! attempt log and event status. Ladders are compressed (0s,1s,2s); bounds
//! are generous and assert order, not milliseconds.

use std::time::Duration;

use hooklane_tests::{eventually, on_both_backends, test_env, Backend, Receiver, Reply, Server};
use serde_json::{json, Value};

const WAIT: Duration = Duration::from_secs(20);

async fn setup(backend: Backend, extra: &[(&str, &str)]) -> (Server, Receiver) {
    (
        Server::start_on(backend, test_env(extra)).await,
        Receiver::start().await,
    )
}

fn secret_of(sub: &Value) -> String {
    sub["secret"].as_str().expect("secret").to_owned()
}

fn header_map(r: &hooklane_tests::Recorded) -> axum::http::HeaderMap {
    r.headers.clone()
}

async fn a_delivery_verifies_with_an_independent_standard_webhooks_implementation(
    backend: Backend,
) {
    let (server, rx) = setup(backend, &[]).await;
    let sub = server.subscribe("acme", &rx.url("a"), &["invoice.*"]).await;
    let id = server
        .publish("acme", "invoice.paid", json!({"amount": 42}))
        .await;
    assert!(eventually(WAIT, || rx.count("a") == 1).await);
    let req = &rx.requests("a")[0];
    let wh = standardwebhooks::Webhook::new(&secret_of(&sub)).expect("secret");
    wh.verify(&req.body, &header_map(req))
        .expect("signature verifies");
    assert_eq!(req.header("webhook-id"), id);
    assert_eq!(req.header("webhook-attempt"), "1");
    assert_eq!(req.header("content-type"), "application/json");
    assert!(req.header("user-agent").starts_with("hooklane/"));
    let body: Value = serde_json::from_slice(&req.body).unwrap();
    assert_eq!(body["type"], "invoice.paid");
    assert_eq!(body["data"], json!({"amount": 42}));
    assert!(body["timestamp"].is_string());
}

async fn retries_follow_the_ladder_with_the_same_id_and_body_then_park(backend: Backend) {
    let (server, rx) = setup(backend, &[("HOOKLANE_RETRY_SCHEDULE", "0s,2s,6s")]).await;
    rx.set_default("a", Reply::Status(500));
    let sub = server.subscribe("acme", &rx.url("a"), &["*"]).await;
    let id = server
        .publish("acme", "order.created", json!({"n": 1}))
        .await;
    assert!(
        eventually(WAIT, || rx.count("a") == 3).await,
        "three attempts"
    );
    let reqs = rx.requests("a");
    let attempts: Vec<String> = reqs.iter().map(|r| r.header("webhook-attempt")).collect();
    assert_eq!(attempts, ["1", "2", "3"]);
    for r in &reqs {
        assert_eq!(r.header("webhook-id"), id);
        assert_eq!(r.body, reqs[0].body, "same body bytes on every attempt");
    }
    // Gaps of 2 s and 6 s, each within the ±10 % jitter, bounded on both
    // sides with slack for scheduling: on AWS a message comes back by
    // whole seconds of visibility, up to half a second early, plus a
    // receive cycle. A ladder twice as long (4 s, 12 s) or half as long
    // (1 s, 3 s) falls outside.
    let gap1 = reqs[1].at - reqs[0].at;
    let gap2 = reqs[2].at - reqs[1].at;
    let within = |gap: Duration, low: u64, high: u64| {
        gap >= Duration::from_millis(low) && gap < Duration::from_millis(high)
    };
    assert!(within(gap1, 1_250, 3_750), "gap1 {gap1:?}");
    assert!(within(gap2, 4_800, 9_000), "gap2 {gap2:?}");
    let sub_id = sub["id"].as_str().unwrap();
    assert!(
        wait_parked(&server, sub_id, 1).await,
        "parked after the last attempt"
    );
    let (_, dl) = server
        .call("GET", "/v1/tenants/acme/dead-letters", None)
        .await;
    let item = &dl["items"][0];
    assert_eq!(item["event_id"], id.as_str());
    assert_eq!(item["attempts"], 3);
    assert_eq!(item["last_status_code"], 500);
    assert!(item["reason"].as_str().unwrap().contains("3 attempts"));
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert_eq!(rx.count("a"), 3, "no attempt after parking");
}

async fn wait_parked(server: &Server, sub_id: &str, n: usize) -> bool {
    for _ in 0..400 {
        let (_, dl) = server
            .call(
                "GET",
                &format!("/v1/tenants/acme/dead-letters?subscription_id={sub_id}"),
                None,
            )
            .await;
        if dl["items"].as_array().map(|a| a.len()) == Some(n) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

async fn a_400_is_parked_after_one_attempt_and_replay_delivers_with_a_fresh_ladder(
    backend: Backend,
) {
    let (server, rx) = setup(backend, &[]).await;
    rx.script("a", vec![Reply::Body(400, "bad payload".into())]);
    let sub = server.subscribe("acme", &rx.url("a"), &["*"]).await;
    let sub_id = sub["id"].as_str().unwrap();
    let id = server.publish("acme", "x.y", json!({})).await;
    assert!(wait_parked(&server, sub_id, 1).await);
    assert_eq!(rx.count("a"), 1, "not retried");
    let (_, dl) = server
        .call("GET", "/v1/tenants/acme/dead-letters", None)
        .await;
    assert!(dl["items"][0]["reason"].as_str().unwrap().contains("400"));
    let (status, _) = server
        .call("GET", &format!("/v1/tenants/acme/events/{id}"), None)
        .await;
    assert_eq!(status, 200);

    let (status, body) = server
        .call(
            "POST",
            "/v1/tenants/acme/dead-letters/replay",
            Some(json!({"subscription_id": sub_id})),
        )
        .await;
    assert_eq!((status, body["replayed"].as_u64()), (202, Some(1)));
    assert!(
        eventually(WAIT, || rx.count("a") == 2).await,
        "replay delivers"
    );
    let second = &rx.requests("a")[1];
    assert_eq!(second.header("webhook-id"), id);
    assert_eq!(second.header("webhook-attempt"), "1", "a fresh ladder");
    assert!(wait_parked(&server, sub_id, 0).await, "no longer parked");
    assert!(delivery_state_becomes(&server, &id, "delivered").await);
}

async fn delivery_state_becomes(server: &Server, event_id: &str, state: &str) -> bool {
    for _ in 0..400 {
        let (_, ev) = server
            .call("GET", &format!("/v1/tenants/acme/events/{event_id}"), None)
            .await;
        if ev["deliveries"][0]["state"] == state {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

async fn retry_after_on_429_replaces_the_ladder_delay(backend: Backend) {
    let (server, rx) = setup(backend, &[("HOOKLANE_RETRY_SCHEDULE", "0s,100ms,100ms")]).await;
    rx.script("a", vec![Reply::RetryAfter(429, "3".into())]);
    server.subscribe("acme", &rx.url("a"), &["*"]).await;
    server.publish("acme", "x.y", json!({})).await;
    assert!(eventually(WAIT, || rx.count("a") == 2).await);
    let reqs = rx.requests("a");
    let gap = reqs[1].at - reqs[0].at;
    assert!(
        gap >= Duration::from_millis(2900),
        "waited {gap:?}, not the 100ms ladder step"
    );
    assert_eq!(reqs[1].header("webhook-attempt"), "2");
}

async fn redirects_are_not_followed_and_park(backend: Backend) {
    let (server, rx) = setup(backend, &[]).await;
    // 302 (which a following client turns into a GET) and 307 (which it
    // sends again as a POST), each pointing at an endpoint that records
    // any method.
    rx.set_default("a", Reply::Redirect(302, rx.url("elsewhere")));
    rx.set_default("b", Reply::Redirect(307, rx.url("elsewhere")));
    let a = server.subscribe("acme", &rx.url("a"), &["*"]).await;
    let b = server.subscribe("acme", &rx.url("b"), &["*"]).await;
    server.publish("acme", "x.y", json!({})).await;
    assert!(wait_parked(&server, a["id"].as_str().unwrap(), 1).await);
    assert!(wait_parked(&server, b["id"].as_str().unwrap(), 1).await);
    assert_eq!((rx.count("a"), rx.count("b")), (1, 1));
    assert_eq!(rx.count("elsewhere"), 0, "no redirect was followed");
}

async fn after_rotation_both_secrets_sign_and_either_verifies(backend: Backend) {
    let (server, rx) = setup(backend, &[]).await;
    let sub = server.subscribe("acme", &rx.url("a"), &["*"]).await;
    let sub_id = sub["id"].as_str().unwrap();
    let (status, rotated) = server
        .call(
            "POST",
            &format!("/v1/tenants/acme/subscriptions/{sub_id}/rotate-secret"),
            None,
        )
        .await;
    assert_eq!(status, 200);
    let new_secret = rotated["secret"].as_str().unwrap();
    assert_ne!(new_secret, secret_of(&sub));
    server.publish("acme", "x.y", json!({})).await;
    assert!(eventually(WAIT, || rx.count("a") == 1).await);
    let req = &rx.requests("a")[0];
    assert_eq!(req.header("webhook-signature").split(' ').count(), 2);
    for secret in [new_secret.to_owned(), secret_of(&sub)] {
        let wh = standardwebhooks::Webhook::new(&secret).unwrap();
        wh.verify(&req.body, &header_map(req)).expect("verifies");
    }
}

async fn the_attempt_log_lists_attempts_newest_first_with_a_capped_excerpt(backend: Backend) {
    let (server, rx) = setup(backend, &[("HOOKLANE_RETRY_SCHEDULE", "0s,200ms")]).await;
    rx.script("a", vec![Reply::Body(503, "x".repeat(5000))]);
    let sub = server.subscribe("acme", &rx.url("a"), &["*"]).await;
    let sub_id = sub["id"].as_str().unwrap();
    let id = server.publish("acme", "x.y", json!({})).await;
    assert!(eventually(WAIT, || rx.count("a") == 2).await);
    let path = format!("/v1/tenants/acme/subscriptions/{sub_id}/attempts");
    let mut items = Vec::new();
    for _ in 0..200 {
        let (_, body) = server.call("GET", &path, None).await;
        items = body["items"].as_array().cloned().unwrap_or_default();
        if items.len() == 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(items.len(), 2);
    assert_eq!(items[0]["attempt"], 2);
    assert_eq!(items[0]["outcome"], "delivered");
    assert_eq!(items[1]["attempt"], 1);
    assert_eq!(items[1]["status_code"], 503);
    assert_eq!(items[1]["outcome"], "retrying");
    assert_eq!(items[1]["event_id"], id.as_str());
    let excerpt = items[1]["response_excerpt"].as_str().unwrap();
    assert!(
        excerpt.len() <= 1024 && excerpt.len() >= 1000,
        "excerpt {}",
        excerpt.len()
    );
    let (_, page) = server.call("GET", &format!("{path}?limit=1"), None).await;
    let cursor = page["next_cursor"].as_str().expect("a next page");
    let (_, page2) = server
        .call("GET", &format!("{path}?limit=1&cursor={cursor}"), None)
        .await;
    assert_eq!(page2["items"][0]["attempt"], 1);
    assert!(page2["next_cursor"].is_null());
}

async fn event_status_shows_each_matching_subscriptions_delivery(backend: Backend) {
    let (server, rx) = setup(backend, &[]).await;
    rx.set_default("bad", Reply::Status(404));
    let ok = server.subscribe("acme", &rx.url("ok"), &["a.*"]).await;
    let bad = server.subscribe("acme", &rx.url("bad"), &["a.b"]).await;
    server.subscribe("acme", &rx.url("other"), &["z.*"]).await;
    let id = server.publish("acme", "a.b", json!({})).await;
    let mut states = Vec::new();
    for _ in 0..400 {
        let (_, ev) = server
            .call("GET", &format!("/v1/tenants/acme/events/{id}"), None)
            .await;
        states = ev["deliveries"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| {
                (
                    d["subscription_id"].as_str().unwrap().to_owned(),
                    d["state"].as_str().unwrap().to_owned(),
                )
            })
            .collect();
        states.sort();
        if states
            .iter()
            .all(|(_, s)| s == "delivered" || s == "parked")
            && states.len() == 2
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let mut expected = vec![
        (
            ok["id"].as_str().unwrap().to_owned(),
            "delivered".to_owned(),
        ),
        (bad["id"].as_str().unwrap().to_owned(), "parked".to_owned()),
    ];
    expected.sort();
    assert_eq!(states, expected);
    assert_eq!(
        rx.count("other"),
        0,
        "a non-matching subscription gets nothing"
    );
}

async fn a_receiver_that_never_answers_times_out_and_is_retried(backend: Backend) {
    let (server, rx) = setup(
        backend,
        &[
            ("HOOKLANE_ATTEMPT_TIMEOUT", "1s"),
            ("HOOKLANE_RETRY_SCHEDULE", "0s,200ms"),
        ],
    )
    .await;
    rx.script("a", vec![Reply::Hang]);
    let sub = server.subscribe("acme", &rx.url("a"), &["*"]).await;
    server.publish("acme", "x.y", json!({})).await;
    assert!(
        eventually(WAIT, || rx.count("a") == 2).await,
        "retried after the timeout"
    );
    let reqs = rx.requests("a");
    assert!(reqs[1].at - reqs[0].at >= Duration::from_millis(1000));
    assert_eq!(reqs[1].header("webhook-attempt"), "2");
    let path = format!(
        "/v1/tenants/acme/subscriptions/{}/attempts",
        sub["id"].as_str().unwrap()
    );
    let mut first = Value::Null;
    for _ in 0..200 {
        let (_, body) = server.call("GET", &path, None).await;
        if body["items"].as_array().is_some_and(|a| a.len() == 2) {
            first = body["items"][1].clone();
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(first["error"], "timeout");
    assert!(first["status_code"].is_null());
}

async fn a_parked_delivery_counts_in_the_subscriptions_health_and_a_success_resets_it(
    backend: Backend,
) {
    let (server, rx) = setup(backend, &[]).await;
    rx.script("a", vec![Reply::Status(410)]);
    let sub = server.subscribe("acme", &rx.url("a"), &["*"]).await;
    let path = format!(
        "/v1/tenants/acme/subscriptions/{}",
        sub["id"].as_str().unwrap()
    );
    server.publish("acme", "x.y", json!({})).await;
    let mut health = Value::Null;
    for _ in 0..200 {
        health = server.call("GET", &path, None).await.1["health"].clone();
        if health["consecutive_failures"] == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(health["consecutive_failures"], 1);
    assert_eq!(health["last_status_code"], 410);
    assert!(health["first_failure_at"].is_string());
    server.publish("acme", "x.y", json!({})).await;
    for _ in 0..200 {
        health = server.call("GET", &path, None).await.1["health"].clone();
        if health["consecutive_failures"] == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(health["consecutive_failures"], 0);
    assert!(health["first_failure_at"].is_null());
    assert_eq!(health["last_outcome"], "delivered");
}

/// G12 on both backends. The AWS backend fans a duplicate publish out
/// again (in case the first accept never reached the queue): that must
/// deliver nothing new, neither to the subscription that already has the
/// event nor to one created after it.
async fn a_duplicate_publish_delivers_nothing_new_even_to_a_later_subscription(backend: Backend) {
    let (server, rx) = setup(backend, &[]).await;
    server.subscribe("acme", &rx.url("early"), &["a.*"]).await;
    let events = "/v1/tenants/acme/events";
    let body = json!({"type": "a.b", "data": {}, "id": "order-7"});
    let (status, first) = server.call("POST", events, Some(body.clone())).await;
    assert_eq!(status, 202, "{first}");
    assert!(eventually(WAIT, || rx.count("early") == 1).await);

    // Past the one-second clock allowance for subscriptions created after
    // an event.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    server.subscribe("acme", &rx.url("late"), &["a.*"]).await;
    let (status, second) = server.call("POST", events, Some(body)).await;
    assert_eq!(status, 200, "{second}");
    assert_eq!(second["created_at"], first["created_at"]);

    // A later event reaches both: once it has, the duplicate's fan-out
    // (queued before it, in the tenant's order) is done too.
    server.publish("acme", "a.c", json!({})).await;
    let ids = |name: &str| -> Vec<String> {
        rx.requests(name)
            .iter()
            .map(|r| r.header("webhook-id"))
            .collect()
    };
    assert!(
        eventually(WAIT, || rx.count("late") >= 1 && rx.count("early") >= 2).await,
        "early {:?}, late {:?}",
        ids("early"),
        ids("late")
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(ids("early").iter().filter(|id| *id == "order-7").count(), 1);
    assert!(
        !ids("late").contains(&"order-7".to_owned()),
        "{:?}",
        ids("late")
    );
}

on_both_backends!(
    a_delivery_verifies_with_an_independent_standard_webhooks_implementation,
    retries_follow_the_ladder_with_the_same_id_and_body_then_park,
    a_400_is_parked_after_one_attempt_and_replay_delivers_with_a_fresh_ladder,
    retry_after_on_429_replaces_the_ladder_delay,
    redirects_are_not_followed_and_park,
    after_rotation_both_secrets_sign_and_either_verifies,
    the_attempt_log_lists_attempts_newest_first_with_a_capped_excerpt,
    event_status_shows_each_matching_subscriptions_delivery,
    a_receiver_that_never_answers_times_out_and_is_retried,
    a_parked_delivery_counts_in_the_subscriptions_health_and_a_success_resets_it,
    a_duplicate_publish_delivers_nothing_new_even_to_a_later_subscription,
);
