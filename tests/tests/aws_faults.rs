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

/// `serve --backend aws` in this process on fresh resources (made
/// directly, not through the proxy), every call of its SDK clients going
/// through a fault proxy that injects nothing yet; a compressed ladder and
/// a 5 s attempt timeout.
async fn serve_through_proxy() -> (FaultProxy, Server) {
    let env = test_env(&[
        ("HOOKLANE_RETRY_SCHEDULE", "0s,1s,1s,1s,1s,1s,1s,1s,1s,1s"),
        ("HOOKLANE_ATTEMPT_TIMEOUT", "5s"),
    ]);
    let settings = aws::fresh_resources(12).await;
    let proxy = FaultProxy::start_on(aws::Standin::chosen().endpoints()).await;
    let server = Server::start_aws_with(env, aws::sdk_at(&proxy.endpoint).await, settings).await;
    (proxy, server)
}

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
    subscribe_in(server, "acme", url).await
}

async fn subscribe_in(server: &Server, tenant: &str, url: &str) -> String {
    let (statuses, body) = call_through_5xx(
        server,
        "POST",
        &format!("/v1/tenants/{tenant}/subscriptions"),
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
    publish_in(server, "acme", id, n).await
}

async fn publish_in(server: &Server, tenant: &str, id: &str, n: usize) {
    let (statuses, body) = call_through_5xx(
        server,
        "POST",
        &format!("/v1/tenants/{tenant}/events"),
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
    let (proxy, server) = serve_through_proxy().await;
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

/// Publishes `ids` as one event batch, retrying 5xx with the same ids,
/// until every item is accepted (a retry may find some accepted before).
async fn publish_batch(server: &Server, ids: &[String]) {
    let events: Vec<Value> = ids
        .iter()
        .map(|id| json!({"id": id, "type": "fault.test", "data": {}}))
        .collect();
    let (statuses, body) = call_through_5xx(
        server,
        "POST",
        "/v1/tenants/acme/event-batches",
        Some(json!({ "events": events })),
    )
    .await;
    assert_eq!(statuses.last(), Some(&200), "batch: {statuses:?} {body}");
    for item in body["items"].as_array().expect("items") {
        let status = item["status"].as_u64().unwrap_or(0);
        assert!(
            status == 202 || (status == 200 && statuses.len() > 1),
            "batch item: {item} after {statuses:?}"
        );
    }
}

/// The event ids `name` received, in the order of their first arrival.
fn first_arrivals(rx: &Receiver, name: &str) -> Vec<String> {
    let mut seen = HashSet::new();
    rx.requests(name)
        .iter()
        .map(|r| r.header("webhook-id"))
        .filter(|id| seen.insert(id.clone()))
        .collect()
}

/// Requests that repeated an event `name` already had, beyond `retries`
/// (the failures its script answered).
fn repeats(rx: &Receiver, name: &str, retries: usize) -> usize {
    rx.requests(name)
        .len()
        .saturating_sub(first_arrivals(rx, name).len() + retries)
}

/// Per-entry faults at the wire: a fifth of the entries of every
/// `SendMessageBatch`, `BatchGetItem` and `BatchWriteItem` come back
/// undone (failed, unprocessed) from calls that succeed, a fifth of the
/// transactions are cancelled for throttling, and every call is answered
/// up to 40 ms late. A tenant of 55 subscriptions fans out through its type
/// index (written with `BatchWriteItem`, read with `BatchGetItem`, and by
/// the delivery view); a subscription that fails its first attempts puts
/// its lane into retry while later deliveries come (a lane in retry keeps
/// them in the table, one transaction each, and refills them); event
/// batches put several deliveries of one lane in one `SendMessageBatch`.
/// Nothing accepted is lost, every lane keeps acceptance order, and attempt
/// numbers count up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batch_calls_leaving_entries_undone_lose_nothing_and_keep_every_lane_in_order() {
    let (proxy, server) = serve_through_proxy().await;
    proxy.set_entry_rate(200);
    proxy.set_delay(Duration::from_millis(40));

    let rx = Receiver::start().await;
    rx.script("flaky", vec![Reply::Status(500); 4]);
    for name in ["steady", "flaky"] {
        subscribe(&server, &rx.url(name)).await;
    }
    let wide: Vec<String> = (0..55).map(|i| format!("wide-{i}")).collect();
    for name in &wide {
        subscribe_in(&server, "wide", &rx.url(name)).await;
    }

    let run = aws::unique_prefix();
    let mut accepted = Vec::new();
    for round in 0..6 {
        let single = format!("{run}-{round}");
        publish(&server, &single, round).await;
        accepted.push(single);
        let batch: Vec<String> = (0..4).map(|k| format!("{run}-{round}-{k}")).collect();
        publish_batch(&server, &batch).await;
        accepted.extend(batch);
    }
    let mut wide_events = Vec::new();
    for n in 0..4 {
        let id = format!("{run}-wide-{n}");
        publish_in(&server, "wide", &id, n).await;
        wide_events.push(id);
        // Each fan-out of the tenant before the next: the first finds it
        // wide and writes its index, the later ones read through it.
        assert!(
            eventually(WAIT, || missing(&rx, "wide-0", &wide_events) == 0).await,
            "the wide tenant's event {n} arrived"
        );
    }
    // The delivery view reads the records of the wide tenant's 55
    // subscriptions by key (`BatchGetItem`).
    for id in &wide_events {
        let path = format!("/v1/tenants/wide/events/{id}");
        let (statuses, body) = call_through_5xx(&server, "GET", &path, None).await;
        assert_eq!(statuses.last(), Some(&200), "{body}");
        assert_eq!(
            body["deliveries"].as_array().map(Vec::len),
            Some(55),
            "{body}"
        );
    }

    let all_arrived = eventually(WAIT, || {
        ["steady", "flaky"]
            .iter()
            .all(|name| missing(&rx, name, &accepted) == 0)
            && wide
                .iter()
                .all(|name| missing(&rx, name, &wide_events) == 0)
    })
    .await;
    let faults = proxy.entry_faults();
    eprintln!(
        "entry faults: {faults:?}; repeats: steady {}, flaky {}, wide {}",
        repeats(&rx, "steady", 0),
        repeats(&rx, "flaky", 4),
        wide.iter().map(|n| repeats(&rx, n, 0)).sum::<usize>()
    );
    assert!(
        all_arrived,
        "missing: steady {}, flaky {}, wide {}",
        missing(&rx, "steady", &accepted),
        missing(&rx, "flaky", &accepted),
        wide.iter()
            .map(|n| missing(&rx, n, &wide_events))
            .sum::<usize>()
    );
    for op in [
        "AmazonSQS.SendMessageBatch",
        "DynamoDB_20120810.BatchGetItem",
        "DynamoDB_20120810.BatchWriteItem",
        "DynamoDB_20120810.TransactWriteItems",
    ] {
        assert!(
            faults.get(op).copied().unwrap_or(0) >= 1,
            "{op} had entries fail: {faults:?}"
        );
    }
    for name in ["steady", "flaky"] {
        assert_eq!(
            first_arrivals(&rx, name),
            accepted,
            "{name}'s lane in acceptance order"
        );
    }
    for name in &wide {
        assert_eq!(first_arrivals(&rx, name), wide_events, "{name} in order");
    }
    let bad = bad_attempt_sequences(&rx);
    assert!(
        bad.is_empty(),
        "attempt numbers that skip or repeat: {bad:?}"
    );
}

/// A minute in which every DynamoDB and SQS call is throttled, begun with
/// deliveries queued and publishing going on: every publish answers 503
/// with `Retry-After` (nothing can be stored), never 500; when the
/// throttling stops, every event answered 202 before and after (the
/// refused ones sent again) arrives, in acceptance order, with attempt
/// numbers counting up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_minute_of_throttling_everywhere_loses_nothing_and_the_backlog_drains_after() {
    let (proxy, server) = serve_through_proxy().await;
    let rx = Receiver::start().await;
    for name in KEPT {
        subscribe(&server, &rx.url(name)).await;
    }
    rx.script("flaky-0", vec![Reply::Status(500), Reply::Status(500)]);
    let run = aws::unique_prefix();
    let mut accepted = Vec::new();
    for n in 0..5 {
        let id = format!("{run}-before-{n}");
        publish(&server, &id, n).await;
        accepted.push(id);
    }
    proxy.throttle_all(true);
    let began = Instant::now();
    let mut during = Vec::new();
    let mut n = 0;
    while began.elapsed() < Duration::from_secs(60) {
        let id = format!("{run}-during-{n}");
        let resp = server
            .http
            .post(format!("{}/v1/tenants/acme/events", server.base))
            .bearer_auth(hooklane_tests::TOKEN)
            .json(&json!({"id": id, "type": "fault.test", "data": {"n": n}}))
            .send()
            .await
            .expect("an answer");
        let status = resp.status().as_u16();
        let retry_after = resp.headers().contains_key("retry-after");
        let body = resp.text().await.unwrap_or_default();
        assert!(
            status == 503 && retry_after,
            "during the throttling: {status} (Retry-After: {retry_after}) {body}"
        );
        during.push((id, status));
        n += 1;
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    proxy.throttle_all(false);
    // What was refused is sent again, in order, now that calls go through.
    for (id, status) in &during {
        if *status == 503 {
            publish(&server, id, 0).await;
            accepted.push(id.clone());
        }
    }
    for n in 0..5 {
        let id = format!("{run}-after-{n}");
        publish(&server, &id, n).await;
        accepted.push(id);
    }
    let all_arrived = eventually(WAIT, || {
        KEPT.iter().all(|name| missing(&rx, name, &accepted) == 0)
    })
    .await;
    let throttled: u64 = proxy
        .injected()
        .iter()
        .filter(|((_, f), _)| *f == hooklane_tests::faults::Fault::Throttle)
        .map(|(_, n)| n)
        .sum();
    eprintln!(
        "throttled calls: {throttled}; publishes during the minute: {:?}",
        during.iter().map(|(_, s)| s).collect::<Vec<_>>()
    );
    assert!(
        all_arrived,
        "missing: {:?}",
        KEPT.iter()
            .map(|name| missing(&rx, name, &accepted))
            .collect::<Vec<_>>()
    );
    let throttled_in = |service: &str| {
        proxy
            .injected()
            .iter()
            .filter(|((op, f), _)| {
                op.starts_with(service) && *f == hooklane_tests::faults::Fault::Throttle
            })
            .count()
    };
    assert!(
        throttled_in("DynamoDB") >= 1 && throttled_in("AmazonSQS") >= 1,
        "both services were throttled: {:?}",
        proxy.injected()
    );
    for name in KEPT {
        assert_eq!(
            first_arrivals(&rx, name),
            accepted,
            "{name} in acceptance order"
        );
    }
    let bad = bad_attempt_sequences(&rx);
    assert!(
        bad.is_empty(),
        "attempt numbers that skip or repeat: {bad:?}"
    );
}
