//! The egress guard at delivery time (G9), on both backends: hosts are
//! resolved once, checked, and connected to at the checked address, so a name that answered a
//! public address at registration and answers loopback at delivery (DNS
//! rebinding) reaches nothing inside the network.
//!
//! The test's resolver answers for one name of its own; only the loopback
//! answer could ever be connected to, and the public one never is.

use std::net::Ipv4Addr;
use std::sync::Arc;
use std::time::Duration;

use hooklane_tests::dns::SwitchingDns;
use hooklane_tests::{eventually, on_both_backends, test_env, Backend, Outside, Receiver, Server};
use serde_json::{json, Value};

/// The name the test resolver answers for.
const NAME: &str = "rebind.hooklane.test";

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

async fn a_name_rebound_to_loopback_after_registration_is_refused_at_delivery_and_logged(
    backend: Backend,
) {
    let rx = Receiver::start().await;
    // A public address at registration, loopback at delivery.
    let public = Ipv4Addr::new(93, 184, 215, 14);
    let dns = Arc::new(SwitchingDns::new(
        NAME,
        Some(public),
        Some(Ipv4Addr::LOCALHOST),
    ));
    // Plain http to reach the loopback receiver's port, but private
    // targets refused, as in production.
    let env = test_env(&[("HOOKLANE_ALLOW_PRIVATE_TARGETS", "false")]);
    let outside = Outside {
        dns: dns.clone(),
        ..Outside::default()
    };
    let server = Server::start_with(backend, env, outside).await;
    let port = rx.base.rsplit(':').next().expect("receiver port");
    let url = format!("http://{NAME}:{port}/target");

    let sub = server.subscribe("acme", &url, &["*"]).await;
    let sub_id = sub["id"].as_str().expect("id").to_owned();
    dns.switch();
    server
        .publish("acme", "invoice.paid", json!({"n": 1}))
        .await;

    let mut log = Vec::new();
    for _ in 0..750 {
        log = attempts(&server, &sub_id).await;
        if !log.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(40)).await;
    }
    assert_eq!(log.len(), 1, "one attempt, parked: {log:?}");
    assert_eq!(log[0]["outcome"], "parked", "{log:?}");
    let error = log[0]["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("refused address") && error.contains("127.0.0.1"),
        "the attempt log says why: {error}"
    );
    // Give a wrongly connected request time to land before asserting none.
    let reached = eventually(Duration::from_secs(1), || rx.count("target") > 0).await;
    assert!(!reached, "a request reached loopback");
}

on_both_backends!(a_name_rebound_to_loopback_after_registration_is_refused_at_delivery_and_logged,);
