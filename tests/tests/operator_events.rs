//! Operator events end to end on both backends (`../shared/API.md`,
//! "Operator events"): `delivery.parked`, `subscription.recovered`,
//! `subscription.suspended` and `subscription.probe_failed` reach the
//! operator webhook signed, once each, with their fields;
//! `HOOKLANE_OPERATOR_EVENTS` chooses the kinds; the operator webhook's own
//! failures produce no events about itself. The ladder and the recovery
//! threshold are compressed (`0s,1s`; `HOOKLANE_RECOVERED_AFTER=1s`
//! instead of a minute).

use std::collections::HashSet;
use std::time::Duration;

use hooklane_tests::{eventually, on_both_backends, test_env, Backend, Receiver, Reply, Server};
use serde_json::{json, Value};

const WAIT: Duration = Duration::from_secs(30);
const OPERATOR_SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

async fn setup(backend: Backend, rx: &Receiver, extra: &[(&str, &str)]) -> Server {
    let operator = rx.url("operator");
    let mut env = vec![
        ("HOOKLANE_RETRY_SCHEDULE", "0s,1s"),
        (
            "HOOKLANE_SUSPEND_POLICY",
            "retryable=2/0s,permanent=2/0s,fatal=1/0s",
        ),
        ("HOOKLANE_RECOVERED_AFTER", "1s"),
        ("HOOKLANE_OPERATOR_WEBHOOK_URL", operator.as_str()),
        ("HOOKLANE_OPERATOR_WEBHOOK_SECRET", OPERATOR_SECRET),
    ];
    env.extend_from_slice(extra);
    Server::start_on(backend, test_env(&env)).await
}

/// The operator events received of type `kind`, first arrival of each id.
fn received(rx: &Receiver, kind: &str) -> Vec<Value> {
    let mut seen = HashSet::new();
    rx.requests("operator")
        .iter()
        .filter(|r| seen.insert(r.header("webhook-id")))
        .map(|r| {
            let wh = standardwebhooks::Webhook::new(OPERATOR_SECRET).unwrap();
            wh.verify(&r.body, &r.headers).expect("signed");
            serde_json::from_slice::<Value>(&r.body).unwrap()
        })
        .filter(|b| b["type"] == kind)
        .map(|b| b["data"].clone())
        .collect()
}

async fn subscribe(server: &Server, rx: &Receiver, name: &str) -> String {
    let sub = server.subscribe("acme", &rx.url(name), &["*"]).await;
    sub["id"].as_str().unwrap().to_owned()
}

/// Over a second after `flaky` began failing, it answers again: one
/// success later, the operator has heard of the recovery.
async fn recover(server: &Server, rx: &Receiver) {
    tokio::time::sleep(Duration::from_millis(1200)).await;
    rx.set_default("flaky", Reply::Status(204));
    server
        .publish("acme", "order.created", json!({"n": 2}))
        .await;
    assert!(eventually(WAIT, || received(rx, "subscription.recovered").len() == 1).await);
}

