//! The local AWS-compatible servers the AWS figures run on, started by the
//! bench itself on free loopback ports and stopped when dropped:
//! - the fast pair (the default): dynoxide for DynamoDB
//!   (`target/tools/bin/dynoxide`) and ministack for SQS and SNS
//!   (`.venv-ministack/bin/ministack`), both installed by `tests/run.sh`;
//!   two processes where a burst's calls do not wait in one queue
//!   (ministack answers in parallel, dynoxide one call at a time in
//!   microseconds);
//! - moto (`HOOKLANE_BENCH_STANDIN=moto`), as the tests run it
//!   (`tests/moto_server.py`), which answers one call at a time: a figure
//!   taken on it under load measures its queue as much as hooklane.
//!
//! Either way a child `serve --backend aws` gets the endpoints in the
//! variables the AWS SDK reads ([`Standin::env`]).

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::Context;

/// The running stand-in.
pub struct Standin {
    /// Which one (`fast` or `moto`), for the figures' notes.
    pub name: &'static str,
    children: Vec<Child>,
    /// The endpoints (and the region and credentials), as a child's
    /// environment.
    pub env: Vec<(&'static str, String)>,
}

fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

fn spawn(cmd: &mut Command, what: &str) -> anyhow::Result<Child> {
    cmd.stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .with_context(|| format!("starting {what} (tests/run.sh installs it)"))
}

/// A URL's check: exits 0 when it answers 200.
const HEALTH: &str = "import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=1)";

/// Waits (at most 30 s) until `ready` says so.
fn wait_until(mut ready: impl FnMut() -> bool) -> bool {
    for _ in 0..300 {
        if ready() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    false
}

/// Waits (at most 30 s) until every port takes connections.
fn wait_for(ports: &[u16]) -> bool {
    wait_until(|| {
        ports
            .iter()
            .all(|p| std::net::TcpStream::connect(("127.0.0.1", *p)).is_ok())
    })
}

impl Standin {
    /// Starts the stand-in `HOOKLANE_BENCH_STANDIN` names (`fast`, the
    /// default, or `moto`).
    pub fn start() -> anyhow::Result<Self> {
        match std::env::var("HOOKLANE_BENCH_STANDIN").as_deref() {
            Ok("moto") => Self::moto(),
            Ok("fast") | Err(_) => Self::fast(),
            Ok(other) => anyhow::bail!("HOOKLANE_BENCH_STANDIN={other}: fast or moto"),
        }
    }

    fn moto() -> anyhow::Result<Self> {
        let port = free_port()?;
        let child = spawn(
            Command::new(".venv/bin/python").args([
                "tests/moto_server.py",
                "-H",
                "127.0.0.1",
                "-p",
                &port.to_string(),
            ]),
            "moto (tests/moto_server.py with .venv/bin/python)",
        )?;
        let mut standin = Self::with(
            "moto",
            vec![("AWS_ENDPOINT_URL", format!("http://127.0.0.1:{port}"))],
        );
        standin.children.push(child);
        anyhow::ensure!(wait_for(&[port]), "moto did not start");
        Ok(standin)
    }

    fn fast() -> anyhow::Result<Self> {
        let (ddb, sqs) = (free_port()?, free_port()?);
        let at = |port: u16| format!("http://127.0.0.1:{port}");
        let env = vec![
            ("AWS_ENDPOINT_URL_DYNAMODB", at(ddb)),
            ("AWS_ENDPOINT_URL_SQS", at(sqs)),
            ("AWS_ENDPOINT_URL_SNS", at(sqs)),
        ];
        // Each child is in `standin` as soon as it runs, so that one that
        // fails to start stops the other (its drop).
        let mut standin = Self::with("fast", env);
        standin.children.push(spawn(
            Command::new("target/tools/bin/dynoxide").args([
                "--host",
                "127.0.0.1",
                "--port",
                &ddb.to_string(),
                "--log",
                "quiet",
            ]),
            "dynoxide (target/tools/bin/dynoxide)",
        )?);
        standin.children.push(spawn(
            Command::new(".venv-ministack/bin/ministack")
                .env("GATEWAY_PORT", sqs.to_string())
                .env("BIND_HOST", "127.0.0.1")
                .env("SERVICES", "sqs,sns")
                .env("LOG_LEVEL", "WARNING"),
            "ministack (.venv-ministack/bin/ministack)",
        )?);
        // ministack takes connections before its services answer: its
        // health page says when they do.
        let ready = wait_for(&[ddb, sqs])
            && wait_until(|| {
                std::process::Command::new(".venv/bin/python")
                    .args(["-c", HEALTH, &format!("{}/_ministack/health", at(sqs))])
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .status()
                    .is_ok_and(|s| s.success())
            });
        anyhow::ensure!(ready, "the fast pair did not start");
        Ok(standin)
    }

    /// A stand-in with these endpoints (and the region and credentials),
    /// its children yet to start.
    fn with(name: &'static str, mut env: Vec<(&'static str, String)>) -> Self {
        env.extend([
            ("AWS_REGION", "us-east-1".to_owned()),
            ("AWS_ACCESS_KEY_ID", "bench".to_owned()),
            ("AWS_SECRET_ACCESS_KEY", "bench".to_owned()),
        ]);
        Self {
            name,
            children: Vec::new(),
            env,
        }
    }
}

impl Drop for Standin {
    fn drop(&mut self) {
        for child in &mut self.children {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
