//! A clean stop of `hooklane serve` (SIGTERM, as a service manager sends
//! it, or Ctrl-C's SIGINT), on both backends. The endpoint first answers
//! one event at once, so that on AWS its later attempts get the main
//! pool's cut-off (`HOOKLANE_SLOW_AFTER`, 5 s), not a new endpoint's 1 s.
//! - at `serve`'s defaults (attempt timeout 15 s, `HOOKLANE_SHUTDOWN_GRACE`
//!   10 s), an attempt in flight at the signal finishes and its outcome is
//!   recorded, no attempt starts after it, and the process exits 0 within
//!   the README's bound (the grace plus a second); restarted over the
//!   same state, the delivery shows delivered at its first attempt, and the
//!   receiver saw it once;
//! - an attempt still running when the grace ends is left to the next
//!   start: the process exits 0 within the same bound, and after the
//!   restart the delivery is attempted again with the next attempt number,
//!   so the receiver sees attempts 1 and 2, never one number twice, and
//!   nothing is lost.

use std::process::{Child, Command, ExitStatus};
use std::time::{Duration, Instant};

use hooklane_tests::child::{self, free_port, hooklane_binary, State};
use hooklane_tests::{eventually, on_both_backends, test_env, Backend, Receiver, Reply, Server};
use serde_json::{json, Value};

/// What the README promises beyond the grace: the exit itself.
const EXIT: Duration = Duration::from_secs(1);

fn state_of(backend: Backend, dir: &std::path::Path) -> State {
    match backend {
        Backend::Embedded => State::Db(dir.join("stop.db")),
        Backend::Aws => State::Aws(hooklane_tests::aws::unique_prefix()),
    }
}

/// Subscribes `name` and has one event delivered to it, then publishes
/// the event the test stops during, and waits for its first request.
async fn proven_then_held(server: &Server, rx: &Receiver, name: &str) -> (Value, String) {
    let sub = server.subscribe("acme", &rx.url(name), &["*"]).await;
    server.publish("acme", "stop.warm", json!({})).await;
    assert!(
        eventually(Duration::from_secs(30), || rx.count(name) == 1).await,
        "the first event was delivered"
    );
    let event = server.publish("acme", "stop.test", json!({})).await;
    assert!(
        eventually(Duration::from_secs(30), || rx.count(name) == 2).await,
        "the attempt reached the receiver"
    );
    (sub, event)
}

