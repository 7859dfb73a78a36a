//! The `hooklane` command: `serve` runs the whole API and the delivery
//! workers in one process (over embedded SQLite, or over DynamoDB and SQS
//! with `--backend aws`); `dlq` inspects and replays the SQS dead-letter
//! queue; `receive` is a local receiver that prints and verifies what
//! hooklane sends; `status` asks a running hooklane how far behind
//! delivery is.
//!
//! The AWS backend (`serve --backend aws`, `dlq`) is the cargo feature
//! `aws`, off by default: without it the command builds without the AWS
//! SDK, in a few minutes (`cargo run --release --features aws -- ...`
//! builds it in); `dlq` then says so. `dead-letters` lists and replays a
//! tenant's parked deliveries through the API, on either backend.

mod api_client;
mod dead_letters;
#[cfg(feature = "aws")]
mod dlq;
mod receive;
mod status;

/// mimalloc: the delivery path allocates and frees small buffers at a high
/// rate; glibc's allocator kept handing pages back to the kernel
/// (`madvise`) and faulting them in again.
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Context as _;
use clap::{Parser, Subcommand};
use hooklane_core::config::Config;
use hooklane_core::telemetry::Chain;

#[derive(Parser)]
#[command(
    name = "hooklane",
    version,
    about = "Webhook delivery: sign, send, retry, park, replay"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// What `serve --help` adds after its options: the endpoint options a
