//! The per-tenant bound on attempts in flight (G3), on both backends: a
//! tenant with fifty receivers that accept and never answer has at most
//! `HOOKLANE_TENANT_MAX_IN_FLIGHT` (8) requests open at any moment, the
//! slots go round (more than eight of its endpoints are tried), and
//! another tenant's deliveries keep arriving. On AWS the bound holds across
//! both delivery pools (the hung lanes move to the slow pool, whose ten
//! invocations could hold a hundred requests open without it).
//!
//! The bound is checked exactly on the engine's side (the server runs in
//! this process: [`in_flight`] counts a request from the moment it goes out
//! to its answer or timeout). The receiver's view is printed beside it and
//! checked with an allowance: a request counts there from its arrival to
//! 500 ms before the receiver saw its connection end, because a client that
//! gives up closes the connection a moment before the receiver notices,
//! and the slot it gave back may already carry the next request.

use std::time::{Duration, Instant};

use hooklane_core::domain::TenantId;
use hooklane_core::engine::in_flight;
use hooklane_tests::{eventually, on_both_backends, test_env, Backend, Receiver, Reply, Server};
use serde_json::json;

async fn a_tenant_with_fifty_hung_receivers_never_has_more_than_eight_attempts_in_flight(
    backend: Backend,
) {
    let server = Server::start_on(
        backend,
        test_env(&[
            ("HOOKLANE_TENANT_MAX_IN_FLIGHT", "8"),
            ("HOOKLANE_ATTEMPT_TIMEOUT", "3s"),
            ("HOOKLANE_SLOW_AFTER", "1s"),
            ("HOOKLANE_RETRY_SCHEDULE", "0s,1s,1s,1s,1s,1s,1s,1s,1s,1s"),
        ]),
    )
    .await;
    // Each backend's test its own tenant: both run in this process, and
    // the engine's count is per tenant and process.
    let a = format!("a-{backend:?}");
    let hung = Receiver::start().await;
    let healthy = Receiver::start().await;
    for i in 0..50 {
        let name = format!("hang{i}");
        hung.set_default(&name, Reply::Hang);
        server.subscribe(&a, &hung.url(&name), &["*"]).await;
    }
    server.subscribe("b", &healthy.url("b"), &["*"]).await;
    server.publish(&a, "a.load", json!({})).await;

    // Thirty seconds of hung attempts (each held 1–3 s), with tenant b
    // publishing throughout.
    let tried = |rx: &Receiver| {
        (0..50)
            .filter(|i| rx.count(&format!("hang{i}")) > 0)
            .count()
    };
    let start = Instant::now();
    let mut sent = 0;
    while start.elapsed() < Duration::from_secs(30) {
        server.publish("b", "b.ping", json!({ "n": sent })).await;
        sent += 1;
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    let engine_peak = in_flight::peak_of(&TenantId::parse(&a).expect("tenant id"));
    let peak = hung.peak_in_flight_overall(Duration::from_millis(500));
    let spread = tried(&hung);
    eprintln!(
        "{backend:?}: peak {engine_peak} counted by the engine; the receiver saw {peak} \
         ({} counting every request to the moment it saw the end); {spread} endpoints tried",
        hung.peak_in_flight_overall(Duration::ZERO)
    );
    assert!(
        engine_peak <= 8,
        "tenant a had {engine_peak} requests out at once; the bound is 8"
    );
    assert!(
        peak <= 8,
        "tenant a's receiver held {peak} requests open at once; the bound is 8"
    );
    assert!(
        peak >= 4,
        "tenant a held at most {peak} requests open: its attempts hardly ran"
    );
    assert!(
        spread > 8,
        "only {spread} of tenant a's 50 endpoints were tried: slots are not given back"
    );
    assert!(
        eventually(Duration::from_secs(60), || healthy.count("b") >= sent).await,
        "tenant b got {} of its {sent} events",
        healthy.count("b")
    );
}

on_both_backends!(a_tenant_with_fifty_hung_receivers_never_has_more_than_eight_attempts_in_flight,);
