//! Lanes across subscriptions through `serve`: isolation from hung
//! receivers (G2), unregister stops delivery with a control (G4), and order
//! per subscription while another lane retries (G5). Schedules are
//! compressed; assertions are about order and absence, with generous bounds.

use std::time::{Duration, Instant};

use hooklane_tests::{eventually, on_both_backends, test_env, Backend, Receiver, Reply, Server};
use serde_json::json;

const WAIT: Duration = Duration::from_secs(30);

async fn a_healthy_delivery_arrives_while_200_receivers_hold_their_requests_open(backend: Backend) {
    // Attempts may take 5 minutes, longer than every wait below: none of
    // the hung ones is released during the test.
    let server = Server::start_on(backend, test_env(&[("HOOKLANE_ATTEMPT_TIMEOUT", "5m")])).await;
    let wait = WAIT;
    let rx = Receiver::start().await;
    for i in 0..200 {
        let name = format!("hang{i}");
        rx.set_default(&name, Reply::Hang);
        server.subscribe("acme", &rx.url(&name), &["*"]).await;
    }
    // Created last, so its delivery is enqueued after all 200 hung ones.
    server.subscribe("acme", &rx.url("healthy"), &["*"]).await;
    server.publish("acme", "load.test", json!({})).await;
    assert!(
        eventually(wait, || rx.hanging() == 200).await,
        "all 200 hung requests in flight (got {})",
        rx.hanging()
    );
    assert!(
        eventually(wait, || rx.count("healthy") == 1).await,
        "the healthy subscription's delivery arrived"
    );
    assert_eq!(rx.hanging(), 200, "every hung request was still held open");

    // And a second event still reaches the healthy lane at once.
    server.publish("acme", "load.again", json!({})).await;
    assert!(eventually(wait, || rx.count("healthy") == 2).await);
    assert_eq!(rx.hanging(), 200);
}

async fn after_delete_answers_204_the_target_gets_no_attempt_while_the_control_is_retried(
    backend: Backend,
) {
    let server = Server::start_on(
        backend,
        test_env(&[(
            "HOOKLANE_RETRY_SCHEDULE",
            "0s,500ms,500ms,500ms,500ms,500ms",
        )]),
    )
    .await;
    let rx = Receiver::start().await;
    rx.set_default("target", Reply::Status(500));
    rx.set_default("control", Reply::Status(500));
    let target = server.subscribe("acme", &rx.url("target"), &["*"]).await;
    server.subscribe("acme", &rx.url("control"), &["*"]).await;
    let event = server.publish("acme", "x.y", json!({})).await;
    assert!(eventually(WAIT, || rx.count("target") >= 1).await);

    let target_id = target["id"].as_str().unwrap();
    let (status, _) = server
        .call(
            "DELETE",
            &format!("/v1/tenants/acme/subscriptions/{target_id}"),
            None,
        )
        .await;
    assert_eq!(status, 204);
    let answered = Instant::now();
    let before = rx.count("control");
    assert!(
        eventually(WAIT, || rx.count("control") >= before + 2).await,
        "the control is retried after the 204"
    );
    assert!(
        rx.requests("target").iter().all(|r| r.at < answered),
        "no attempt to the target started after the 204"
    );
    let (_, ev) = server
        .call("GET", &format!("/v1/tenants/acme/events/{event}"), None)
        .await;
    let state = ev["deliveries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["subscription_id"] == target_id)
        .map(|d| d["state"].clone());
    assert_eq!(state, Some(json!("dropped")), "dropped, not parked");
    let (_, dl) = server
        .call("GET", "/v1/tenants/acme/dead-letters", None)
        .await;
    assert!(dl["items"]
        .as_array()
        .unwrap()
        .iter()
        .all(|d| d["subscription_id"] != target_id));
}

async fn a_retrying_delivery_holds_its_own_lane_and_no_other(backend: Backend) {
    let server = Server::start_on(
        backend,
        test_env(&[("HOOKLANE_RETRY_SCHEDULE", "0s,1s,1s,1s")]),
    )
    .await;
    let rx = Receiver::start().await;
    // The slow lane fails its first two attempts, then recovers.
    rx.script("slow", vec![Reply::Status(503), Reply::Status(503)]);
    server.subscribe("acme", &rx.url("slow"), &["*"]).await;
    server.subscribe("acme", &rx.url("fast"), &["*"]).await;
    let mut ids = Vec::new();
    for n in 0..3 {
        ids.push(server.publish("acme", "seq.event", json!({ "n": n })).await);
    }
    assert!(eventually(WAIT, || rx.count("fast") == 3).await);
    // The fast lane finished all three while the slow lane was still
    // retrying its first event.
    let slow_now: Vec<String> = rx
        .requests("slow")
        .iter()
        .map(|r| r.header("webhook-id"))
        .collect();
    assert!(
        slow_now.iter().all(|id| id == &ids[0]),
        "slow lane moved on early: {slow_now:?}"
    );
    let fast: Vec<String> = rx
        .requests("fast")
        .iter()
        .map(|r| r.header("webhook-id"))
        .collect();
    assert_eq!(fast, ids, "fast lane in acceptance order");

    assert!(eventually(WAIT, || rx.count("slow") == 5).await);
    let slow: Vec<String> = rx
        .requests("slow")
        .iter()
        .map(|r| r.header("webhook-id"))
        .collect();
    assert_eq!(
        slow,
        [
            ids[0].clone(),
            ids[0].clone(),
            ids[0].clone(),
            ids[1].clone(),
            ids[2].clone()
        ],
        "slow lane in order"
    );
}

/// Embedded: every lane runs on its own, so all 200 stay open. (On AWS,
/// hung receivers leave the main pool for the slow pool: `slow_pool.rs`.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_healthy_delivery_arrives_while_200_receivers_hold_their_requests_open_embedded() {
    a_healthy_delivery_arrives_while_200_receivers_hold_their_requests_open(Backend::Embedded).await
}

on_both_backends!(
    after_delete_answers_204_the_target_gets_no_attempt_while_the_control_is_retried,
    a_retrying_delivery_holds_its_own_lane_and_no_other,
);
