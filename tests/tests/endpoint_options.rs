//! Endpoint options end to end, on both backends (`../shared/API.md`
//! "Endpoint options"): content filters decide at fan-out which events
//! make a delivery (each operator with an event it takes and one it
//! refuses, big integers compared exactly, a change applying to later
//! events, bad filters refused with nothing stored); static headers and
//! `Authorization` arrive on every attempt and on the re-enable probe, and
//! the password or token shows up in no read, no attempt log and no log
//! line.

use std::time::Duration;

use hooklane_core::contract::FILTER_CASES;
use hooklane_tests::child::{free_port, hooklane_binary, spawn, Killed, State};
use hooklane_tests::{eventually, on_both_backends, test_env, Backend, Receiver, Reply, Server};
use serde_json::{json, Value};

const WAIT: Duration = Duration::from_secs(30);

/// Each operator: a filter, the data of an event it takes, and of one it
/// refuses (the filter's unit tests use the same table), and one on the
/// event's type.
fn operators() -> Vec<(&'static str, &'static str, &'static str)> {
    let mut cases = FILTER_CASES.to_vec();
    // Types are `op{i}.pass` and `op{i}.no`, `i` its place here.
    cases.push((r#"{"type":{"$prefix":"op18.pa"}}"#, "{}", "{}"));
    assert_eq!(cases.len(), 19, "the type case's index is in its prefix");
    cases
}

/// Registers a subscription with `extra` members; returns its id.
async fn subscribe(server: &Server, url: &str, types: &[&str], extra: Value) -> String {
    let mut body = json!({"url": url, "event_types": types});
    body.as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    let (status, sub) = server
        .call("POST", "/v1/tenants/acme/subscriptions", Some(body))
        .await;
    assert_eq!(status, 201, "{sub}");
    sub["id"].as_str().unwrap().to_owned()
}

/// The `data` of each request `name` received, in order.
fn received(rx: &Receiver, name: &str) -> Vec<String> {
    rx.requests(name)
        .iter()
        .map(|r| {
            let text = String::from_utf8_lossy(&r.body).into_owned();
            let start = text.find(r#""data":"#).expect("a data member") + 7;
            text[start..text.len() - 1].to_owned()
        })
        .collect()
}

async fn each_operator_takes_one_event_and_refuses_another(backend: Backend) {
    let rx = Receiver::start().await;
    let server = Server::start_on(backend, test_env(&[])).await;
    let operators = operators();
    for (i, (filter, _, _)) in operators.iter().enumerate() {
        let filter: Value = serde_json::from_str(filter).unwrap();
        let (types, path) = (format!("op{i}.*"), format!("op{i}"));
        // The filter goes in as text: `Value` would round the big integer.
        let sub = subscribe(&server, &rx.url(&path), &[&types], json!({})).await;
        let patch = format!(r#"{{"filter":{}}}"#, operators[i].0);
        let path = format!("/v1/tenants/acme/subscriptions/{sub}");
        let (status, body) = server.call_text("PATCH", &path, &patch).await;
        assert_eq!(status, 200, "{body}");
        if !operators[i].0.contains("18446744073709551616") {
            assert_eq!(body["filter"], filter, "shown as given");
        }
    }
    for (i, (_, yes, no)) in operators.iter().enumerate() {
        for (kind, data) in [("no", no), ("pass", yes)] {
            let body = format!(r#"{{"type":"op{i}.{kind}","data":{data}}}"#);
            server.publish_text("acme", &body).await;
        }
    }
    let all = eventually(WAIT, || {
        (0..operators.len()).all(|i| rx.count(&format!("op{i}")) >= 1)
    })
    .await;
    assert!(all, "each operator's receiver got its event");
    // A last event to one of them, so that anything wrongly queued before
    // it has arrived too.
    server
        .publish_text("acme", r#"{"type":"op0.pass","data":{"a":5}}"#)
        .await;
    assert!(eventually(WAIT, || rx.count("op0") == 2).await);
    for (i, (filter, yes, _)) in operators.iter().enumerate() {
        let got = received(&rx, &format!("op{i}"));
        let want = if i == 0 {
            vec![*yes, r#"{"a":5}"#]
        } else {
            vec![*yes]
        };
        assert_eq!(got, want, "{filter}");
    }
}

async fn a_filter_change_applies_to_later_events_and_a_bad_one_changes_nothing(backend: Backend) {
    let rx = Receiver::start().await;
    let server = Server::start_on(backend, test_env(&[])).await;
    let usd = json!({"filter": {"data": {"currency": "usd"}}});
    let sub = subscribe(&server, &rx.url("f"), &["*"], usd).await;
    let path = format!("/v1/tenants/acme/subscriptions/{sub}");
    // The refused one first: once the other arrives, both were fanned out
    // (in acceptance order), before the change below.
    server
        .publish("acme", "a.b", json!({"currency": "eur", "n": 2}))
        .await;
    server
        .publish("acme", "a.b", json!({"currency": "usd", "n": 1}))
        .await;
    assert!(eventually(WAIT, || rx.count("f") == 1).await);

    for bad in [
        json!({"data": {"a": {"$regex": "x"}}}),
        json!({"data": {"a": {"$gt": [1]}}}),
        json!({"timestamp": 1}),
        json!([1]),
        json!({"data": {"a": {"b": {"c": {"d": {"e": {"f": {"g": {"h": 1}}}}}}}}}),
        json!({"data": {"a": {"$in": ["x".repeat(4096)]}}}),
    ] {
        let (status, problem) = server
            .call(
                "PATCH",
                &path,
                Some(json!({"filter": bad, "description": "x"})),
            )
            .await;
        assert_eq!(status, 422, "{bad}: {problem}");
        assert_eq!(problem["field"], "filter", "{problem}");
        let (status, problem) = server
            .call(
                "POST",
                "/v1/tenants/acme/subscriptions",
                Some(json!({"url": rx.url("g"), "event_types": ["*"], "filter": bad})),
            )
            .await;
        assert_eq!((status, &problem["field"]), (422, &json!("filter")));
    }
    let (_, now) = server.call("GET", &path, None).await;
    assert_eq!(
        now["filter"],
        json!({"data": {"currency": "usd"}}),
        "unchanged"
    );
    assert_eq!(
        now["description"],
        Value::Null,
        "nothing of the refused change"
    );
    let (_, list) = server
        .call("GET", "/v1/tenants/acme/subscriptions", None)
        .await;
    assert_eq!(list["items"].as_array().unwrap().len(), 1, "none stored");

    // Valid but likely not meant: the answer says so, naming the path.
    let stringy = json!({"filter": {"data": {"n": {"$gte": "10"}}}});
    let (status, body) = server.call("PATCH", &path, Some(stringy)).await;
    assert_eq!(status, 200, "{body}");
    let warning = body["warnings"][0].as_str().unwrap_or_default();
    assert!(warning.starts_with("at `data.n.$gte`"), "{body}");
    let eur = json!({"filter": {"data": {"currency": "eur"}}});
    let (status, body) = server.call("PATCH", &path, Some(eur)).await;
    assert_eq!(status, 200);
    assert!(body.get("warnings").is_none(), "{body}");
    server
        .publish("acme", "a.b", json!({"currency": "usd", "n": 3}))
        .await;
    server
        .publish("acme", "a.b", json!({"currency": "eur", "n": 4}))
        .await;
    assert!(eventually(WAIT, || rx.count("f") == 2).await);
    assert_eq!(
        server
            .call("PATCH", &path, Some(json!({"filter": null})))
            .await
            .0,
        200
    );
    server
        .publish("acme", "a.b", json!({"currency": "gbp", "n": 5}))
        .await;
    assert!(eventually(WAIT, || rx.count("f") == 3).await);
    let ns: Vec<Value> = rx
        .requests("f")
        .iter()
        .map(|r| serde_json::from_slice::<Value>(&r.body).unwrap()["data"]["n"].clone())
        .collect();
    assert_eq!(ns, [json!(1), json!(4), json!(5)]);
}

const TOKEN_SECRET: &str = "tok-Zq81-never-shown";
const PASSWORD: &str = "pw-Kx77-never-shown";

async fn headers_and_auth_go_on_every_attempt_and_the_probe_and_secrets_stay_hidden(
    backend: Backend,
) {
    let rx = Receiver::start().await;
    // The receiver echoes the credentials back: the attempt log must not.
    let echo = format!("bad gateway; saw Bearer {TOKEN_SECRET}");
    rx.set_default("gw", Reply::Echo(500, echo));
    let dir = tempfile::tempdir().unwrap();
    let (port, log) = (free_port(), dir.path().join("serve.log"));
    let env = test_env(&[
        ("HOOKLANE_RETRY_SCHEDULE", "0s,1s"),
        (
            "HOOKLANE_SUSPEND_POLICY",
            "retryable=2/0s,permanent=2/0s,fatal=1/0s",
        ),
        ("RUST_LOG", "info,hooklane_core=debug,hooklane_aws=debug"),
    ]);
    let state = match backend {
        Backend::Embedded => State::Db(dir.path().join("options.db")),
        Backend::Aws => State::Aws(hooklane_tests::aws::unique_prefix()),
    };
    let _child = Killed(spawn(&hooklane_binary(), port, &state, &log, &env));
    let server = Server::connect(&format!("http://127.0.0.1:{port}")).await;

    // Refused headers and auth change nothing.
    for (field, bad) in [
        ("headers", json!({"Webhook-Id": "x"})),
        ("headers", json!({"Authorization": "x"})),
        ("headers", json!({"x-a": "caf\u{e9}"})),
        ("headers", json!({"x-a": "v".repeat(1025)})),
        ("auth", json!({"type": "oauth2"})),
        (
            "auth",
            json!({"type": "basic", "username": "a:b", "password": "p"}),
        ),
    ] {
        let body = json!({"url": rx.url("gw"), "event_types": ["*"], field: bad});
        let (status, problem) = server
            .call("POST", "/v1/tenants/acme/subscriptions", Some(body))
            .await;
        assert_eq!(
            (status, &problem["field"]),
            (422, &json!(field)),
            "{problem}"
        );
    }
    let options = json!({
        "headers": {"X-Api-Key": "k_live_1", "X-Team": "billing ops"},
        "auth": {"type": "bearer", "token": TOKEN_SECRET},
    });
    let (_, list) = server
        .call("GET", "/v1/tenants/acme/subscriptions", None)
        .await;
    assert_eq!(list["items"], json!([]), "nothing stored");
    let sub = subscribe(&server, &rx.url("gw"), &["*"], options).await;
    let path = format!("/v1/tenants/acme/subscriptions/{sub}");
    let (_, read) = server.call("GET", &path, None).await;
    assert_eq!(read["auth"], json!({"type": "bearer"}));
    assert_eq!(read["headers"]["X-Api-Key"], "k_live_1");
    let refused = json!({"headers": {"Host": "evil"}, "auth": null});
    let (status, problem) = server.call("PATCH", &path, Some(refused)).await;
    assert_eq!((status, &problem["field"]), (422, &json!("headers")));
    assert_eq!(server.call("GET", &path, None).await.1, read, "unchanged");

    // Two attempts of one delivery (parked), then the next one's first:
    // suspended. The probe of `enable` carries them too.
    server.publish("acme", "a.b", json!({"n": 1})).await;
    assert!(eventually(WAIT, || rx.count("gw") == 2).await);
    server.publish("acme", "a.b", json!({"n": 2})).await;
    assert!(eventually(WAIT, || rx.count("gw") == 3).await);
    let status = server.status_of(&path, "suspended").await;
    assert_eq!(status, "suspended");
    // Basic auth from here on, with a password.
    let basic = json!({"auth": {"type": "basic", "username": "hook", "password": PASSWORD}});
    assert_eq!(server.call("PATCH", &path, Some(basic)).await.0, 200);
    rx.set_default("gw", Reply::Status(204));
    let (status, enabled) = server.call("POST", &format!("{path}/enable"), None).await;
    assert_eq!(status, 200, "{enabled}");
    assert!(eventually(WAIT, || rx.count("gw") >= 4).await);

    let requests = rx.requests("gw");
    for (i, r) in requests.iter().enumerate() {
        assert_eq!(r.header("x-api-key"), "k_live_1", "request {i}");
        assert_eq!(r.header("x-team"), "billing ops", "request {i}");
        assert!(!r.header("webhook-signature").is_empty(), "still signed");
    }
    let auths: Vec<String> = requests.iter().map(|r| r.header("authorization")).collect();
    assert_eq!(auths[..3], vec![format!("Bearer {TOKEN_SECRET}"); 3]);
    // base64("hook:pw-Kx77-never-shown")
    let basic_value = "Basic aG9vazpwdy1LeDc3LW5ldmVyLXNob3du";
    assert_eq!(auths[3], basic_value, "the probe");
    assert!(String::from_utf8_lossy(&requests[3].body).contains("endpoint.probe"));

    let (_, read) = server.call("GET", &path, None).await;
    let (_, list) = server
        .call("GET", "/v1/tenants/acme/subscriptions", None)
        .await;
    let (_, attempts) = server.call("GET", &format!("{path}/attempts"), None).await;
    // A failed attempt: its response's headers are kept, the echo with them.
    let first = attempts["items"]
        .as_array()
        .and_then(|items| items.iter().find(|a| a["status_code"] == 500))
        .and_then(|a| a["id"].as_str())
        .expect("a failed attempt");
    let (status, detail) = server
        .call("GET", &format!("{path}/attempts/{first}"), None)
        .await;
    assert_eq!(status, 200, "{detail}");
    assert!(
        detail["response_headers"]["x-echo"]
            .as_str()
            .is_some_and(|e| e.contains("[redacted]")),
        "an echo in a header is redacted too: {detail}"
    );
    let sent = &detail["request"]["headers"];
    assert!(
        sent["authorization"]
            .as_str()
            .is_some_and(|a| a.ends_with("[redacted]")),
        "{detail}"
    );
    assert!(
        sent["webhook-id"].is_string() && sent["content-type"] == "application/json",
        "{detail}"
    );
    assert_eq!(read["auth"], json!({"type": "basic", "username": "hook"}));
    let excerpts: Vec<&Value> = attempts["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| &a["response_excerpt"])
        .collect();
    assert!(
        excerpts
            .iter()
            .any(|e| e.as_str().is_some_and(|e| e.contains("[redacted]"))),
        "{excerpts:?}"
    );
    let logged = std::fs::read_to_string(&log).unwrap();
    for secret in [TOKEN_SECRET, PASSWORD, &basic_value[6..]] {
        for (what, text) in [
            ("GET", read.to_string()),
            ("the list", list.to_string()),
            ("the attempt log", attempts.to_string()),
            ("an attempt's detail", detail.to_string()),
            ("the log", logged.clone()),
        ] {
            assert!(!text.contains(secret), "{what} shows {secret}");
        }
    }
}

/// A subscription's stats once they count `attempts` in the last 24 h.
async fn stats_when(server: &Server, id: &str, attempts: u64) -> Value {
    let path = format!("/v1/tenants/acme/subscriptions/{id}/stats");
    for _ in 0..100 {
        let (status, body) = server.call("GET", &path, None).await;
        assert_eq!(status, 200, "{body}");
        if body["last_24h"]["attempts"] == attempts {
            return body;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{path} never counted {attempts} attempts");
}

/// The endpoint statistics count what the attempt log holds: three
/// delivered here, one parked there, in the day's and the week's windows
/// and in their hours and days.
async fn the_stats_count_each_endpoints_attempts_by_outcome(backend: Backend) {
    let rx = Receiver::start().await;
    let server = Server::start_on(backend, test_env(&[("HOOKLANE_RETRY_SCHEDULE", "0s")])).await;
    rx.set_default("bad", Reply::Status(500));
    let good = subscribe(&server, &rx.url("good"), &["good.*"], json!({})).await;
    let bad = subscribe(&server, &rx.url("bad"), &["bad.*"], json!({})).await;
    for n in 0..3 {
        server.publish("acme", "good.x", json!({ "n": n })).await;
    }
    server.publish("acme", "bad.x", json!({})).await;
    assert!(eventually(WAIT, || rx.count("good") == 3 && rx.count("bad") == 1).await);
    let g = stats_when(&server, &good, 3).await;
    assert_eq!(g["complete"], true, "{g}");
    for window in ["last_24h", "last_7d"] {
        assert_eq!(g[window]["delivered"], 3, "{g}");
        assert_eq!(g[window]["failed"], 0, "{g}");
        assert_eq!(g[window]["success_rate"], 1.0, "{g}");
        assert!(g[window]["latency_ms"]["p95"].is_u64(), "{g}");
    }
    let sum = |b: &Value, key: &str| -> u64 {
        b.as_array()
            .unwrap()
            .iter()
            .map(|x| x[key].as_u64().unwrap())
            .sum()
    };
    assert_eq!(g["hourly"].as_array().map(Vec::len), Some(24));
    assert_eq!(g["daily"].as_array().map(Vec::len), Some(7));
    assert_eq!(
        (
            sum(&g["hourly"], "delivered"),
            sum(&g["daily"], "delivered")
        ),
        (3, 3)
    );
    let b = stats_when(&server, &bad, 1).await;
    assert_eq!(
        (
            b["last_7d"]["attempts"].as_u64(),
            b["last_7d"]["delivered"].as_u64()
        ),
        (Some(1), Some(0)),
        "{b}"
    );
    assert_eq!(b["last_7d"]["success_rate"], 0.0, "{b}");
    assert_eq!(sum(&b["daily"], "failed"), 1, "{b}");
    let (status, _) = server
        .call(
            "GET",
            "/v1/tenants/other/subscriptions/{good}/stats"
                .replace("{good}", &good)
                .as_str(),
            None,
        )
        .await;
    assert_eq!(status, 404, "another tenant's path");
}

/// The attempt log filtered by outcome and by time, in pages.
async fn the_attempt_log_filters_by_outcome_and_time_in_pages(backend: Backend) {
    let rx = Receiver::start().await;
    let server = Server::start_on(backend, test_env(&[("HOOKLANE_RETRY_SCHEDULE", "0s")])).await;
    rx.script("mixed", [500, 204, 500, 204].map(Reply::Status).to_vec());
    let sub = subscribe(&server, &rx.url("mixed"), &["*"], json!({})).await;
    let before = time::OffsetDateTime::now_utc() - time::Duration::seconds(5);
    for n in 0..4 {
        server.publish("acme", "a.b", json!({ "n": n })).await;
        assert!(eventually(WAIT, || rx.count("mixed") == n + 1).await);
    }
    let log = format!("/v1/tenants/acme/subscriptions/{sub}/attempts");
    assert!(stats_when(&server, &sub, 4).await["last_24h"]["delivered"] == 2);
    let outcomes = |body: &Value| -> Vec<String> {
        body["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a["outcome"].as_str().unwrap().to_owned())
            .collect()
    };
    let (_, failed) = server
        .call("GET", &format!("{log}?outcome=failed"), None)
        .await;
    assert_eq!(outcomes(&failed), ["parked", "parked"], "{failed}");
    let (_, delivered) = server
        .call("GET", &format!("{log}?outcome=delivered"), None)
        .await;
    assert_eq!(
        outcomes(&delivered),
        ["delivered", "delivered"],
        "{delivered}"
    );
    let (_, first) = server
        .call("GET", &format!("{log}?outcome=failed&limit=1"), None)
        .await;
    assert_eq!(outcomes(&first), ["parked"], "{first}");
    let cursor = first["next_cursor"].as_str().expect("a next page");
    let (_, second) = server
        .call(
            "GET",
            &format!("{log}?outcome=failed&limit=1&cursor={cursor}"),
            None,
        )
        .await;
    assert_eq!(outcomes(&second), ["parked"], "{second}");
    assert_ne!(first["items"][0]["id"], second["items"][0]["id"]);
    assert!(second["next_cursor"].is_null(), "{second}");
    let until = before
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap();
    let (_, none) = server
        .call("GET", &format!("{log}?until={until}"), None)
        .await;
    assert_eq!(outcomes(&none), Vec::<String>::new(), "{none}");
    // One attempt in detail: the request as sent, the response's headers.
    let id = delivered["items"][0]["id"].as_str().unwrap();
    let (status, detail) = server.call("GET", &format!("{log}/{id}"), None).await;
    assert_eq!(status, 200, "{detail}");
    let body: Value = serde_json::from_str(detail["request"]["body"].as_str().unwrap()).unwrap();
    assert_eq!(body["data"]["n"], 3, "{detail}");
    assert_eq!(
        detail["request"]["headers"]["webhook-attempt"], "1",
        "{detail}"
    );
    assert_eq!(detail["request"]["url"], rx.url("mixed"));
    assert!(
        detail["response_headers"].is_null(),
        "a success keeps none: {detail}"
    );
    let id = failed["items"][0]["id"].as_str().unwrap();
    let (_, detail) = server.call("GET", &format!("{log}/{id}"), None).await;
    assert!(
        detail["response_headers"]["content-length"].is_string(),
        "{detail}"
    );
    let gone = "att_0000000000000000000000000";
    assert_eq!(
        server.call("GET", &format!("{log}/{gone}"), None).await.0,
        404
    );
    let (status, problem) = server
        .call("GET", &format!("{log}?outcome=retrying"), None)
        .await;
    assert_eq!(
        (status, &problem["field"]),
        (400, &json!("outcome")),
        "{problem}"
    );
}

on_both_backends!(
    the_attempt_log_filters_by_outcome_and_time_in_pages,
    the_stats_count_each_endpoints_attempts_by_outcome,
    each_operator_takes_one_event_and_refuses_another,
    a_filter_change_applies_to_later_events_and_a_bad_one_changes_nothing,
    headers_and_auth_go_on_every_attempt_and_the_probe_and_secrets_stay_hidden,
);
