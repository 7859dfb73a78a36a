//! `hooklane-bench`: starts its own loopback receiver and `hooklane serve`
//! on a temporary database, drives it, and prints the figures
//! BENCHMARKS.md records, each as a median and spread where it is sampled.
//! Build the server first: `cargo build --release --features aws` (the AWS
//! backend is for figure 5).

mod aws_cost;
mod figures;
mod lambda;
mod lanes;
mod machine;
mod publish;
mod report;
mod rig;
mod soak;
mod soak_receivers;
mod standin;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(about = "hooklane benchmarks (figures of BENCHMARKS.md)")]
struct Cli {
    /// The `hooklane` binary to benchmark.
    #[arg(long, global = true, default_value = "target/release/hooklane")]
    bin: String,
    #[command(subcommand)]
    figure: Figure,
}

#[derive(Subcommand)]
enum Figure {
    /// 1: healthy latency while N receivers hang (N = 0, 8, 100, 1000).
    Isolation {
        #[arg(long, default_value_t = 30)]
        samples: usize,
    },
    /// 2: deliveries per second and CPU per delivery with 1, 100, 10,000 subscriptions.
    Throughput {
        #[arg(long, default_value_t = 30)]
        secs: u64,
        #[arg(long, default_value_t = 32)]
        publishers: usize,
        /// Subscription counts to measure, comma-separated.
        #[arg(long, value_delimiter = ',', default_values_t = [1, 100, 10_000])]
        subs: Vec<usize>,
        /// Runs per subscription count (median and min–max reported).
        #[arg(long, default_value_t = 3)]
        runs: usize,
    },
    /// 3: publish-to-arrival p50/p99 at a given rate (half the measured maximum).
    Latency {
        #[arg(long)]
        rate: f64,
        #[arg(long, default_value_t = 20)]
        secs: u64,
        /// Runs (median and min–max reported).
        #[arg(long, default_value_t = 3)]
        runs: usize,
    },
    /// 3b: drain rate of a backlog queued while the receiver was down, and
    /// the server's CPU per delivery while it drains.
    Drain {
        #[arg(long, default_value_t = 10_000)]
        backlog: u64,
        /// Runs (median and min–max reported).
        #[arg(long, default_value_t = 3)]
        runs: usize,
    },
    /// 4: one event to N subscriptions: enqueued and arrived times, and the server's CPU per delivery.
    Fanout {
        #[arg(long, default_value_t = 10_000)]
        subs: usize,
        /// Each subscription with a content filter the event passes.
        #[arg(long)]
        filtered: bool,
        /// Runs (median and min–max reported).
        #[arg(long, default_value_t = 3)]
        runs: usize,
    },
    /// 5: AWS calls and dollars per delivery (serve --backend aws on the
    /// local stand-ins: the fast pair, or moto with
    /// HOOKLANE_BENCH_STANDIN=moto; the count of calls is the same).
    AwsCost {
        #[arg(long, default_value_t = 500)]
        deliveries: u64,
        /// Publishers at once: 1 is the worst case (each receive finds one
        /// message).
        #[arg(long, default_value_t = 1)]
        publishers: u64,
        /// Subscriptions each event matches (1, 2, 5 or 10 of 10).
        #[arg(long, default_value_t = 1)]
        per_event: u64,
        /// Fill each queue before its poller starts, so receives come full
        /// as under load.
        #[arg(long)]
        at_load: bool,
        /// Events per request: above 1, published through
        /// `POST /event-batches` (at most 100).
        #[arg(long, default_value_t = 1)]
        batch: u64,
        /// Subscriptions of the tenant beside the 10 that take none of the
        /// events: 990 makes a tenant of 1,000.
        #[arg(long, default_value_t = 0)]
        others: u64,
    },
    /// 6: Lambda binary sizes and init time.
    Lambda(lambda::Args),
    /// 8: server CPU per publish with no subscriptions (the publish path
    /// alone), 1 KiB text and 64 KiB numbers; with `--baseline`, that
    /// binary too, run in turn.
    Publish {
        #[arg(long, default_value_t = 5000)]
        count: usize,
        #[arg(long, default_value_t = 16)]
        publishers: usize,
        /// Runs per shape and binary (median and min–max reported).
        #[arg(long, default_value_t = 3)]
        runs: usize,
        /// Another `hooklane` binary to measure alongside (e.g. the build
        /// before a change).
        #[arg(long)]
        baseline: Option<String>,
    },
    /// 10: one subscription, a receiver answering in `answer_ms`:
    /// deliveries per second on each lane count, four events per ordering
    /// key (keys out of order reported).
    Lanes {
        #[arg(long, value_delimiter = ',', default_values_t = [1, 16, 64, 256])]
        lanes: Vec<u16>,
        #[arg(long, default_value_t = 100)]
        answer_ms: u64,
        /// Seconds of work to queue at each lane count's bound.
        #[arg(long, default_value_t = 10)]
        secs: u64,
        /// Publish without ordering keys (each event's lane from its id).
        #[arg(long)]
        no_keys: bool,
    },
    /// 10b: many subscriptions of a few lanes each, a receiver answering
    /// in `answer_ms`: deliveries per second, then publish-to-arrival at
    /// half that rate.
    ManyLanes {
        #[arg(long, default_value_t = 1000)]
        subs: usize,
        #[arg(long, default_value_t = 4)]
        lanes: u16,
        #[arg(long, default_value_t = 50)]
        answer_ms: u64,
        #[arg(long, default_value_t = 40_000)]
        events: u64,
        #[arg(long, default_value_t = 20)]
        secs: u64,
    },
    /// 11: rate limit accuracy: requested against measured, on 64 lanes.
    Rate {
        #[arg(long, value_delimiter = ',', default_values_t = [10, 100, 1000])]
        limits: Vec<u64>,
        #[arg(long, default_value_t = 10)]
        secs: u64,
    },
    /// 7: peak RSS along a long run.
    Memory {
        #[arg(long, default_value_t = 1_000_000)]
        deliveries: u64,
    },
    /// Every figure that needs no AWS account, written as BENCHMARKS.md's
    /// results table.
    Report(report::Args),
    /// 12: a soak with kills and restarts; lost must be 0.
    Soak(soak::Args),
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    // Each hung receiver holds two sockets in this process.
    let _ = rlimit::increase_nofile_limit(65_536);
    let cli = Cli::parse();
    let bin = cli.bin.as_str();
    match cli.figure {
        Figure::Lanes {
            lanes,
            answer_ms,
            secs,
            no_keys,
        } => {
            for n in lanes {
                let bound = f64::from(n) * 1000.0 / answer_ms.max(1) as f64;
                let events = ((bound * secs as f64) as u64).clamp(50, 50_000);
                let r = lanes::run(
                    bin,
                    serde_json::json!({"lanes": n}),
                    answer_ms,
                    events,
                    !no_keys,
                )
                .await?;
                println!(
                    "lanes={n:<4} {:>6.0} deliveries/s first 90 %, {:>6.0} to the last (bound {bound:.0})   peak in flight {}   keys out of order {}   CPU {:.3} ms/delivery   ({events} events, receiver {answer_ms} ms)",
                    r.steady_per_sec, r.per_sec, r.peak_in_flight, r.keys_out_of_order, r.cpu_ms
                );
            }
        }
        Figure::ManyLanes {
            subs,
            lanes,
            answer_ms,
            events,
            secs,
        } => {
            let (per_sec, mut lat) =
                lanes::many(bin, subs, lanes, answer_ms, events, 0.5, secs).await?;
            println!(
                "{subs} subscriptions x {lanes} lanes, receiver {answer_ms} ms: {per_sec:.0} deliveries/s ({events} events)"
            );
            lat.sort_by(|a, b| a.total_cmp(b));
            let at = |q: f64| {
                lat.get(((lat.len().max(1) - 1) as f64 * q) as usize)
                    .copied()
            };
            println!(
                "  publish-to-arrival at half that rate: p50 {:.1} ms, p99 {:.1} ms (n={})",
                at(0.5).unwrap_or(f64::NAN),
                at(0.99).unwrap_or(f64::NAN),
                lat.len()
            );
        }
        Figure::Rate { limits, secs } => {
            for limit in limits {
                let events = (limit * secs).max(50);
                let settings = serde_json::json!({"lanes": 64, "rate_limit": limit});
                let r = lanes::run(bin, settings, 0, events, false).await?;
                println!(
                    "rate_limit={limit:<5} measured {:>8.1}/s   busiest second {}   ({events} events, 64 lanes)",
                    r.per_sec, r.busiest_second
                );
            }
        }
        Figure::Isolation { samples } => {
            for n in [0, 8, 100, 1000] {
                let mut s = figures::isolation(bin, n, samples).await?;
                figures::row(&format!("isolation N={n}"), "ms", &mut s);
            }
        }
        Figure::Throughput {
            secs,
            publishers,
            subs,
            runs,
        } => {
            for subs in subs {
                let (mut rate, mut cpu, mut rss) = (Vec::new(), Vec::new(), Vec::new());
                for _ in 0..runs.max(1) {
                    let t = figures::throughput(bin, subs, secs, publishers, u64::MAX).await?;
                    println!(
                        "  run subs={subs:<6} {:>8.0} deliveries/s   CPU {:.3} ms/delivery   peak RSS {:.1} MB   ({} delivered)",
                        t.per_sec, t.cpu_ms, t.rss_mb, t.delivered
                    );
                    rate.push(t.per_sec);
                    cpu.push(t.cpu_ms);
                    rss.push(t.rss_mb);
                }
                let (m, _, _) = rig::spread(&mut rss);
                println!(
                    "throughput subs={subs:<6} {} deliveries/s   CPU {} ms/delivery   peak RSS {m:.1} MB   (n={})",
                    summary(&mut rate, 0),
                    summary(&mut cpu, 3),
                    rate.len()
                );
            }
        }
        Figure::Latency { rate, secs, runs } => {
            let [mut p50s, mut p99s] = repeat(runs, || async move {
                let mut s = figures::latency(bin, rate, secs).await?;
                let (p50, _, _) = rig::spread(&mut s);
                let p99 = rig::quantile(&s, 0.99);
                println!("  run at {rate:.0}/s   p50 {p50:.2} ms   p99 {p99:.2} ms   max {:.2} ms   (n={})", s[s.len() - 1], s.len());
                Ok([p50, p99])
            })
            .await?;
            println!(
                "latency at {rate:.0}/s   p50 {} ms   p99 {} ms   (runs={})",
                summary(&mut p50s, 2),
                summary(&mut p99s, 2),
                p99s.len()
            );
        }
        Figure::Drain { backlog, runs } => {
            let [mut overall, mut steady, mut cpu] = repeat(runs, || async move {
                let d = figures::drain(bin, backlog).await?;
                println!(
                    "  run {backlog} deliveries   {:.0}/s from receiver-up   {:.0}/s first to last arrival   {:.3} ms CPU per delivery (server)",
                    d.from_up, d.steady, d.cpu_ms
                );
                Ok([d.from_up, d.steady, d.cpu_ms])
            })
            .await?;
            println!(
                "drain {backlog} deliveries   {} /s first to last arrival   {} /s from receiver-up   {} ms CPU per delivery (server)   (runs={})",
                summary(&mut steady, 0),
                summary(&mut overall, 0),
                summary(&mut cpu, 3),
                steady.len()
            );
        }
        Figure::Fanout {
            subs,
            filtered,
            runs,
        } => {
            let [mut enq, mut all, mut cpu] = repeat(runs, || async move {
                let f = figures::fan_out(bin, subs, filtered).await?;
                println!(
                    "  run to {subs}   enqueued in {:.3} s   all arrived in {:.3} s   {:.3} ms CPU per delivery (server)",
                    f.enqueued, f.arrived, f.cpu_ms
                );
                Ok([f.enqueued, f.arrived, f.cpu_ms])
            })
            .await?;
            let filtered = if filtered { " (filtered)" } else { "" };
            println!(
                "fan-out to {subs}{filtered}   enqueued in {} s   all arrived in {} s   {} ms CPU per delivery (server)   (runs={})",
                summary(&mut enq, 3),
                summary(&mut all, 3),
                summary(&mut cpu, 3),
                enq.len()
            );
        }
        Figure::AwsCost {
            deliveries,
            publishers,
            per_event,
            at_load,
            batch,
            others,
        } => {
            let shape = aws_cost::Shape {
                events: deliveries / per_event.max(1),
                publishers: publishers.max(1),
                per_event,
                at_load,
                batch: batch.clamp(1, 100),
                others,
            };
            aws_cost::run(bin, shape).await?;
        }
        Figure::Lambda(args) => lambda::run(args).await?,
        Figure::Report(args) => report::run(bin, args).await?,
        Figure::Soak(args) => soak::run(bin, args).await?,
        Figure::Publish {
            count,
            publishers,
            runs,
            baseline,
        } => publish_figure(bin, baseline.as_deref(), count, publishers, runs).await?,
        Figure::Memory { deliveries } => {
            let marks = figures::memory(bin, deliveries).await?;
            for (n, rss) in marks {
                println!("memory after {n:>9} deliveries   peak RSS {rss:.1} MB");
            }
        }
    }
    Ok(())
}

