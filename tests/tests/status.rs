//! How far behind delivery is, end to end (issue "operators can see how
//! far behind they are"): the backlog gauges of `GET /metrics`, the status
//! of `GET /status` and `hooklane status` follow a scripted scenario.
//!
//! - Both backends: 100 deliveries held behind a receiver that does not
//!   answer yet read as 100 pending, and 0 once it answers; suspended
//!   subscriptions are listed with since when and why until enabled or
//!   deleted.
//! - Both backends, per tenant (on AWS with the store's own counts,
//!   `HOOKLANE_TENANT_BACKLOG`): 100 deliveries to a receiver that is down
//!   read as 100 pending whose oldest grows older; with the receiver up
//!   both fall to 0; `hooklane status` prints the same numbers. With 1,000
//!   tenants each with a backlog, the per-tenant series stay within the
//!   bound (the ten with the most, and `(others)` for the rest) and sum to
//!   the whole.
//!
//! Without those counts (the AWS default) the AWS backend knows only the
//! sum (SQS keeps no count per message group): the first case checks that
//! it says no more than that.

use std::time::Duration;

use hooklane_tests::{
    child::hooklane_binary, eventually, on_both_backends, test_env, Backend, Gate, Receiver, Reply,
    Server, TOKEN,
};
use serde_json::{json, Value};

const WAIT: Duration = Duration::from_secs(60);

/// A metric's value in the `/metrics` text, by its exact series name.
async fn metric(server: &Server, series: &str) -> Option<f64> {
    let (status, body) = server.call("GET", "/metrics", None).await;
    assert_eq!(status, 200);
    let text = body.as_str().expect("metrics text").to_owned();
    text.lines()
        .filter_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .find_map(|v| v.trim().parse().ok())
}

/// The series of a metric, with their labels.
async fn series(server: &Server, name: &str) -> Vec<(String, f64)> {
    let (_, body) = server.call("GET", "/metrics", None).await;
    body.as_str()
        .unwrap_or_default()
        .lines()
        .filter(|l| l.starts_with(&format!("{name}{{")))
        .filter_map(|l| {
            let (labels, v) = l.rsplit_once(' ')?;
            Some((labels.to_owned(), v.parse().ok()?))
        })
        .collect()
}

/// `/metrics` says which build serves: its version (the OpenAPI
/// document's too) and the commit it was built from.
async fn the_build_serving_is_in_the_metrics(backend: Backend) {
    let server = Server::start_on(backend, test_env(&[])).await;
    let build = series(&server, "hooklane_build_info").await;
    assert_eq!(build.len(), 1, "{build:?}");
    let (labels, value) = &build[0];
    assert_eq!(*value, 1.0);
    let version = env!("CARGO_PKG_VERSION");
    assert!(
        labels.contains(&format!("version=\"{version}\"")),
        "{labels}"
    );
    let commit = labels
        .split("commit=\"")
        .nth(1)
        .and_then(|c| c.split('"').next());
    assert!(
        commit.is_some_and(|c| c.len() == 12 || c == "unknown"),
        "{labels}"
    );
    let (_, doc) = server.call("GET", "/openapi.json", None).await;
    assert_eq!(doc["info"]["version"], version);
}

async fn status(server: &Server) -> Value {
    let (code, body) = server.call("GET", "/status", None).await;
    assert_eq!(code, 200, "{body}");
    body
}

/// Publishes `n` events to `tenant` in batches of 100.
async fn publish_many(server: &Server, tenant: &str, n: usize) {
    for start in (0..n).step_by(100) {
        let events: Vec<Value> = (start..n.min(start + 100))
            .map(|i| json!({"type": "order.created", "data": {"n": i}}))
            .collect();
        let (code, body) = server
            .call(
                "POST",
                &format!("/v1/tenants/{tenant}/event-batches"),
                Some(json!({ "events": events })),
            )
            .await;
        assert_eq!(code, 200, "{body}");
        assert!(body["items"]
            .as_array()
            .unwrap()
            .iter()
            .all(|i| i["status"] == 202));
    }
}

