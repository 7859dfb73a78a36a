//! The embedded figures of BENCHMARKS.md: isolation under hung receivers,
//! throughput (and CPU per delivery), latency at half the maximum, drain of
//! a backlog, fan-out to many subscriptions, and memory over a long run.
//! Every loop is bounded in count and time.

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::rig::{arrival_times, kib_payload, receiver, spread, Api, Seen, Serve};

/// Waits (bounded) until `cond` holds; false on timeout.
pub(crate) async fn until(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + limit;
    while Instant::now() < end {
        if cond() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    cond()
}

/// Registers `n` subscriptions, 16 at a time; `url(i)` and `types(i)`.
async fn subscribe_many(
    api: &Api,
    n: usize,
    url: impl Fn(usize) -> String,
    ty: impl Fn(usize) -> String,
) -> anyhow::Result<()> {
    subscribe_many_with(
        api,
        n,
        |k| serde_json::json!({"url": url(k), "event_types": [ty(k)]}),
    )
    .await
}

/// Registers `n` subscriptions, the `k`th from the request body `body(k)`,
/// 16 at a time.
async fn subscribe_many_with(
    api: &Api,
    n: usize,
    body: impl Fn(usize) -> serde_json::Value,
) -> anyhow::Result<()> {
    let mut i = 0;
    while i < n {
        let batch: Vec<_> = (i..(i + 16).min(n))
            .map(|k| {
                let (api, body) = (api.clone(), body(k));
                tokio::spawn(async move { api.subscribe_with(body).await })
            })
            .collect();
        for t in batch {
            t.await??;
        }
        i += 16;
    }
    Ok(())
}

/// Each figure's start: a loopback receiver, `serve` with `env` on a
/// temporary database, and an API client for it.
pub(crate) async fn setup(
    bin: &str,
    env: &[(&str, &str)],
) -> anyhow::Result<(SocketAddr, Arc<Seen>, Serve, Api)> {
    let (addr, seen) = receiver().await?;
    let serve = Serve::start(bin, env).await?;
    let api = Api::new(&serve);
    Ok((addr, seen, serve, api))
}

/// Registers `n` subscriptions to the receiver's answering endpoints,
/// subscription `i` to event type `t.{i}`.
async fn subscribe_ok(api: &Api, addr: SocketAddr, n: usize) -> anyhow::Result<()> {
    subscribe_many(
        api,
        n,
        |i| format!("http://{addr}/ok/{i}"),
        |i| format!("t.{i}"),
    )
    .await
}

fn arrival(seen: &Seen, id: &str) -> Option<Instant> {
    seen.arrivals.lock().ok().and_then(|a| a.get(id).copied())
}

/// Figure 1: a healthy subscription's publish-to-arrival latency (ms) while
/// `hung` receivers accept and never answer.
pub async fn isolation(bin: &str, hung: usize, samples: usize) -> anyhow::Result<Vec<f64>> {
    let (addr, seen, _serve, api) = setup(bin, &[("HOOKLANE_ATTEMPT_TIMEOUT", "300s")]).await?;
    subscribe_many(
        &api,
        hung,
        |i| format!("http://{addr}/hang/{i}"),
        |_| "hang.x".into(),
    )
    .await?;
    api.subscribe(&format!("http://{addr}/ok/healthy"), &["ping"])
        .await?;
    if hung > 0 {
        api.publish("hang-1", "hang.x", &kib_payload()).await?;
        let all = until(Duration::from_secs(120), || {
            seen.hanging.load(Ordering::Relaxed) >= hung as u64
        })
        .await;
        anyhow::ensure!(
            all,
            "only {} of {hung} receivers were held",
            seen.hanging.load(Ordering::Relaxed)
        );
    }
    let mut out = Vec::with_capacity(samples);
    for s in 0..samples {
        let id = format!("ping-{s}");
        let start = Instant::now();
        api.publish(&id, "ping", &kib_payload()).await?;
        until(Duration::from_secs(30), || arrival(&seen, &id).is_some()).await;
        let at = arrival(&seen, &id).ok_or_else(|| anyhow::anyhow!("{id} never arrived"))?;
        out.push((at - start).as_secs_f64() * 1000.0);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    anyhow::ensure!(
        seen.hanging.load(Ordering::Relaxed) >= hung as u64,
        "hung requests were released early"
    );
    Ok(out)
}

/// What a throughput run measured.
pub struct Throughput {
    /// Deliveries per second, publish to arrival.
    pub per_sec: f64,
    /// CPU of `serve` per delivery, in milliseconds.
    pub cpu_ms: f64,
    /// Peak RSS of `serve` in MB.
    pub rss_mb: f64,
    /// Deliveries made.
    pub delivered: u64,
}

/// Publishes 1 KiB events round-robin over `subs` subscriptions from
/// `publishers` concurrent clients for `secs` (or until `limit` events),
/// and waits for every delivery.
pub async fn throughput(
    bin: &str,
    subs: usize,
    secs: u64,
    publishers: usize,
    limit: u64,
) -> anyhow::Result<Throughput> {
    let (addr, seen, serve, api) = setup(bin, &[]).await?;
    subscribe_ok(&api, addr, subs).await?;
    let cpu0 = serve.cpu_seconds();
    let start = Instant::now();
    let published = publish_for(
        &api,
        "e",
        subs,
        Duration::from_secs(secs),
        publishers,
        limit,
    )
    .await?;
    let done = until(Duration::from_secs(600), || {
        seen.delivered.load(Ordering::Relaxed) >= published
    })
    .await;
    anyhow::ensure!(
        done,
        "only {} of {published} delivered",
        seen.delivered.load(Ordering::Relaxed)
    );
    let elapsed = start.elapsed().as_secs_f64();
    let delivered = seen.delivered.load(Ordering::Relaxed);
    Ok(Throughput {
        per_sec: delivered as f64 / elapsed,
        cpu_ms: (serve.cpu_seconds() - cpu0) * 1000.0 / delivered as f64,
        rss_mb: serve.peak_rss_mb(),
        delivered,
    })
}

/// Publishes as fast as the API takes it; returns how many were accepted.
async fn publish_for(
    api: &Api,
    prefix: &str,
    subs: usize,
    span: Duration,
    publishers: usize,
    limit: u64,
) -> anyhow::Result<u64> {
    let count = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let end = Instant::now() + span;
    let tasks: Vec<_> = (0..publishers)
        .map(|p| {
            let (api, count, prefix) = (api.clone(), count.clone(), prefix.to_owned());
            tokio::spawn(async move {
                let data = kib_payload();
                while Instant::now() < end {
                    let n = count.fetch_add(1, Ordering::Relaxed);
                    if n >= limit {
                        count.fetch_sub(1, Ordering::Relaxed);
                        break;
                    }
                    api.publish(
                        &format!("{prefix}{p}-{n}"),
                        &format!("t.{}", n as usize % subs),
                        &data,
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
    Ok(count.load(Ordering::Relaxed))
}

/// Figure 3: publish-to-arrival latency (ms) at `rate` events per second
/// over 100 subscriptions for `secs`.
pub async fn latency(bin: &str, rate: f64, secs: u64) -> anyhow::Result<Vec<f64>> {
    let (addr, seen, _serve, api) = setup(bin, &[]).await?;
    subscribe_ok(&api, addr, 100).await?;
    latencies_at(&api, &seen, rate, secs, 100, &kib_payload()).await
}

/// Publishes at `rate` per second for `secs` (event `n` of type
/// `t.{n % subs}`), then waits (bounded) for the receiver to see them all;
/// returns each one's publish-to-arrival time (ms).
pub(crate) async fn latencies_at(
    api: &Api,
    seen: &Seen,
    rate: f64,
    secs: u64,
    subs: usize,
    data: &serde_json::Value,
) -> anyhow::Result<Vec<f64>> {
    let before = seen.delivered.load(Ordering::Relaxed);
    let total = (rate * secs as f64) as usize;
    let gap = Duration::from_secs_f64(1.0 / rate);
    let start = Instant::now();
    let mut sent = Vec::with_capacity(total);
    let mut inflight = Vec::new();
    for n in 0..total {
        let due = start + gap * n as u32;
        tokio::time::sleep_until(due.into()).await;
        let (api, id, data) = (api.clone(), format!("l{n}"), data.clone());
        sent.push((id.clone(), Instant::now()));
        inflight.push(tokio::spawn(async move {
            api.publish(&id, &format!("t.{}", n % subs), &data).await
        }));
    }
    for t in inflight {
        t.await??;
    }
    until(Duration::from_secs(120), || {
        seen.delivered.load(Ordering::Relaxed) >= before + total as u64
    })
    .await;
    Ok(sent
        .iter()
        .filter_map(|(id, at)| arrival(seen, id).map(|a| (a - *at).as_secs_f64() * 1000.0))
        .collect())
}

/// What a drain run measured.
pub struct Drain {
    /// Deliveries per second from the receiver's return to the last
    /// arrival (counts each lane's wait for its next retry).
    pub from_up: f64,
    /// Deliveries per second from the first arrival to the last.
    pub steady: f64,
    /// CPU of `serve` per delivery from the receiver's return to the last
    /// arrival, in milliseconds: the drain's cost, whatever the machine's
    /// other load does to its rate.
    pub cpu_ms: f64,
}

/// Figure 3b: deliveries per second while a backlog of `backlog` queued
/// deliveries over 100 subscriptions empties once the receiver is back.
pub async fn drain(bin: &str, backlog: u64) -> anyhow::Result<Drain> {
    let schedule = vec!["1s"; 30].join(",");
    let (addr, seen, serve, api) = setup(
        bin,
        &[
            ("HOOKLANE_RETRY_SCHEDULE", &format!("0s,{schedule}")),
            ("HOOKLANE_RETRY_JITTER", "0"),
        ],
    )
    .await?;
    subscribe_ok(&api, addr, 100).await?;
    seen.down.store(true, Ordering::Relaxed);
    publish_for(&api, "d", 100, Duration::from_secs(600), 32, backlog).await?;
    let queued = wait_metric(&api, "hooklane_deliveries_enqueued_total", backlog).await;
    anyhow::ensure!(queued, "the backlog was never fully queued");
    seen.arrivals
        .lock()
        .map_err(|_| anyhow::anyhow!("lock"))?
        .clear();
    let cpu0 = serve.cpu_seconds();
    let up = Instant::now();
    seen.down.store(false, Ordering::Relaxed);
    let done = until(Duration::from_secs(600), || {
        seen.arrivals.lock().map(|a| a.len() as u64).unwrap_or(0) >= backlog
    })
    .await;
    anyhow::ensure!(done, "the backlog did not drain");
    let cpu_ms = (serve.cpu_seconds() - cpu0) * 1000.0 / backlog as f64;
    let times = arrival_times(&seen)?;
    let first = times.iter().min().copied().unwrap_or(up);
    let last = times.iter().max().copied().unwrap_or(up);
    Ok(Drain {
        from_up: backlog as f64 / (last - up).as_secs_f64(),
        steady: (backlog - 1) as f64 / (last - first).as_secs_f64().max(1e-9),
        cpu_ms,
    })
}

async fn wait_metric(api: &Api, name: &str, want: u64) -> bool {
    for _ in 0..60_000 {
        if api.metric(name).await.unwrap_or(0) >= want {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    false
}

/// What a fan-out run measured.
pub struct FanOut {
    /// Seconds from the publish until every delivery is enqueued.
    pub enqueued: f64,
    /// Seconds from the publish until every delivery has arrived.
    pub arrived: f64,
    /// CPU of `serve` per delivery from the publish to the last arrival,
    /// in milliseconds: the fan-out's and the deliveries' cost together
    /// (they overlap on the machine's cores), with the answers to this
    /// benchmark's `/metrics` polls (every 5 ms until enqueued), whatever
    /// the machine's other load does to the times.
    pub cpu_ms: f64,
}

/// Figure 4: one event to `subs` subscriptions: seconds until every
/// delivery is enqueued and until every one has arrived, and the server's
/// CPU per delivery ([`FanOut`]).
pub async fn fan_out(bin: &str, subs: usize, filtered: bool) -> anyhow::Result<FanOut> {
    let (addr, seen, serve, api) = setup(bin, &[]).await?;
    // With `filtered`, each subscription has a content filter on the
    // event's data that the event passes: every delivery is still made,
    // after one filter each.
    let filter = filtered.then(|| serde_json::json!({"data": {"blob": {"$prefix": "x"}}}));
    subscribe_many_with(&api, subs, |i| {
        let mut body =
            serde_json::json!({"url": format!("http://{addr}/ok/{i}"), "event_types": ["fan.*"]});
        if let Some(f) = &filter {
            body["filter"] = f.clone();
        }
        body
    })
    .await?;
    let cpu0 = serve.cpu_seconds();
    let start = Instant::now();
    api.publish("fan-1", "fan.out", &kib_payload()).await?;
    anyhow::ensure!(
        wait_metric(&api, "hooklane_deliveries_enqueued_total", subs as u64).await,
        "fan-out stalled"
    );
    let enqueued = start.elapsed().as_secs_f64();
    let all = until(Duration::from_secs(300), || {
        seen.delivered.load(Ordering::Relaxed) >= subs as u64
    })
    .await;
    anyhow::ensure!(
        all,
        "only {} arrived",
        seen.delivered.load(Ordering::Relaxed)
    );
    Ok(FanOut {
        enqueued,
        arrived: start.elapsed().as_secs_f64(),
        cpu_ms: (serve.cpu_seconds() - cpu0) * 1000.0 / subs as f64,
    })
}

/// Figure 7: peak RSS of `serve` sampled along `total` deliveries at full
/// speed over 100 subscriptions: (deliveries so far, peak RSS MB) pairs.
pub async fn memory(bin: &str, total: u64) -> anyhow::Result<Vec<(u64, f64)>> {
    let (addr, seen, serve, api) = setup(bin, &[]).await?;
    subscribe_ok(&api, addr, 100).await?;
    let step = (total / 10).max(1);
    let mut marks = Vec::new();
    let mut done = 0;
    while done < total {
        publish_for(
            &api,
            &format!("m{done}-"),
            100,
            Duration::from_secs(3600),
            32,
            step,
        )
        .await?;
        done += step;
        until(Duration::from_secs(300), || {
            seen.delivered.load(Ordering::Relaxed) >= done
        })
        .await;
        seen.arrivals
            .lock()
            .map_err(|_| anyhow::anyhow!("lock"))?
            .clear();
        marks.push((seen.delivered.load(Ordering::Relaxed), serve.peak_rss_mb()));
        eprintln!(
            "  {} delivered, peak RSS {:.1} MB",
            marks[marks.len() - 1].0,
            marks[marks.len() - 1].1
        );
    }
    Ok(marks)
}

/// Prints a row: label, median and p10–p90 of the samples.
pub fn row(label: &str, unit: &str, samples: &mut [f64]) {
    let (m, lo, hi) = spread(samples);
    println!(
        "{label:<28} median {m:>9.2} {unit}   p10–p90 {lo:.2}–{hi:.2}   (n={})",
        samples.len()
    );
}
