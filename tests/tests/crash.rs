//! Crash safety (G1): `hooklane serve` is killed with SIGKILL while
//! deliveries are pending and retrying, restarted over the same database,
//! and every event that was answered 202 still arrives.

use std::process::Child;
use std::time::Duration;

use hooklane_tests::child::{self, free_port, hooklane_binary, State};
use hooklane_tests::{eventually, on_both_backends, test_env, Backend, Receiver, Reply, Server};
use serde_json::json;

fn spawn(bin: &std::path::Path, port: u16, state: &State, log: &std::path::Path) -> Child {
    // A short attempt timeout: on the AWS backend, messages in flight at the
    // kill come back after the queue's visibility timeout (6 × this).
    let env = test_env(&[
        ("HOOKLANE_RETRY_SCHEDULE", "0s,2s,2s,2s,2s"),
        ("HOOKLANE_ATTEMPT_TIMEOUT", "3s"),
    ]);
    child::spawn(bin, port, state, log, &env)
}

/// A client for a `serve` running as a child process.
async fn connect(port: u16) -> Server {
    Server::connect(&format!("http://127.0.0.1:{port}")).await
}

async fn every_accepted_event_arrives_after_a_sigkill_and_restart(backend: Backend) {
    let bin = hooklane_binary();
    let dir = tempfile::tempdir().unwrap();
    let state = match backend {
        Backend::Embedded => State::Db(dir.path().join("crash.db")),
        Backend::Aws => State::Aws(hooklane_tests::aws::unique_prefix()),
    };
    let port = free_port();
    let log = dir.path().join("serve.log");
    let rx = Receiver::start().await;
    // "retry" fails its first three attempts, so its lane is retrying at the kill.
    rx.script(
        "retry",
        vec![Reply::Status(500), Reply::Status(500), Reply::Status(500)],
    );

    let mut child = spawn(&bin, port, &state, &log);
    let server = connect(port).await;
    server.subscribe("acme", &rx.url("retry"), &["*"]).await;
    server.subscribe("acme", &rx.url("plain"), &["*"]).await;
    let mut ids = Vec::new();
    for n in 0..30 {
        ids.push(
            server
                .publish("acme", "crash.test", json!({ "n": n }))
                .await,
        );
    }
    child.kill().expect("SIGKILL");
    let _ = child.wait();
    let at_kill = (rx.count("retry"), rx.count("plain"));
    assert!(
        at_kill.0 < 30,
        "the retrying lane still had work at the kill"
    );

    let mut child = spawn(&bin, port, &state, &log);
    let _server = connect(port).await;
    let all_arrived = |name: &str| {
        let seen: std::collections::HashSet<String> = rx
            .requests(name)
            .iter()
            .map(|r| r.header("webhook-id"))
            .collect();
        ids.iter().all(|id| seen.contains(id))
    };
    let ok = eventually(Duration::from_secs(240), || {
        all_arrived("retry") && all_arrived("plain")
    })
    .await;
    let _ = child.kill();
    let _ = child.wait();
    if !ok {
        let tail = child::tail(&log, 40);
        let seen = |name: &str| {
            rx.requests(name)
                .iter()
                .map(|r| r.header("webhook-id"))
                .collect::<std::collections::HashSet<_>>()
                .len()
        };
        panic!(
            "not every accepted event arrived (at kill: {at_kill:?}; distinct now: retry {}, plain {}); serve's log:\n{tail}",
            seen("retry"),
            seen("plain")
        );
    }
}

on_both_backends!(every_accepted_event_arrives_after_a_sigkill_and_restart);
