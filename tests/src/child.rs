//! `hooklane serve` as a child process, for the tests that kill it
//! (SIGKILL) or limit it (file size): the binary built once, a free port,
//! and a spawn over a database file, a resource prefix on the local
//! AWS-compatible server or a stack of the template there, logging to a
//! file a failing test prints.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// Builds the `hooklane` binary, with its AWS backend, and returns its path.
pub fn hooklane_binary() -> PathBuf {
    cargo_binary("hooklane", &["--features", "aws"])
}

/// Builds package `package`'s binary of the same name (with `extra`
/// arguments to `cargo build`) and returns its path.
pub fn cargo_binary(package: &str, extra: &[&str]) -> PathBuf {
    let out = Command::new(env!("CARGO"))
        .args(["build", "-p", package, "--message-format=json"])
        .args(extra)
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
        .stderr(Stdio::inherit())
        .output()
        .expect("cargo build runs");
    assert!(out.status.success(), "building {package} failed");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter_map(|v| v["executable"].as_str().map(PathBuf::from))
        .find(|p| p.file_name().is_some_and(|n| n == package))
        .unwrap_or_else(|| panic!("the {package} executable"))
}

/// A port nothing listens on (yet).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// Where the child keeps its state: a database file, or a resource prefix
/// on the local AWS-compatible server (which outlives the child).
pub enum State {
    /// The embedded backend's SQLite file.
    Db(PathBuf),
    /// The AWS backend's resource prefix.
    Aws(String),
    /// A stack of the template: `serve --backend aws` without
    /// `--create-resources`, its names read from a deployed function's
    /// environment (these variables) as the function reads them.
    Deployed(std::collections::HashMap<String, String>),
}

/// Starts `hooklane serve` on `port` over `state` with the given settings
/// (on top of the process environment), appending its log to `log`.
pub fn spawn(
    bin: &Path,
    port: u16,
    state: &State,
    log: &Path,
    env: &std::collections::HashMap<String, String>,
) -> Child {
    let mut cmd = Command::new(bin);
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .expect("log file");
    cmd.args(["serve", "--listen", &format!("127.0.0.1:{port}")])
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(log);
    match state {
        State::Db(db) => {
            cmd.arg("--db").arg(db);
        }
        State::Aws(prefix) => {
            cmd.args([
                "--backend",
                "aws",
                "--create-resources",
                "--resource-prefix",
                prefix,
            ]);
            cmd.envs(crate::aws::child_env());
        }
        State::Deployed(function_env) => {
            cmd.args(["--backend", "aws"]);
            cmd.envs(crate::aws::child_env_on(crate::aws::Standin::Moto));
            cmd.envs(function_env);
        }
    }
    cmd.envs(env);
    cmd.spawn().expect("hooklane serve starts")
}

/// The last `n` lines of a log file.
pub fn tail(log: &Path, n: usize) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// A child that is killed (and reaped) when dropped, a failing test's
/// included.
pub struct Killed(pub Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
