//! A clean stop of `hooklane serve` (SIGTERM, as a service manager sends
//! it): no attempt starts after the signal, the attempt in flight finishes
//! and its outcome is recorded, and the process exits within the README's
//! bound (the attempt timeout plus 5 s, at `serve`'s default timeout of
//! 15 s). Restarted over the same database, the delivery shows delivered
//! at its first attempt, and the receiver saw it once.

use std::process::Command;
use std::time::{Duration, Instant};

use hooklane_tests::child::{self, free_port, hooklane_binary, State};
use hooklane_tests::{eventually, test_env, Receiver, Reply, Server};
use serde_json::{json, Value};

/// `serve`'s default attempt timeout, and what a stop waits beyond it.
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(15);
const STOP_MARGIN: Duration = Duration::from_secs(5);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_lets_the_attempt_in_flight_finish_and_record_its_outcome_then_exits() {
    let bin = hooklane_binary();
    let dir = tempfile::tempdir().unwrap();
    let state = State::Db(dir.path().join("stop.db"));
    let (port, log) = (free_port(), dir.path().join("serve.log"));
    let env = test_env(&[("HOOKLANE_ATTEMPT_TIMEOUT", "15s")]);
    let rx = Receiver::start().await;
    rx.set_default("slow", Reply::Slow(Duration::from_secs(2), 204));

    let mut serving = child::spawn(&bin, port, &state, &log, &env);
    let server = Server::connect(&format!("http://127.0.0.1:{port}")).await;
    let sub = server.subscribe("acme", &rx.url("slow"), &["*"]).await;
    let event = server.publish("acme", "stop.test", json!({})).await;
    assert!(
        eventually(Duration::from_secs(30), || rx.count("slow") == 1).await,
        "the attempt reached the receiver"
    );

    let signalled = Instant::now();
    let sent = Command::new("kill")
        .args(["-TERM", &serving.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(sent.success(), "SIGTERM sent");
    let mut exit = None;
    while signalled.elapsed() < ATTEMPT_TIMEOUT + STOP_MARGIN {
        if let Some(status) = serving.try_wait().expect("wait") {
            exit = Some(status);
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let Some(status) = exit else {
        let _ = serving.kill();
        let _ = serving.wait();
        panic!(
            "serve did not exit within {:?} of SIGTERM; its log:\n{}",
            ATTEMPT_TIMEOUT + STOP_MARGIN,
            child::tail(&log, 30)
        );
    };
    assert!(
        status.success(),
        "a clean exit ({status}); log:\n{}",
        child::tail(&log, 30)
    );
    assert_eq!(rx.count("slow"), 1, "the receiver saw the attempt once");

    let mut again = child::spawn(&bin, port, &state, &log, &env);
    let server = Server::connect(&format!("http://127.0.0.1:{port}")).await;
    let sub_id = sub["id"].as_str().expect("id");
    let (code, attempts) = server
        .call(
            "GET",
            &format!("/v1/tenants/acme/subscriptions/{sub_id}/attempts"),
            None,
        )
        .await;
    let (_, shown) = server
        .call("GET", &format!("/v1/tenants/acme/events/{event}"), None)
        .await;
    let _ = again.kill();
    let _ = again.wait();
    assert_eq!(code, 200, "{attempts}");
    let items = attempts["items"].as_array().expect("items");
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
