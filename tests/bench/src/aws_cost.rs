//! Figure 5: AWS API calls per delivery, counted by `serve --backend aws`
//! against the local AWS-compatible server (moto), and the dollars per
//! million 1 KiB deliveries they cost at public on-demand prices.
//!
//! The counts are real (an SDK interceptor counts every call the adapters
//! make), and so is what they are billed as: the interceptor computes
//! DynamoDB write and read units from the size of every item written or
//! read, index writes and transactions included, and SQS requests by
//! 64 KiB chunk (`hooklane_aws::capacity`, which says what it estimates).
//! Lambda time is the run's wall time per delivery, an upper bound.

use std::collections::BTreeMap;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use anyhow::Context as _;

use crate::rig::{kib_payload, receiver, Api, Serve};

/// Where the counting server bills empty receives (`hooklane_aws::calls`).
const EMPTY_RECEIVE: &str = "ReceiveMessage (empty)";

/// us-east-1 on-demand prices (USD), as published in 2026.
const SQS_FIFO_PER_REQUEST: f64 = 0.50 / 1e6;
const DDB_WRITE_UNIT: f64 = 0.625 / 1e6;
const DDB_READ_UNIT: f64 = 0.125 / 1e6;
const LAMBDA_ARM_GB_SECOND: f64 = 0.000_013_333_4;
const LAMBDA_REQUEST: f64 = 0.20 / 1e6;
/// Provisioned capacity: a write unit-hour $0.00065 (3,600 writes), a
/// read unit-hour $0.00013 (3,600 strongly consistent reads).
const PROVISIONED_WRITE_UNIT: f64 = 0.00065 / 3600.0;
const PROVISIONED_READ_UNIT: f64 = 0.00013 / 3600.0;

