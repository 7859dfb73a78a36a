//! Lanes per subscription, ordering keys and rate limits through `serve`
//! (G5): concurrency to one endpoint bounded by its lanes, order per key
//! across lanes, retries and a change of lanes, the rate limit at the
//! receiver, and the recovery ramp. Schedules are compressed; assertions
//! are about bounds, order and absence, with generous waits.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use hooklane_core::domain::{lane_of, EventId, LaneCount, OrderingKey};
use hooklane_tests::{
    eventually, on_both_backends, test_env, Backend, Gate, Receiver, Reply, Server,
};
use serde_json::{json, Value};

const WAIT: Duration = Duration::from_secs(90);

async fn subscribe_with(server: &Server, rx: &Receiver, name: &str, extra: Value) -> String {
    let mut body = json!({"url": rx.url(name), "event_types": ["*"]});
    for (k, v) in extra.as_object().expect("object") {
        body[k] = v.clone();
    }
    let (status, sub) = server
        .call("POST", "/v1/tenants/acme/subscriptions", Some(body))
        .await;
    assert_eq!(status, 201, "{sub}");
    sub["id"].as_str().expect("id").to_owned()
}

async fn patch(server: &Server, id: &str, body: Value) -> Value {
    let path = format!("/v1/tenants/acme/subscriptions/{id}");
    let (status, sub) = server.call("PATCH", &path, Some(body)).await;
    assert_eq!(status, 200, "{sub}");
    sub
}

/// Publishes `n` (and `key`, when given) as one event; returns its id.
async fn publish(server: &Server, n: usize, key: Option<&str>) -> String {
    let mut body = json!({"type": "o.n", "data": {"n": n}});
    if let Some(k) = key {
        body["ordering_key"] = json!(k);
        body["data"]["key"] = json!(k);
    }
    let (status, e) = server
        .call("POST", "/v1/tenants/acme/events", Some(body))
        .await;
    assert_eq!(status, 202, "{e}");
    e["id"].as_str().expect("id").to_owned()
}

/// The `data` of each request `name` received, in arrival order.
fn arrived(rx: &Receiver, name: &str) -> Vec<Value> {
    rx.requests(name)
        .iter()
        .map(|r| serde_json::from_slice::<Value>(&r.body).expect("json")["data"].clone())
        .collect()
}

/// The `n`s of each key, in arrival order (first arrival of each event).
fn by_key(data: &[Value]) -> HashMap<String, Vec<u64>> {
    let mut out: HashMap<String, Vec<u64>> = HashMap::new();
    for d in data {
        let key = d["key"].as_str().unwrap_or("").to_owned();
        let n = d["n"].as_u64().expect("n");
        let seen = out.entry(key).or_default();
        if !seen.contains(&n) {
            seen.push(n);
        }
    }
    out
}

/// Events that share a key arrived in order (those without one may not).
fn assert_in_order_per_key(data: &[Value]) {
    for (key, ns) in by_key(data).into_iter().filter(|(k, _)| !k.is_empty()) {
        let mut sorted = ns.clone();
        sorted.sort();
        assert_eq!(ns, sorted, "key {key:?} out of order");
    }
}

async fn sixty_four_lanes_bound_the_requests_in_flight_and_one_lane_keeps_order(backend: Backend) {
    let server = Server::start_on(backend, test_env(&[])).await;
    let rx = Receiver::start().await;
    let slow = Reply::Slow(Duration::from_millis(100), 204);
    rx.set_default("wide", slow.clone());
    rx.set_default("narrow", Reply::Slow(Duration::from_millis(20), 204));
    let wide = subscribe_with(&server, &rx, "wide", json!({"lanes": 64})).await;
    subscribe_with(&server, &rx, "narrow", json!({})).await;
    let (_, view) = server
        .call(
            "GET",
            &format!("/v1/tenants/acme/subscriptions/{wide}"),
            None,
        )
        .await;
    assert_eq!(view["lanes"], 64);
    assert_eq!(view["rate_limit"], Value::Null);

    // On moto every FIFO receive scans the queue, so one lane there takes
    // a few deliveries a second: fewer events keep the test short.
    let total = match backend {
        Backend::Embedded => 200,
        Backend::Aws => 64,
    };
    for n in 0..total {
        publish(&server, n, None).await;
    }
    assert!(
        eventually(WAIT, || rx.count("wide") >= total
            && rx.count("narrow") >= total)
        .await,
        "all arrive (wide {}, narrow {})",
        rx.count("wide"),
        rx.count("narrow")
    );
    let peak = rx.peak_in_flight("wide");
    assert!(peak <= 64, "at most one request per lane: {peak}");
    assert!(peak > 1, "lanes deliver concurrently: {peak}");
    assert_eq!(rx.peak_in_flight("narrow"), 1, "one lane: one at a time");
    let ns: Vec<u64> = arrived(&rx, "narrow")
        .iter()
        .map(|d| d["n"].as_u64().expect("n"))
        .collect();
    assert_eq!(
        ns,
        (0..total as u64).collect::<Vec<_>>(),
        "one lane: in order"
    );
}

