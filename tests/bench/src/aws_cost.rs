//! Figure 5: AWS API calls per delivery, counted by `serve --backend aws`
//! against the local AWS-compatible server (moto), and the dollars per
//! million 1 KiB deliveries they cost at public on-demand prices.
//!
//! The counts are real (an SDK interceptor counts every call the adapters
//! make). The capacity units per call are estimated from item sizes (the
//! local server does not report consumed capacity): a subscription,
//! delivery record or attempt item is under 1 KB (1 write unit; a
//! strongly consistent read of up to 4 KB is 1 read unit), an event item
//! with its 1 KiB payload is under 2 KB (2 write units). Lambda time is
//! the handler's measured time per delivery here, at 256 MB arm64.

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

/// Write and read units one call of `op` costs (see the module doc).
fn units(service: &str, op: &str) -> (f64, f64) {
    match (service, op) {
        ("DynamoDB", "PutItem") => (1.5, 0.0),
        ("DynamoDB", "UpdateItem" | "DeleteItem") => (1.0, 0.0),
        ("DynamoDB", "GetItem" | "Query") => (0.0, 1.0),
        _ => (0.0, 0.0),
    }
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
    let before = calls(&api.metrics_text().await?);
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
    let after = calls(&api.metrics_text().await?);
    report(&before, &after, deliveries, elapsed);
    Ok(())
}

fn report(
    before: &BTreeMap<(String, String), u64>,
    after: &BTreeMap<(String, String), u64>,
    n: u64,
    elapsed: Duration,
) {
    let (mut sqs, mut wru, mut rru) = (0.0, 0.0, 0.0);
    println!(
        "{:<10} {:<26} {:>10}",
        "service", "operation", "per delivery"
    );
    for ((service, op), total) in after {
        let per = (total
            - before
                .get(&(service.clone(), op.clone()))
                .copied()
                .unwrap_or(0)) as f64
            / n as f64;
        if per == 0.0 {
            continue;
        }
        println!("{service:<10} {op:<26} {per:>10.3}");
        let (w, r) = units(service, op);
        (wru, rru) = (wru + w * per, rru + r * per);
        if service == "SQS" {
            sqs += per;
        }
    }
    // Lambda: two invocations per ten deliveries (ingest and delivery
    // batches), each delivery's share of handler time at 256 MB.
    let lambda_secs = elapsed.as_secs_f64() / n as f64;
    let lambda = lambda_secs * 0.25 * LAMBDA_ARM_GB_SECOND + 0.2 * LAMBDA_REQUEST;
    let (sqs_usd, wru_usd, rru_usd) = (
        sqs * SQS_FIFO_PER_REQUEST,
        wru * DDB_WRITE_UNIT,
        rru * DDB_READ_UNIT,
    );
    let total = sqs_usd + wru_usd + rru_usd + lambda;
    println!("per million deliveries: SQS ${:.2} ({sqs:.2} requests each), DynamoDB writes ${:.2} ({wru:.2} WRU), reads ${:.2} ({rru:.2} RRU), Lambda ${:.2} ({:.1} ms each, an upper bound: measured end to end on moto)",
        sqs_usd * 1e6, wru_usd * 1e6, rru_usd * 1e6, lambda * 1e6, lambda_secs * 1000.0);
    println!(
        "total ${:.2} per million successful 1 KiB deliveries (target <= $1.00)",
        total * 1e6
    );
}