/// Starts moto from `.venv` on a free loopback port.
fn moto() -> anyhow::Result<(Child, String)> {
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let child = Command::new(".venv/bin/moto_server")
        .args(["-H", "127.0.0.1", "-p", &port.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .context("starting .venv/bin/moto_server (tests/run.sh installs it)")?;
    Ok((child, format!("http://127.0.0.1:{port}")))
}

/// Parses `hooklane_aws_calls_total{service="…",operation="…"} n` lines.
fn calls(metrics: &str) -> BTreeMap<(String, String), u64> {
    metrics
        .lines()
        .filter_map(|l| l.strip_prefix("hooklane_aws_calls_total{service=\""))
        .filter_map(|l| {
            let (service, rest) = l.split_once("\",operation=\"")?;
            let (op, n) = rest.split_once("\"} ")?;
            Some(((service.to_owned(), op.to_owned()), n.trim().parse().ok()?))
        })
        .collect()
}

/// Parses `hooklane_aws_billed_total{service="…",operation="…",unit="…"} n`
/// lines: [write units, read units, SQS requests] by (service, operation).
fn billed(metrics: &str) -> BTreeMap<(String, String), [f64; 3]> {
    let mut out: BTreeMap<(String, String), [f64; 3]> = BTreeMap::new();
    for l in metrics
        .lines()
        .filter_map(|l| l.strip_prefix("hooklane_aws_billed_total{service=\""))
    {
        let parsed = (|| {
            let (service, rest) = l.split_once("\",operation=\"")?;
            let (op, rest) = rest.split_once("\",unit=\"")?;
            let (unit, n) = rest.split_once("\"} ")?;
            let slot = ["wru", "rru", "requests"].iter().position(|u| *u == unit)?;
            Some((
                (service.to_owned(), op.to_owned()),
                slot,
                n.trim().parse().ok()?,
            ))
        })();
        if let Some((key, slot, n)) = parsed {
            out.entry(key).or_default()[slot] = n;
        }
    }
    out
}

/// How a run publishes and delivers.
#[derive(Clone, Copy, Debug)]
pub struct Shape {
    /// Events published.
    pub events: u64,
    /// Publishers at once (one at a time: 1).
    pub publishers: u64,
    /// Subscriptions each event matches (of 10; 1, 2, 5 or 10).
    pub per_event: u64,
    /// Fill each queue before its poller starts, so receives are full.
    pub at_load: bool,
}

/// Runs the shape over 10 subscriptions and prints the calls and what
/// they are billed per delivery.
pub async fn run(bin: &str, shape: Shape) -> anyhow::Result<()> {
    anyhow::ensure!(
        [1, 2, 5, 10].contains(&shape.per_event),
        "--per-event is 1, 2, 5 or 10"
    );
    let (mut moto, endpoint) = moto()?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let result = measure(bin, &endpoint, shape).await;
    let _ = moto.kill();
    let _ = moto.wait();
    result
}

/// The counts a process served now.
async fn counts(api: &Api) -> anyhow::Result<Counts> {
    let text = api.metrics_text().await?;
    Ok((calls(&text), billed(&text)))
}

/// `after - before`, added to `sum`.
fn add_diff(sum: &mut Counts, before: &Counts, after: &Counts) {
    for (k, n) in &after.0 {
        *sum.0.entry(k.clone()).or_default() += n - before.0.get(k).copied().unwrap_or(0);
    }
    for (k, units) in &after.1 {
        let was = before.1.get(k).copied().unwrap_or_default();
        let slot = sum.1.entry(k.clone()).or_default();
        for i in 0..3 {
            slot[i] += units[i] - was[i];
        }
    }
}

/// Calls other than receives (pollers receive all the time, even from an
/// empty queue).
async fn work(api: &Api) -> anyhow::Result<BTreeMap<(String, String), u64>> {
    let mut calls = counts(api).await?.0;
    calls.retain(|(_, op), _| op != "ReceiveMessage");
    Ok(calls)
}

/// Waits until the process's calls (receives aside) stop changing for
/// five seconds.
async fn until_quiet(api: &Api) -> anyhow::Result<()> {
    let mut last = work(api).await?;
    let mut quiet_since = Instant::now();
    let end = Instant::now() + Duration::from_secs(600);
    while quiet_since.elapsed() < Duration::from_secs(5) && Instant::now() < end {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let now = work(api).await?;
        if now != last {
            (last, quiet_since) = (now, Instant::now());
        }
    }
    Ok(())
}

async fn measure(bin: &str, endpoint: &str, shape: Shape) -> anyhow::Result<()> {
    let (addr, seen) = receiver().await?;
    let deliveries = shape.events * shape.per_event;
    let kinds = 10 / shape.per_event;
    let prefix = format!("cost{}", std::process::id());
    let env = |poll: &'static str| {
        let mut env = vec![
            ("AWS_ENDPOINT_URL", endpoint.to_owned()),
            ("AWS_REGION", "us-east-1".into()),
            ("AWS_ACCESS_KEY_ID", "bench".into()),
            ("AWS_SECRET_ACCESS_KEY", "bench".into()),
            ("HOOKLANE_COUNT_AWS_CALLS", "1".into()),
            ("HOOKLANE_BACKEND", "aws".into()),
        ];
        if shape.at_load {
            env.push(("HOOKLANE_LOCAL_POLL", poll.into()));
        }
        env
    };
    let start_on = |poll: &'static str| {
        let env = env(poll);
        let prefix = prefix.clone();
        async move {
            let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
            Serve::start_aws_on(bin, &env, &prefix).await
        }
    };
    let mut sum: Counts = Default::default();
    // Publish (with every poller off when at load).
    let serve = start_on("").await?;
    let api = Api::new(&serve);
    for i in 0..10 {
        api.subscribe(
            &format!("http://{addr}/ok/{i}"),
            &[&format!("t.{}", i % kinds)],
        )
        .await?;
    }
    let before = counts(&api).await?;
    let start = Instant::now();
    let tasks: Vec<_> = (0..shape.publishers)
        .map(|p| {
            let api = api.clone();
            tokio::spawn(async move {
                for n in (p..shape.events).step_by(shape.publishers as usize) {
                    api.publish(
                        &format!("c{n}"),
                        &format!("t.{}", n % kinds),
                        &kib_payload(),
                    )
                    .await?;
                }
                anyhow::Ok(())
            })
        })
        .collect();
    for t in tasks {
        t.await??;
    }
    let mut last = (api, serve, before);
    if shape.at_load {
        // The ingest queue is full: fan it out with the delivery poller
        // off, then deliver from a full delivery queue.
        for poll in ["ingest", "deliveries,slow"] {
            let after = counts(&last.0).await?;
            add_diff(&mut sum, &last.2, &after);
            drop(last);
            let serve = start_on(poll).await?;
            let api = Api::new(&serve);
            let before = counts(&api).await?;
            if poll == "ingest" {
                until_quiet(&api).await?;
            }
            last = (api, serve, before);
        }
    }
    let end = Instant::now() + Duration::from_secs(600);
    while seen.delivered.load(Ordering::Relaxed) < deliveries && Instant::now() < end {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    anyhow::ensure!(
        seen.delivered.load(Ordering::Relaxed) >= deliveries,
        "not every delivery arrived"
    );
    until_quiet(&last.0).await?;
    let elapsed = start.elapsed();
    let after = counts(&last.0).await?;
    add_diff(&mut sum, &last.2, &after);
    println!(
        "{} events to {} subscription(s) each, {}",
        shape.events,
        shape.per_event,
        if shape.at_load {
            "at load (each queue filled before its poller started)".to_owned()
        } else {
            format!("{} publisher(s) at once", shape.publishers)
        }
    );
    report(&sum, deliveries, (!shape.at_load).then_some(elapsed));
    Ok(())
}

type Counts = (
    BTreeMap<(String, String), u64>,
    BTreeMap<(String, String), [f64; 3]>,
);

fn report(sum: &Counts, n: u64, elapsed: Option<Duration>) {
    let (mut sqs, mut wru, mut rru) = (0.0, 0.0, 0.0);
    println!(
        "{:<10} {:<22} {:>9} {:>8} {:>8} {:>9}",
        "service", "operation", "calls", "WRU", "RRU", "SQS req"
    );
    println!("{:<33} (per delivery)", "");
    // Empty receives are billed apart (one request each): a poller makes
    // them at its own pace, not per delivery.
    let empty_key = ("SQS".to_owned(), EMPTY_RECEIVE.to_owned());
    let empty = sum.1.get(&empty_key).map_or(0.0, |u| u[2]);
    let mut idle = 0.0;
    let mut keys: Vec<&(String, String)> = sum.0.keys().chain(sum.1.keys()).collect();
    keys.sort();
    keys.dedup();
    for key in keys {
        let (service, op) = key;
        let mut calls = sum.0.get(key).copied().unwrap_or(0) as f64;
        if op == "ReceiveMessage" {
            calls -= empty;
        }
        if op == EMPTY_RECEIVE {
            calls = empty;
        }
        let calls = calls / n as f64;
        if calls == 0.0 {
            continue;
        }
        let units = sum.1.get(key).copied().unwrap_or_default();
        let per: Vec<f64> = units.iter().map(|u| u / n as f64).collect();
        println!(
            "{service:<10} {op:<22} {calls:>9.3} {:>8.3} {:>8.3} {:>9.3}",
            per[0], per[1], per[2]
        );
        if op == EMPTY_RECEIVE {
            idle = per[2];
            continue;
        }
        (wru, rru, sqs) = (wru + per[0], rru + per[1], sqs + per[2]);
    }
    println!(
        "(the empty receives, {idle:.3} a delivery here, are the pollers' idle cost and not counted below: on AWS about 3 a minute per poller and queue, whatever the load)"
    );
    let (sqs_usd, wru_usd, rru_usd) = (
        sqs * SQS_FIFO_PER_REQUEST,
        wru * DDB_WRITE_UNIT,
        rru * DDB_READ_UNIT,
    );
    println!("per million deliveries: SQS ${:.2} ({sqs:.2} billed requests each), DynamoDB writes ${:.2} ({wru:.2} WRU), reads ${:.2} ({rru:.2} RRU)",
        sqs_usd * 1e6, wru_usd * 1e6, rru_usd * 1e6);
    println!(
        "total ${:.2} per million successful 1 KiB deliveries before Lambda and API Gateway (targets: $3.00 one at a time, $2.00 at load)",
        (sqs_usd + wru_usd + rru_usd) * 1e6
    );
    println!(
        "with provisioned capacity at 70 % use: DynamoDB ${:.2}, total ${:.2}",
        (wru * PROVISIONED_WRITE_UNIT + rru * PROVISIONED_READ_UNIT) / 0.7 * 1e6,
        (sqs_usd + (wru * PROVISIONED_WRITE_UNIT + rru * PROVISIONED_READ_UNIT) / 0.7) * 1e6
    );
    if let Some(elapsed) = elapsed {
        // Two invocations per ten deliveries (ingest and delivery batches),
        // each delivery's share of the run's time at 256 MB.
        let lambda_secs = elapsed.as_secs_f64() / n as f64;
        let lambda = lambda_secs * 0.25 * LAMBDA_ARM_GB_SECOND + 0.2 * LAMBDA_REQUEST;
        println!(
            "Lambda at most ${:.2} ({:.1} ms each: the run's wall time on the local server, an upper bound)",
            lambda * 1e6,
            lambda_secs * 1000.0
        );
    }
}