async fn ordering_keys_keep_their_order_over_eight_lanes_and_a_retry_holds_only_its_lane(
    backend: Backend,
) {
    let server = Server::start_on(
        backend,
        test_env(&[("HOOKLANE_RETRY_SCHEDULE", "0s,15s,15s")]),
    )
    .await;
    let rx = Receiver::start().await;
    rx.set_default("keys", Reply::Slow(Duration::from_millis(10), 204));
    rx.script("keys", vec![Reply::Status(503)]);
    subscribe_with(&server, &rx, "keys", json!({"lanes": 8})).await;

    // The stuck key's first event is the first request: it fails, and its
    // retry is 15 s away (publishing the rest takes a few seconds on moto).
    let stuck_id = publish(&server, 0, Some("key-0")).await;
    assert!(eventually(WAIT, || rx.count("keys") == 1).await);
    // 20 keys, 5 events each (3 on moto, whose FIFO receives slow down
    // with every message queued).
    let per_key = match backend {
        Backend::Embedded => 5,
        Backend::Aws => 3,
    };
    let keys: Vec<String> = (0..20).map(|k| format!("key-{k}")).collect();
    for n in 1..=per_key {
        for k in &keys {
            publish(&server, n, Some(k)).await;
        }
    }
    let unkeyed: Vec<String> = publish_unkeyed(&server, 3).await;
    let expected = 1 + 20 * per_key + unkeyed.len();
    assert!(
        eventually(WAIT, || by_key(&arrived(&rx, "keys"))
            .values()
            .map(Vec::len)
            .sum::<usize>()
            >= expected)
        .await,
        "every event arrives"
    );
    let lanes = LaneCount::parse(8).expect("lanes");
    let lane = |k: &str| {
        let key = OrderingKey::parse(k).expect("key");
        lane_of(Some(&key), &EventId::parse(&stuck_id).expect("id"), lanes)
    };
    let data = arrived(&rx, "keys");
    assert_in_order_per_key(&data);
    let (_, event) = server
        .call("GET", &format!("/v1/tenants/acme/events/{stuck_id}"), None)
        .await;
    assert_eq!(event["ordering_key"], "key-0");
    assert_eq!(event["deliveries"][0]["lane"], lane("key-0"), "{event}");
    assert_eq!(
        by_key(&data)[""].len(),
        unkeyed.len(),
        "events without a key arrive"
    );

    // Until the stuck delivery's retry, nothing of its lane arrived, while
    // other lanes went on.
    let retry_at = data
        .iter()
        .skip(1)
        .position(|d| d["key"] == "key-0" && d["n"] == 0)
        .expect("the retry arrived")
        + 1;
    let before = &data[1..retry_at];
    assert!(
        before
            .iter()
            .all(|d| d["key"].as_str().is_none_or(|k| lane(k) != lane("key-0"))),
        "nothing of the retrying lane went ahead of its head: {before:?}"
    );
    assert!(
        before.iter().any(|d| d["key"].is_string()),
        "other lanes went on while it waited"
    );
}

/// Publishes `n` events without a key; returns their ids.
async fn publish_unkeyed(server: &Server, n: usize) -> Vec<String> {
    let mut ids = Vec::new();
    for i in 0..n {
        ids.push(publish(server, 1000 + i, None).await);
    }
    ids
}

