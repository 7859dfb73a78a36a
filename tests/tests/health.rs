//! Endpoint health end to end (G8) on both backends, with compressed
//! thresholds: a dead receiver is suspended, the operator webhook gets one
//! signed notification, events published meanwhile are held, enable probes
//! first, and the backfill delivers every missed event once, in order. The
//! circuit breaker stops connecting to a hanging receiver while open and
//! never delays other subscriptions.

use std::time::{Duration, Instant};

use hooklane_tests::{
    eventually, on_both_backends, test_env, Backend, Gate, Receiver, Reply, Server,
};
use serde_json::{json, Value};

const WAIT: Duration = Duration::from_secs(30);
const OPERATOR_SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

async fn setup(backend: Backend, rx: &Receiver, extra: &[(&str, &str)]) -> Server {
    let operator = rx.url("operator");
    let mut env = vec![
        ("HOOKLANE_RETRY_SCHEDULE", "0s"),
        (
            "HOOKLANE_SUSPEND_POLICY",
            "retryable=2/0s,permanent=2/0s,fatal=1/0s",
        ),
        ("HOOKLANE_OPERATOR_WEBHOOK_URL", operator.as_str()),
        ("HOOKLANE_OPERATOR_WEBHOOK_SECRET", OPERATOR_SECRET),
        ("HOOKLANE_BACKFILL_RATE", "50"),
        // The suspension notice alone: the other operator events have
        // their own tests (operator_events.rs).
        ("HOOKLANE_OPERATOR_EVENTS", "subscription.suspended"),
    ];
    env.extend_from_slice(extra);
    Server::start_on(backend, test_env(&env)).await
}

async fn subscription(server: &Server, id: &str) -> Value {
    server
        .call("GET", &format!("/v1/tenants/acme/subscriptions/{id}"), None)
        .await
        .1
}

