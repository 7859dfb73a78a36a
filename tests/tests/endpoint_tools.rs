//! The endpoint tools end to end, on both backends (`../shared/API.md`
//! "Endpoint options"): a test event arrives signed, once, at its
//! subscription alone; a recovery re-delivers exactly what a subscription
//! missed in a window (parked, and held while it was suspended), in
//! acceptance order, leaving what it got, events outside the window and
//! other subscriptions alone, while its live deliveries go on beside it.

use std::time::Duration;

use hooklane_tests::{eventually, on_both_backends, test_env, Backend, Receiver, Reply, Server};
use serde_json::{json, Value};

const WAIT: Duration = Duration::from_secs(60);

/// The `data.n` of each request `name` received whose type is not the
/// probe's, in order.
fn ns(rx: &Receiver, name: &str) -> Vec<String> {
    rx.requests(name)
        .iter()
        .filter_map(|r| serde_json::from_slice::<Value>(&r.body).ok())
        .filter(|b| b["type"] != "endpoint.probe")
        .map(|b| b["data"]["n"].as_str().unwrap_or("?").to_owned())
        .collect()
}

/// Publishes an event of `n`; returns its acceptance time.
async fn publish(server: &Server, n: &str) -> String {
    let (status, body) = server
        .call(
            "POST",
            "/v1/tenants/acme/events",
            Some(json!({"type": "order.created", "data": {"n": n}})),
        )
        .await;
    assert_eq!(status, 202, "{body}");
    body["created_at"].as_str().unwrap().to_owned()
}

