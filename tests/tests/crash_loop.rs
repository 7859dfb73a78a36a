//! Crash loop (G1): while events are published to several subscriptions
//! (three of which answer 500 to their first requests), `hooklane serve`
//! (a child process) is killed with SIGKILL at random moments, mid-batch,
//! and restarted over the same state each time. Publishers retry a publish
//! that got no answer with the same event id. After the last restart,
//! every accepted event (answered 202, or 200 to such a retry) reaches
//! every subscription.
//!
//! Embedded: 1,000 events to 10 subscriptions, ten kills over one
//! database. AWS (`serve --backend aws` over the same queues and table each
//! time): 200 events to 6 subscriptions, six kills; a load of the embedded
//! size through the local AWS-compatible server would take many minutes,
//! and what a kill leaves in flight comes back only after the queue's
//! visibility timeout.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hooklane_tests::child::{self, free_port, hooklane_binary, State};
use hooklane_tests::{
    eventually, on_both_backends, test_env, Backend, Receiver, Reply, Server, TOKEN,
};
use serde_json::json;

const FLAKY: usize = 3;
const PUBLISHERS: usize = 4;

/// The load of one run.
#[derive(Clone, Copy)]
struct Load {
    events: usize,
    subscriptions: usize,
    kills: usize,
}

const EMBEDDED: Load = Load {
    events: 1000,
    subscriptions: 10,
    kills: 10,
};
const AWS: Load = Load {
    events: 200,
    subscriptions: 6,
    kills: 6,
};
/// How long a publisher keeps trying one event.
const PUBLISH_WITHIN: Duration = Duration::from_secs(120);
/// How long every delivery may take to arrive after the last restart.
const ARRIVE_WITHIN: Duration = Duration::from_secs(180);

/// A seeded pseudo-random sequence (splitmix64).
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        (z ^ (z >> 31)) % n
    }
}

/// Publishes event `id` until it is accepted (202, or 200 when an earlier
/// try was accepted before a kill cut its answer off); `false` if the
/// bound passed first.
async fn publish(http: &reqwest::Client, base: &str, id: &str, n: usize) -> bool {
    let deadline = Instant::now() + PUBLISH_WITHIN;
    while Instant::now() < deadline {
        let sent = http
            .post(format!("{base}/v1/tenants/acme/events"))
            .bearer_auth(TOKEN)
            .json(&json!({"id": id, "type": "crash.loop", "data": {"n": n}}))
            .timeout(Duration::from_secs(10))
            .send()
            .await;
        match sent.map(|r| r.status().as_u16()) {
            Ok(202 | 200) => return true,
            Ok(s) if s < 500 => panic!("publish {id} answered {s}"),
            // Refused or cut off by a kill, or a 5xx: try again.
            _ => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
    false
}

/// Publishes every `PUBLISHERS`th event from `first`, paced so the load
/// spans the kills; returns the ids accepted.
async fn publisher(
    base: String,
    run: String,
    (first, events): (usize, usize),
    accepted: Arc<Mutex<HashSet<String>>>,
) {
    let http = reqwest::Client::new();
    for n in (first..events).step_by(PUBLISHERS) {
        let id = format!("{run}-{n}");
        if publish(&http, &base, &id, n).await {
            accepted.lock().unwrap().insert(id);
        }
        tokio::time::sleep(Duration::from_millis(30)).await;
    }
}

fn missing(rx: &Receiver, name: &str, accepted: &HashSet<String>) -> usize {
    let seen: HashSet<String> = rx
        .requests(name)
        .iter()
        .map(|r| r.header("webhook-id"))
        .collect();
    accepted.iter().filter(|id| !seen.contains(*id)).count()
}

async fn after_sigkills_during_a_load_every_accepted_event_reaches_every_subscription(
    backend: Backend,
) {
    let (load, state_of) = match backend {
        Backend::Embedded => (EMBEDDED, None),
        Backend::Aws => (AWS, Some(hooklane_tests::aws::unique_prefix())),
    };
    let bin = hooklane_binary();
    let dir = tempfile::tempdir().unwrap();
    let state = match state_of {
        None => State::Db(dir.path().join("loop.db")),
        Some(prefix) => State::Aws(prefix),
    };
    let (port, log) = (free_port(), dir.path().join("serve.log"));
    let base = format!("http://127.0.0.1:{port}");
    let env = test_env(&[
        ("HOOKLANE_RETRY_SCHEDULE", "0s,1s,1s,1s,1s,1s,1s,1s,1s,1s"),
        ("HOOKLANE_ATTEMPT_TIMEOUT", "3s"),
    ]);
    // `HOOKLANE_TEST_SEED` replays a run's kill points.
    let seed = hooklane_tests::seed("crash loop kill points");
    let mut rng = Rng(seed);

    let rx = Receiver::start().await;
    let names: Vec<String> = (0..load.subscriptions)
        .map(|i| format!("sub-{i}"))
        .collect();
    let mut child = child::spawn(&bin, port, &state, &log, &env);
    let server = Server::connect(&base).await;
    for (i, name) in names.iter().enumerate() {
        if i < FLAKY {
            rx.script(name, vec![Reply::Status(500); 4]);
        }
        server.subscribe("acme", &rx.url(name), &["*"]).await;
    }

    let accepted: Arc<Mutex<HashSet<String>>> = Arc::default();
    let run = hooklane_tests::aws::unique_prefix();
    let publishers: Vec<_> = (0..PUBLISHERS)
        .map(|first| {
            tokio::spawn(publisher(
                base.clone(),
                run.clone(),
                (first, load.events),
                accepted.clone(),
            ))
        })
        .collect();
    for _ in 0..load.kills {
        Server::connect(&base).await;
        tokio::time::sleep(Duration::from_millis(200 + rng.below(1000))).await;
        child.kill().expect("SIGKILL");
        let _ = child.wait();
        child = child::spawn(&bin, port, &state, &log, &env);
    }
    for p in publishers {
        p.await.expect("a publisher");
    }
    Server::connect(&base).await;

    let accepted = accepted.lock().unwrap().clone();
    let all_arrived = eventually(ARRIVE_WITHIN, || {
        names.iter().all(|name| missing(&rx, name, &accepted) == 0)
    })
    .await;
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(
        accepted.len(),
        load.events,
        "every event was accepted in the end; serve's log:\n{}",
        child::tail(&log, 40)
    );
    let missing: Vec<String> = names
        .iter()
        .map(|name| format!("{name}: {}", missing(&rx, name, &accepted)))
        .collect();
    assert!(
        all_arrived,
        "not every accepted event arrived ({missing:?}); serve's log:\n{}",
        child::tail(&log, 40)
    );
}

on_both_backends!(after_sigkills_during_a_load_every_accepted_event_reaches_every_subscription);
