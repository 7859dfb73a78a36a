//! AWS faults: `serve --backend aws` runs in this process with its SDK
//! clients pointed at a fault-injecting proxy in front of the local
//! AWS-compatible server ([`hooklane_tests::faults`]). About one call in
//! twenty, across DynamoDB and SQS, gets throttled, a 500 or 503, or a
//! reset connection (before the call is forwarded, or after, so that an
//! operation that happened looks failed), while subscriptions are created,
//! events are published and delivered, and subscriptions are deleted.
//!
//! What must hold:
//! - G1: every event answered 202 (or 200 to a retry after a 5xx) reaches
//!   every subscription that was not deleted. A first publish is never
//!   answered 200 (that would say "duplicate" to a publisher whose own
//!   write merely lost its answer).
//! - G4: once `DELETE` has answered 204, no request reaches that
//!   subscription. The test deletes while the subscription's one attempt
//!   in flight is held open by its receiver, so every request that arrives
//!   after the 204 started after it.
//! - G7: at-least-once allows a delivery to arrive more than once (a 2xx
//!   whose outcome could not be recorded is attempted again); it does not
//!   allow an attempt number to be skipped or repeated. So for each
//!   subscription and event, the `webhook-attempt` values in arrival order
//!   are exactly 1, 2, ..., k. A lane has at most one attempt in flight, so
//!   arrival order is attempt order. (A process that dies between
//!   recording an attempt's start and sending it leaves that number unused;
//!   this test injects faults into calls, not crashes: the process is alive
//!   to retry a write whose answer it lost.)

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::{Duration, Instant};

use hooklane_tests::faults::FaultProxy;
use hooklane_tests::{aws, eventually, test_env, Gate, Receiver, Reply, Server};
use serde_json::{json, Value};

const KEPT: [&str; 3] = ["steady-0", "steady-1", "flaky-0"];
const DOOMED: [&str; 2] = ["doomed-0", "doomed-1"];
const EVENTS: usize = 30;
/// Faults per thousand calls.
const RATE: u32 = 50;
/// How long everything may take to arrive (generous: a lost receive or a
/// failed handler leaves a message invisible for the visibility timeout).
const WAIT: Duration = Duration::from_secs(240);