async fn wait_status(server: &Server, id: &str, status: &str) -> bool {
    for _ in 0..600 {
        if subscription(server, id).await["status"] == status {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

fn ids(rx: &Receiver, name: &str) -> Vec<String> {
    rx.requests(name)
        .iter()
        .map(|r| r.header("webhook-id"))
        .collect()
}

async fn a_dead_receiver_is_suspended_notified_once_and_enable_backfills_in_order(
    backend: Backend,
) {
    suspend_notify_and_backfill(backend, 1).await;
}

/// The backfill is one lane of its own, however many the subscription
/// has: every missed event arrives, in acceptance order.
async fn a_subscription_of_eight_lanes_is_backfilled_in_order_too(backend: Backend) {
    suspend_notify_and_backfill(backend, 8).await;
}

async fn suspend_notify_and_backfill(backend: Backend, lanes: u16) {
    let rx = Receiver::start().await;
    rx.set_default("dead", Reply::Status(500));
    let server = setup(backend, &rx, &[]).await;
    let sub = server.subscribe("acme", &rx.url("dead"), &["*"]).await;
    let id = sub["id"].as_str().unwrap().to_owned();
    let path = format!("/v1/tenants/acme/subscriptions/{id}");
    let (status, _) = server
        .call("PATCH", &path, Some(json!({ "lanes": lanes })))
        .await;
    assert_eq!(status, 200);
    let mut events = Vec::new();
    for n in 0..2 {
        events.push(
            server
                .publish("acme", "order.created", json!({ "n": n }))
                .await,
        );
        assert!(eventually(WAIT, || rx.count("dead") == n + 1).await);
    }
    assert!(
        wait_status(&server, &id, "suspended").await,
        "suspended after the streak"
    );
    let view = subscription(&server, &id).await;
    assert!(view["suspended_at"].is_string());
    assert!(view["status_reason"]
        .as_str()
        .unwrap()
        .contains("retryable"));

    assert!(
        eventually(WAIT, || rx.count("operator") == 1).await,
        "one notification"
    );
    let note = &rx.requests("operator")[0];
    let wh = standardwebhooks::Webhook::new(OPERATOR_SECRET).unwrap();
    wh.verify(&note.body, &note.headers)
        .expect("the notification is signed");
    let body: Value = serde_json::from_slice(&note.body).unwrap();
    assert_eq!(body["type"], "subscription.suspended");
    let data = &body["data"];
    assert_eq!(data["subscription_id"], id.as_str());
    assert_eq!(data["tenant_id"], "acme");
    assert_eq!(data["url"], rx.url("dead").as_str());
    assert_eq!(data["failure_count"], 2);
    assert!(data["failing_since"].is_string());
    assert_eq!(data["last_status_code"], 500);
    assert!(data["last_error"].as_str().unwrap().contains("500"));
    assert_eq!(
        data["held_events"], 0,
        "both deliveries were parked: nothing waits"
    );
    assert!(data["reenable"].as_str().unwrap().contains("/enable"));

    for n in 2..4 {
        events.push(
            server
                .publish("acme", "order.created", json!({ "n": n }))
                .await,
        );
    }
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(rx.count("dead"), 2, "nothing attempted while suspended");

    rx.set_default("dead", Reply::Status(204));
    let (status, enabled) = server
        .call(
            "POST",
            &format!("/v1/tenants/acme/subscriptions/{id}/enable"),
            None,
        )
        .await;
    assert_eq!(status, 200, "{enabled}");
    assert_eq!(enabled["status"], "active");
    assert_eq!(enabled["health"]["consecutive_failures"], 0);
    let probe = &rx.requests("dead")[2];
    let probe_body: Value = serde_json::from_slice(&probe.body).unwrap();
    assert_eq!(probe_body["type"], "endpoint.probe");
    assert!(
        eventually(WAIT, || ids(&rx, "dead").len() == 3 + events.len()).await,
        "every missed event arrived: {:?}",
        ids(&rx, "dead")
    );
    assert_eq!(ids(&rx, "dead")[3..], events[..], "once each, in order");
    tokio::time::sleep(Duration::from_millis(1000)).await;
    assert_eq!(rx.count("dead"), 3 + events.len(), "no duplicates");
    assert_eq!(rx.count("operator"), 1, "still one notification");
}

async fn enable_against_a_503_stays_suspended_says_why_and_backfills_nothing(backend: Backend) {
    let rx = Receiver::start().await;
    rx.set_default("dead", Reply::Status(503));
    let server = setup(backend, &rx, &[]).await;
    let sub = server.subscribe("acme", &rx.url("dead"), &["*"]).await;
    let id = sub["id"].as_str().unwrap().to_owned();
    for n in 0..2 {
        server.publish("acme", "a.b", json!({ "n": n })).await;
        assert!(eventually(WAIT, || rx.count("dead") == n + 1).await);
    }
    assert!(wait_status(&server, &id, "suspended").await);
    let (status, problem) = server
        .call(
            "POST",
            &format!("/v1/tenants/acme/subscriptions/{id}/enable"),
            None,
        )
        .await;
    assert_eq!(status, 409);
    assert!(
        problem["detail"].as_str().unwrap().contains("503"),
        "{problem}"
    );
    let view = subscription(&server, &id).await;
    assert_eq!(view["status"], "suspended");
    assert!(view["status_reason"].as_str().unwrap().contains("503"));
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(
        rx.count("dead"),
        3,
        "two deliveries and the probe, nothing backfilled"
    );
}

async fn an_open_breaker_stops_connecting_to_a_hanging_receiver_and_others_are_unaffected(
    backend: Backend,
) {
    let rx = Receiver::start().await;
    rx.set_default("hang", Reply::Hang);
    let server = setup(
        backend,
        &rx,
        &[
            (
                "HOOKLANE_RETRY_SCHEDULE",
                "0s,100ms,100ms,100ms,100ms,100ms",
            ),
            ("HOOKLANE_ATTEMPT_TIMEOUT", "500ms"),
            // Open long enough to outlast the three deliveries below on a busy
            // machine (each may take up to 5 s); half-open follows within WAIT.
            ("HOOKLANE_BREAKER", "failures=2,open=20s,max_open=20s"),
            ("HOOKLANE_SUSPEND_POLICY", "retryable=100/1h"),
        ],
    )
    .await;
    let hang = server.subscribe("acme", &rx.url("hang"), &["hang.*"]).await;
    server.subscribe("acme", &rx.url("ok"), &["ok.*"]).await;
    server.publish("acme", "hang.one", json!({})).await;
    assert!(
        eventually(WAIT, || rx.count("hang") == 2).await,
        "two timed-out attempts"
    );
    // Open: no new connection for the open period, while the other
    // subscription's deliveries go straight through.
    for n in 0..3 {
        let before = rx.count("ok");
        server.publish("acme", "ok.ping", json!({ "n": n })).await;
        assert!(eventually(Duration::from_secs(5), || rx.count("ok") == before + 1).await);
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert_eq!(rx.count("hang"), 2, "not connected to while open");
    let view = subscription(&server, hang["id"].as_str().unwrap()).await;
    assert_eq!(view["health"]["breaker"]["state"], "open");
    assert!(
        eventually(WAIT, || rx.count("hang") == 3).await,
        "half-open lets one attempt through"
    );
}

/// G8 on time: a dead receiver with steady traffic is suspended once the
/// policy's duration has passed, counting the deliveries in retry and
/// those waiting behind them, not only those whose ladders ended (which,
/// one lane at a time, took 37 s here).
async fn a_dead_receiver_with_steady_traffic_is_suspended_on_time_on_one_lane_and_on_eight(
    backend: Backend,
) {
    for lanes in [1, 8] {
        let rx = Receiver::start().await;
        rx.set_default("dead", Reply::Status(503));
        let server = setup(
            backend,
            &rx,
            &[
                ("HOOKLANE_RETRY_SCHEDULE", "0s,2s,4s"),
                (
                    "HOOKLANE_SUSPEND_POLICY",
                    "retryable=5/6s,permanent=5/6s,fatal=5/6s",
                ),
                ("HOOKLANE_BREAKER", "failures=5,open=1s,max_open=1s"),
            ],
        )
        .await;
        let (status, sub) = server
            .call(
                "POST",
                "/v1/tenants/acme/subscriptions",
                Some(json!({"url": rx.url("dead"), "event_types": ["*"], "lanes": lanes})),
            )
            .await;
        assert_eq!(status, 201, "{sub}");
        let id = sub["id"].as_str().unwrap().to_owned();
        let mut suspended = None;
        for n in 0..120 {
            server.publish("acme", "a.b", json!({ "n": n })).await;
            if subscription(&server, &id).await["status"] == "suspended" {
                suspended = Some(Instant::now());
                break;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        let suspended = suspended.expect("suspended within the traffic");
        // The page's count and the reason's are one number: the failures
        // the policy counted, deliveries still in retry included.
        let view = subscription(&server, &id).await;
        let reason = view["status_reason"].as_str().unwrap_or_default();
        let count = &view["health"]["consecutive_failures"];
        assert!(
            reason.contains(&format!("failures: {count} since")),
            "{lanes} lanes: the page counts {count}, the reason says {reason:?}"
        );
        let first_failure = rx.requests("dead")[0].at;
        let after = suspended - first_failure;
        assert!(
            after >= Duration::from_secs(6),
            "{lanes} lanes: not before the policy's 6 s ({after:?})"
        );
        // The duration plus one ladder step is 10 s; the bound is generous
        // for a busy machine and well under the 37 s of counting ended
        // deliveries only.
        assert!(
            after < Duration::from_secs(18),
            "{lanes} lanes: suspended {after:?} after the first failure"
        );
    }
}

async fn attempt_count(server: &Server, id: &str) -> usize {
    let path = format!("/v1/tenants/acme/subscriptions/{id}/attempts");
    let (_, log) = server.call("GET", &path, None).await;
    log["items"].as_array().map_or(0, Vec::len)
}

async fn health_is_written_once_per_delivery_when_its_retries_end_never_per_attempt(
    backend: Backend,
) {
    let rx = Receiver::start().await;
    // The first delivery fails all three attempts; the second fails once,
    // then succeeds.
    rx.script("flaky", vec![Reply::Status(500); 4]);
    let env = test_env(&[("HOOKLANE_RETRY_SCHEDULE", "0s,2s,2s")]);
    let server = Server::start_on(backend, env).await;
    let sub = server.subscribe("acme", &rx.url("flaky"), &["*"]).await;
    let id = sub["id"].as_str().unwrap().to_owned();

    server.publish("acme", "a.b", json!({"n": 1})).await;
    assert!(eventually(WAIT, || rx.count("flaky") == 1).await);
    for _ in 0..200 {
        if attempt_count(&server, &id).await == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let health = &subscription(&server, &id).await["health"];
    assert_eq!(health["consecutive_failures"], 0, "mid-sequence: {health}");
    assert!(
        health["last_attempt_at"].is_null(),
        "mid-sequence: {health}"
    );

    assert!(eventually(WAIT, || rx.count("flaky") == 3).await);
    let mut health = Value::Null;
    for _ in 0..200 {
        health = subscription(&server, &id).await["health"].clone();
        if health["last_outcome"] == "parked" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(health["last_outcome"], "parked", "{health}");
    assert_eq!(
        health["consecutive_failures"], 1,
        "one delivery of three failed attempts counts once: {health}"
    );
    assert_eq!(health["last_status_code"], 500);

    server.publish("acme", "a.b", json!({"n": 2})).await;
    assert!(eventually(WAIT, || rx.count("flaky") == 4).await);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let health = &subscription(&server, &id).await["health"];
    assert_eq!(
        (&health["consecutive_failures"], &health["last_outcome"]),
        (&json!(1), &json!("parked")),
        "a retrying attempt leaves the record as it was: {health}"
    );
    assert!(eventually(WAIT, || rx.count("flaky") == 5).await);
    let mut reset = false;
    for _ in 0..200 {
        let health = &subscription(&server, &id).await["health"];
        if health["consecutive_failures"] == 0 && health["last_outcome"] == "delivered" {
            reset = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(reset, "the success at the second attempt resets the record");
}

on_both_backends!(
    a_subscription_of_eight_lanes_is_backfilled_in_order_too,
    a_dead_receiver_with_steady_traffic_is_suspended_on_time_on_one_lane_and_on_eight,
    health_is_written_once_per_delivery_when_its_retries_end_never_per_attempt,
    a_dead_receiver_is_suspended_notified_once_and_enable_backfills_in_order,
    enable_against_a_503_stays_suspended_says_why_and_backfills_nothing,
    an_open_breaker_stops_connecting_to_a_hanging_receiver_and_others_are_unaffected,
);

/// The notice counts the deliveries that wait for the suspended
/// subscription: on the embedded store, every queued one. (On AWS, where
/// queued messages cannot be counted, it counts the spilled ones.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_suspension_notice_counts_the_deliveries_queued_behind_the_failing_one() {
    let rx = Receiver::start().await;
    let gate = Gate::new();
    rx.script("dead", vec![Reply::Gated(gate.clone(), 500)]);
    rx.set_default("dead", Reply::Status(500));
    let server = setup(Backend::Embedded, &rx, &[]).await;
    let sub = server.subscribe("acme", &rx.url("dead"), &["*"]).await;
    let id = sub["id"].as_str().unwrap().to_owned();
    server.publish("acme", "a.b", json!({"n": 0})).await;
    assert!(eventually(WAIT, || gate.reached() == 1).await);
    let mut last = String::new();
    for n in 1..5 {
        last = server.publish("acme", "a.b", json!({ "n": n })).await;
    }
    // Fan-out goes in order: once the last is queued, all four are.
    let mut queued = false;
    for _ in 0..500 {
        let (_, event) = server
            .call("GET", &format!("/v1/tenants/acme/events/{last}"), None)
            .await;
        if event["deliveries"].as_array().is_some_and(|d| d.len() == 1) {
            queued = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(queued, "the four were queued behind the held attempt");
    gate.open();
    assert!(wait_status(&server, &id, "suspended").await);
    assert!(eventually(WAIT, || rx.count("operator") == 1).await);
    let body: Value = serde_json::from_slice(&rx.requests("operator")[0].body).unwrap();
    assert_eq!(
        body["data"]["held_events"], 3,
        "two parked, three queued behind them: {}",
        body["data"]
    );
}
