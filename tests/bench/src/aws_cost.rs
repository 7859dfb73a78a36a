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

/// us-east-1 on-demand prices (USD), as published in 2026.
const SQS_FIFO_PER_REQUEST: f64 = 0.50 / 1e6;
const DDB_WRITE_UNIT: f64 = 0.625 / 1e6;
const DDB_READ_UNIT: f64 = 0.125 / 1e6;
const LAMBDA_ARM_GB_SECOND: f64 = 0.000_013_333_4;
const LAMBDA_REQUEST: f64 = 0.20 / 1e6;

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

/// Runs `deliveries` deliveries over 10 subscriptions, published by
/// `publishers` at once, and prints the calls and cost per delivery.
pub async fn run(bin: &str, deliveries: u64, publishers: u64) -> anyhow::Result<()> {
    let (mut moto, endpoint) = moto()?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let result = measure(bin, &endpoint, deliveries, publishers.max(1)).await;
    let _ = moto.kill();
    let _ = moto.wait();
    result
}

async fn measure(
    bin: &str,
    endpoint: &str,
    deliveries: u64,
    publishers: u64,
) -> anyhow::Result<()> {
    let (addr, seen) = receiver().await?;
    let env = [
        ("AWS_ENDPOINT_URL", endpoint),
        ("AWS_REGION", "us-east-1"),
        ("AWS_ACCESS_KEY_ID", "bench"),
        ("AWS_SECRET_ACCESS_KEY", "bench"),
        ("HOOKLANE_COUNT_AWS_CALLS", "1"),
        ("HOOKLANE_BACKEND", "aws"),
    ];
    let serve = Serve::start_aws(bin, &env).await?;
    let api = Api::new(&serve);
    for i in 0..10 {
        api.subscribe(&format!("http://{addr}/ok/{i}"), &[&format!("t.{i}")])
            .await?;
    }
    let text = api.metrics_text().await?;
    let before = (calls(&text), billed(&text));
    let start = Instant::now();
    let tasks: Vec<_> = (0..publishers)
        .map(|p| {
            let api = api.clone();
            tokio::spawn(async move {
                for n in (p..deliveries).step_by(publishers as usize) {
                    api.publish(&format!("c{n}"), &format!("t.{}", n % 10), &kib_payload())
                        .await?;
                }
                anyhow::Ok(())
            })
        })
        .collect();
    for t in tasks {
        t.await??;
    }
    let end = Instant::now() + Duration::from_secs(600);
    while seen.delivered.load(Ordering::Relaxed) < deliveries && Instant::now() < end {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    anyhow::ensure!(
        seen.delivered.load(Ordering::Relaxed) >= deliveries,
        "not every delivery arrived"
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    let elapsed = start.elapsed();
    let text = api.metrics_text().await?;
    let after = (calls(&text), billed(&text));
    report(&before, &after, deliveries, elapsed);
    Ok(())
}

type Counts = (
    BTreeMap<(String, String), u64>,
    BTreeMap<(String, String), [f64; 3]>,
);

fn report(before: &Counts, after: &Counts, n: u64, elapsed: Duration) {
    let (mut sqs, mut wru, mut rru) = (0.0, 0.0, 0.0);
    println!(
        "{:<10} {:<22} {:>9} {:>8} {:>8} {:>9}",
        "service", "operation", "calls", "WRU", "RRU", "SQS req"
    );
    println!("{:<33} (per delivery)", "");
    for ((service, op), total) in &after.0 {
        let key = (service.clone(), op.clone());
        let calls = (total - before.0.get(&key).copied().unwrap_or(0)) as f64 / n as f64;
        if calls == 0.0 {
            continue;
        }
        let was = before.1.get(&key).copied().unwrap_or_default();
        let now = after.1.get(&key).copied().unwrap_or_default();
        let per: Vec<f64> = (0..3).map(|i| (now[i] - was[i]) / n as f64).collect();
        println!(
            "{service:<10} {op:<22} {calls:>9.3} {:>8.3} {:>8.3} {:>9.3}",
            per[0], per[1], per[2]
        );
        (wru, rru, sqs) = (wru + per[0], rru + per[1], sqs + per[2]);
    }
    // Lambda: two invocations per ten deliveries (ingest and delivery
    // batches), each delivery's share of the run's time at 256 MB.
    let lambda_secs = elapsed.as_secs_f64() / n as f64;
    let lambda = lambda_secs * 0.25 * LAMBDA_ARM_GB_SECOND + 0.2 * LAMBDA_REQUEST;
    let (sqs_usd, wru_usd, rru_usd) = (
        sqs * SQS_FIFO_PER_REQUEST,
        wru * DDB_WRITE_UNIT,
        rru * DDB_READ_UNIT,
    );
    let total = sqs_usd + wru_usd + rru_usd;
    println!("per million deliveries: SQS ${:.2} ({sqs:.2} billed requests each), DynamoDB writes ${:.2} ({wru:.2} WRU), reads ${:.2} ({rru:.2} RRU)",
        sqs_usd * 1e6, wru_usd * 1e6, rru_usd * 1e6);
    println!(
        "total ${:.2} per million successful 1 KiB deliveries before Lambda (target <= $3.00 one at a time, $2.00 at load)",
        total * 1e6
    );
    println!(
        "Lambda at most ${:.2} ({:.1} ms each: the run's wall time on the local server, an upper bound)",
        lambda * 1e6,
        lambda_secs * 1000.0
    );
}
