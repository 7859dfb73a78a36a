//! The figures of lanes per subscription (BENCHMARKS.md 10 and 11): one
//! subscription whose receiver takes a while to answer, delivered on 1 to
//! 256 lanes with ordering keys (deliveries per second, the most requests
//! in flight, keys out of order), and the rate limit's accuracy (requested
//! against measured). Each run queues its events while the receiver holds
//! its requests, then releases them and times the backlog's arrival, so
//! publishing does not bound what is measured. Every loop is bounded.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use bytes::Bytes;

use crate::figures::{latencies_at, setup, until};
use crate::rig::{arrival_times, Api, Seen};

/// Publishers at once.
const PUBLISHERS: u64 = 32;

/// Keys the events are spread over: four events a key, so lanes get even
/// shares (a few keys over many lanes leave some lanes with far more work
/// than others, which is a property of the keys, not of the server), and
/// a multiple of the publishers, so each key's events come from one
/// publisher, in order.
fn keys_for(events: u64) -> u64 {
    (events / 4).div_ceil(PUBLISHERS).max(1) * PUBLISHERS
}

/// What one run measured.
pub struct Run {
    /// Deliveries per second, from release to the last arrival.
    pub per_sec: f64,
    /// Deliveries per second while every lane is busy: the first 90 % of
    /// the backlog, from release (the last arrivals come from the lanes
    /// that drew the most events).
    pub steady_per_sec: f64,
    /// The most requests the receiver held at once.
    pub peak_in_flight: u64,
    /// Keys whose events arrived out of publish order.
    pub keys_out_of_order: usize,
    /// The most arrivals in any one second.
    pub busiest_second: usize,
    /// Server CPU per delivery (ms), from release to the last arrival.
    pub cpu_ms: f64,
}

/// Publishes `events` events, event `i` with key `k{i % keys}` and `n = i /
/// keys`, from [`PUBLISHERS`] publishers (each key from one of them, in
/// order); without `keyed`, the key is in the data only.
async fn publish_keyed(api: &Api, events: u64, keyed: bool) -> anyhow::Result<()> {
    let keys = keys_for(events);
    let publishers = PUBLISHERS;
    let tasks: Vec<_> = (0..publishers)
        .map(|p| {
            let api = api.clone();
            tokio::spawn(async move {
                let mut i = p;
                while i < events {
                    let key = format!("k{}", i % keys);
                    let mut body = serde_json::json!({
                        "type": "l.x",
                        "data": {"k": key, "n": i / keys},
                    });
                    if keyed {
                        body["ordering_key"] = serde_json::json!(key);
                    }
                    api.publish_raw(Bytes::from(body.to_string())).await?;
                    i += publishers;
                }
                anyhow::Ok(())
            })
        })
        .collect();
    for t in tasks {
        t.await??;
    }
    Ok(())
}

/// Runs one subscription with `sub` settings (lanes, rate limit) to a
/// receiver answering after `answer_ms`: queues `events`, releases them and
/// measures their arrival.
pub async fn run(
    bin: &str,
    settings: serde_json::Value,
    answer_ms: u64,
    events: u64,
    keyed: bool,
) -> anyhow::Result<Run> {
    let (addr, seen, serve, api) = setup(bin, &[("HOOKLANE_ATTEMPT_TIMEOUT", "300s")]).await?;
    let mut body = serde_json::json!({
        "url": format!("http://{addr}/slow/{answer_ms}/x"),
        "event_types": ["*"],
    });
    for (k, v) in settings.as_object().into_iter().flatten() {
        body[k] = v.clone();
    }
    api.subscribe_with(body).await?;
    seen.held.store(true, Ordering::Relaxed);
    publish_keyed(&api, events, keyed).await?;
    let released = Instant::now();
    let cpu_before = serve.cpu_seconds();
    seen.held.store(false, Ordering::Relaxed);
    let done = until(Duration::from_secs(900), || arrived(&seen) >= events).await;
    anyhow::ensure!(done, "only {} of {events} arrived", arrived(&seen));
    let cpu_ms = (serve.cpu_seconds() - cpu_before) * 1000.0 / events as f64;
    let mut times = arrival_times(&seen)?;
    times.sort();
    let last = times.last().copied().unwrap_or(released);
    let busiest_second = (0..times.len())
        .map(|i| {
            times[i..]
                .iter()
                .take_while(|t| **t < times[i] + Duration::from_secs(1))
                .count()
        })
        .max()
        .unwrap_or(0);
    let ninety = times
        .get((times.len() * 9 / 10).saturating_sub(1))
        .copied()
        .unwrap_or(last);
    Ok(Run {
        per_sec: events as f64 / (last - released).as_secs_f64(),
        steady_per_sec: (times.len() * 9 / 10) as f64 / (ninety - released).as_secs_f64(),
        peak_in_flight: seen.in_flight.lock().map(|f| f.1).unwrap_or(0),
        keys_out_of_order: out_of_order(&seen),
        busiest_second,
        cpu_ms,
    })
}

