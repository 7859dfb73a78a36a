//! Disk full (embedded, G1), two ways, `hooklane serve` running as a child
//! process each time:
//! - its file-size limit (`RLIMIT_FSIZE`, what `ulimit -f` sets) is
//!   lowered to just above its files' sizes, so the database soon cannot
//!   grow: to SQLite this is a full disk;
//! - the database lives on a 4 MiB tmpfs the test mounts (as root, or
//!   through `sudo -n`; where neither can mount, that test says so and
//!   passes without running), filled by publishing, then grown with
//!   `mount -o remount,size=64m`.
//!
//! Publishing then answers 503 `application/problem+json` with
//! `Retry-After`; deliveries whose progress cannot be written wait (none is
//! marked failed for it); the process keeps running; nothing answered 202
//! is lost; and once there is room again the same process accepts the
//! refused event sent again and delivers everything, without a restart.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use hooklane_tests::child::{self, free_port, hooklane_binary, State};
use hooklane_tests::{eventually, test_env, Receiver, Server};
use serde_json::json;

/// Most publishes tried before the limit must have been reached.
const MAX_PUBLISHES: usize = 3000;
/// Each event's data: with the WAL's page per write, the files grow fast.
const DATA_BYTES: usize = 2048;

/// The largest of the files the database uses.
fn largest_file(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .expect("the database directory")
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with("full.db"))
        .filter_map(|e| e.metadata().ok())
        .map(|m| m.len())
        .max()
        .unwrap_or(0)
}

fn set_file_size_limit(pid: u32, limit: u64) {
    let (mut soft, mut hard) = (0, 0);
    rlimit::prlimit(
        pid as i32,
        rlimit::Resource::FSIZE,
        None,
        Some((&mut soft, &mut hard)),
    )
    .expect("reading the child's file-size limit");
    // The soft limit only: an unprivileged process may raise it again up
    // to the hard one.
    rlimit::prlimit(
        pid as i32,
        rlimit::Resource::FSIZE,
        Some((limit, hard)),
        None,
    )
    .expect("setting the child's file-size limit");
}