/// Polls `/metrics` until `series` reads `want`.
async fn metric_reaches(server: &Server, series: &str, want: f64) -> bool {
    let deadline = std::time::Instant::now() + WAIT;
    while std::time::Instant::now() < deadline {
        if metric(server, series).await == Some(want) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    false
}

async fn held_deliveries_read_as_pending_until_the_receiver_answers(backend: Backend) {
    let rx = Receiver::start().await;
    let gate = Gate::new();
    rx.set_default("held", Reply::Gated(gate.clone(), 204));
    let server = Server::start_on(backend, test_env(&[("HOOKLANE_ATTEMPT_TIMEOUT", "60s")])).await;
    server.subscribe("acme", &rx.url("held"), &["*"]).await;
    publish_many(&server, "acme", 100).await;
    assert!(
        metric_reaches(&server, "hooklane_backlog_deliveries", 100.0).await,
        "100 pending while the receiver holds the first: {:?}",
        metric(&server, "hooklane_backlog_deliveries").await
    );
    let doc = status(&server).await;
    assert_eq!(doc["backlog"]["pending"], 100);
    match backend {
        // Per tenant, with the oldest's age.
        Backend::Embedded => {
            assert_eq!(doc["backlog"]["tenants"][0]["pending"], 100, "{doc}");
            assert!(
                doc["backlog"]["oldest_age_seconds"].as_f64().is_some(),
                "{doc}"
            );
        }
        // SQS counts the queues only: no tenant, no age, and no age gauge
        // that could read 0 while deliveries wait.
        Backend::Aws => {
            assert_eq!(doc["backlog"]["tenants"], json!([]), "{doc}");
            assert!(doc["backlog"]["oldest_age_seconds"].is_null(), "{doc}");
            assert_eq!(
                metric(&server, "hooklane_backlog_oldest_age_seconds").await,
                None
            );
        }
    }
    gate.open();
    assert!(eventually(WAIT, || rx.count("held") >= 100).await);
    assert!(
        metric_reaches(&server, "hooklane_backlog_deliveries", 0.0).await,
        "none pending once delivered"
    );
    assert_eq!(status(&server).await["backlog"]["pending"], 0);
}

async fn the_status_lists_suspended_subscriptions_with_why_until_enabled_or_deleted(
    backend: Backend,
) {
    let rx = Receiver::start().await;
    rx.set_default("dead", Reply::Status(500));
    rx.set_default("gone", Reply::Status(500));
    let env = test_env(&[
        ("HOOKLANE_RETRY_SCHEDULE", "0s"),
        ("HOOKLANE_SUSPEND_POLICY", "retryable=1/0s"),
    ]);
    let server = Server::start_on(backend, env).await;
    let dead = server.subscribe("acme", &rx.url("dead"), &["*"]).await;
    let gone = server.subscribe("beta", &rx.url("gone"), &["*"]).await;
    let (dead, gone) = (dead["id"].as_str().unwrap(), gone["id"].as_str().unwrap());
    server.publish("acme", "order.created", json!({})).await;
    server.publish("beta", "order.created", json!({})).await;
    let mut doc = Value::Null;
    let deadline = std::time::Instant::now() + WAIT;
    while std::time::Instant::now() < deadline {
        doc = status(&server).await;
        let both = doc["suspended"]
            .as_array()
            .is_some_and(|l| l.iter().any(|r| r["subscription_id"] == dead));
        if doc["suspended_total"] == 2 && both {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(doc["suspended_total"], 2, "{doc}");
    let listed = doc["suspended"].as_array().unwrap();
    let row = listed
        .iter()
        .find(|r| r["subscription_id"] == dead)
        .expect("listed");
    assert_eq!(row["tenant"], "acme");
    assert_eq!(row["url"], rx.url("dead"));
    assert!(
        row["since"].is_string() && row["reason"].is_string(),
        "{row}"
    );
    assert_eq!(
        metric(&server, "hooklane_subscriptions_suspended").await,
        Some(2.0)
    );
    // Enabled (its probe answered) or deleted, it leaves the list.
    rx.set_default("dead", Reply::Status(204));
    let (code, body) = server
        .call(
            "POST",
            &format!("/v1/tenants/acme/subscriptions/{dead}/enable"),
            None,
        )
        .await;
    assert_eq!(code, 200, "{body}");
    let (code, _) = server
        .call(
            "DELETE",
            &format!("/v1/tenants/beta/subscriptions/{gone}"),
            None,
        )
        .await;
    assert_eq!(code, 204);
    let doc = status(&server).await;
    assert_eq!(doc["suspended_total"], 0, "{doc}");
    assert_eq!(doc["suspended"], json!([]));
}

/// The server of a per-tenant case: on AWS with the tenant backlog
/// counted.
async fn counting_server(backend: Backend, ladder: &str) -> Server {
    let mut env = vec![("HOOKLANE_RETRY_SCHEDULE", ladder)];
    if backend == Backend::Aws {
        env.push(("HOOKLANE_TENANT_BACKLOG", "true"));
    }
    Server::start_on(backend, test_env(&env)).await
}

on_both_backends!(
    the_build_serving_is_in_the_metrics,
    held_deliveries_read_as_pending_until_the_receiver_answers,
    the_status_lists_suspended_subscriptions_with_why_until_enabled_or_deleted,
    a_down_receivers_backlog_grows_older_then_drains_and_the_command_says_so,
    a_thousand_tenants_with_a_backlog_make_eleven_series_that_sum_to_the_whole,
);

/// `hooklane status` against `server`: its exit and what it printed.
fn status_command(server: &Server, json: bool) -> String {
    let mut cmd = std::process::Command::new(hooklane_binary());
    cmd.args(["status", "--url", &server.base])
        .env("HOOKLANE_API_TOKEN", TOKEN);
    if json {
        cmd.arg("--json");
    }
    let out = cmd.output().expect("hooklane status runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("text")
}

async fn a_down_receivers_backlog_grows_older_then_drains_and_the_command_says_so(
    backend: Backend,
) {
    // Built first: the build is not to eat into the ladder below.
    let _ = hooklane_binary();
    let rx = Receiver::start().await;
    rx.set_default("down", Reply::Status(503));
    // A ladder long enough that nothing parks while the test watches
    // (90 s), short enough that the head comes back soon once it is up.
    let ladder = format!("0s,{}", ["3s"; 30].join(","));
    let server = counting_server(backend, &ladder).await;
    server.subscribe("acme", &rx.url("down"), &["*"]).await;
    publish_many(&server, "acme", 100).await;
    assert!(eventually(WAIT, || rx.count("down") >= 1).await);
    assert!(metric_reaches(&server, "hooklane_backlog_deliveries", 100.0).await);
    if backend == Backend::Embedded {
        // One subscription on one lane: one lane task runs.
        assert_eq!(metric(&server, "hooklane_lanes_running").await, Some(1.0));
    }
    let tenant_series = "hooklane_tenant_backlog_deliveries{tenant=\"acme\"}";
    assert_eq!(metric(&server, tenant_series).await, Some(100.0));
    let age = "hooklane_backlog_oldest_age_seconds";
    let first = metric(&server, age).await.expect("an oldest age");
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let later = metric(&server, age).await.expect("an oldest age");
    assert!(
        later >= first + 1.0,
        "the oldest grows older: {first} then {later}"
    );

    let printed = status_command(&server, false);
    assert!(
        printed.contains("Backlog: 100 pending, the oldest queued "),
        "{printed}"
    );
    let acme_row = printed
        .lines()
        .find(|l| l.trim_start().starts_with("acme"))
        .unwrap_or_else(|| panic!("a row for acme: {printed}"));
    let cells: Vec<&str> = acme_row.split_whitespace().collect();
    assert_eq!(cells[..2], ["acme", "100"], "{printed}");
    assert!(cells[2..].join(" ").ends_with(" s"), "its age: {printed}");
    let doc: Value = serde_json::from_str(&status_command(&server, true)).expect("JSON");
    assert_eq!(doc["backlog"]["tenants"][0]["tenant"], "acme");
    assert_eq!(doc["backlog"]["tenants"][0]["pending"], 100);
    let json_age = doc["backlog"]["oldest_age_seconds"]
        .as_f64()
        .expect("an age");
    assert!(json_age >= later, "{json_age} after {later}");

    rx.set_default("down", Reply::Status(204));
    assert!(metric_reaches(&server, "hooklane_backlog_deliveries", 0.0).await);
    assert_eq!(metric(&server, age).await, Some(0.0));
    if backend == Backend::Embedded {
        assert!(metric_reaches(&server, "hooklane_lanes_running", 0.0).await);
    }
    assert!(series(&server, "hooklane_tenant_backlog_deliveries")
        .await
        .is_empty());
    let printed = status_command(&server, false);
    assert!(printed.contains("Backlog: none pending"), "{printed}");
    let doc: Value = serde_json::from_str(&status_command(&server, true)).expect("JSON");
    assert_eq!(doc["backlog"]["pending"], 0);
    assert_eq!(doc["backlog"]["oldest_age_seconds"], 0.0);
    if backend == Backend::Aws {
        // Attempts are the delivery functions' to count (their EMF lines),
        // not the API's `/metrics`.
        return;
    }
    // Every attempt is in the outcome classes and the duration histogram.
    let attempts = metric(&server, "hooklane_attempts_total").await.unwrap();
    let classes: f64 = series(&server, "hooklane_attempt_outcomes_total")
        .await
        .iter()
        .map(|(_, v)| v)
        .sum();
    assert_eq!(classes, attempts);
    assert_eq!(
        metric(&server, "hooklane_attempt_duration_seconds_count").await,
        Some(attempts)
    );
    assert_eq!(
        metric(&server, "hooklane_publish_to_first_attempt_seconds_count").await,
        Some(100.0)
    );
}

async fn a_thousand_tenants_with_a_backlog_make_eleven_series_that_sum_to_the_whole(
    backend: Backend,
) {
    let rx = Receiver::start().await;
    rx.set_default("down", Reply::Status(503));
    // Each lane's head fails once and waits ten minutes: nothing moves
    // while the test reads, however long the setup takes.
    let server = counting_server(backend, "0s,10m").await;
    // Tenant t0000 has 12 pending, t0001 11, … t0010 2: the ten with the
    // most are named; t0010 and the 989 others with 1 each are summed.
    for t in 0..1000 {
        let tenant = format!("t{t:04}");
        server.subscribe(&tenant, &rx.url("down"), &["*"]).await;
    }
    for t in 0..1000 {
        let n = if t < 11 { 12 - t } else { 1 };
        publish_many(&server, &format!("t{t:04}"), n).await;
    }
    let total: usize = (0..11).map(|t| 12 - t).sum::<usize>() + 989;
    assert!(
        metric_reaches(&server, "hooklane_backlog_deliveries", total as f64).await,
        "{:?} pending of {total}; {:?}",
        metric(&server, "hooklane_backlog_deliveries").await,
        status(&server).await
    );
    let rows = series(&server, "hooklane_tenant_backlog_deliveries").await;
    assert_eq!(rows.len(), 11, "{rows:?}");
    assert_eq!(rows.iter().map(|(_, v)| v).sum::<f64>(), total as f64);
    assert!(rows
        .iter()
        .any(|(l, v)| l.contains("\"t0000\"") && *v == 12.0));
    assert!(rows
        .iter()
        .any(|(l, v)| l.contains("\"(others)\"") && *v == 991.0));
    assert_eq!(
        series(&server, "hooklane_tenant_backlog_oldest_age_seconds")
            .await
            .len(),
        11
    );
    let doc = status(&server).await;
    assert_eq!(doc["backlog"]["tenants"].as_array().unwrap().len(), 11);
}
