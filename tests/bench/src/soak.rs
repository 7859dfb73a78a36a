//! Figure 12, the soak: `hooklane serve` (a child process, on either
//! backend) takes a steady stream of events for `--minutes`, each to ten
//! subscriptions: four healthy receivers, two failing (500), two that hang
//! on every third request and two that flap (503 ten seconds in thirty)
//! ([`crate::soak_receivers`]). Meanwhile the server is killed with
//! SIGKILL at random moments (every 30 to 90 s) and restarted over the same
//! state; publishers send a publish that got no answer again with the same
//! id. Then publishing stops and the backlog drains (at most
//! `--drain-minutes`), and it prints what was published, delivered,
//! delivered more than once, parked and lost, and the server's resident
//! memory and open file descriptors over time.
//!
//! Lost must be 0: a delivery of an event answered 202 that its receiver
//! never answered 2xx and that was not parked either (a failing receiver's
//! deliveries park after the ladder, and a hanging one's, rarely, when
//! every attempt met a held request). The command exits non-zero
//! otherwise. Every
//! loop is bounded in count and time.

use std::collections::HashSet;
use std::process::{Child, Command, Stdio};

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context;
use serde_json::{json, Value};

use crate::rig::TOKEN;
use crate::soak_receivers::{self, Seen};

/// The receivers: path kind, subscriptions, lanes each. A failing
/// receiver's delivery takes the whole ladder (about 15 s), so its
/// subscriptions have 256 lanes: at 10 events a second each lane is busy
/// about 60 % of the time, and its backlog does not grow.
const KINDS: [(&str, usize, u16); 4] = [
    ("ok", 4, 1),
    ("fail", 2, 256),
    ("hang", 2, 64),
    ("flap", 2, 8),
];

/// The soak's options.
#[derive(clap::Args)]
pub struct Args {
    /// Minutes of publishing.
    #[arg(long, default_value_t = 10)]
    minutes: u64,
    /// Events per second (each to all ten subscriptions).
    #[arg(long, default_value_t = 10)]
    rate: u64,
    /// `embedded`, or `aws` (on local AWS-compatible servers: the fast
    /// pair, or moto with `HOOKLANE_BENCH_STANDIN=moto`;
    /// [`crate::standin`]).
    #[arg(long, default_value = "embedded")]
    backend: String,
    /// Most minutes to wait for the backlog to drain.
    #[arg(long, default_value_t = 10)]
    drain_minutes: u64,
    /// When deliveries are lost, minutes to keep the server (and the local
    /// AWS-compatible server) running after the report, for a look at
    /// their state; 0 stops them at once.
    #[arg(long, default_value_t = 0)]
    hold_on_loss_minutes: u64,
}

/// The server under soak: restarted over the same state and port.
struct Server {
    bin: String,
    port: u16,
    dir: tempfile::TempDir,
    aws: Option<Aws>,
    child: Child,
}

