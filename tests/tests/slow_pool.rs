//! The slow pool on AWS (through `serve --backend aws` on the local
//! AWS-compatible server, with the stand-in's invocation pools as small as
//! a test can afford): hung receivers leave the main pool, so another
//! tenant's deliveries keep their normal latency, and a lane whose
//! receiver answers again comes back to the main pool, in order. Bounds are
//! generous; what is asserted is order and absence of delay, not
//! milliseconds.

use std::time::{Duration, Instant};

use hooklane_tests::{eventually, test_env, Backend, Gate, Receiver, Reply, Server};
use serde_json::{json, Value};
use tokio::sync::Mutex;

/// One test at a time: the 200 hung receivers keep the local server busy
/// enough to slow every other test's calls.
static ONE_AT_A_TIME: Mutex<()> = Mutex::const_new(());

/// The first arrival time of each event a receiver got, by event id.
fn arrival(rx: &Receiver, name: &str, event: &str) -> Option<Instant> {
    rx.requests(name)
        .into_iter()
        .find(|r| r.header("webhook-id") == event)
        .map(|r| r.at)
}

/// Publishes to tenant `b` and waits for the arrival; its latency.
async fn latency(server: &Server, rx: &Receiver, n: usize) -> Duration {
    let sent = Instant::now();
    let id = server.publish("b", "b.ping", json!({ "n": n })).await;
    assert!(
        eventually(Duration::from_secs(120), || arrival(rx, "b", &id).is_some()).await,
        "tenant b's event {n} arrives"
    );
    arrival(rx, "b", &id).expect("arrived") - sent
}

/// G2 on AWS: with five invocations per pool (50 attempts at once), 200
/// receivers of tenant `a` that accept and never answer hold the slow
/// pool's 50 requests open, and tenant `b`'s deliveries keep their normal
/// latency through a minute of publishing. Without the slow pool, the hung
/// attempts hold every main-pool invocation for the whole attempt timeout
/// (60 s) and `b` waits that long.
///
/// Tenant `a` publishes once: on the local AWS-compatible server every
/// send to a FIFO queue scans the messages already in it, so handing 200
/// more over to a slow queue that holds hundreds takes seconds of its
/// time, which shows as latency of every call it serves (the real queue
/// has no such cost; BENCHMARKS.md has the figures for AWS).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hundred_hung_receivers_of_one_tenant_do_not_delay_another_tenants_deliveries() {
    let _one = ONE_AT_A_TIME.lock().await;
    let server = Server::start_on(
        Backend::Aws,
        test_env(&[
            ("HOOKLANE_LOCAL_MAX_INVOCATIONS", "5"),
            ("HOOKLANE_LOCAL_SLOW_MAX_INVOCATIONS", "5"),
            // The slow pool itself is under test: tenant `a` may hold more
            // than its default share (half the main pool, 25 here), so that
            // its hung requests fill the slow pool.
            ("HOOKLANE_TENANT_MAX_IN_FLIGHT", "4096"),
            ("HOOKLANE_ATTEMPT_TIMEOUT", "2m"),
            ("HOOKLANE_SLOW_AFTER", "1s"),
            ("HOOKLANE_RETRY_SCHEDULE", "0s,1s"),
        ]),
    )
    .await;
    let rx = Receiver::start().await;
    server.subscribe("b", &rx.url("b"), &["*"]).await;
    // Tenant b's normal latency, before anything hangs.
    let mut normal = Duration::ZERO;
    for n in 0..5 {
        normal = normal.max(latency(&server, &rx, n).await);
    }
    for i in 0..200 {
        let name = format!("hang{i}");
        rx.set_default(&name, Reply::Hang);
        server.subscribe("a", &rx.url(&name), &["*"]).await;
    }
    server.publish("a", "a.load", json!({})).await;
    // The first attempts the main pool makes (at most 50 at once) are cut
    // off after 1 s; the messages received after waiting longer than that
    // and a poll's pause go to the slow pool without one. There they hang, 50 at a time, for
    // 2 min. The slow queue fills as the hand-overs come, and a receive
    // takes what is there (a FIFO queue's mapping has no batching window),
    // so the first batches can be short and hold fewer than 50 for their
    // 2 min; the batches after them come full: the wait covers two rounds.
    // The main pool makes at most 100 requests (two rounds of 50, each cut
    // off after 1 s) before the queue reads as behind, so 150 requests
    // with 50 held are the slow pool's; so is the check after the minute
    // below (50 still held, where the main pool cuts off after 1 s).
    let tried = |rx: &Receiver| {
        (0..200)
            .map(|i| rx.count(&format!("hang{i}")))
            .sum::<usize>()
    };
    assert!(
        eventually(Duration::from_secs(330), || tried(&rx) >= 150
            && rx.hanging() >= 50)
        .await,
        "the slow pool holds 50 hung requests (got {} of {} requests)",
        rx.hanging(),
        tried(&rx)
    );
    // A minute of publishing to b, every 2 s: normal latency plus a
    // receive cycle (the stand-in polls an idle queue at most a second
    // apart), with room for a busy machine and a busy local server (one
    // run saw 4.9 s once against 0.7 s). Without the slow pool the wait is
    // the whole 2 min attempt timeout.
    let bound = normal + Duration::from_secs(10);
    let started = Instant::now();
    let mut worst = Duration::ZERO;
    let mut n = 5;
    while started.elapsed() < Duration::from_secs(60) {
        worst = worst.max(latency(&server, &rx, n).await);
        n += 1;
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    assert!(
        worst <= bound,
        "tenant b's worst latency {worst:?} against a normal {normal:?}"
    );
    assert!(
        rx.hanging() >= 50,
        "hung requests still held open ({})",
        rx.hanging()
    );
}

