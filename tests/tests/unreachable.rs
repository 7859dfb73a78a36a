//! Receivers that cannot be reached at all, end to end on `serve` on both
//! backends: a host
//! whose name stopped resolving is a *fatal* failure (G8: it counts toward
//! the fatal limit, which suspends soonest), and a port nobody listens on
//! is a *retryable* one (the ladder runs, the delivery parks, the
//! subscription stays active). Compressed schedules; loopback only.

use std::net::Ipv4Addr;
use std::sync::Arc;
use std::time::Duration;

use hooklane_tests::child::free_port;
use hooklane_tests::dns::SwitchingDns;
use hooklane_tests::{on_both_backends, test_env, Backend, Outside, Server};
use serde_json::{json, Value};

/// The name the test resolver answers for.
const NAME: &str = "gone.hooklane.test";

/// The attempt log of a subscription of `acme`.
async fn attempts(server: &Server, sub_id: &str) -> Vec<Value> {
    let (_, body) = server
        .call(
            "GET",
            &format!("/v1/tenants/acme/subscriptions/{sub_id}/attempts"),
            None,
        )
        .await;
    body["items"].as_array().cloned().unwrap_or_default()
}

/// A subscription of `acme` as `GET` shows it.
async fn shown(server: &Server, sub_id: &str) -> Value {
    let (_, body) = server
        .call(
            "GET",
            &format!("/v1/tenants/acme/subscriptions/{sub_id}"),
            None,
        )
        .await;
    body
}

async fn a_host_that_stopped_resolving_fails_fatally_and_is_suspended_at_the_fatal_limit(
    backend: Backend,
) {
    // Loopback at registration; the name is gone at delivery.
    let dns = Arc::new(SwitchingDns::new(NAME, Some(Ipv4Addr::LOCALHOST), None));
    let env = test_env(&[
        ("HOOKLANE_RETRY_SCHEDULE", "0s,100ms"),
        (
            "HOOKLANE_SUSPEND_POLICY",
            "retryable=25/12h,permanent=5/1h,fatal=2/0s",
        ),
    ]);
    let outside = Outside {
        dns: dns.clone(),
        ..Outside::default()
    };
    let server = Server::start_with(backend, env, outside).await;
    let port = free_port();
    let sub = server
        .subscribe("acme", &format!("http://{NAME}:{port}/hooks"), &["*"])
        .await;
    let sub_id = sub["id"].as_str().expect("id").to_owned();
    dns.switch();
    for n in 0..2 {
        server
            .publish("acme", "invoice.paid", json!({ "n": n }))
            .await;
    }
    let mut status = Value::Null;
    for _ in 0..750 {
        status = shown(&server, &sub_id).await["status"].clone();
        if status == "suspended" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(40)).await;
    }
    let log = attempts(&server, &sub_id).await;
    assert_eq!(status, "suspended", "suspended at the fatal limit: {log:?}");
    assert!(!log.is_empty(), "the attempts are logged");
    for a in &log {
        let error = a["error"].as_str().unwrap_or_default();
        assert!(error.contains("dns error"), "the log says why: {a}");
    }
}

async fn a_port_nobody_listens_on_is_retried_on_the_ladder_then_parked_and_not_suspended(
    backend: Backend,
) {
    let env = test_env(&[("HOOKLANE_RETRY_SCHEDULE", "0s,100ms,100ms")]);
    let server = Server::start_with(backend, env, Outside::default()).await;
    let url = format!("http://127.0.0.1:{}/hooks", free_port());
    let sub = server.subscribe("acme", &url, &["*"]).await;
    let sub_id = sub["id"].as_str().expect("id").to_owned();
    server.publish("acme", "invoice.paid", json!({})).await;
    let mut log = Vec::new();
    for _ in 0..750 {
        log = attempts(&server, &sub_id).await;
        if log.iter().any(|a| a["outcome"] == "parked") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(40)).await;
    }
    assert_eq!(log.len(), 3, "every step of the ladder: {log:?}");
    assert!(log.iter().any(|a| a["outcome"] == "parked"), "{log:?}");
    for a in &log {
        let error = a["error"].as_str().unwrap_or_default();
        assert!(error.contains("connection error"), "the log says why: {a}");
    }
    assert_eq!(
        shown(&server, &sub_id).await["status"],
        "active",
        "a refused connection is retryable: no suspension after one parked delivery"
    );
}

on_both_backends!(
    a_host_that_stopped_resolving_fails_fatally_and_is_suspended_at_the_fatal_limit,
    a_port_nobody_listens_on_is_retried_on_the_ladder_then_parked_and_not_suspended,
);
