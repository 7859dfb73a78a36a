//! Secret rotation's overlap (G7) with the engine's clock moved forward:
//! the old secret signs beside the new one for 24 hours after a rotation,
//! and never after. Signatures are computed independently with the
//! Standard Webhooks implementation's `sign`, since the timestamps are the
//! moved clock's and a receiver's freshness check would refuse them.

use std::sync::Arc;
use std::time::Duration;

use hooklane_tests::{eventually, test_env, MovableClock, Outside, Receiver, Recorded, Server};
use serde_json::json;

const HOUR: Duration = Duration::from_secs(3600);

/// The signature `secret` gives the request.
fn signature(secret: &str, req: &Recorded) -> String {
    let timestamp: i64 = req.header("webhook-timestamp").parse().expect("timestamp");
    standardwebhooks::Webhook::new(secret)
        .expect("secret")
        .sign(&req.header("webhook-id"), timestamp, &req.body)
        .expect("sign")
}

fn signatures(req: &Recorded) -> Vec<String> {
    let header = req.header("webhook-signature");
    header.split(' ').map(str::to_owned).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_old_secret_signs_for_24_hours_after_a_rotation_and_then_stops() {
    let rx = Receiver::start().await;
    let clock = Arc::new(MovableClock::default());
    let outside = Outside {
        clock: clock.clone(),
        ..Outside::default()
    };
    let server = Server::start_outside(test_env(&[]), outside).await;
    let sub = server.subscribe("acme", &rx.url("a"), &["*"]).await;
    let (sub_id, old) = (sub["id"].as_str().unwrap(), sub["secret"].as_str().unwrap());
    let (status, rotated) = server
        .call(
            "POST",
            &format!("/v1/tenants/acme/subscriptions/{sub_id}/rotate-secret"),
            None,
        )
        .await;
    assert_eq!(status, 200, "{rotated}");
    let new = rotated["secret"].as_str().unwrap();

    clock.advance(23 * HOUR);
    server.publish("acme", "x.y", json!({"n": 1})).await;
    assert!(eventually(Duration::from_secs(20), || rx.count("a") == 1).await);
    let within = &rx.requests("a")[0];
    assert_eq!(
        signatures(within),
        [signature(new, within), signature(old, within)],
        "23 hours after the rotation both secrets sign, the new one first"
    );

    clock.advance(HOUR + Duration::from_secs(60));
    server.publish("acme", "x.y", json!({"n": 2})).await;
    assert!(eventually(Duration::from_secs(20), || rx.count("a") == 2).await);
    let after = &rx.requests("a")[1];
    assert_eq!(
        signatures(after),
        [signature(new, after)],
        "24 hours after the rotation only the new secret signs"
    );
}