/// Tenant `acme`'s attempt log of subscription `sub_id` (its first 50).
async fn attempt_log(server: &Server, sub_id: &str) -> Value {
    let (status, attempts) = server
        .call(
            "GET",
            &format!("/v1/tenants/acme/subscriptions/{sub_id}/attempts?limit=50"),
            None,
        )
        .await;
    assert_eq!(status, 200, "{attempts}");
    attempts
}

/// `serve --backend aws` where a lane moves to the slow pool after 1 s
/// and an attempt there times out after 3 s, retried each second.
async fn start_quick_to_move() -> Server {
    Server::start_on(
        Backend::Aws,
        test_env(&[
            ("HOOKLANE_ATTEMPT_TIMEOUT", "3s"),
            ("HOOKLANE_SLOW_AFTER", "1s"),
            ("HOOKLANE_RETRY_SCHEDULE", "0s,1s,1s,1s,1s,1s"),
        ]),
    )
    .await
}

/// Polls `GET /status` until the lanes it counts in the slow pool are
/// `want` (within 60 s); the last count read.
async fn slow_lanes_reach(server: &Server, want: u64) -> Option<u64> {
    let end = Instant::now() + Duration::from_secs(60);
    loop {
        let (status, body) = server.call("GET", "/status", None).await;
        assert_eq!(status, 200, "{body}");
        let n = body["backlog"]["slow_pool_lanes"].as_u64();
        if n == Some(want) || Instant::now() > end {
            return n;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// A lane whose receiver hangs moves to the slow pool; once its receiver
/// answers in time again it comes back to the main pool (where an attempt
/// is cut off after `HOOKLANE_SLOW_AFTER`), and every delivery arrives in
/// order throughout. `GET /status` counts the lane in the slow pool while
/// it is there, and not once it is back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lane_that_stops_hanging_comes_back_to_the_main_pool_in_order() {
    let _one = ONE_AT_A_TIME.lock().await;
    let server = start_quick_to_move().await;
    let rx = Receiver::start().await;
    // The first request is cut off in the main pool after 1 s; the second,
    // in the slow pool, times out after 3 s; then it answers at once.
    rx.script("r", vec![Reply::Hang, Reply::Hang]);
    let sub = server.subscribe("acme", &rx.url("r"), &["*"]).await;
    let mut ids = Vec::new();
    for n in 0..5 {
        ids.push(server.publish("acme", "o.n", json!({ "n": n })).await);
    }
    assert_eq!(
        slow_lanes_reach(&server, 1).await,
        Some(1),
        "the lane moved"
    );
    assert!(
        eventually(Duration::from_secs(90), || rx.count("r") >= 7).await,
        "the first five arrive ({})",
        rx.count("r")
    );
    // Back in the main pool once the last delivery handed over is done:
    // the next ones arrive in order too.
    assert_eq!(
        slow_lanes_reach(&server, 0).await,
        Some(0),
        "the lane is back"
    );
    for n in 5..10 {
        ids.push(server.publish("acme", "o.n", json!({ "n": n })).await);
    }
    assert!(
        eventually(Duration::from_secs(90), || rx.count("r") >= 12).await,
        "all ten arrive ({})",
        rx.count("r")
    );
    let mut firsts: Vec<String> = Vec::new();
    for r in rx.requests("r") {
        let id = r.header("webhook-id");
        if !firsts.contains(&id) {
            firsts.push(id);
        }
    }
    assert_eq!(firsts, ids, "in order, first arrival of each");
    // In the main pool an attempt is cut off after 1 s: a reply that takes
    // 2 s times out there (in the slow pool it would have been delivered at
    // the first attempt).
    rx.script("r", vec![Reply::Slow(Duration::from_secs(2), 204)]);
    let probe = server.publish("acme", "o.n", json!({ "n": 10 })).await;
    let retried = eventually(Duration::from_secs(120), || rx.count("r") >= 14).await;
    let sub_id = sub["id"].as_str().expect("id");
    let attempts = attempt_log(&server, sub_id).await;
    assert!(
        retried,
        "the probe is retried and arrives ({}): {attempts}",
        rx.count("r")
    );
    let first: Vec<&Value> = attempts["items"]
        .as_array()
        .expect("items")
        .iter()
        .filter(|a| a["event_id"] == probe.as_str() && a["attempt"] == 1)
        .collect();
    assert_eq!(first.len(), 1, "{attempts}");
    assert_eq!(
        first[0]["error"], "timeout",
        "cut off in the main pool: {attempts}"
    );
}

/// The message whose cut-off attempt moves its lane to the slow pool is
/// handed over with its mark written in the same write as the lane's flag
/// (`store::Received`); when the slow pool delivers it, the lane comes back
/// to the main pool at once (a wrong mark would keep it in the slow pool
/// until a later message of it came through there: checked by writing a
/// wrong one, which fails this test).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lane_moved_by_one_message_comes_back_when_that_message_is_delivered() {
    let _one = ONE_AT_A_TIME.lock().await;
    let server = start_quick_to_move().await;
    let rx = Receiver::start().await;
    rx.script("r", vec![Reply::Hang]);
    let sub = server.subscribe("acme", &rx.url("r"), &["*"]).await;
    let sub_id = sub["id"].as_str().expect("id");
    let first = server.publish("acme", "o.n", json!({ "n": 0 })).await;
    // Its retry is delivered in the slow pool, and recorded; the lane
    // comes back right after (a second's margin for that write).
    let timed_out_then_delivered = vec![json!("timeout"), Value::Null];
    let attempts = errors_become(&server, sub_id, &first, &timed_out_then_delivered).await;
    assert_eq!(
        errors_of(&attempts, &first),
        timed_out_then_delivered,
        "the first event is retried and delivered: {attempts}"
    );
    tokio::time::sleep(Duration::from_secs(1)).await;
    // A reply of 2 s is cut off in the main pool (1 s), and delivered at
    // once in the slow pool (3 s).
    rx.script("r", vec![Reply::Slow(Duration::from_secs(2), 204)]);
    let probe = server.publish("acme", "o.n", json!({ "n": 1 })).await;
    assert!(
        eventually(Duration::from_secs(60), || rx.count("r") >= 4).await,
        "the probe is retried and arrives ({})",
        rx.count("r")
    );
    let attempts = attempt_log(&server, sub_id).await;
    assert_eq!(
        errors_of(&attempts, &probe),
        timed_out_then_delivered,
        "the probe's first attempt ran in the main pool again: {attempts}"
    );
}

/// A first attempt to a new endpoint, received after waiting in the queue
/// past the first cut-off (1 s, the default), goes to the slow pool with no
/// attempt in the main pool: a receiver that answers in 2 s is delivered
/// at its first attempt there, and one that fails at once is parked there
/// and its lane comes back. With the pool keeping up, the same receiver
/// is cut off in the main pool first (shown first, as the control). The
/// main pool is one invocation here, held by another tenant's request
/// that waits on a gate while the new endpoint's event queues behind it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_endpoints_first_attempt_waits_for_no_cut_off_when_the_pool_is_behind() {
    let _one = ONE_AT_A_TIME.lock().await;
    let server = Server::start_on(
        Backend::Aws,
        test_env(&[
            ("HOOKLANE_LOCAL_MAX_INVOCATIONS", "1"),
            ("HOOKLANE_ATTEMPT_TIMEOUT", "10s"),
            ("HOOKLANE_RETRY_SCHEDULE", "0s,1s"),
        ]),
    )
    .await;
    let rx = Receiver::start().await;
    // The control: the pool keeps up, and the first attempt is cut off.
    rx.set_default("early", Reply::Slow(Duration::from_secs(2), 204));
    let early = server.subscribe("acme", &rx.url("early"), &["*"]).await;
    let early_id = early["id"].as_str().expect("id");
    let event = server.publish("acme", "o.n", json!({ "n": 0 })).await;
    let cut_then_delivered = vec![json!("timeout"), Value::Null];
    let attempts = errors_become(&server, early_id, &event, &cut_then_delivered).await;
    assert_eq!(
        errors_of(&attempts, &event),
        cut_then_delivered,
        "{attempts}"
    );
    // Another tenant's endpoint, known to answer, holds the one invocation.
    server.subscribe("other", &rx.url("blocker"), &["*"]).await;
    server.publish("other", "o.n", json!({})).await;
    assert!(eventually(Duration::from_secs(30), || rx.count("blocker") == 1).await);
    let gate = Gate::new();
    rx.set_default("blocker", Reply::Gated(gate.clone(), 204));
    server.publish("other", "o.n", json!({})).await;
    assert!(
        eventually(Duration::from_secs(30), || gate.reached() == 1).await,
        "the blocker's request is held"
    );
    rx.set_default("late", Reply::Slow(Duration::from_secs(2), 204));
    let late = server.subscribe("acme", &rx.url("late"), &["*"]).await;
    // A new endpoint that fails at once moves too, and comes back when its
    // delivery is parked after answers in time.
    rx.set_default("failing", Reply::Status(500));
    server.subscribe("acme", &rx.url("failing"), &["*"]).await;
    let late_id = late["id"].as_str().expect("id");
    let event = server.publish("acme", "o.n", json!({ "n": 1 })).await;
    // Past the first cut-off and a poll's pause (2 s).
    tokio::time::sleep(Duration::from_secs(3)).await;
    gate.open();
    let delivered = vec![Value::Null];
    let attempts = errors_become(&server, late_id, &event, &delivered).await;
    assert_eq!(
        errors_of(&attempts, &event),
        delivered,
        "the first attempt ran in the slow pool: {attempts}"
    );
    assert_eq!(rx.count("late"), 1);
    assert!(eventually(Duration::from_secs(60), || rx.count("failing") == 2).await);
    assert_eq!(
        slow_lanes_reach(&server, 0).await,
        Some(0),
        "every lane is back in the main pool, the failing one's too"
    );
}

/// Polls the attempt log of `sub_id` until `event`'s errors are `want`
/// (within 60 s); the log as last read.
async fn errors_become(server: &Server, sub_id: &str, event: &str, want: &[Value]) -> Value {
    let end = Instant::now() + Duration::from_secs(60);
    loop {
        let attempts = attempt_log(server, sub_id).await;
        if errors_of(&attempts, event) == want || Instant::now() > end {
            return attempts;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The errors of `event`'s attempts in an attempt log, in attempt order
/// (`null` for the one delivered).
fn errors_of(attempts: &Value, event: &str) -> Vec<Value> {
    let items = attempts["items"].as_array().expect("items");
    let mut mine: Vec<&Value> = items.iter().filter(|a| a["event_id"] == event).collect();
    mine.sort_by_key(|a| a["attempt"].as_i64());
    mine.iter().map(|a| a["error"].clone()).collect()
}
