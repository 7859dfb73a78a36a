//! Figure 6, Lambda: each function's cargo-lambda release binary size and
//! its process's time from start to ready for its first event. Targets: at
//! most 8 MB, init under 30 ms (median).
//!
//! Size is the `bootstrap` file's length (1 MB = 1,048,576 bytes). Init is
//! the time from just before spawning the bootstrap to the arrival of its
//! first `GET /2018-06-01/runtime/invocation/next` at a fake Runtime API
//! (hyper on 127.0.0.1:0), which holds that request open; the child is then
//! killed and reaped. The child gets a cleared environment: the Lambda
//! variables, dummy credentials, and AWS on 127.0.0.1:9 (refused, so no real
//! AWS is contacted; no operator webhook, so init makes no AWS call). A run
//! not ready within 10 s fails; a function's first failure is rerun with
//! stderr captured to show why. Lambda's own sandbox and download time is
//! not included.

use std::convert::Infallible;
use std::io::{Read, Seek, SeekFrom};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::{Duration, Instant};

use anyhow::Context;
use bytes::Bytes;
use http_body_util::Full;
use hyper::{body::Incoming, server::conn::http1, service::service_fn, Method, Request, Response};
use hyper_util::rt::TokioIo;
use tokio::{net::TcpListener, process::Command, sync::mpsc, task::JoinSet};

/// The functions measured, as named under the cargo-lambda output directory.
const FUNCTIONS: [&str; 3] = ["hooklane-api", "hooklane-fanout", "hooklane-delivery"];
/// Size target: at most this many bytes (8 MB).
const MAX_BYTES: u64 = 8 * 1_048_576;
/// Init target: median strictly under this many milliseconds.
const MAX_INIT_MS: f64 = 30.0;
/// How long one cold start may take before it counts as a failure.
const RUN_TIMEOUT: Duration = Duration::from_secs(10);
/// A function's runs stop after this many failures in a row.
const MAX_FAILS_IN_A_ROW: usize = 3;
/// The Runtime API request that means "ready for the first event".
const NEXT_PATH: &str = "/2018-06-01/runtime/invocation/next";
/// The command that builds the bootstraps.
const BUILD_HINT: &str =
    "infra/check.sh   (runs `cargo lambda build --release` for the three functions)";

/// Options of the Lambda figure.
#[derive(clap::Args, Debug, Clone)]
pub struct Args {
    /// Directory with cargo-lambda output (default target/lambda): <dir>/<function>/bootstrap
    #[arg(long, default_value = "target/lambda")]
    pub dir: PathBuf,
    /// Cold starts per function
    #[arg(long, default_value_t = 20)]
    pub runs: usize,
}

/// How one cold start ended.
enum Outcome {
    /// `invocation/next` arrived this long after the spawn.
    Ready(Duration),
    /// The process exited before asking for an event.
    Exited(ExitStatus),
    /// Neither happened within [`RUN_TIMEOUT`].
    TimedOut,
}

/// One function's measurements.
struct Row {
    name: &'static str,
    bytes: u64,
    init_ms: Vec<f64>,
    failed: usize,
}

/// Measures figure 6 and prints it as a table.
pub async fn run(args: Args) -> anyhow::Result<()> {
    let dir = resolve_dir(&args.dir);
    let (mut rows, mut missing) = (Vec::new(), Vec::new());
    for name in FUNCTIONS {
        let bin = dir.join(name).join("bootstrap");
        match tokio::fs::metadata(&bin).await {
            Ok(meta) if meta.is_file() => {
                rows.push(measure(name, &bin, meta.len(), args.runs).await?)
            }
            _ => missing.push(bin),
        }
    }
    if !missing.is_empty() {
        let missing: Vec<_> = missing.iter().map(|b| b.display().to_string()).collect();
        println!("missing: {}", missing.join(", "));
        println!("build the bootstraps with: {BUILD_HINT}");
    }
    anyhow::ensure!(!rows.is_empty(), "no bootstrap under {}", dir.display());
    print_table(&rows);
    println!(
        "method: size_mb = bootstrap file length / 1,048,576; init_ms = time from spawning \
         {}/<function>/bootstrap to its first GET {NEXT_PATH} on a local fake Runtime API, \
         {} cold starts each (median, p10-p90 interpolated; <30ms judged on the median); \
         excludes Lambda's own sandbox creation and code download time.",
        dir.display(),
        args.runs
    );
    Ok(())
}

