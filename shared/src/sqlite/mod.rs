//! The embedded adapter: every port over one SQLite file in WAL mode.
//!
//! Writes go to one writer thread that commits them in groups (group
//! commit): each write runs in its own savepoint, the group commits with one
//! `fsync` (`synchronous=FULL`), and only then does each caller get its
//! answer, so nothing acknowledged is lost in a crash and the disk is not
//! asked for one flush per write. Reads use a small pool of connections,
//! which WAL lets run beside the writer.

mod attempts;
mod backfill;
mod deliveries;
mod events;
mod schema;
mod subscriptions;

use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};

use rusqlite::Connection;
use tokio::sync::oneshot;

use crate::ports::{StoreError, StoreResult};

pub use backfill::{BackfillJob, BackfillStep};
pub use deliveries::Lane;

/// Most writes committed together in one transaction.
const GROUP_LIMIT: usize = 512;
/// Idle read connections kept open.
const READERS: usize = 8;

type Reply = Box<dyn FnOnce(Option<&str>) + Send>;
type Job = Box<dyn FnOnce(&Connection) -> (bool, Reply) + Send>;

/// Every port over one SQLite database.
#[derive(Clone)]
pub struct SqliteStore {
    inner: Arc<Inner>,
}

struct Inner {
    path: PathBuf,
    jobs: Mutex<mpsc::Sender<Job>>,
    readers: Mutex<Vec<Connection>>,
}

fn backend(e: impl std::fmt::Display) -> StoreError {
    StoreError::Backend(e.to_string())
}

fn open_conn(path: &Path) -> rusqlite::Result<Connection> {
    let conn = Connection::open(path)?;
    conn.busy_timeout(std::time::Duration::from_secs(10))?;
    conn.execute_batch(
        "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL; PRAGMA foreign_keys=OFF;",
    )?;
    Ok(conn)
}

impl SqliteStore {
    /// Opens (creating if needed) the database at `path` and starts its
    /// writer thread.
    pub fn open(path: &Path) -> StoreResult<Self> {
        let mut writer = open_conn(path).map_err(backend)?;
        schema::migrate(&mut writer).map_err(backend)?;
        let (tx, rx) = mpsc::channel::<Job>();
        std::thread::Builder::new()
            .name("hooklane-sqlite-writer".into())
            .spawn(move || writer_loop(writer, rx))
            .map_err(backend)?;
        Ok(Self {
            inner: Arc::new(Inner {
                path: path.to_owned(),
                jobs: Mutex::new(tx),
                readers: Mutex::new(Vec::new()),
            }),
        })
    }

    /// Runs `f` in the writer's next group; answers after the group commits.
    pub(crate) async fn write<T, F>(&self, f: F) -> StoreResult<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> rusqlite::Result<T> + Send + 'static,
    {
        let (tx, rx) = oneshot::channel::<StoreResult<T>>();
        let job: Job = Box::new(move |conn| {
            let result = f(conn);
            let ok = result.is_ok();
            let reply: Reply = Box::new(move |commit_err| {
                let answer = match commit_err {
                    Some(e) => Err(StoreError::Backend(format!("commit: {e}"))),
                    None => result.map_err(backend),
                };
                let _ = tx.send(answer);
            });
            (ok, reply)
        });
        self.inner
            .jobs
            .lock()
            .map_err(|_| backend("writer lock poisoned"))?
            .send(job)
            .map_err(|_| backend("the writer thread has stopped"))?;
        rx.await
            .map_err(|_| backend("the writer dropped a write"))?
    }

    /// Runs `f` on a read connection off the async runtime.
    pub(crate) async fn read<T, F>(&self, f: F) -> StoreResult<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> rusqlite::Result<T> + Send + 'static,
    {
        let inner = self.inner.clone();
        tokio::task::spawn_blocking(move || {
            let pooled = inner.readers.lock().ok().and_then(|mut p| p.pop());
            let conn = match pooled {
                Some(c) => c,
                None => open_conn(&inner.path).map_err(backend)?,
            };
            let result = f(&conn).map_err(backend);
            if let Ok(mut pool) = inner.readers.lock() {
                if pool.len() < READERS {
                    pool.push(conn);
                }
            }
            result
        })
        .await
        .map_err(backend)?
    }
}

fn writer_loop(conn: Connection, rx: mpsc::Receiver<Job>) {
    while let Ok(first) = rx.recv() {
        let mut group = vec![first];
        while group.len() < GROUP_LIMIT {
            match rx.try_recv() {
                Ok(job) => group.push(job),
                Err(_) => break,
            }
        }
        let mut replies = Vec::with_capacity(group.len());
        let begin = conn.execute_batch("BEGIN IMMEDIATE");
        for job in group {
            if let Err(e) = conn.execute_batch("SAVEPOINT job") {
                replies.push((false, Box::new(move |_: Option<&str>| drop(e)) as Reply));
                continue;
            }
            let (ok, reply) = job(&conn);
            let end = if ok {
                "RELEASE job"
            } else {
                "ROLLBACK TO job; RELEASE job"
            };
            let _ = conn.execute_batch(end);
            replies.push((ok, reply));
        }
        let commit_err = match begin.and_then(|_| conn.execute_batch("COMMIT")) {
            Ok(()) => None,
            Err(e) => {
                let _ = conn.execute_batch("ROLLBACK");
                Some(e.to_string())
            }
        };
        for (_, reply) in replies {
            reply(commit_err.as_deref());
        }
    }
}

pub(crate) use crate::record::{from_ms, ms};

/// A column that failed to parse back into a domain value.
pub(crate) fn corrupt(what: &str) -> rusqlite::Error {
    rusqlite::Error::InvalidColumnName(format!("stored {what} does not parse"))
}

#[cfg(test)]
mod tests;
