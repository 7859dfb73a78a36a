//! One telemetry init for every entry point: readable logs locally, JSON
//! logs where `HOOKLANE_LOG_FORMAT=json` (or on Lambda); the level comes
//! from `RUST_LOG` (default `info`): a level, or `target=level` pairs
//! separated by commas (`info,hooklane_core=debug`). Spans and events carry
//! tenant, subscription and event ids, never bodies or secrets.
//!
//! The filter is `tracing_subscriber`'s `Targets`, not `EnvFilter`: the
//! latter's regular-expression engine would add half a megabyte to every
//! Lambda binary, for span-field filters hooklane has no use for.

use tracing_subscriber::filter::Targets;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::Layer;

/// The filter `RUST_LOG` asks for, or `info` when it is unset or unreadable.
fn filter() -> Targets {
    std::env::var("RUST_LOG")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| Targets::new().with_default(tracing::Level::INFO))
}

/// An error and its causes on one line (`outer: cause: root cause`), for
/// log fields: `error = %Chain(&e)`.
pub struct Chain<'a>(pub &'a (dyn std::error::Error + 'static));

impl std::fmt::Display for Chain<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)?;
        let mut cause = self.0.source();
        while let Some(e) = cause {
            write!(f, ": {e}")?;
            cause = e.source();
        }
        Ok(())
    }
}

/// Installs the global subscriber once; later calls do nothing.
pub fn init() {
    // A bad value is refused (named) by the configuration, read next.
    let json = crate::config::log_json(&|k| std::env::var(k).ok()).unwrap_or(false);
    let fmt = tracing_subscriber::fmt::layer().with_writer(std::io::stderr);
    let fmt = if json {
        fmt.json().with_filter(filter()).boxed()
    } else {
        fmt.with_filter(filter()).boxed()
    };
    // The log's filter is the log's only: the traces layer, when there is
    // one, takes its own spans whatever `RUST_LOG` says.
    let _ = tracing_subscriber::registry()
        .with(fmt)
        .with(crate::trace::layer())
        .try_init();
}
