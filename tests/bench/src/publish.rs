//! Figure 8: the publish path alone. Publishers send pre-serialized bodies
//! to a server with no subscriptions, so what the server spends per
//! accepted event is the request, the body's parse and the durable
//! archive: the part of publishing that keeping `data` as published (G13)
//! changed. Measured for the standard 1 KiB text payload and for 64 KiB of
//! numbers, where parsing into values and writing them out again cost
//! most. With a baseline binary the two servers are run in turn, so a noisy
//! machine weighs on both alike.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;

use crate::rig::{Api, Serve};

/// One run's figures.
pub struct PublishRun {
    /// Server CPU (user + system) per accepted publish, in ms.
    pub cpu_ms: f64,
    /// Accepted publishes per second over the run.
    pub per_sec: f64,
}

/// A payload shape of the figure.
#[derive(Clone, Copy, Debug)]
pub enum Shape {
    /// The other figures' 1 KiB `{"blob": "xxx…"}`.
    KibText,
    /// About 64 KiB of order lines, numbers of every spelling.
    Numbers,
}

impl Shape {
    /// The label printed.
    pub fn label(self) -> &'static str {
        match self {
            Self::KibText => "1 KiB text",
            Self::Numbers => "64 KiB numbers",
        }
    }

    /// `data` as JSON text.
    fn data(self) -> String {
        match self {
            Self::KibText => format!(r#"{{"blob":"{}"}}"#, "x".repeat(1000)),
            Self::Numbers => {
                let lines: Vec<String> = (0..640)
                    .map(|i| {
                        format!(
                            r#"{{"sku":"A-{i:04}","qty":{},"price":{}.50,"id":{},"ratio":0.{i:03}1,"tax":1.0e-2}}"#,
                            i % 7 + 1,
                            i * 3,
                            18_446_744_073_709_551_000u64 + i as u64
                        )
                    })
                    .collect();
                format!(r#"{{"order":{i},"lines":[{}]}}"#, lines.join(","), i = 7)
            }
        }
    }
}

/// Publishes `count` events of `shape` from `publishers` tasks to a fresh
/// `bin serve` with no subscriptions; the server's CPU per publish.
pub async fn run(
    bin: &str,
    shape: Shape,
    count: usize,
    publishers: usize,
) -> anyhow::Result<PublishRun> {
    let serve = Serve::start(bin, &[]).await?;
    let api = Api::new(&serve);
    let data = shape.data();
    // One warm-up publish: the first request opens the database's caches.
    api.publish_raw(body(&data, "warm")).await?;
    let cpu0 = serve.cpu_seconds();
    let start = Instant::now();
    let next = Arc::new(AtomicUsize::new(0));
    let tasks: Vec<_> = (0..publishers)
        .map(|_| {
            let (api, next, data) = (api.clone(), next.clone(), data.clone());
            tokio::spawn(async move {
                loop {
                    let n = next.fetch_add(1, Ordering::Relaxed);
                    if n >= count {
                        break;
                    }
                    api.publish_raw(body(&data, &format!("p{n}"))).await?;
                }
                anyhow::Ok(())
            })
        })
        .collect();
    for t in tasks {
        t.await??;
    }
    let secs = start.elapsed().as_secs_f64();
    let cpu = serve.cpu_seconds() - cpu0;
    Ok(PublishRun {
        cpu_ms: cpu * 1000.0 / count as f64,
        per_sec: count as f64 / secs,
    })
}

fn body(data: &str, id: &str) -> Bytes {
    Bytes::from(format!(r#"{{"id":"{id}","type":"t.x","data":{data}}}"#))
}