async fn a_rate_limit_of_40_on_16_lanes_holds_in_every_second_and_null_lifts_it(backend: Backend) {
    let server = Server::start_on(backend, test_env(&[])).await;
    let rx = Receiver::start().await;
    // moto delivers a few tens a second in all, so on it the limit is 10.
    let limit = match backend {
        Backend::Embedded => 40,
        Backend::Aws => 10,
    };
    let id = subscribe_with(
        &server,
        &rx,
        "limited",
        json!({"lanes": 16, "rate_limit": limit}),
    )
    .await;
    let first = 4 * limit;
    let bound = limit + limit / 10;
    for n in 0..first {
        publish(&server, n, None).await;
    }
    assert!(
        eventually(WAIT, || rx.count("limited") >= first).await,
        "all arrive ({})",
        rx.count("limited")
    );
    let limited = busiest_second(
        &rx.requests("limited")
            .iter()
            .map(|r| r.at)
            .collect::<Vec<_>>(),
    );
    assert!(
        limited <= bound,
        "at most {limit} + a tenth in any second: {limited}"
    );

    // At one a second, then lifted: the same events come at once.
    patch(&server, &id, json!({"rate_limit": 1})).await;
    let slow_from = rx.count("limited");
    for n in 0..5 {
        publish(&server, 10_000 + n, None).await;
    }
    assert!(eventually(WAIT, || rx.count("limited") >= slow_from + 5).await);
    let slow: Vec<Instant> = rx.requests("limited")[slow_from..]
        .iter()
        .map(|r| r.at)
        .collect();
    assert!(busiest_second(&slow) <= 2, "one a second: {slow:?}");
    let span = *slow.iter().max().expect("arrived") - *slow.iter().min().expect("arrived");
    assert!(
        span >= Duration::from_millis(3500),
        "five starts a second apart span four seconds: {span:?}"
    );
    let lifted = patch(&server, &id, json!({"rate_limit": null})).await;
    assert_eq!(lifted["rate_limit"], Value::Null);
    let fast_from = rx.count("limited");
    for n in 0..10 {
        publish(&server, 20_000 + n, None).await;
    }
    assert!(eventually(WAIT, || rx.count("limited") >= fast_from + 10).await);
    let fast: Vec<Instant> = rx.requests("limited")[fast_from..]
        .iter()
        .map(|r| r.at)
        .collect();
    let busiest = busiest_second(&fast);
    assert!(
        busiest > 2,
        "no limit after null: {busiest} in the busiest second"
    );
}

/// The most arrivals in any one-second window starting at an arrival.
fn busiest_second(at: &[Instant]) -> usize {
    let mut at = at.to_vec();
    at.sort();
    (0..at.len())
        .map(|i| {
            at[i..]
                .iter()
                .take_while(|t| **t < at[i] + Duration::from_secs(1))
                .count()
        })
        .max()
        .unwrap_or(0)
}

async fn after_a_failure_streak_the_recovery_ramp_runs_a_quarter_of_the_lanes(backend: Backend) {
    let server = Server::start_on(
        backend,
        test_env(&[
            ("HOOKLANE_RETRY_SCHEDULE", "0s"),
            // Long enough that publishing 64 events on a busy machine's
            // local AWS server still ends well within it.
            ("HOOKLANE_RECOVERY_RAMP", "after=1s,for=40s"),
        ]),
    )
    .await;
    let rx = Receiver::start().await;
    rx.script("ramp", vec![Reply::Status(503)]);
    rx.set_default("ramp", Reply::Slow(Duration::from_millis(200), 204));
    subscribe_with(&server, &rx, "ramp", json!({"lanes": 8})).await;

    // A parked delivery starts the streak; a success 1.5 s later ends it.
    publish(&server, 0, None).await;
    assert!(eventually(WAIT, || rx.count("ramp") == 1).await);
    tokio::time::sleep(Duration::from_millis(1500)).await;
    publish(&server, 1, None).await;
    assert!(eventually(WAIT, || rx.count("ramp") == 2).await);
    let ramp_began = Instant::now();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let base = rx.count("ramp");
    for n in 2..66 {
        publish(&server, n, None).await;
    }
    // Well within the ramp: two lanes of eight.
    tokio::time::sleep(
        (ramp_began + Duration::from_secs(10)).saturating_duration_since(Instant::now()),
    )
    .await;
    let during = rx.peak_in_flight("ramp");
    assert!(
        ramp_began.elapsed() < Duration::from_secs(39),
        "measured within the ramp"
    );
    assert!(
        rx.count("ramp") > base,
        "the ramp delivers on its quarter of the lanes"
    );
    assert!(
        during <= 2,
        "a quarter of 8 lanes during the ramp: {during}"
    );
    assert!(
        eventually(WAIT, || rx.count("ramp") >= 66).await,
        "all arrive ({})",
        rx.count("ramp")
    );
    let after = rx.peak_in_flight("ramp");
    assert!(after > 2, "full lanes after the ramp: {after}");
}

on_both_backends!(
    sixty_four_lanes_bound_the_requests_in_flight_and_one_lane_keeps_order,
    ordering_keys_keep_their_order_over_eight_lanes_and_a_retry_holds_only_its_lane,
    a_rate_limit_of_40_on_16_lanes_holds_in_every_second_and_null_lifts_it,
    after_a_failure_streak_the_recovery_ramp_runs_a_quarter_of_the_lanes,
    a_patch_from_one_lane_to_eight_and_then_to_three_keeps_per_key_order,
);