/// One publish: status, `Content-Type`, `Retry-After`.
async fn publish(server: &Server, id: &str) -> (u16, String, Option<String>) {
    let resp = server
        .http
        .post(format!("{}/v1/tenants/acme/events", server.base))
        .bearer_auth(hooklane_tests::TOKEN)
        .json(&json!({"id": id, "type": "disk.full", "data": {"pad": "x".repeat(DATA_BYTES)}}))
        .timeout(Duration::from_secs(30))
        .send()
        .await
        .expect("the server answers");
    let header = |name: &str| {
        resp.headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    (
        resp.status().as_u16(),
        header("content-type").unwrap_or_default(),
        header("retry-after"),
    )
}

/// `serve` over the database `db` (a child process logging into `logs`:
/// not on the filesystem that fills, so a failing test can read the log),
/// with one subscription of `acme` to the receiver's `sink`.
async fn serving(db: &Path, logs: &Path) -> (std::process::Child, Server, Receiver, PathBuf) {
    let (port, log) = (free_port(), logs.join("serve.log"));
    let state = State::Db(db.to_owned());
    let serve = child::spawn(&hooklane_binary(), port, &state, &log, &test_env(&[]));
    let server = Server::connect(&format!("http://127.0.0.1:{port}")).await;
    let rx = Receiver::start().await;
    server.subscribe("acme", &rx.url("sink"), &["*"]).await;
    (serve, server, rx, log)
}

/// Publishes `id` again every 200 ms, as a publisher told to retry would,
/// until it is answered 202 (at most 30 s); the last status.
async fn sent_again(server: &Server, id: &str) -> u16 {
    let again = Instant::now() + Duration::from_secs(30);
    let mut status = 0;
    while status != 202 && Instant::now() < again {
        tokio::time::sleep(Duration::from_millis(200)).await;
        status = publish(server, id).await.0;
    }
    status
}

/// Whether every id in `accepted` reached the receiver's `sink` within
/// `within`.
async fn all_arrived(rx: &Receiver, accepted: &HashSet<String>, within: Duration) -> bool {
    eventually(within, || {
        let seen: HashSet<String> = rx
            .requests("sink")
            .iter()
            .map(|r| r.header("webhook-id"))
            .collect();
        accepted.iter().all(|id| seen.contains(id))
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_answers_503_with_retry_after_loses_nothing_and_recovers_without_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let logs = tempfile::tempdir().unwrap();
    let (mut serve, server, rx, log) = serving(&dir.path().join("full.db"), logs.path()).await;

    let run = hooklane_tests::aws::unique_prefix();
    let mut accepted: HashSet<String> = HashSet::new();
    let mut refused = None;
    let mut n = 0;
    for _ in 0..20 {
        let id = format!("{run}-{n}");
        n += 1;
        assert_eq!(publish(&server, &id).await.0, 202);
        accepted.insert(id);
    }
    assert!(eventually(Duration::from_secs(30), || rx.count("sink") >= 20).await);

    set_file_size_limit(serve.id(), largest_file(dir.path()) + 64 * 1024);
    while n < MAX_PUBLISHES {
        let id = format!("{run}-{n}");
        n += 1;
        let answer = publish(&server, &id).await;
        match answer.0 {
            202 => {
                accepted.insert(id);
            }
            _ => {
                refused = Some((id, answer));
                break;
            }
        }
    }
    let Some((refused_id, (status, content_type, retry_after))) = refused else {
        panic!("{MAX_PUBLISHES} publishes never filled the disk");
    };
    assert_eq!(
        status,
        503,
        "a full disk answers 503; log:\n{}",
        child::tail(&log, 30)
    );
    assert_eq!(content_type, "application/problem+json");
    assert!(
        retry_after
            .as_deref()
            .and_then(|v| v.parse::<u64>().ok())
            .is_some(),
        "a 503 says when to retry: {retry_after:?}"
    );
    // Still full a moment later: the process is alive and still refuses.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(publish(&server, &refused_id).await.0, 503);
    assert!(
        serve.try_wait().expect("the child's state").is_none(),
        "serve survived the full disk"
    );

    set_file_size_limit(serve.id(), rlimit::INFINITY);
    // The publisher sends the refused event again, as Retry-After says.
    assert_eq!(
        sent_again(&server, &refused_id).await,
        202,
        "the refused event is accepted once space is back"
    );
    accepted.insert(refused_id);
    for _ in 0..20 {
        let id = format!("{run}-{n}");
        n += 1;
        assert_eq!(publish(&server, &id).await.0, 202);
        accepted.insert(id);
    }
    let arrived = all_arrived(&rx, &accepted, Duration::from_secs(60)).await;
    let still_running = serve.try_wait().expect("the child's state").is_none();
    let _ = serve.kill();
    let _ = serve.wait();
    assert!(still_running, "the same process went on (no restart)");
    assert!(
        arrived,
        "every event answered 202 arrived ({} of {}); log:\n{}",
        rx.count("sink"),
        accepted.len(),
        child::tail(&log, 30)
    );
}

/// Most publishes tried before the tmpfs must be full.
const MAX_FS_PUBLISHES: usize = 4000;

/// A tmpfs mounted for the test, unmounted when dropped.
struct Mounted {
    dir: PathBuf,
    sudo: bool,
}

impl Mounted {
    /// Mounts a tmpfs of `size` at `dir`, or says why it cannot.
    fn tmpfs(dir: &Path, size: &str) -> Result<Self, String> {
        let mut why = Vec::new();
        for sudo in [false, true] {
            let out = mount_cmd(sudo)
                .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
                .arg(dir)
                .output();
            match out {
                Ok(o) if o.status.success() => {
                    return Ok(Self {
                        dir: dir.to_owned(),
                        sudo,
                    })
                }
                Ok(o) => why.push(String::from_utf8_lossy(&o.stderr).trim().to_owned()),
                Err(e) => why.push(e.to_string()),
            }
        }
        Err(why.join("; "))
    }

    /// Grows the filesystem to `size`.
    fn resize(&self, size: &str) {
        let ok = mount_cmd(self.sudo)
            .args(["-o", &format!("remount,size={size}")])
            .arg(&self.dir)
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "remounting the tmpfs at {size}");
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        let mut umount = if self.sudo {
            let mut c = Command::new("sudo");
            c.args(["-n", "umount"]);
            c
        } else {
            Command::new("umount")
        };
        let _ = umount.arg("-l").arg(&self.dir).status();
    }
}

fn mount_cmd(sudo: bool) -> Command {
    if sudo {
        let mut c = Command::new("sudo");
        c.args(["-n", "mount"]);
        c
    } else {
        Command::new("mount")
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_filesystem_refuses_publishes_pauses_deliveries_and_recovers_when_grown() {
    let dir = tempfile::tempdir().unwrap();
    let fs = match Mounted::tmpfs(dir.path(), "4m") {
        Ok(fs) => fs,
        Err(why) => {
            eprintln!("SKIPPED: this machine cannot mount a tmpfs for the test ({why})");
            return;
        }
    };
    let logs = tempfile::tempdir().unwrap();
    let (mut serve, server, rx, log) = serving(&fs.dir.join("full.db"), logs.path()).await;

    let run = hooklane_tests::aws::unique_prefix();
    let mut accepted: HashSet<String> = HashSet::new();
    let mut refused = None;
    for n in 0..MAX_FS_PUBLISHES {
        let id = format!("{run}-{n}");
        match publish(&server, &id).await {
            (202, _, _) => {
                accepted.insert(id);
            }
            answer => {
                refused = Some((id, answer));
                break;
            }
        }
    }
    let tail = child::tail(&log, 30);
    let Some((refused_id, (status, _, retry_after))) = refused else {
        panic!("{MAX_FS_PUBLISHES} publishes never filled the filesystem; log:\n{tail}");
    };
    assert_eq!(status, 503, "a full filesystem answers 503; log:\n{tail}");
    assert!(
        retry_after.and_then(|v| v.parse::<u64>().ok()).is_some(),
        "a 503 says when to retry"
    );
    // What arrives while it is full (printed): deliveries whose progress
    // cannot be written wait for space.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let paused_at = rx.count("sink");
    tokio::time::sleep(Duration::from_secs(2)).await;
    let still = (rx.count("sink"), publish(&server, &refused_id).await.0);
    assert!(
        serve.try_wait().expect("the child's state").is_none(),
        "serve survived the full filesystem"
    );

    fs.resize("64m");
    assert_eq!(
        sent_again(&server, &refused_id).await,
        202,
        "the refused event is accepted once space is back"
    );
    accepted.insert(refused_id);
    let arrived = all_arrived(&rx, &accepted, Duration::from_secs(120)).await;
    // None parked: a delivery that waited for space is not a failed one.
    let (_, dead) = server
        .call("GET", "/v1/tenants/acme/dead-letters", None)
        .await;
    let still_running = serve.try_wait().expect("the child's state").is_none();
    let _ = serve.kill();
    let _ = serve.wait();
    assert_eq!(dead["items"], serde_json::json!([]), "nothing parked");
    eprintln!(
        "accepted {}, arrived while full {paused_at} then {}, refused again {}",
        accepted.len(),
        still.0,
        still.1
    );
    assert_eq!(still.1, 503, "still full two seconds on");
    assert!(still_running, "the same process went on (no restart)");
    assert!(
        arrived,
        "every event answered 202 arrived ({} of {}); log:\n{}",
        rx.count("sink"),
        accepted.len(),
        child::tail(&log, 30)
    );
}
