//! The portal key made once and kept in the store (no
//! `HOOKLANE_PORTAL_KEY`), on both backends: a session minted before a
//! restart works after it, and on AWS one minted by another process works
//! in this one (as across Lambda instances).

use hooklane_tests::child::{self, free_port, hooklane_binary, State};
use hooklane_tests::{on_both_backends, test_env, Backend, Server};
use serde_json::json;

async fn a_session_survives_a_restart_and_works_in_another_process(backend: Backend) {
    let bin = hooklane_binary();
    let dir = tempfile::tempdir().unwrap();
    let state = match backend {
        Backend::Embedded => State::Db(dir.path().join("key.db")),
        Backend::Aws => State::Aws(hooklane_tests::aws::unique_prefix()),
    };
    let env = test_env(&[]);
    assert!(!env.contains_key("HOOKLANE_PORTAL_KEY"));
    let (first_port, log) = (free_port(), dir.path().join("serve.log"));
    let mut first = child::spawn(&bin, first_port, &state, &log, &env);
    let server = Server::connect(&format!("http://127.0.0.1:{first_port}")).await;
    let (status, minted) = server
        .call("POST", "/v1/tenants/a/portal-sessions", Some(json!({})))
        .await;
    assert_eq!(status, 201, "{minted}");
    let url = minted["url"].as_str().expect("url");
    let token = url.split_once("#session=").expect("a session").1.to_owned();
    let subs = "/v1/tenants/a/subscriptions";
    assert_eq!(server.call_as(&token, "GET", subs, None).await.0, 200);

    // On AWS, another process over the same table, while the first runs
    // (as another Lambda instance would). An embedded database has one.
    if matches!(backend, Backend::Aws) {
        let other_port = free_port();
        let other_log = dir.path().join("other.log");
        let mut other = child::spawn(&bin, other_port, &state, &other_log, &env);
        let beside = Server::connect(&format!("http://127.0.0.1:{other_port}")).await;
        let status = beside.call_as(&token, "GET", subs, None).await.0;
        other.kill().expect("kill");
        let _ = other.wait();
        assert_eq!(status, 200, "{}", child::tail(&other_log, 20));
    }

    // The first process restarted.
    first.kill().expect("kill");
    let _ = first.wait();
    let mut again = child::spawn(&bin, first_port, &state, &log, &env);
    let restarted = Server::connect(&format!("http://127.0.0.1:{first_port}")).await;
    let status = restarted.call_as(&token, "GET", subs, None).await.0;
    again.kill().expect("kill");
    let _ = again.wait();
    assert_eq!(status, 200, "{}", child::tail(&log, 20));
}

on_both_backends!(a_session_survives_a_restart_and_works_in_another_process);
