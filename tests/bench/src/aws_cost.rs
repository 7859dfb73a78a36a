//! Figure 5: AWS API calls per delivery, counted by `serve --backend aws`
//! against the local AWS-compatible servers ([`crate::standin`]: the fast
//! pair unless told moto; the count of calls is the same on either), and
//! the dollars per
//! million 1 KiB deliveries they cost at public on-demand prices.
//!
//! The counts are real (an SDK interceptor counts every call the adapters
//! make), and so is what they are billed as: the interceptor computes
//! DynamoDB write and read units from the size of every item written or
//! read, index writes and transactions included, and SQS requests by
//! 64 KiB chunk (`hooklane_aws::capacity`, which says what it estimates).
//! Lambda time is the run's wall time per delivery, an upper bound.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crate::rig::{invoice_payload, receiver, Api, Serve};

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
/// lines: [write units, read units, SQS requests, Lambda milliseconds] by
/// (service, operation).
fn billed(metrics: &str) -> BTreeMap<(String, String), [f64; 4]> {
    let mut out: BTreeMap<(String, String), [f64; 4]> = BTreeMap::new();
    for l in metrics
        .lines()
        .filter_map(|l| l.strip_prefix("hooklane_aws_billed_total{service=\""))
    {
        let parsed = (|| {
            let (service, rest) = l.split_once("\",operation=\"")?;
            let (op, rest) = rest.split_once("\",unit=\"")?;
            let (unit, n) = rest.split_once("\"} ")?;
            let slot = ["wru", "rru", "requests", "ms"]
                .iter()
                .position(|u| *u == unit)?;
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
    /// Events per request (above 1: `POST /event-batches`).
    pub batch: u64,
    /// Subscriptions of the tenant beside the 10 that take none of the
    /// events (a wide tenant: its fan-out reads through the type index).
    pub others: u64,
}

/// Runs the shape over 10 subscriptions (and `others` more of the tenant
/// that take none of its events) and prints the calls and what
/// they are billed per delivery; the dollars per million deliveries
/// (SQS and DynamoDB on demand).
pub async fn run(bin: &str, shape: Shape) -> anyhow::Result<f64> {
    anyhow::ensure!(
        [1, 2, 5, 10].contains(&shape.per_event),
        "--per-event is 1, 2, 5 or 10"
    );
    let standin = crate::standin::Standin::start()?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    measure(bin, &standin.env, shape).await
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
        for i in 0..4 {
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

async fn measure(
    bin: &str,
    endpoints: &[(&'static str, String)],
    shape: Shape,
) -> anyhow::Result<f64> {
    let (addr, seen) = receiver().await?;
    let deliveries = shape.events * shape.per_event;
    let kinds = 10 / shape.per_event;
    let prefix = format!("cost{}", std::process::id());
    let env = |poll: &'static str| {
        let mut env = endpoints.to_vec();
        env.extend([
            ("HOOKLANE_COUNT_AWS_CALLS", "1".into()),
            ("HOOKLANE_BACKEND", "aws".into()),
        ]);
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
    if shape.others > 0 {
        for i in 0..shape.others {
            api.subscribe(&format!("http://{addr}/ok/other{i}"), &["other.x"])
                .await?;
        }
        // The tenant's first fan-out reads it whole and indexes it, once:
        // not counted.
        api.publish("warm-up", "warm.up", &serde_json::json!({}))
            .await?;
    }
    let before = counts(&api).await?;
    let start = Instant::now();
    // One publisher, not at load: each event is published once the last
    // one's deliveries arrived, so every receive finds the one message
    // (the shape a quiet tenant has, whatever the local server's speed).
    let one_at_a_time = shape.publishers == 1 && !shape.at_load;
    let tasks: Vec<_> = (0..shape.publishers)
        .map(|p| {
            let api = api.clone();
            let seen = seen.clone();
            tokio::spawn(async move {
                let mut took = Duration::ZERO;
                let mine: Vec<u64> = (p..shape.events)
                    .step_by(shape.publishers as usize)
                    .collect();
                for chunk in mine.chunks(shape.batch as usize) {
                    let sent = Instant::now();
                    let event = |n: u64| {
                        (
                            format!("c{n}"),
                            format!("t.{}", n % kinds),
                            invoice_payload(n),
                        )
                    };
                    if let [n] = chunk {
                        let (id, ty, data) = event(*n);
                        api.publish(&id, &ty, &data).await?;
                    } else {
                        api.publish_batch(chunk.iter().map(|n| event(*n)).collect())
                            .await?;
                    }
                    took += sent.elapsed();
                    let n = chunk[chunk.len() - 1];
                    let due = (n + 1) * shape.per_event;
                    let end = Instant::now() + Duration::from_secs(30);
                    while one_at_a_time
                        && seen.delivered.load(Ordering::Relaxed) < due
                        && Instant::now() < end
                    {
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                }
                anyhow::Ok(took)
            })
        })
        .collect();
    let mut api_time = Duration::ZERO;
    for t in tasks {
        api_time += t.await??;
    }
    let mut last = (api, serve, before);
    // The delivering process's CPU seconds when it started delivering.
    let mut cpu_from = None;
    if shape.at_load {
        // The ingest queue is full: fan it out with the delivery poller
        // off, then deliver from a full delivery queue.
        for poll in ["ingest", "deliveries,slow"] {
            let after = counts(&last.0).await?;
            add_diff(&mut sum, &last.2, &after);
            drop(last);
            let serve = start_on(poll).await?;
            if poll != "ingest" {
                cpu_from = Some(serve.cpu_seconds());
            }
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
    let delivering = cpu_from.map(|from| Delivering {
        cpu_ms: (last.1.cpu_seconds() - from) * 1000.0 / deliveries as f64,
        peak_rss_mb: last.1.peak_rss_mb(),
    });
    let after = counts(&last.0).await?;
    add_diff(&mut sum, &last.2, &after);
    anyhow::ensure!(
        sum.1.values().any(|units| units.iter().any(|u| *u > 0.0)),
        "the server reported no billed AWS units (a build that does not count them)"
    );
    println!(
        "{} events to {} subscription(s) each of a tenant of {}, {}",
        shape.events,
        shape.per_event,
        10 + shape.others,
        if shape.at_load {
            "at load (each queue filled before its poller started)".to_owned()
        } else {
            format!("{} publisher(s) at once", shape.publishers)
        }
    );
    let requests = shape.events.div_ceil(shape.batch);
    let usd = report(&sum, deliveries, (requests, api_time), shape);
    if let Some(d) = delivering {
        d.report();
    }
    println!("(run time {:.1} s)", elapsed.as_secs_f64());
    Ok(usd)
}

type Counts = (
    BTreeMap<(String, String), u64>,
    BTreeMap<(String, String), [f64; 4]>,
);

/// Lambda's memory in GB: the template's default for every function.
const LAMBDA_GB: f64 = 0.25;

/// What the process that delivered alone (at load) used: the delivery
/// function's work, measured where Lambda's time cannot be (the local
/// server's latency dominates wall time here).
struct Delivering {
    /// CPU milliseconds a delivery (user and system, read from `/proc` at
    /// 10 ms resolution): the handler's work, its pollers' receives and
    /// its idle ticks, so an upper bound of the function's.
    cpu_ms: f64,
    /// The process's peak resident set.
    peak_rss_mb: f64,
}

impl Delivering {
    /// Lambda gives a function a share of a vCPU in proportion to its
    /// memory, one whole at 1,769 MB: the CPU time a delivery takes at
    /// each memory size, before any wait on DynamoDB, SQS or the receiver.
    fn report(&self) {
        let at = |mb: f64| self.cpu_ms * 1769.0 / mb.min(1769.0);
        println!(
            "delivering: {:.2} CPU ms a delivery (this machine; pollers' receives and idle included), peak RSS {:.1} MB; as a Lambda function's CPU time: {:.1} ms a delivery at 128 MB, {:.1} at 256, {:.1} at 512, {:.1} at 1,024, {:.2} at 1,769 (a batch of ten: ten times that)",
            self.cpu_ms,
            self.peak_rss_mb,
            at(128.0),
            at(256.0),
            at(512.0),
            at(1024.0),
            at(1769.0)
        );
    }
}

/// Prints the ledger per delivery. `api` is the requests that published
/// the events and the time they took, seen by the publisher (an upper
/// bound of the API function's billed duration; one invocation per
/// request). The on-demand total per million deliveries.
fn report(sum: &Counts, n: u64, api: (u64, Duration), shape: Shape) -> f64 {
    let (mut sqs, mut wru, mut rru) = (0.0, 0.0, 0.0);
    let (mut invocations, mut lambda_ms) = (0.0, 0.0);
    println!(
        "{:<10} {:<22} {:>9} {:>8} {:>8} {:>9} {:>9}",
        "service", "operation", "calls", "WRU", "RRU", "SQS req", "Lambda ms"
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
            "{service:<10} {op:<22} {calls:>9.3} {:>8.3} {:>8.3} {:>9.3} {:>9.2}",
            per[0], per[1], per[2], per[3]
        );
        if op == EMPTY_RECEIVE {
            idle = per[2];
            continue;
        }
        if service == "Lambda" {
            (invocations, lambda_ms) = (invocations + calls, lambda_ms + per[3]);
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
    let lambda = |calls: f64, ms: f64| {
        calls * LAMBDA_REQUEST + ms / 1000.0 * LAMBDA_GB * LAMBDA_ARM_GB_SECOND
    };
    let workers_usd = lambda(invocations, lambda_ms);
    let api_calls = api.0 as f64 / n as f64;
    let api_ms = api.1.as_secs_f64() * 1000.0 / n as f64;
    let api_usd = lambda(api_calls, api_ms);
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
    println!(
        "Lambda (arm64, {} MB): fan-out and delivery ${:.2} ({invocations:.3} invocations, {lambda_ms:.2} billed ms a delivery, the handlers' time measured on the local server), API ${:.2} ({api_calls:.3} requests, {api_ms:.2} ms a delivery as the publisher waited: an upper bound)",
        LAMBDA_GB * 1024.0,
        workers_usd * 1e6,
        api_usd * 1e6
    );
    let per_event = 1.0 / shape.per_event as f64;
    println!(
        "API Gateway (HTTP API, $1.00 per million requests): ${:.2} as published here ({} event(s) a request); ${:.2} with one request per event, ${:.2} with `POST /event-batches` of 100",
        api_calls * 1.0,
        shape.batch,
        per_event,
        per_event / 100.0
    );
    (sqs_usd + wru_usd + rru_usd) * 1e6
}