/// Sends `signal` to `serving` and waits for its exit, at most `bound`.
async fn stop(
    serving: &mut Child,
    signal: &str,
    bound: Duration,
    log: &std::path::Path,
) -> ExitStatus {
    let signalled = Instant::now();
    let sent = Command::new("kill")
        .args([signal, &serving.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(sent.success(), "{signal} sent");
    while signalled.elapsed() < bound {
        if let Some(status) = serving.try_wait().expect("wait") {
            return status;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let _ = serving.kill();
    let _ = serving.wait();
    panic!(
        "serve did not exit within {bound:?} of {signal}; its log:\n{}",
        child::tail(log, 30)
    );
}

async fn attempts(server: &Server, sub: &Value) -> Value {
    let sub_id = sub["id"].as_str().expect("id");
    let path = format!("/v1/tenants/acme/subscriptions/{sub_id}/attempts");
    let (code, attempts) = server.call("GET", &path, None).await;
    assert_eq!(code, 200, "{attempts}");
    attempts
}

async fn sigterm_lets_the_attempt_in_flight_finish_and_record_its_outcome_then_exits(
    backend: Backend,
) {
    let bin = hooklane_binary();
    let dir = tempfile::tempdir().unwrap();
    let state = state_of(backend, dir.path());
    let (port, log) = (free_port(), dir.path().join("serve.log"));
    // serve's defaults: attempt timeout 15 s, grace 10 s.
    let env = test_env(&[("HOOKLANE_ATTEMPT_TIMEOUT", "15s")]);
    let grace = Duration::from_secs(10);
    let rx = Receiver::start().await;
    rx.script(
        "slow",
        vec![Reply::Status(204), Reply::Slow(Duration::from_secs(2), 204)],
    );

    let mut serving = child::spawn(&bin, port, &state, &log, &env);
    let server = Server::connect(&format!("http://127.0.0.1:{port}")).await;
    let (sub, event) = proven_then_held(&server, &rx, "slow").await;

    let status = stop(&mut serving, "-TERM", grace + EXIT, &log).await;
    let tail = child::tail(&log, 30);
    assert!(status.success(), "a clean exit ({status}); log:\n{tail}");
    assert_eq!(rx.count("slow"), 2, "the receiver saw the attempt once");

    let mut again = child::spawn(&bin, port, &state, &log, &env);
    let server = Server::connect(&format!("http://127.0.0.1:{port}")).await;
    let attempts = attempts(&server, &sub).await;
    let (_, shown) = server
        .call("GET", &format!("/v1/tenants/acme/events/{event}"), None)
        .await;
    let _ = again.kill();
    let _ = again.wait();
    let items: Vec<&Value> = attempts["items"]
        .as_array()
        .expect("items")
        .iter()
        .filter(|a| a["event_id"] == event.as_str())
        .collect();
    assert_eq!(
        items.len(),
        1,
        "one attempt, its outcome recorded before the exit: {attempts}"
    );
    assert_eq!(items[0]["attempt"], 1, "{attempts}");
    assert_eq!(items[0]["status_code"], 204, "{attempts}");
    assert_eq!(
        shown["deliveries"][0]["state"],
        Value::from("delivered"),
        "{shown}"
    );
}

async fn an_attempt_running_past_the_grace_is_made_again_after_the_restart_with_the_next_number(
    backend: Backend,
) {
    let bin = hooklane_binary();
    let dir = tempfile::tempdir().unwrap();
    let state = state_of(backend, dir.path());
    let (port, log) = (free_port(), dir.path().join("serve.log"));
    let grace = Duration::from_secs(2);
    let env = test_env(&[
        ("HOOKLANE_SHUTDOWN_GRACE", "2s"),
        ("HOOKLANE_ATTEMPT_TIMEOUT", "5s"),
        ("HOOKLANE_RETRY_SCHEDULE", "0s,1s,1s,1s"),
    ]);
    let rx = Receiver::start().await;
    // The second request is held far past the grace; the rest are
    // answered.
    rx.script(
        "held",
        vec![
            Reply::Status(204),
            Reply::Slow(Duration::from_secs(60), 204),
        ],
    );

    let mut serving = child::spawn(&bin, port, &state, &log, &env);
    let server = Server::connect(&format!("http://127.0.0.1:{port}")).await;
    let (sub, event) = proven_then_held(&server, &rx, "held").await;

    // Ctrl-C, as a terminal sends it.
    let status = stop(&mut serving, "-INT", grace + EXIT, &log).await;
    let tail = child::tail(&log, 30);
    assert!(status.success(), "a clean exit ({status}); log:\n{tail}");

    let mut again = child::spawn(&bin, port, &state, &log, &env);
    let server = Server::connect(&format!("http://127.0.0.1:{port}")).await;
    // Once the first attempt's lease (or its message's visibility) ends.
    let made_again = eventually(Duration::from_secs(90), || rx.count("held") >= 3).await;
    // Nothing more comes after the delivered second attempt.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let (_, shown) = server
        .call("GET", &format!("/v1/tenants/acme/events/{event}"), None)
        .await;
    let attempts = attempts(&server, &sub).await;
    let _ = again.kill();
    let _ = again.wait();
    assert!(
        made_again,
        "attempted again after the restart; log:\n{}",
        child::tail(&log, 30)
    );
    let requests = rx.requests("held");
    let seen: Vec<(String, String)> = requests
        .iter()
        .map(|r| (r.header("webhook-id"), r.header("webhook-attempt")))
        .collect();
    let numbers: Vec<&str> = seen
        .iter()
        .filter(|(id, _)| *id == event)
        .map(|(_, n)| n.as_str())
        .collect();
    assert_eq!(requests.len(), 3, "nothing more: {seen:?}");
    assert_eq!(
        numbers,
        ["1", "2"],
        "each number once, in order: {seen:?} {attempts}"
    );
    assert_eq!(
        shown["deliveries"][0]["state"],
        Value::from("delivered"),
        "{shown}"
    );
}

on_both_backends!(
    sigterm_lets_the_attempt_in_flight_finish_and_record_its_outcome_then_exits,
    an_attempt_running_past_the_grace_is_made_again_after_the_restart_with_the_next_number,
);