async fn each_operator_event_is_sent_once_signed_with_its_fields(backend: Backend) {
    let rx = Receiver::start().await;
    rx.set_default("flaky", Reply::Status(500));
    rx.set_default("dead", Reply::Status(500));
    let server = setup(backend, &rx, &[]).await;
    let flaky = subscribe(&server, &rx, "flaky").await;

    let e1 = server
        .publish("acme", "order.created", json!({"n": 1}))
        .await;
    assert!(eventually(WAIT, || rx.count("flaky") == 2).await);
    assert!(eventually(WAIT, || received(&rx, "delivery.parked").len() == 1).await);
    let parked = &received(&rx, "delivery.parked")[0];
    assert_eq!(parked["tenant_id"], "acme");
    assert_eq!(parked["subscription_id"], flaky.as_str());
    assert_eq!(parked["url"], rx.url("flaky").as_str());
    assert_eq!(parked["event_id"], e1.as_str());
    assert_eq!(parked["event_type"], "order.created");
    assert_eq!(parked["attempts"], 2);
    assert_eq!(parked["last_status_code"], 500);
    assert!(parked["last_error"].as_str().unwrap().contains("500"));
    assert!(!parked["reason"].as_str().unwrap().is_empty());

    // Failing for over a second, then a success: recovered, once.
    recover(&server, &rx).await;
    let recovered = &received(&rx, "subscription.recovered")[0];
    assert_eq!(recovered["tenant_id"], "acme");
    assert_eq!(recovered["subscription_id"], flaky.as_str());
    assert_eq!(recovered["url"], rx.url("flaky").as_str());
    assert!(recovered["failing_since"].is_string());
    assert_eq!(recovered["failure_count"], 1);
    server
        .publish("acme", "order.created", json!({"n": 3}))
        .await;
    assert!(eventually(WAIT, || rx.count("flaky") == 4).await);

    // A parked delivery and the next one's failed first attempt suspend
    // `dead` (the deliveries in retry count, G8); enable's probe fails.
    let dead = subscribe(&server, &rx, "dead").await;
    server
        .publish("acme", "invoice.paid", json!({"n": 0}))
        .await;
    assert!(eventually(WAIT, || rx.count("dead") == 2).await);
    server
        .publish("acme", "invoice.paid", json!({"n": 1}))
        .await;
    assert!(eventually(WAIT, || received(&rx, "subscription.suspended").len() == 1).await);
    assert_eq!(
        received(&rx, "subscription.suspended")[0]["subscription_id"],
        dead.as_str()
    );
    let enable = format!("/v1/tenants/acme/subscriptions/{dead}/enable");
    let (status, _) = server.call("POST", &enable, None).await;
    assert_eq!(status, 409);
    assert!(
        eventually(WAIT, || received(&rx, "subscription.probe_failed").len()
            == 1)
        .await
    );
    let probe = &received(&rx, "subscription.probe_failed")[0];
    assert_eq!(probe["subscription_id"], dead.as_str());
    assert_eq!(probe["status_code"], 500);

    tokio::time::sleep(Duration::from_millis(1500)).await;
    let parked = received(&rx, "delivery.parked");
    let parked_subs: Vec<&str> = parked
        .iter()
        .map(|p| p["subscription_id"].as_str().unwrap())
        .collect();
    assert_eq!(
        parked_subs,
        [flaky.as_str(), dead.as_str()],
        "one per parked delivery (the second of `dead` is held)"
    );
    for kind in [
        "subscription.recovered",
        "subscription.suspended",
        "subscription.probe_failed",
    ] {
        assert_eq!(received(&rx, kind).len(), 1, "{kind} once");
    }
}

/// `HOOKLANE_OPERATOR_EVENTS` sends the kinds it lists and no others.
async fn the_operator_events_setting_chooses_the_kinds(backend: Backend) {
    let rx = Receiver::start().await;
    rx.set_default("flaky", Reply::Status(500));
    let only = [("HOOKLANE_OPERATOR_EVENTS", "subscription.recovered")];
    let server = setup(backend, &rx, &only).await;
    subscribe(&server, &rx, "flaky").await;
    server
        .publish("acme", "order.created", json!({"n": 1}))
        .await;
    assert!(eventually(WAIT, || rx.count("flaky") == 2).await);
    recover(&server, &rx).await;
    assert!(
        received(&rx, "delivery.parked").is_empty(),
        "parked is not listed"
    );
}

/// The operator webhook failing parks its own deliveries and tells of
/// nothing about itself: one event, attempted on its ladder, no more.
async fn the_operator_webhooks_own_failures_send_nothing_about_itself(backend: Backend) {
    let rx = Receiver::start().await;
    rx.set_default("flaky", Reply::Status(500));
    rx.set_default("operator", Reply::Status(500));
    let server = setup(backend, &rx, &[]).await;
    subscribe(&server, &rx, "flaky").await;
    server
        .publish("acme", "order.created", json!({"n": 1}))
        .await;
    assert!(
        eventually(WAIT, || rx.count("operator") == 2).await,
        "the ladder's two attempts"
    );
    tokio::time::sleep(Duration::from_millis(3000)).await;
    let ids: HashSet<String> = rx
        .requests("operator")
        .iter()
        .map(|r| r.header("webhook-id"))
        .collect();
    assert_eq!((ids.len(), rx.count("operator")), (1, 2), "{ids:?}");
}

on_both_backends!(
    each_operator_event_is_sent_once_signed_with_its_fields,
    the_operator_events_setting_chooses_the_kinds,
    the_operator_webhooks_own_failures_send_nothing_about_itself,
);