/// What `serve --backend aws` needs to find its resources: the stand-in's
/// endpoints (as the SDK's variables) and the resource prefix.
type Aws = (Vec<(&'static str, String)>, String);

impl Server {
    /// Starts `bin serve` over `dir` (or the AWS resources of `aws`: the
    /// endpoints and the prefix) on `port`.
    fn start(bin: &str, port: u16, aws: Option<Aws>) -> anyhow::Result<Self> {
        let dir = tempfile::tempdir()?;
        let child = Self::command(bin, port, &dir, aws.as_ref())
            .spawn()
            .context("starting serve")?;
        Ok(Self {
            bin: bin.to_owned(),
            port,
            dir,
            aws,
            child,
        })
    }

    fn command(bin: &str, port: u16, dir: &tempfile::TempDir, aws: Option<&Aws>) -> Command {
        let mut cmd = Command::new(bin);
        cmd.args(["serve", "--listen", &format!("127.0.0.1:{port}"), "--db"])
            .arg(dir.path().join("soak.db"))
            .env("HOOKLANE_API_TOKEN", TOKEN)
            .env("HOOKLANE_ALLOW_HTTP", "true")
            .env("HOOKLANE_ALLOW_PRIVATE_TARGETS", "true")
            .env("HOOKLANE_RETRY_SCHEDULE", "0s,1s,2s,4s,8s")
            .env("HOOKLANE_ATTEMPT_TIMEOUT", "5s")
            // The breaker would put the failing receivers' deliveries off
            // for minutes at a time; what is measured is what is kept.
            .env("HOOKLANE_BREAKER", "failures=1000000")
            .stdout(Stdio::null());
        // `HOOKLANE_SOAK_LOG=file` keeps the server's log (info and up)
        // across its restarts, for a look after a run.
        let log = std::env::var_os("HOOKLANE_SOAK_LOG").and_then(|p| {
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(p)
                .ok()
        });
        match log {
            Some(f) => cmd.env("RUST_LOG", "info").stderr(f),
            None => cmd.env("RUST_LOG", "error").stderr(Stdio::null()),
        };
        if let Some((endpoints, prefix)) = aws {
            cmd.args([
                "--backend",
                "aws",
                "--create-resources",
                "--resource-prefix",
                prefix,
            ])
            .envs(endpoints.iter().map(|(k, v)| (k, v)));
        }
        cmd
    }

    fn kill_and_restart(&mut self) -> anyhow::Result<()> {
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.child = Self::command(&self.bin, self.port, &self.dir, self.aws.as_ref())
            .spawn()
            .context("restarting serve")?;
        Ok(())
    }

    /// Resident memory (kB) and open file descriptors of the process now.
    fn sample(&self) -> (u64, usize) {
        let pid = self.child.id();
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        let rss = status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or(0);
        let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count());
        (rss, fds)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A small deterministic sequence for the kill times.
fn next(seed: &mut u64) -> u64 {
    *seed ^= *seed << 13;
    *seed ^= *seed >> 7;
    *seed ^= *seed << 17;
    *seed
}

async fn call(
    http: &reqwest::Client,
    base: &str,
    method: &str,
    path: &str,
    body: Option<Value>,
) -> Option<(u16, Value)> {
    let url = format!("{base}{path}");
    let req = match method {
        "POST" => http.post(url).json(&body.unwrap_or_default()),
        _ => http.get(url),
    };
    let resp = req
        .bearer_auth(TOKEN)
        .timeout(Duration::from_secs(30))
        .send()
        .await
        .ok()?;
    let status = resp.status().as_u16();
    Some((status, resp.json().await.unwrap_or_default()))
}

/// Calls until the server answers (it may be restarting), at most 300
/// tries 200 ms apart, each within its own 30 s timeout.
async fn call_through(
    http: &reqwest::Client,
    base: &str,
    method: &str,
    path: &str,
    body: Value,
) -> anyhow::Result<(u16, Value)> {
    for _ in 0..300 {
        match call(http, base, method, path, Some(body.clone())).await {
            Some((s, v)) if s < 500 => return Ok((s, v)),
            _ => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
    anyhow::bail!("{method} {path}: no answer for a minute")
}

/// Publishes at `rate` per second until `until`, each event sent again with
/// its id until answered 202 or 200 (within [`call_through`]'s tries); the
/// ids accepted.
async fn publish(base: String, rate: u64, until: Instant, accepted: Arc<Mutex<Vec<String>>>) {
    let http = reqwest::Client::new();
    let run = std::process::id();
    let mut tick = tokio::time::interval(Duration::from_micros(1_000_000 / rate.max(1)));
    let mut sent = tokio::task::JoinSet::new();
    let mut n = 0u64;
    while Instant::now() < until {
        tick.tick().await;
        let id = format!("evt-soak-{run}-{n}");
        let (http, base, accepted) = (http.clone(), base.clone(), accepted.clone());
        n += 1;
        sent.spawn(async move {
            let body = json!({"id": id, "type": "soak.event", "data": {"n": n}});
            let path = "/v1/tenants/soak/events";
            if let Ok((202 | 200, _)) = call_through(&http, &base, "POST", path, body).await {
                if let Ok(mut a) = accepted.lock() {
                    a.push(id);
                }
            }
        });
    }
    // Each ends within call_through's bound.
    while sent.join_next().await.is_some() {}
}

/// The (subscription, event) pairs the tenant has parked, every page of
/// its dead letters in one listing (not one per subscription: on AWS a
/// subscription's listing reads the tenant's whole parked index).
async fn parked(http: &reqwest::Client, base: &str) -> anyhow::Result<HashSet<(String, String)>> {
    let mut pairs = HashSet::new();
    let mut cursor = String::new();
    for _ in 0..10_000 {
        let path = format!("/v1/tenants/soak/dead-letters?limit=250{cursor}");
        let (status, page) = call_through(http, base, "GET", &path, Value::Null).await?;
        anyhow::ensure!(status == 200, "{path} answered {status}: {page}");
        for item in page["items"].as_array().into_iter().flatten() {
            if let (Some(s), Some(e)) =
                (item["subscription_id"].as_str(), item["event_id"].as_str())
            {
                pairs.insert((s.to_owned(), e.to_owned()));
            }
        }
        match page["next_cursor"].as_str() {
            Some(c) => cursor = format!("&cursor={c}"),
            None => break,
        }
    }
    Ok(pairs)
}

/// Runs the soak and prints its figures.
pub async fn run(bin: &str, args: Args) -> anyhow::Result<()> {
    let (addr, seen) = soak_receivers::start().await?;
    let mut standin = None;
    let aws = match args.backend.as_str() {
        "embedded" => None,
        "aws" => {
            let started = crate::standin::Standin::start()?;
            println!("soak on the {} stand-in", started.name);
            let endpoints = started.env.clone();
            standin = Some(started);
            Some((endpoints, format!("soak{}", std::process::id())))
        }
        other => anyhow::bail!("--backend: embedded or aws, not {other}"),
    };
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let mut server = Server::start(bin, port, aws)?;
    let base = format!("http://127.0.0.1:{port}");
    let http = reqwest::Client::new();
    let mut subs = Vec::new();
    for (kind, count, lanes) in KINDS {
        for i in 0..count {
            let path = format!("/{kind}/{i}");
            let body = json!({"url": format!("http://{addr}{path}"), "event_types": ["*"], "lanes": lanes});
            let (status, sub) =
                call_through(&http, &base, "POST", "/v1/tenants/soak/subscriptions", body).await?;
            anyhow::ensure!(status == 201, "subscribe answered {status}: {sub}");
            subs.push((
                kind,
                path,
                sub["id"].as_str().unwrap_or_default().to_owned(),
            ));
        }
    }
    let started = Instant::now();
    let until = started + Duration::from_secs(args.minutes * 60);
    let accepted = Arc::new(Mutex::new(Vec::new()));
    let publishing = tokio::spawn(publish(base.clone(), args.rate, until, accepted.clone()));
    let (mut samples, mut kills) = (Vec::new(), 0);
    // `HOOKLANE_TEST_SEED` replays a run's kill times.
    let mut seed = std::env::var("HOOKLANE_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(u64::from(std::process::id()))
        | 1;
    println!("soak: kill times from seed {seed} (HOOKLANE_TEST_SEED={seed} replays them)");
    let mut next_kill = started + Duration::from_secs(30 + next(&mut seed) % 60);
    while Instant::now() < until {
        tokio::time::sleep(Duration::from_secs(10)).await;
        samples.push((started.elapsed().as_secs(), server.sample()));
        if Instant::now() >= next_kill && Instant::now() < until {
            server.kill_and_restart()?;
            kills += 1;
            next_kill = Instant::now() + Duration::from_secs(30 + next(&mut seed) % 60);
        }
    }
    publishing.await?;
    let accepted: Vec<String> = accepted.lock().map(|a| a.clone()).unwrap_or_default();
    let mut known = HashSet::new();
    let drained = drain(
        &http,
        &base,
        (&seen, &subs, &accepted),
        &mut known,
        args.drain_minutes,
        &server,
        &mut samples,
    )
    .await?;
    let report = Report {
        args: &args,
        accepted: accepted.len(),
        kills,
        drained,
        samples,
    };
    let lost = report
        .print(&http, &base, (&seen, &subs, &accepted), &mut known)
        .await?;
    if lost > 0 {
        for (path, sub, event) in unaccounted(&seen, &subs, &accepted, &known).take(20) {
            println!("  unaccounted for: {path} {sub} {event}");
        }
        if args.hold_on_loss_minutes > 0 {
            println!(
                "holding for {} min: server {base}, AWS {:?}",
                args.hold_on_loss_minutes, server.aws
            );
            tokio::time::sleep(Duration::from_secs(args.hold_on_loss_minutes * 60)).await;
        }
    }
    drop((server, standin));
    anyhow::ensure!(lost == 0, "{lost} deliveries of accepted events were lost");
    Ok(())
}

type Subs = [(&'static str, String, String)];

/// The deliveries of accepted events neither answered 2xx nor known
/// parked: (path, subscription, event).
fn unaccounted<'a>(
    seen: &'a Seen,
    subs: &'a Subs,
    accepted: &'a [String],
    known: &'a HashSet<(String, String)>,
) -> impl Iterator<Item = (&'a str, &'a str, &'a str)> + 'a {
    subs.iter().flat_map(move |(_, path, id)| {
        accepted
            .iter()
            .filter(move |e| !seen.got(path, e) && !known.contains(&(id.clone(), (*e).clone())))
            .map(move |e| (path.as_str(), id.as_str(), e.as_str()))
    })
}

/// Deliveries of accepted events neither answered 2xx nor parked (a
/// failing receiver's park after the ladder; a hanging one's, rarely, when
/// every attempt landed on a held request), and those parked. `known`
/// keeps the parked pairs between checks (the soak replays nothing, so a
/// parked delivery stays parked); the dead letters are listed again only
/// while some delivery is neither seen nor known parked, and, unless
/// `always`, only once the server has nothing pending (before that, some
/// delivery is missing anyway, and on the local AWS-compatible server
/// every page of the listing scans the whole table; a failed `/status`
/// counts as nothing pending).
async fn missing(
    http: &reqwest::Client,
    base: &str,
    (seen, subs, accepted): (&Seen, &Subs, &[String]),
    known: &mut HashSet<(String, String)>,
    always: bool,
) -> anyhow::Result<(u64, u64)> {
    let count =
        |known: &HashSet<(String, String)>| unaccounted(seen, subs, accepted, known).count() as u64;
    if count(known) > 0 && (always || pending(http, base).await.unwrap_or(0) == 0) {
        known.extend(parked(http, base).await?);
    }
    Ok((count(known), known.len() as u64))
}

/// The deliveries the server has pending (`/status`).
async fn pending(http: &reqwest::Client, base: &str) -> anyhow::Result<u64> {
    let (_, status) = call_through(http, base, "GET", "/status", Value::Null).await?;
    Ok(status["backlog"]["pending"].as_u64().unwrap_or(0))
}

/// Waits until nothing is missing, at most `minutes` of wall time (the
/// checks' own time included: on the local server a check reads a large
/// table); the seconds it took, or `None` when it did not drain.
async fn drain(
    http: &reqwest::Client,
    base: &str,
    (seen, subs, accepted): (&Seen, &Subs, &[String]),
    known: &mut HashSet<(String, String)>,
    minutes: u64,
    server: &Server,
    samples: &mut Vec<(u64, (u64, usize))>,
) -> anyhow::Result<Option<u64>> {
    let started = Instant::now();
    let bound = Duration::from_secs(minutes.max(1) * 60);
    while started.elapsed() < bound {
        let left = bound.saturating_sub(started.elapsed());
        // Past half the bound the dead letters are listed whatever the
        // server has pending (a copy of a message left in a queue counts as
        // pending, a spilled delivery does not).
        let always = started.elapsed() > bound / 2;
        let check = missing(http, base, (seen, subs, accepted), known, always);
        match tokio::time::timeout(left, check).await {
            Ok(found) => {
                if found?.0 == 0 {
                    return Ok(Some(started.elapsed().as_secs()));
                }
            }
            Err(_) => break,
        }
        tokio::time::sleep(Duration::from_secs(10)).await;
        samples.push((samples.last().map_or(0, |s| s.0) + 10, server.sample()));
    }
    Ok(None)
}

struct Report<'a> {
    args: &'a Args,
    accepted: usize,
    kills: u32,
    drained: Option<u64>,
    samples: Vec<(u64, (u64, usize))>,
}

impl Report<'_> {
    /// Prints the figures; the deliveries lost.
    async fn print(
        &self,
        http: &reqwest::Client,
        base: &str,
        (seen, subs, accepted): (&Seen, &Subs, &[String]),
        known: &mut HashSet<(String, String)>,
    ) -> anyhow::Result<u64> {
        let a = self.args;
        println!("soak: {} backend, {} min at {} events/s, ten subscriptions (4 healthy, 2 failing, 2 hanging 1 in 3, 2 flapping), {} kills (SIGKILL and restart)", a.backend, a.minutes, a.rate, self.kills);
        let (mut delivered, mut twice) = (0, 0);
        for (kind, path, _) in subs.iter().filter(|s| s.0 != "fail") {
            let (n, t) = seen.delivered_to(path);
            println!("  {kind:<4} {path:<8} delivered {n:>7}   more than once {t:>5}");
            delivered += n;
            twice += t;
        }
        // Bounded as the drain is: a check that cannot finish is said so.
        let bound = Duration::from_secs(a.drain_minutes.max(1) * 60);
        let checked = tokio::time::timeout(
            bound,
            missing(http, base, (seen, subs, accepted), known, true),
        );
        let Ok(checked) = checked.await else {
            anyhow::bail!(
                "the loss check (every dead letter read through the API) did not finish within {} min",
                a.drain_minutes
            );
        };
        let (missing, parked) = checked?;
        // Not drained: what the server still has pending is not lost (yet).
        let pending = pending(http, base).await?;
        let lost = missing.saturating_sub(pending);
        let expected = accepted.len() * subs.len();
        println!("published (answered 202 or 200)  {}", self.accepted);
        println!("deliveries expected              {expected}");
        println!("delivered (2xx)                  {delivered}   (more than once: {twice})");
        println!("parked                           {parked}");
        println!("pending (not drained yet)        {pending}");
        println!("lost                             {lost}");
        match self.drained {
            Some(s) => println!("drained                          {s} s after publishing stopped"),
            None => println!(
                "drained                          no: still missing after {} min",
                a.drain_minutes
            ),
        }
        let peak = self.samples.iter().map(|s| s.1 .0).max().unwrap_or(0);
        let fds = self.samples.iter().map(|s| s.1 .1).max().unwrap_or(0);
        println!(
            "peak RSS {:.1} MB, most open file descriptors {fds}",
            peak as f64 / 1024.0
        );
        let every = (self.samples.len() / 12).max(1);
        for (t, (rss, fds)) in self.samples.iter().step_by(every) {
            println!(
                "  t={t:>5} s   RSS {:>6.1} MB   fds {fds:>5}",
                *rss as f64 / 1024.0
            );
        }
        Ok(lost)
    }
}
