//! OTLP traces end to end, on both backends: `hooklane serve` (a child
//! process, its log at `warn`, as traces do not depend on the log's level)
//! with an OTLP/HTTP endpoint exports, for one publish to two
//! subscriptions, one trace: a `publish` span that continues the publish
//! request's `traceparent`, the `fan_out` span and both `attempt` spans
//! under it, each attempt's own context reaching its receiver as the
//! request's `traceparent`, each span with its tenant, event, subscription
//! and attempt. Without an endpoint (the default) no request carries a
//! `traceparent`.

use std::time::Duration;

use hooklane_tests::child::{free_port, hooklane_binary, spawn, tail, Killed, State};
use hooklane_tests::{
    eventually, on_both_backends, test_env, Backend, Receiver, Reply, Server, TOKEN,
};
use serde_json::{json, Value};

const WAIT: Duration = Duration::from_secs(30);
const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const PARENT: &str = "00f067aa0ba902b7";

/// Every span the collector received: (name, trace id, span id, parent id,
/// attributes by key).
fn spans(rx: &Receiver) -> Vec<(String, String, String, String, Value)> {
    rx.requests("otlp")
        .iter()
        .filter_map(|r| serde_json::from_slice::<Value>(&r.body).ok())
        .flat_map(|doc| {
            let mut out = Vec::new();
            for rs in doc["resourceSpans"].as_array().into_iter().flatten() {
                for ss in rs["scopeSpans"].as_array().into_iter().flatten() {
                    for s in ss["spans"].as_array().into_iter().flatten() {
                        let attrs: serde_json::Map<String, Value> = s["attributes"]
                            .as_array()
                            .into_iter()
                            .flatten()
                            .map(|a| {
                                let v = &a["value"];
                                let v = v
                                    .get("stringValue")
                                    .or_else(|| v.get("intValue"))
                                    .cloned()
                                    .unwrap_or(Value::Null);
                                (a["key"].as_str().unwrap_or("").to_owned(), v)
                            })
                            .collect();
                        let text = |k: &str| s[k].as_str().unwrap_or("").to_lowercase();
                        out.push((
                            text("name"),
                            text("traceId"),
                            text("spanId"),
                            text("parentSpanId"),
                            Value::Object(attrs),
                        ));
                    }
                }
            }
            out
        })
        .collect()
}

/// A value of an attribute as text (OTLP/JSON writes integers as strings).
fn attr(attrs: &Value, key: &str) -> String {
    match &attrs[key] {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

async fn one_publish_to_two_subscriptions_is_one_trace_and_each_attempt_sends_its_own_traceparent(
    backend: Backend,
) {
    let rx = Receiver::start().await;
    rx.set_default("otlp", Reply::Status(200));
    rx.set_default("one", Reply::Status(204));
    rx.set_default("two", Reply::Status(204));
    let dir = tempfile::tempdir().unwrap();
    let (port, log) = (free_port(), dir.path().join("serve.log"));
    let collector = rx.url("otlp");
    let env = test_env(&[
        ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", collector.as_str()),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"),
        ("OTEL_BSP_SCHEDULE_DELAY", "100"),
    ]);
    let state = match backend {
        Backend::Embedded => State::Db(dir.path().join("traces.db")),
        Backend::Aws => State::Aws(hooklane_tests::aws::unique_prefix()),
    };
    let _child = Killed(spawn(&hooklane_binary(), port, &state, &log, &env));
    let base = format!("http://127.0.0.1:{port}");
    let server = Server::connect(&base).await;
    let one = server.subscribe("acme", &rx.url("one"), &["*"]).await;
    let two = server.subscribe("acme", &rx.url("two"), &["*"]).await;

    let resp = reqwest::Client::new()
        .post(format!("{base}/v1/tenants/acme/events"))
        .bearer_auth(TOKEN)
        .header("traceparent", format!("00-{TRACE}-{PARENT}-01"))
        .json(&json!({"type": "order.created", "data": {"n": 1}}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 202);
    let event_id = resp.json::<Value>().await.unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(eventually(WAIT, || rx.count("one") == 1 && rx.count("two") == 1).await);
    let named = |name: &str| -> Vec<_> { spans(&rx).into_iter().filter(|s| s.0 == name).collect() };
    let all_in = eventually(WAIT, || {
        named("publish").len() == 1 && !named("fan_out").is_empty() && named("attempt").len() == 2
    })
    .await;
    assert!(all_in, "spans: {:?}\n{}", spans(&rx), tail(&log, 20));

    let (_, trace, publish_span, parent, attrs) = named("publish").remove(0);
    assert_eq!(
        (trace.as_str(), parent.as_str()),
        (TRACE, PARENT),
        "publish continues the request's trace"
    );
    assert_eq!(attr(&attrs, "tenant"), "acme");
    assert_eq!(attr(&attrs, "event_id"), event_id);
    for (_, trace, _, parent, attrs) in named("fan_out") {
        assert_eq!(attr(&attrs, "event_id"), event_id);
        assert_eq!(trace, TRACE, "the fan-out is in the publish's trace");
        assert_eq!(parent, publish_span, "under the publish span");
    }
    for (path, sub) in [("one", &one), ("two", &two)] {
        let sub_id = sub["id"].as_str().unwrap();
        let (_, trace, span, parent, attrs) = named("attempt")
            .into_iter()
            .find(|s| attr(&s.4, "subscription_id") == sub_id)
            .unwrap_or_else(|| panic!("an attempt span of {path}: {:?}", spans(&rx)));
        assert_eq!(trace, TRACE, "the attempt is in the publish's trace");
        assert_eq!(parent, publish_span, "under the publish span");
        let sent = rx.requests(path)[0].header("traceparent");
        let parts: Vec<&str> = sent.split('-').collect();
        assert_eq!(
            parts.get(1..3),
            Some(&[TRACE, span.as_str()][..]),
            "{path} got its attempt span's own context: {sent:?}"
        );
        assert_eq!(attr(&attrs, "event_id"), event_id);
        assert_eq!(attr(&attrs, "attempt"), "1");
        assert_eq!(attr(&attrs, "status_code"), "204");
        assert_eq!(attr(&attrs, "outcome"), "success");
    }
}

on_both_backends!(
    one_publish_to_two_subscriptions_is_one_trace_and_each_attempt_sends_its_own_traceparent
);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_an_endpoint_no_request_carries_a_traceparent() {
    let rx = Receiver::start().await;
    rx.set_default("hook", Reply::Status(204));
    let server = Server::start(test_env(&[])).await;
    server.subscribe("acme", &rx.url("hook"), &["*"]).await;
    server.publish("acme", "order.created", json!({})).await;
    assert!(eventually(WAIT, || rx.count("hook") == 1).await);
    assert_eq!(rx.requests("hook")[0].header("traceparent"), "");
}