/// subscription takes, each with an example (README: "Endpoint options").
const ENDPOINT_OPTIONS: &str = "\
Endpoint options (members of POST/PATCH /v1/tenants/{tenant}/subscriptions):
  filter   a content filter on the event's type and data, checked at fan-out:
             {\"data\": {\"amount\": {\"$gte\": 1000}, \"currency\": {\"$in\": [\"usd\", \"eur\"]}}}
           operators $eq $neq $gt $gte $lt $lte $in $nin $exists $prefix $and $or $not
  headers  up to 20 static headers on every attempt: {\"X-Api-Key\": \"k_live_51H8\"}
  auth     Authorization on every attempt, never shown back:
             {\"type\": \"bearer\", \"token\": \"…\"} or {\"type\": \"basic\", \"username\": \"…\", \"password\": \"…\"}
Endpoint tools:
  POST …/subscriptions/{id}/test     {\"event_type\": \"webhook.test\", \"data\": {}} (both optional)
  POST …/subscriptions/{id}/recover  {\"since\": \"2026-12-05T00:00:00Z\", \"until\": \"…\"} (until optional)";

#[derive(Subcommand)]
enum Command {
    /// Serve the API and run the delivery workers over embedded SQLite.
    #[command(after_help = ENDPOINT_OPTIONS)]
    Serve {
        /// Address to listen on.
        #[arg(long, env = "HOOKLANE_LISTEN", default_value = "127.0.0.1:8080")]
        listen: SocketAddr,
        /// SQLite database file (created if missing; embedded backend).
        #[arg(long, env = "HOOKLANE_DB", default_value = "./hooklane.db")]
        db: PathBuf,
        /// Where state lives: `embedded` (SQLite) or `aws` (DynamoDB and
        /// SQS FIFO at `AWS_ENDPOINT_URL` or AWS itself).
        #[arg(long, env = "HOOKLANE_BACKEND", value_enum, default_value = "embedded")]
        backend: Backend,
        /// With `--backend aws`: create the table and queues first (for a
        /// local AWS-compatible server); otherwise their names come from
        /// `HOOKLANE_TABLE` and the `HOOKLANE_*_QUEUE_URL` variables.
        #[arg(long)]
        create_resources: bool,
        /// Prefix of the names `--create-resources` creates.
        #[arg(long, env = "HOOKLANE_RESOURCE_PREFIX", default_value = "hooklane")]
        resource_prefix: String,
    },
    /// List and replay a tenant's parked deliveries (dead letters), through
    /// a running hooklane's API, on either backend.
    DeadLetters(dead_letters::Args),
    /// Inspect, replay and purge the SQS dead-letter queue (AWS backend).
    #[cfg(feature = "aws")]
    Dlq(dlq::Args),
    /// Inspect, replay and purge the SQS dead-letter queue (AWS backend;
    /// not built in: build with `--features aws`).
    #[cfg(not(feature = "aws"))]
    #[command(disable_help_flag = true)]
    Dlq {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, hide = true)]
        rest: Vec<String>,
    },
    /// Listen for webhooks and print each request, verifying signatures.
    Receive(receive::Args),
    /// Show how far behind delivery is, for whom and since when: backlog
    /// per tenant, suspended subscriptions, dead letters, open breakers.
    Status(status::Args),
}

/// SQLite allocates its page caches with the C library's `malloc`, from
/// every thread that reads, and each new read transaction after a commit
/// drops and refills the reader's cache. glibc gives each thread an arena
/// and hands freed memory back to the kernel (`madvise`, then TLB flushes
/// on every core) as soon as the top of an arena is free: under load that
/// was a tenth of the server's CPU. A 64 MiB trim threshold keeps freed
/// memory for reuse; peak RSS stays flat (BENCHMARKS.md, figure 7).
#[allow(unsafe_code)]
fn keep_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only changes the allocator's tuning, and runs once,
    // before any SQLite connection exists.
    unsafe {
        libc::mallopt(libc::M_TRIM_THRESHOLD, 64 << 20);
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    keep_freed_memory();
    hooklane_core::telemetry::init();
    match Cli::parse().command {
        Command::Serve {
            listen,
            db,
            backend,
            create_resources,
            resource_prefix,
        } => {
            let store = match backend {
                Backend::Embedded => Store::Embedded(db),
                #[cfg(feature = "aws")]
                Backend::Aws => Store::Aws {
                    create: create_resources.then_some(resource_prefix),
                },
                #[cfg(not(feature = "aws"))]
                Backend::Aws => {
                    let _ = (create_resources, resource_prefix);
                    anyhow::bail!(
                        "this hooklane was built without the AWS backend: build it with the \
                         `aws` feature (cargo run --release --features aws -- serve --backend aws)"
                    )
                }
            };
            serve(listen, store).await
        }
        Command::DeadLetters(args) => dead_letters::run(args).await,
        #[cfg(feature = "aws")]
        Command::Dlq(args) => dlq::run(args).await,
        #[cfg(not(feature = "aws"))]
        Command::Dlq { rest: _ } => anyhow::bail!(
            "`hooklane dlq` reads the AWS backend's SQS dead-letter queue and comes with the \
             `aws` feature: cargo run --release --features aws -- dlq …\n\
             A tenant's parked deliveries, on either backend: hooklane dead-letters --tenant T list"
        ),
        Command::Receive(args) => receive::run(args).await,
        Command::Status(args) => status::run(args).await,
    }
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum Backend {
    Embedded,
    Aws,
}

enum Store {
    Embedded(PathBuf),
    #[cfg(feature = "aws")]
    Aws {
        create: Option<String>,
    },
}

async fn serve(listen: SocketAddr, store: Store) -> anyhow::Result<()> {
    let mut config = Config::from_env().context("configuration")?;
    if config.api_token.is_none() {
        let token = hooklane_core::signing::Secret::generate()
            .expose()
            .replace("whsec_", "hl_");
        println!("HOOKLANE_API_TOKEN is not set; this run's API token is:\n  {token}");
        config.api_token = Some(token);
    }
    survive_file_size_limit();
    // Each hung receiver holds a socket: allow many at once.
    if let Err(e) = rlimit::increase_nofile_limit(65_536) {
        tracing::warn!(error = %Chain(&e), "could not raise the open-file limit");
    }
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .with_context(|| format!("listening on {listen}"))?;
    println!("hooklane listening on http://{}", listener.local_addr()?);
    let served = match store {
        Store::Embedded(db) => {
            hooklane_core::embedded::serve(listener, config, &db, shutdown_signal()).await
        }
        #[cfg(feature = "aws")]
        Store::Aws { create } => {
            // Read before anything is created: a bad value creates nothing.
            let aws_env = hooklane_aws::AwsEnv::from_env().context("configuration")?;
            let resources = create.map(|prefix| hooklane_aws::Resources {
                prefix,
                // Six times the longest an attempt may hold a message.
                visibility: config.attempt_timeout * 6,
            });
            let sdk = hooklane_aws::sdk_config().await;
            hooklane_aws::queue_poller::serve(
                listener,
                (config, aws_env, Default::default()),
                sdk,
                None,
                resources,
                shutdown_signal(),
            )
            .await
        }
    };
    // The spans ended before the shutdown go out (when traces are on).
    hooklane_core::trace::flush_done().await;
    served
}

/// A write past the process's file-size limit (`ulimit -f`, or a
/// filesystem that enforces one) raises SIGXFSZ, whose default action ends
/// the process. With a handler installed, the write fails instead (EFBIG):
/// the store answers 503 with `Retry-After`, the workers pause and try
/// again, and everything goes on once the limit is raised, without a
/// restart.
fn survive_file_size_limit() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        match signal(SignalKind::from_raw(libc::SIGXFSZ)) {
            Ok(mut stream) => {
                tokio::spawn(async move {
                    while stream.recv().await.is_some() {
                        tracing::debug!("a write went past the file-size limit");
                    }
                });
            }
            Err(e) => tracing::warn!(error = %Chain(&e), "could not handle SIGXFSZ"),
        }
    }
}

async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(s) => s,
                Err(_) => return ctrl_c.await.unwrap_or(()),
            };
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
}

#[cfg(test)]
mod tests {
    use clap::Parser as _;

    use super::{Cli, Command};

    /// Built without the AWS backend, `dlq` is still a command, one that
    /// says where it comes from (not clap's "unrecognized subcommand").
    #[cfg(not(feature = "aws"))]
    #[test]
    fn dlq_without_the_aws_feature_is_a_command_that_says_how_to_get_it() {
        let cli = Cli::try_parse_from(["hooklane", "dlq", "list", "--limit", "5"]);
        assert!(matches!(cli.map(|c| c.command), Ok(Command::Dlq { .. })));
    }

    #[test]
    fn dead_letters_takes_list_and_replay() {
        for args in [
            &[
                "hooklane",
                "dead-letters",
                "--token",
                "t",
                "--tenant",
                "a",
                "list",
            ][..],
            &[
                "hooklane",
                "dead-letters",
                "--token",
                "t",
                "--tenant",
                "a",
                "replay",
                "evt_1",
            ],
        ] {
            let cli = Cli::try_parse_from(args);
            assert!(matches!(
                cli.map(|c| c.command),
                Ok(Command::DeadLetters(_))
            ));
        }
    }
}
