//! End-to-end tests of the `hooklane` command's tools that talk to a
//! running hooklane, on both backends: `dead-letters` lists a tenant's
//! parked deliveries and replays them through the API.

use std::time::Duration;

use hooklane_tests::child::hooklane_binary;
use hooklane_tests::{
    eventually, on_both_backends, test_env, Backend, Receiver, Reply, Server, TOKEN,
};

/// Runs `hooklane dead-letters` against `server` with `args`; its stdout.
async fn dead_letters(server: &Server, args: &[&str]) -> String {
    let out = tokio::process::Command::new(hooklane_binary())
        .args(["dead-letters", "--url", &server.base, "--tenant", "acme"])
        .args(args)
        .env("HOOKLANE_API_TOKEN", TOKEN)
        .output()
        .await
        .expect("hooklane runs");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "dead-letters {args:?}: {}\n{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

async fn the_dead_letters_command_lists_and_replays_parked_deliveries(backend: Backend) {
    let server = Server::start_on(backend, test_env(&[("HOOKLANE_RETRY_SCHEDULE", "0s")])).await;
    let receiver = Receiver::start().await;
    receiver.set_default("hook", Reply::Status(500));
    let sub = server
        .subscribe("acme", &receiver.url("hook"), &["*"])
        .await;
    let sub = sub["id"].as_str().expect("id").to_owned();
    let first = server
        .publish("acme", "a.b", serde_json::json!({"n": 1}))
        .await;
    let second = server
        .publish("acme", "a.b", serde_json::json!({"n": 2}))
        .await;
    let path = "/v1/tenants/acme/dead-letters";
    let mut parked = 0;
    for _ in 0..300 {
        parked = server.call("GET", path, None).await.1["items"]
            .as_array()
            .map_or(0, Vec::len);
        if parked == 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(parked, 2, "both deliveries parked");

    let listed = dead_letters(&server, &["list"]).await;
    assert!(listed.starts_with("2 dead letters"), "{listed}");
    for id in [&first, &second, &sub] {
        assert!(listed.contains(id.as_str()), "{id} missing:\n{listed}");
    }
    assert!(listed.contains("500"), "the last status:\n{listed}");
    let one = dead_letters(&server, &["list", "--limit", "1", "--json"]).await;
    assert_eq!(one.lines().count(), 1, "{one}");

    receiver.set_default("hook", Reply::Status(204));
    let replayed = dead_letters(&server, &["replay", &first]).await;
    assert_eq!(replayed.trim(), "replayed 1");
    let delivered = eventually(Duration::from_secs(30), || {
        receiver
            .requests("hook")
            .iter()
            .filter(|r| r.header("webhook-id") == first)
            .count()
            == 2
    })
    .await;
    assert!(delivered, "the replayed event was sent again, once");
    let rest = dead_letters(&server, &["list"]).await;
    assert!(
        rest.starts_with("1 dead letters") && rest.contains(&second),
        "{rest}"
    );
    let all = dead_letters(&server, &["replay", "--subscription", &sub]).await;
    assert_eq!(all.trim(), "replayed 1");
    let ok = eventually(Duration::from_secs(30), || {
        let of_second = receiver.requests("hook");
        of_second
            .iter()
            .filter(|r| r.header("webhook-id") == second)
            .count()
            == 2
    })
    .await;
    assert!(ok, "the second arrived after replaying the subscription's");
    assert_eq!(
        dead_letters(&server, &["list"]).await.trim(),
        "no dead letters"
    );
}

on_both_backends!(the_dead_letters_command_lists_and_replays_parked_deliveries);