/// A relative `dir` missing under the current directory but present under
/// the workspace root is taken from there (so the default works anywhere).
fn resolve_dir(dir: &Path) -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(dir);
    if dir.is_relative() && !dir.exists() && root.exists() {
        root
    } else {
        dir.to_path_buf()
    }
}

/// Cold-starts one bootstrap `runs` times.
async fn measure(name: &'static str, bin: &Path, bytes: u64, runs: usize) -> anyhow::Result<Row> {
    let (init_ms, failed) = (Vec::with_capacity(runs), 0);
    let mut row = Row {
        name,
        bytes,
        init_ms,
        failed,
    };
    let (mut in_a_row, mut diagnosed) = (0, false);
    for i in 1..=runs {
        let outcome = cold_start(name, bin, Stdio::null()).await?;
        let Outcome::Ready(init) = outcome else {
            row.failed += 1;
            in_a_row += 1;
            eprintln!("{name} run {i}/{runs}: {}", describe(&outcome));
            if !diagnosed {
                diagnosed = true;
                diagnose(name, bin).await?;
            }
            if in_a_row >= MAX_FAILS_IN_A_ROW {
                eprintln!("{name}: {in_a_row} failures in a row, skipping its remaining runs");
                break;
            }
            continue;
        };
        in_a_row = 0;
        row.init_ms.push(init.as_secs_f64() * 1000.0);
    }
    Ok(row)
}

/// Starts `bin` once more with stderr to a temporary file and prints it.
async fn diagnose(name: &str, bin: &Path) -> anyhow::Result<()> {
    let mut file = tempfile::tempfile().context("a temporary file for stderr")?;
    let sink = file.try_clone().context("sharing the stderr file")?;
    let outcome = cold_start(name, bin, Stdio::from(sink)).await?;
    eprintln!("{name} rerun with stderr captured: {}", describe(&outcome));
    let mut stderr = Vec::new();
    file.seek(SeekFrom::Start(0))
        .and_then(|_| file.read_to_end(&mut stderr))
        .with_context(|| format!("reading {name}'s stderr"))?;
    let tail = String::from_utf8_lossy(&stderr[stderr.len().saturating_sub(4000)..]);
    eprintln!("{name} stderr (last 4000 bytes):\n{}", tail.trim_end());
    Ok(())
}

/// Words for a failed outcome.
fn describe(outcome: &Outcome) -> String {
    match outcome {
        Outcome::Ready(d) => format!("ready after {:.1} ms", d.as_secs_f64() * 1000.0),
        Outcome::Exited(status) => format!("exited ({status}) before GET {NEXT_PATH}"),
        Outcome::TimedOut => format!("no GET {NEXT_PATH} within {} s", RUN_TIMEOUT.as_secs()),
    }
}

/// One cold start of `bin` against a fresh fake Runtime API, its stderr
/// going to `stderr`.
async fn cold_start(name: &str, bin: &Path, stderr: Stdio) -> anyhow::Result<Outcome> {
    let (addr, mut arrivals, server) = fake_runtime_api().await?;
    let mut cmd = command(bin, name, addr);
    cmd.stderr(stderr);
    let start = Instant::now();
    let mut child = cmd
        .spawn()
        .with_context(|| format!("starting {}", bin.display()))?;
    let outcome = tokio::select! {
        Some(at) = arrivals.recv() => Outcome::Ready(at.saturating_duration_since(start)),
        status = child.wait() => Outcome::Exited(status.with_context(|| format!("waiting for {name}"))?),
        () = tokio::time::sleep(RUN_TIMEOUT) => Outcome::TimedOut,
    };
    if !matches!(outcome, Outcome::Exited(_)) {
        child
            .start_kill()
            .with_context(|| format!("killing {name}"))?;
    }
    child
        .wait()
        .await
        .with_context(|| format!("reaping {name}"))?;
    server.abort();
    Ok(outcome)
}