async fn a_test_event_arrives_signed_once_at_its_subscription_alone(backend: Backend) {
    let rx = Receiver::start().await;
    rx.set_default("a", Reply::Status(204));
    rx.set_default("b", Reply::Status(204));
    let server = Server::start_on(backend, test_env(&[])).await;
    // `a` takes no event of the test's type, and filters everything out.
    let (_, a) = server
        .call(
            "POST",
            "/v1/tenants/acme/subscriptions",
            Some(json!({"url": rx.url("a"), "event_types": ["invoice.*"],
                        "filter": {"data": {"never": true}}})),
        )
        .await;
    let b = server.subscribe("acme", &rx.url("b"), &["*"]).await;
    let path = format!(
        "/v1/tenants/acme/subscriptions/{}",
        a["id"].as_str().unwrap()
    );
    let (status, answer) = server.call("POST", &format!("{path}/test"), None).await;
    assert_eq!(status, 202, "{answer}");
    let test_id = answer["event_id"].as_str().unwrap().to_owned();
    let custom = json!({"event_type": "order.shipped", "data": {"n": "custom"}});
    let (status, custom_answer) = server
        .call("POST", &format!("{path}/test"), Some(custom))
        .await;
    assert_eq!(status, 202, "{custom_answer}");
    // A live event after them: once `b` has it, anything wrongly queued to
    // `b` before it has arrived too.
    server
        .publish("acme", "order.created", json!({"n": "live"}))
        .await;
    assert!(eventually(WAIT, || rx.count("a") == 2 && rx.count("b") == 1).await);
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(rx.count("a"), 2, "each test event once");
    assert_eq!(
        ns(&rx, "b"),
        ["live"],
        "the other subscription got no test event"
    );

    let secret = a["secret"].as_str().unwrap();
    let wh = standardwebhooks::Webhook::new(secret).unwrap();
    let requests = rx.requests("a");
    for r in &requests {
        wh.verify(&r.body, &r.headers)
            .expect("signed with the subscription's secret");
    }
    let first: Value = serde_json::from_slice(&requests[0].body).unwrap();
    let second: Value = serde_json::from_slice(&requests[1].body).unwrap();
    assert_eq!(
        (first["type"].as_str(), &first["data"]),
        (Some("webhook.test"), &json!({}))
    );
    assert_eq!(requests[0].header("webhook-id"), test_id);
    assert_eq!(second["type"], "order.shipped");
    assert_eq!(second["data"]["n"], "custom");
    let (_, log) = server.call("GET", &format!("{path}/attempts"), None).await;
    let logged: Vec<&str> = log["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["event_id"].as_str().unwrap())
        .collect();
    assert!(
        logged.contains(&test_id.as_str()),
        "in its attempt log: {log}"
    );

    // A recovery of the other subscription does not give it the test
    // events either: it receives the live event only, which it has.
    let b_path = format!(
        "/v1/tenants/acme/subscriptions/{}",
        b["id"].as_str().unwrap()
    );
    let since = (time::OffsetDateTime::now_utc() - time::Duration::minutes(5))
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap();
    let (status, answer) = server
        .call(
            "POST",
            &format!("{b_path}/recover"),
            Some(json!({"since": since})),
        )
        .await;
    assert_eq!(
        (status, &answer["recovering"]),
        (202, &json!(1)),
        "{answer}"
    );
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(
        ns(&rx, "b"),
        ["live"],
        "no test event recovered to another subscription"
    );

    let (status, problem) = server
        .call(
            "POST",
            &format!("{path}/test"),
            Some(json!({"event_type": "bad type"})),
        )
        .await;
    assert_eq!(
        (status, &problem["field"]),
        (422, &json!("event_type")),
        "{problem}"
    );
}

async fn a_recovery_redelivers_exactly_what_was_missed_in_its_window_in_order(backend: Backend) {
    let rx = Receiver::start().await;
    rx.set_default("r", Reply::Status(500));
    rx.set_default("other", Reply::Status(204));
    let env = test_env(&[
        // One attempt per delivery; the tenth failed delivery in a row
        // suspends; nothing else holds attempts back.
        ("HOOKLANE_RETRY_SCHEDULE", "0s"),
        (
            "HOOKLANE_SUSPEND_POLICY",
            "retryable=10/0s,permanent=10/0s,fatal=10/0s",
        ),
        ("HOOKLANE_BREAKER", "failures=1000"),
        ("HOOKLANE_RECOVERY_RAMP", "off"),
        ("HOOKLANE_BACKFILL_RATE", "10"),
    ]);
    let server = Server::start_on(backend, env).await;
    let r = server.subscribe("acme", &rx.url("r"), &["*"]).await;
    server.subscribe("acme", &rx.url("other"), &["*"]).await;
    let path = format!(
        "/v1/tenants/acme/subscriptions/{}",
        r["id"].as_str().unwrap()
    );

    // Before the window: parked, and not to be recovered.
    publish(&server, "out-before").await;
    assert!(eventually(WAIT, || rx.count("r") == 1).await);
    tokio::time::sleep(Duration::from_millis(20)).await;
    rx.set_default("r", Reply::Status(204));
    let mut since = String::new();
    for i in 1..=10 {
        let at = publish(&server, &format!("d{i}")).await;
        if i == 1 {
            since = at;
        }
        assert!(eventually(WAIT, || rx.count("r") == 1 + i).await);
    }
    rx.set_default("r", Reply::Status(500));
    for i in 1..=10 {
        publish(&server, &format!("p{i}")).await;
        assert!(eventually(WAIT, || rx.count("r") == 11 + i).await);
    }
    let status = server.status_of(&path, "suspended").await;
    assert_eq!(status, "suspended", "ten failed deliveries in a row");
    let mut until = String::new();
    for i in 1..=10 {
        until = publish(&server, &format!("h{i}")).await;
    }
    assert!(eventually(WAIT, || rx.count("other") == 31).await);
    assert_eq!(rx.count("r"), 21, "nothing attempted while suspended");

    // Back up: enable, then recover the window of the 30 (merged with the
    // backfill that enabling starts, whose window is inside it).
    rx.set_default("r", Reply::Status(204));
    let (code, body) = server.call("POST", &format!("{path}/enable"), None).await;
    assert_eq!(code, 200, "{body}");
    let window = json!({"since": since, "until": until});
    // Asked twice: the second starts it over and sends nothing twice.
    for _ in 0..2 {
        let (code, answer) = server
            .call("POST", &format!("{path}/recover"), Some(window.clone()))
            .await;
        assert_eq!((code, &answer["recovering"]), (202, &json!(30)), "{answer}");
    }
    publish(&server, "live").await;
    let recovered = |rx: &Receiver| ns(rx, "r")[21..].to_vec();
    assert!(eventually(WAIT, || recovered(&rx).len() >= 21).await);
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let mut got = recovered(&rx);
    let live = got
        .iter()
        .position(|n| n == "live")
        .expect("the live event arrived");
    assert!(
        live < 20,
        "the live delivery went ahead of the recovery's end: {got:?}"
    );
    got.remove(live);
    let want: Vec<String> = (1..=10)
        .map(|i| format!("p{i}"))
        .chain((1..=10).map(|i| format!("h{i}")))
        .collect();
    assert_eq!(got, want, "exactly the missed ones, in acceptance order");
    assert_eq!(
        rx.count("other"),
        32,
        "the other subscription got nothing again"
    );

    // Outside the retention: refused, nothing started.
    let old = json!({"since": "2020-01-01T00:00:00Z"});
    let (code, problem) = server
        .call("POST", &format!("{path}/recover"), Some(old))
        .await;
    assert_eq!(
        (code, &problem["field"]),
        (422, &json!("since")),
        "{problem}"
    );
}

/// A recovery whose window opens before the endpoint was created sends it
/// nothing accepted before then: it never subscribed to those events.
async fn a_recovery_sends_nothing_accepted_before_the_endpoint_existed(backend: Backend) {
    let rx = Receiver::start().await;
    rx.set_default("early", Reply::Status(204));
    rx.set_default("new", Reply::Status(204));
    let server = Server::start_on(backend, test_env(&[])).await;
    server.subscribe("acme", &rx.url("early"), &["*"]).await;
    publish(&server, "before-1").await;
    publish(&server, "before-2").await;
    assert!(eventually(WAIT, || ns(&rx, "early").len() == 2).await);
    tokio::time::sleep(Duration::from_millis(20)).await;
    let new = server.subscribe("acme", &rx.url("new"), &["*"]).await;
    publish(&server, "after").await;
    assert!(eventually(WAIT, || ns(&rx, "new").len() == 1).await);
    let since = (time::OffsetDateTime::now_utc() - time::Duration::minutes(5))
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap();
    let path = format!(
        "/v1/tenants/acme/subscriptions/{}/recover",
        new["id"].as_str().unwrap()
    );
    let (status, answer) = server
        .call("POST", &path, Some(json!({ "since": since })))
        .await;
    assert_eq!(
        (status, &answer["recovering"]),
        (202, &json!(1)),
        "only the event accepted since it was created: {answer}"
    );
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(ns(&rx, "new"), ["after"], "nothing from before it existed");
}

on_both_backends!(
    a_test_event_arrives_signed_once_at_its_subscription_alone,
    a_recovery_redelivers_exactly_what_was_missed_in_its_window_in_order,
    a_recovery_sends_nothing_accepted_before_the_endpoint_existed,
);