/// Figure 8 for `bin` and, in turn with it, `baseline`.
async fn publish_figure(
    bin: &str,
    baseline: Option<&str>,
    count: usize,
    publishers: usize,
    runs: usize,
) -> anyhow::Result<()> {
    let bins: Vec<&str> = baseline.into_iter().chain([bin]).collect();
    for shape in [publish::Shape::KibText, publish::Shape::Numbers] {
        let mut figures = vec![(Vec::new(), Vec::new()); bins.len()];
        for _ in 0..runs.max(1) {
            for (b, (cpu, rate)) in bins.iter().zip(figures.iter_mut()) {
                let r = publish::run(b, shape, count, publishers).await?;
                println!(
                    "  run {:<15} {b}   CPU {:.4} ms/publish   {:.0} publishes/s",
                    shape.label(),
                    r.cpu_ms,
                    r.per_sec
                );
                cpu.push(r.cpu_ms);
                rate.push(r.per_sec);
            }
        }
        for (b, (cpu, rate)) in bins.iter().zip(figures.iter_mut()) {
            println!(
                "publish {:<15} {b}   CPU {} ms/publish   {} publishes/s   (runs={})",
                shape.label(),
                summary(cpu, 4),
                summary(rate, 0),
                cpu.len()
            );
        }
    }
    Ok(())
}

/// Runs a figure `runs` times (at least once); the `N` values each run
/// gave, as `N` series.
async fn repeat<const N: usize, F, Fut>(runs: usize, run: F) -> anyhow::Result<[Vec<f64>; N]>
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<[f64; N]>>,
{
    let mut series: [Vec<f64>; N] = std::array::from_fn(|_| Vec::new());
    for _ in 0..runs.max(1) {
        for (s, v) in series.iter_mut().zip(run().await?) {
            s.push(v);
        }
    }
    Ok(series)
}

/// "median M (min-max a-b)" with `digits` decimals.
fn summary(values: &mut [f64], digits: usize) -> String {
    let (median, lo, hi) = rig::median_range(values);
    format!("median {median:.digits$} (min-max {lo:.digits$}-{hi:.digits$})")
}