/// The bootstrap's environment besides `AWS_LAMBDA_RUNTIME_API` and
/// `AWS_LAMBDA_FUNCTION_NAME`: dummy credentials, and AWS on a refusing port.
const ENV: [(&str, &str); 12] = [
    ("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "256"),
    ("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST"),
    ("AWS_LAMBDA_LOG_STREAM_NAME", "bench"),
    ("AWS_LAMBDA_LOG_GROUP_NAME", "bench"),
    ("AWS_REGION", "us-east-1"),
    ("AWS_ACCESS_KEY_ID", "bench"),
    ("AWS_SECRET_ACCESS_KEY", "bench"),
    ("AWS_ENDPOINT_URL", "http://127.0.0.1:9"),
    ("HOOKLANE_TABLE", "bench"),
    ("HOOKLANE_INGEST_QUEUE_URL", "http://127.0.0.1:9/q"),
    ("HOOKLANE_DELIVERY_QUEUE_URL", "http://127.0.0.1:9/q"),
    ("HOOKLANE_DLQ_URL", "http://127.0.0.1:9/q"),
];

/// The bootstrap's command: a cleared environment (no inherited `HOOKLANE_*`
/// or `AWS_*` setting applies) holding only [`ENV`] and the fake API.
fn command(bin: &Path, name: &str, api: SocketAddr) -> Command {
    let mut cmd = Command::new(bin);
    cmd.env_clear()
        .envs(ENV)
        .env("AWS_LAMBDA_RUNTIME_API", api.to_string())
        .env("AWS_LAMBDA_FUNCTION_NAME", name)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .kill_on_drop(true);
    cmd
}

/// A fake Lambda Runtime API on 127.0.0.1:0. It sends the instant each
/// `invocation/next` request arrives and holds that request open; anything
/// else gets 404. Aborting the returned task closes every connection.
async fn fake_runtime_api() -> anyhow::Result<(
    SocketAddr,
    mpsc::UnboundedReceiver<Instant>,
    tokio::task::JoinHandle<()>,
)> {
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .context("binding the fake Runtime API")?;
    let addr = listener
        .local_addr()
        .context("the fake Runtime API's address")?;
    let (tx, rx) = mpsc::unbounded_channel();
    let server = tokio::spawn(async move {
        let mut conns = JoinSet::new(); // dropped with the task: aborts held requests
        while let Ok((stream, _)) = listener.accept().await {
            let tx = tx.clone();
            let svc = service_fn(move |req| runtime_api(req, tx.clone()));
            conns.spawn(http1::Builder::new().serve_connection(TokioIo::new(stream), svc));
        }
    });
    Ok((addr, rx, server))
}

/// One request to the fake Runtime API.
async fn runtime_api(
    req: Request<Incoming>,
    arrivals: mpsc::UnboundedSender<Instant>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let at = Instant::now();
    if req.method() == Method::GET && req.uri().path() == NEXT_PATH {
        let _ = arrivals.send(at); // the receiver may be gone after a timeout
        std::future::pending::<()>().await;
    }
    let mut resp = Response::new(Full::new(Bytes::new()));
    *resp.status_mut() = hyper::StatusCode::NOT_FOUND;
    Ok(resp)
}

/// The `p`th percentile (0..=1) of sorted samples, linearly interpolated.
fn percentile(sorted: &[f64], p: f64) -> f64 {
    let rank = p * (sorted.len() - 1) as f64;
    let (lo, hi) = (rank.floor() as usize, rank.ceil() as usize);
    sorted[lo] + (sorted[hi] - sorted[lo]) * (rank - lo as f64)
}

/// Prints the rows as an aligned table.
fn print_table(rows: &[Row]) {
    let line = |c: [&str; 8]| {
        let [a, b, c2, d, e, f, g, h] = c;
        println!("{a:<18} {b:>8} {c2:>6} {d:>8} {e:>15} {f:>15} {g:>6} {h:>6}");
    };
    line([
        "function", "size_mb", "<=8MB", "init_ms", "p10-p90", "min-max", "<30ms", "runs",
    ]);
    let yes_no = |ok: bool| if ok { "yes" } else { "NO" };
    for row in rows {
        let mut ms = row.init_ms.clone();
        ms.sort_by(f64::total_cmp);
        let p = |q| percentile(&ms, q);
        let (init, spread, range) = match ms.last() {
            None => ("-".into(), "-".into(), "-".into()),
            Some(max) => (
                format!("{:.1}", p(0.5)),
                format!("{:.1}-{:.1}", p(0.1), p(0.9)),
                format!("{:.1}-{max:.1}", ms[0]),
            ),
        };
        line([
            row.name,
            &format!("{:.2}", row.bytes as f64 / 1_048_576.0),
            yes_no(row.bytes <= MAX_BYTES),
            &init,
            &spread,
            &range,
            yes_no(!ms.is_empty() && p(0.5) < MAX_INIT_MS),
            &format!("{}/{}", ms.len(), ms.len() + row.failed),
        ]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_interpolate() {
        let s = [10.0, 20.0, 30.0, 40.0];
        assert_eq!(percentile(&s, 0.0), 10.0);
        assert_eq!(percentile(&s, 0.5), 25.0);
        assert_eq!(percentile(&s, 1.0), 40.0);
    }
}
