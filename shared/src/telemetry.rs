//! One telemetry init for every entry point: readable logs locally, JSON
//! logs where `HOOKLANE_LOG_FORMAT=json` (or on Lambda); the level comes
//! from `RUST_LOG` (default `info`). Spans and events carry tenant,
//! subscription and event ids, never bodies or secrets.

use tracing_subscriber::EnvFilter;

/// Installs the global subscriber once; later calls do nothing.
pub fn init() {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let json = std::env::var("HOOKLANE_LOG_FORMAT").is_ok_and(|v| v == "json")
        || std::env::var("AWS_LAMBDA_FUNCTION_NAME").is_ok();
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let _ = if json {
        builder.json().try_init()
    } else {
        builder.try_init()
    };
}