/// Calls the API until it answers something other than a 5xx (bounded);
/// returns every status in order and the last body.
async fn call_through_5xx(
    server: &Server,
    method: &str,
    path: &str,
    body: Option<Value>,
) -> (Vec<u16>, Value) {
    let mut statuses = Vec::new();
    for _ in 0..10 {
        let (status, value) = server.call(method, path, body.clone()).await;
        statuses.push(status);
        if status < 500 {
            return (statuses, value);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!("{method} {path} kept answering 5xx: {statuses:?}");
}

async fn subscribe(server: &Server, url: &str) -> String {
    let (statuses, body) = call_through_5xx(
        server,
        "POST",
        "/v1/tenants/acme/subscriptions",
        Some(json!({"url": url, "event_types": ["*"]})),
    )
    .await;
    assert_eq!(
        statuses.last(),
        Some(&201),
        "subscribe: {statuses:?} {body}"
    );
    body["id"].as_str().expect("subscription id").to_owned()
}

/// Publishes event `id`, retrying 5xx with the same id, until it is
/// accepted; panics on a first answer of 200.
async fn publish(server: &Server, id: &str, n: usize) {
    let (statuses, body) = call_through_5xx(
        server,
        "POST",
        "/v1/tenants/acme/events",
        Some(json!({"id": id, "type": "fault.test", "data": {"n": n}})),
    )
    .await;
    assert_ne!(
        statuses[0], 200,
        "the first publish of {id} was answered as a duplicate"
    );
    let last = *statuses.last().unwrap_or(&0);
    assert!(
        last == 202 || (last == 200 && statuses.len() > 1),
        "publish {id}: {statuses:?} {body}"
    );
}

/// Deletes a subscription while its receiver holds its one attempt in
/// flight; returns when the deletion was answered.
async fn delete_mid_attempt(server: &Server, rx: &Receiver, name: &str, id: &str) -> Instant {
    assert!(
        eventually(WAIT, || rx.count(name) >= 3).await,
        "{name} got deliveries before its deletion"
    );
    let gate = Gate::new();
    rx.script(name, vec![Reply::Gated(gate.clone(), 500)]);
    let held = eventually(WAIT, || gate.reached() >= 1).await;
    assert!(held, "an attempt to {name} reached its gate");
    let (statuses, body) = call_through_5xx(
        server,
        "DELETE",
        &format!("/v1/tenants/acme/subscriptions/{id}"),
        None,
    )
    .await;
    // A DELETE that answered 5xx may still have taken effect; its retry
    // then finds nothing to delete.
    let last = *statuses.last().unwrap_or(&0);
    assert!(
        last == 204 || (last == 404 && statuses.len() > 1),
        "DELETE {name}: {statuses:?} {body}"
    );
    let answered = Instant::now();
    gate.open();
    answered
}

/// Every (endpoint, event) whose `webhook-attempt` values, in arrival
/// order, are not exactly 1, 2, ..., k.
fn bad_attempt_sequences(rx: &Receiver) -> Vec<String> {
    let mut seqs: BTreeMap<(String, String), Vec<u32>> = BTreeMap::new();
    for r in rx.all() {
        let attempt = r.header("webhook-attempt").parse().unwrap_or(0);
        seqs.entry((r.path.clone(), r.header("webhook-id")))
            .or_default()
            .push(attempt);
    }
    seqs.into_iter()
        .filter(|(_, s)| !s.iter().copied().eq(1..=s.len() as u32))
        .map(|((path, id), s)| format!("{path} {id}: {s:?}"))
        .collect()
}

fn missing(rx: &Receiver, name: &str, ids: &[String]) -> usize {
    let seen: HashSet<String> = rx
        .requests(name)
        .iter()
        .map(|r| r.header("webhook-id"))
        .collect();
    ids.iter().filter(|id| !seen.contains(*id)).count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_injected_aws_faults_nothing_accepted_is_lost_nothing_follows_a_delete_and_attempt_numbers_count_up(
) {
    let env = test_env(&[
        ("HOOKLANE_RETRY_SCHEDULE", "0s,1s,1s,1s,1s,1s,1s,1s,1s,1s"),
        ("HOOKLANE_ATTEMPT_TIMEOUT", "5s"),
    ]);
    // The resources are created directly; the server's every call then
    // goes through the proxy.
    let settings = aws::fresh_resources(12).await;
    let proxy = FaultProxy::start(&aws::endpoint()).await;
    let server = Server::start_aws_with(env, aws::sdk_at(&proxy.endpoint).await, settings).await;
    proxy.set_rate(RATE);

    let rx = Receiver::start().await;
    rx.script("flaky-0", vec![Reply::Status(500), Reply::Status(500)]);
    let mut ids: HashMap<&str, String> = HashMap::new();
    for name in KEPT.iter().chain(DOOMED.iter()) {
        ids.insert(name, subscribe(&server, &rx.url(name)).await);
    }

    let run = aws::unique_prefix();
    let events: Vec<String> = (0..EVENTS).map(|n| format!("{run}-{n}")).collect();
    let publishing = {
        let (base, events) = (server.base.clone(), events.clone());
        tokio::spawn(async move {
            let client = Server::connect(&base).await;
            for (n, id) in events.iter().enumerate() {
                publish(&client, id, n).await;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
    };
    let (first, second) = tokio::join!(
        delete_mid_attempt(&server, &rx, DOOMED[0], &ids[DOOMED[0]]),
        delete_mid_attempt(&server, &rx, DOOMED[1], &ids[DOOMED[1]]),
    );
    let deleted = [(DOOMED[0], first), (DOOMED[1], second)];
    publishing.await.expect("every event was published");

    let all_arrived = eventually(WAIT, || {
        KEPT.iter().all(|name| missing(&rx, name, &events) == 0)
    })
    .await;
    let summary: Vec<String> = KEPT
        .iter()
        .map(|name| format!("{name}: {} missing", missing(&rx, name, &events)))
        .collect();
    eprintln!(
        "calls: {} to DynamoDB, {} to SQS; faults injected: {:?}",
        proxy.calls("DynamoDB"),
        proxy.calls("AmazonSQS"),
        proxy.injected()
    );
    assert!(all_arrived, "not every accepted event arrived: {summary:?}");
    assert!(
        proxy.injected_into("DynamoDB") >= 1 && proxy.injected_into("AmazonSQS") >= 1,
        "faults reached both services: {:?}",
        proxy.injected()
    );
    for (name, answered) in deleted {
        let late: Vec<String> = rx
            .requests(name)
            .iter()
            .filter(|r| r.at > answered)
            .map(|r| {
                format!(
                    "{} attempt {}",
                    r.header("webhook-id"),
                    r.header("webhook-attempt")
                )
            })
            .collect();
        assert!(
            late.is_empty(),
            "{name} got requests after its 204: {late:?}"
        );
    }
    let bad = bad_attempt_sequences(&rx);
    assert!(
        bad.is_empty(),
        "attempt numbers that skip or repeat: {bad:?}"
    );
}
