//! Races on the AWS path that a fleet of delivery functions runs into, with
//! two `serve --backend aws` (two sets of stand-in mappings, each with its
//! own engines, as two deployments of functions would be) over the same
//! table and queues:
//! - G8: a subscription of 16 lanes whose receiver answers 410 to every
//!   event fails on many lanes at once in both; each failure that reaches
//!   the permanent limit tries the guarded transition to `suspended`, and
//!   the operator hears of it once (one `subscription.suspended` event id),
//!   however many tried. It needs each lane's failure counted: sequences
//!   that end at once on several lanes each count over the health record
//!   as stored (the storage contract's
//!   `failed_sequences_each_count_over_the_stored_record`), where a record
//!   computed from the read before the attempt once left the count at 1
//!   and the subscription active.

use std::collections::HashSet;
use std::time::Duration;

use hooklane_tests::{aws, eventually, test_env, Receiver, Reply, Server};
use serde_json::{json, Value};

const OPERATOR_SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

/// The distinct `subscription.suspended` events the operator received.
fn suspended_notices(rx: &Receiver) -> HashSet<String> {
    rx.requests("operator")
        .iter()
        .filter(|r| {
            serde_json::from_slice::<Value>(&r.body)
                .is_ok_and(|b| b["type"] == "subscription.suspended")
        })
        .map(|r| r.header("webhook-id"))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_fleets_racing_to_suspend_one_subscription_send_one_notice() {
    let rx = Receiver::start().await;
    rx.set_default("dead", Reply::Status(410));
    let operator = rx.url("operator");
    let env = test_env(&[
        (
            "HOOKLANE_SUSPEND_POLICY",
            "retryable=25/12h,permanent=2/0s,fatal=3/15m",
        ),
        ("HOOKLANE_OPERATOR_WEBHOOK_URL", operator.as_str()),
        ("HOOKLANE_OPERATOR_WEBHOOK_SECRET", OPERATOR_SECRET),
    ]);
    let sdk = aws::sdk().await;
    let settings = aws::fresh_resources(60).await;
    let a = Server::start_aws_with(env.clone(), sdk.clone(), settings.clone()).await;
    let b = Server::start_aws_with(env, sdk, settings).await;

    let body = json!({"url": rx.url("dead"), "event_types": ["*"], "lanes": 16});
    let (code, sub) = a
        .call("POST", "/v1/tenants/acme/subscriptions", Some(body))
        .await;
    assert_eq!(code, 201, "{sub}");
    let sub_id = sub["id"].as_str().expect("id").to_owned();
    for n in 0..32 {
        let server = if n % 2 == 0 { &a } else { &b };
        server
            .publish("acme", "order.created", json!({ "n": n }))
            .await;
    }
    let path = format!("/v1/tenants/acme/subscriptions/{sub_id}");
    let mut status = Value::Null;
    for _ in 0..300 {
        status = a.call("GET", &path, None).await.1["status"].clone();
        if status == "suspended" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let shown = a.call("GET", &path, None).await.1;
    assert_eq!(status, "suspended", "tried {}: {shown}", rx.count("dead"));
    assert!(
        eventually(Duration::from_secs(30), || !suspended_notices(&rx)
            .is_empty())
        .await,
        "the operator heard of the suspension"
    );
    // Room for a second notice from a process that lost the race.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let tried = rx.count("dead");
    let notices = suspended_notices(&rx);
    assert!(
        tried >= 2,
        "the receiver was tried on several lanes: {tried}"
    );
    assert_eq!(notices.len(), 1, "one notice: {notices:?}");
}