fn arrived(seen: &Seen) -> u64 {
    seen.keyed.lock().map(|k| k.len() as u64).unwrap_or(0)
}

/// Keys whose `n`s did not arrive in increasing order.
fn out_of_order(seen: &Seen) -> usize {
    let Ok(keyed) = seen.keyed.lock() else {
        return 0;
    };
    let mut last: std::collections::HashMap<&str, u64> = Default::default();
    let mut bad = std::collections::HashSet::new();
    for (k, n) in keyed.iter() {
        if last.get(k.as_str()).is_some_and(|prev| n < prev) {
            bad.insert(k.as_str());
        }
        last.insert(k, *n);
    }
    bad.len()
}

/// Registers `subs` subscriptions of `lanes` lanes each, subscription `i`
/// to event type `t.{i}` at `/slow/{answer_ms}/{i}`, 16 at a time.
async fn subscribe_lanes(
    api: &Api,
    addr: std::net::SocketAddr,
    subs: usize,
    lanes: u16,
    answer_ms: u64,
) -> anyhow::Result<()> {
    for start in (0..subs).step_by(16) {
        let batch: Vec<_> = (start..(start + 16).min(subs))
            .map(|i| {
                let api = api.clone();
                let body = serde_json::json!({
                    "url": format!("http://{addr}/slow/{answer_ms}/{i}"),
                    "event_types": [format!("t.{i}")],
                    "lanes": lanes,
                });
                tokio::spawn(async move { api.subscribe_with(body).await })
            })
            .collect();
        for t in batch {
            t.await??;
        }
    }
    Ok(())
}

/// Figure 10b: `subs` subscriptions of `lanes` lanes, a receiver answering
/// after `answer_ms`: deliveries per second of a released backlog of
/// `events` (one event per subscription in turn), then publish-to-arrival
/// times (ms) at `rate_share` of that rate for `secs`.
pub async fn many(
    bin: &str,
    subs: usize,
    lanes: u16,
    answer_ms: u64,
    events: u64,
    rate_share: f64,
    secs: u64,
) -> anyhow::Result<(f64, Vec<f64>)> {
    let (addr, seen, _serve, api) = setup(bin, &[("HOOKLANE_ATTEMPT_TIMEOUT", "300s")]).await?;
    subscribe_lanes(&api, addr, subs, lanes, answer_ms).await?;
    seen.held.store(true, Ordering::Relaxed);
    let tasks: Vec<_> = (0..32u64)
        .map(|p| {
            let api = api.clone();
            tokio::spawn(async move {
                let mut i = p;
                while i < events {
                    let body =
                        serde_json::json!({"type": format!("t.{}", i as usize % subs), "data": {}});
                    api.publish_raw(Bytes::from(body.to_string())).await?;
                    i += 32;
                }
                anyhow::Ok(())
            })
        })
        .collect();
    for t in tasks {
        t.await??;
    }
    let released = Instant::now();
    seen.held.store(false, Ordering::Relaxed);
    let done = until(Duration::from_secs(900), || {
        seen.delivered.load(Ordering::Relaxed) >= events
    })
    .await;
    anyhow::ensure!(done, "the backlog did not arrive");
    let last = arrival_times(&seen)?.into_iter().max().unwrap_or(released);
    let per_sec = events as f64 / (last - released).as_secs_f64();

    let rate = per_sec * rate_share;
    let latencies = latencies_at(&api, &seen, rate, secs, subs, &serde_json::json!({})).await?;
    Ok((per_sec, latencies))
}