/// A change of lanes keeps per-key order (embedded: a lane head waits for
/// its key's older delivery still pending on its old lane; AWS: a key's
/// new deliveries wait for the fence at the end of its old lane), also
/// when the lanes change again while the first change drains.
///
/// That the new lanes run side by side is shown with a gate rather than
/// by chance overlap: the first 40 requests (the old lane's, and on the
/// embedded backend a few new lanes' heads whose keys' old deliveries are
/// done) are answered after 30 ms, every later one is held until two are
/// held at once. On AWS the new lanes' heads come back from their fence waits at
/// times of their own, so short requests need not overlap.
async fn a_patch_from_one_lane_to_eight_and_then_to_three_keeps_per_key_order(backend: Backend) {
    let server = Server::start_on(backend, test_env(&[])).await;
    let rx = Receiver::start().await;
    let gate = Gate::new();
    rx.set_default("change", Reply::Gated(gate.clone(), 204));
    rx.script(
        "change",
        vec![Reply::Slow(Duration::from_millis(30), 204); 40],
    );
    let id = subscribe_with(&server, &rx, "change", json!({})).await;
    let keys: Vec<String> = (0..8).map(|k| format!("k{k}")).collect();
    for n in 0..5 {
        for k in &keys {
            publish(&server, n, Some(k)).await;
        }
    }
    // Queued on the one lane (30 ms each: 1.2 s of work) when the lanes
    // change; the next events go to eight lanes.
    let view = patch(&server, &id, json!({"lanes": 8})).await;
    assert_eq!(view["lanes"], 8);
    assert!(rx.count("change") < 40, "still queued at the change");
    for n in 5..10 {
        for k in &keys {
            publish(&server, n, Some(k)).await;
        }
    }
    let view = patch(&server, &id, json!({"lanes": 3})).await;
    assert_eq!(view["lanes"], 3);
    for n in 10..13 {
        for k in &keys {
            publish(&server, n, Some(k)).await;
        }
    }
    let side_by_side = eventually(WAIT, || rx.peak_in_flight("change") > 1).await;
    gate.open();
    assert!(side_by_side, "eight lanes after the change");
    assert!(
        eventually(WAIT, || rx.count("change") >= 104).await,
        "all arrive ({})",
        rx.count("change")
    );
    assert_in_order_per_key(&arrived(&rx, "change"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lanes_rate_limits_and_ordering_keys_out_of_range_are_refused_with_the_field_named() {
    let server = Server::start_on(Backend::Embedded, test_env(&[])).await;
    let rx = Receiver::start().await;
    let subs = "/v1/tenants/acme/subscriptions";
    for (field, value) in [
        ("lanes", json!(0)),
        ("lanes", json!(257)),
        ("lanes", json!(null)),
        ("lanes", json!(1.5)),
        ("rate_limit", json!(0)),
        ("rate_limit", json!(10_001)),
        ("rate_limit", json!("10")),
    ] {
        let body = json!({"url": rx.url("x"), "event_types": ["*"], field: value});
        let (status, problem) = server.call("POST", subs, Some(body)).await;
        assert!(matches!(status, 400 | 422), "{field}={value}: {status}");
        assert_eq!(problem["field"], field, "{problem}");
    }
    let (_, list) = server.call("GET", subs, None).await;
    assert_eq!(
        list["items"].as_array().map(Vec::len),
        Some(0),
        "nothing created"
    );
    // As in JSON Schema, a number with no fraction is an integer.
    let body = json!({"url": rx.url("x"), "event_types": ["*"], "lanes": 8.0, "rate_limit": 1e2});
    let (status, sub) = server.call("POST", subs, Some(body)).await;
    assert_eq!(status, 201, "{sub}");
    assert_eq!(
        (sub["lanes"].clone(), sub["rate_limit"].clone()),
        (json!(8), json!(100))
    );

    let events = "/v1/tenants/acme/events";
    for key in [
        json!(""),
        json!("k".repeat(257)),
        json!("é".repeat(129)),
        json!(7),
    ] {
        let body = json!({"type": "a.b", "data": {}, "ordering_key": key});
        let (status, problem) = server.call("POST", events, Some(body)).await;
        assert!(matches!(status, 400 | 422), "{status}");
        assert_eq!(problem["field"], "ordering_key", "{problem}");
    }
    // 256 bytes of UTF-8 is the most.
    let id = publish(&server, 1, Some(&"é".repeat(128))).await;
    let (_, event) = server.call("GET", &format!("{events}/{id}"), None).await;
    assert_eq!(event["ordering_key"], "é".repeat(128));
}
