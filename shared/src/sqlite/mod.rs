//! The embedded adapter: every port over one SQLite file in WAL mode.
//!
//! Writes go to one writer thread that commits them in groups (group
//! commit): each write runs in its own savepoint, the group commits once,
//! and only then does each caller get its answer.
//!
//! Durability is chosen per write. Whatever an API answer promises (an
//! accepted event, a registration, an unregistration, a replay, a status
//! change) is a durable write: its group commits with `fsync`
//! (`synchronous=FULL`), so a power loss cannot undo it. Delivery progress
//! (attempt starts, outcomes, the attempt log, fan-out bookkeeping) is a
//! relaxed write: committed to the WAL without waiting for the disk, which
//! survives any process crash; after a power loss the database holds a
//! prefix of those commits, so a delivery may be attempted once more
//! (at-least-once), never lost. Reads use a small pool of connections,
//! which WAL lets run beside the writer.

mod access;
mod attempts;
mod backfill;
mod deliveries;
mod events;
mod overview;
mod schema;
mod subscriptions;
mod views;

use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};

use rusqlite::Connection;
use tokio::sync::oneshot;

use crate::ports::{StoreError, StoreResult};
use crate::rate::{InMemoryRates, RateLimits, Slot};
use crate::telemetry::Chain;

pub use deliveries::Lane;

#[async_trait::async_trait]
impl RateLimits for SqliteStore {
    async fn reserve(
        &self,
        sub: &crate::domain::SubscriptionId,
        limit: crate::domain::RateLimit,
        now: time::OffsetDateTime,
    ) -> StoreResult<Slot> {
        self.inner.rates.reserve(sub, limit, now).await
    }
}

/// Most writes committed together in one transaction.
const GROUP_LIMIT: usize = 512;

type Reply = Box<dyn FnOnce(Option<&rusqlite::Error>) + Send>;
type Run = Box<dyn FnOnce(&Connection) -> (bool, Reply) + Send>;

/// One write for the writer thread.
struct Job {
    run: Run,
    durable: bool,
}

/// Every port over one SQLite database.
#[derive(Clone)]
pub struct SqliteStore {
    inner: Arc<Inner>,
}

impl crate::engine::Store for SqliteStore {
    /// One database behind every port: each port is the store itself.
    fn store_ports(self) -> crate::engine::StorePorts {
        crate::engine::StorePorts::of_one(self)
    }
}

struct Inner {
    path: PathBuf,
    jobs: Mutex<mpsc::Sender<Job>>,
    /// Rate limits: one process holds every lane, so they live in memory.
    rates: InMemoryRates,
}

fn backend(what: &str) -> StoreError {
    StoreError::backend(what)
}

/// A failure while opening the database, with its cause.
fn opening(doing: &str, e: impl std::error::Error + Send + Sync + 'static) -> StoreError {
    StoreError::backend_from(doing, e)
}

/// Maps a SQLite error. A full disk (or a file at the process's size
/// limit), a failed read or write, and a lock held past the busy timeout
/// are `Unavailable`: the transaction was rolled back, nothing changed,
/// and the same call can succeed once the cause is gone (the API answers
/// 503 with `Retry-After`, the workers pause and try again). Anything else
/// is `Backend`.
pub(crate) fn store_error(e: &rusqlite::Error) -> StoreError {
    use rusqlite::ErrorCode::{DatabaseBusy, DatabaseLocked, DiskFull, SystemIoFailure};
    match e {
        rusqlite::Error::SqliteFailure(f, _)
            if matches!(
                f.code,
                DiskFull | SystemIoFailure | DatabaseBusy | DatabaseLocked
            ) =>
        {
            StoreError::unavailable_from("SQLite", e.to_string())
        }
        _ => StoreError::backend_from("SQLite", e.to_string()),
    }
}

/// Opens a connection. The query planner stability guarantee is on: the
/// planner must not look at bound values, or SQLite recompiles a cached
/// statement whenever a `LIMIT ?` or an equality against a small integer
/// is bound again (the statement cache clears bindings between uses),
/// which cost a tenth of the server's CPU under load.
fn open_conn(path: &Path) -> rusqlite::Result<Connection> {
    let conn = Connection::open(path)?;
    conn.set_db_config(
        rusqlite::config::DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG,
        true,
    )?;
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
        let mut writer = open_conn(path).map_err(|e| opening("opening the database", e))?;
        // Checkpoint every 8,000 pages (32 MB of WAL) rather than 1,000:
        // the hot pages (lane heads, the queue's indexes) are rewritten many
        // times between checkpoints and copied back once per checkpoint.
        writer
            .pragma_update(None, "wal_autocheckpoint", 8000)
            .map_err(|e| opening("setting the checkpoint interval", e))?;
        schema::migrate(&mut writer).map_err(|e| opening("migrating the schema", e))?;
        let (tx, rx) = mpsc::channel::<Job>();
        std::thread::Builder::new()
            .name("hooklane-sqlite-writer".into())
            .spawn(move || writer_loop(writer, rx))
            .map_err(|e| opening("starting the writer thread", e))?;
        Ok(Self {
            inner: Arc::new(Inner {
                path: path.to_owned(),
                jobs: Mutex::new(tx),
                rates: InMemoryRates::default(),
            }),
        })
    }

    /// Runs `f` in the writer's next group; answers after the group
    /// commits durably (`fsync`).
    pub(crate) async fn write<T, F>(&self, f: F) -> StoreResult<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> rusqlite::Result<T> + Send + 'static,
    {
        self.submit(f, true).await
    }

    /// Runs `f` in the writer's next group; answers after the group
    /// commits to the WAL (process-crash safe, not power-loss safe).
    pub(crate) async fn write_relaxed<T, F>(&self, f: F) -> StoreResult<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> rusqlite::Result<T> + Send + 'static,
    {
        self.submit(f, false).await
    }

    async fn submit<T, F>(&self, f: F, durable: bool) -> StoreResult<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> rusqlite::Result<T> + Send + 'static,
    {
        let (tx, rx) = oneshot::channel::<StoreResult<T>>();
        let run: Run = Box::new(move |conn| {
            let result = f(conn);
            let ok = result.is_ok();
            let reply: Reply = Box::new(move |commit_err| {
                let answer = match commit_err {
                    Some(e) => Err(store_error(e)),
                    None => result.map_err(|e| store_error(&e)),
                };
                let _ = tx.send(answer);
            });
            (ok, reply)
        });
        self.inner
            .jobs
            .lock()
            .map_err(|_| backend("writer lock poisoned"))?
            .send(Job { run, durable })
            .map_err(|_| backend("the writer thread has stopped"))?;
        // The writer drops a job only when it could not start a
        // transaction (or a savepoint) for it: nothing ran.
        rx.await
            .map_err(|_| StoreError::unavailable("the writer could not start a transaction"))?
    }

    /// Runs `f` on this thread's read connection to the database. Reads
    /// are short indexed lookups, so they run in place rather than hopping
    /// to a blocking thread: the hop (two context switches per read) cost
    /// more than the read itself. WAL readers never wait for the writer.
    pub(crate) async fn read<T, F>(&self, f: F) -> StoreResult<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> rusqlite::Result<T> + Send + 'static,
    {
        READERS_BY_THREAD.with(|cell| {
            let mut map = cell.borrow_mut();
            if !map.contains_key(&self.inner.path) {
                let conn = open_conn(&self.inner.path).map_err(|e| store_error(&e))?;
                map.insert(self.inner.path.clone(), conn);
            }
            let conn = map
                .get(&self.inner.path)
                .ok_or_else(|| backend("no read connection"))?;
            f(conn).map_err(|e| store_error(&e))
        })
    }
}

thread_local! {
    /// One read connection per thread and database file.
    static READERS_BY_THREAD: std::cell::RefCell<std::collections::HashMap<PathBuf, Connection>> =
        std::cell::RefCell::new(std::collections::HashMap::new());
}

fn writer_loop(conn: Connection, rx: mpsc::Receiver<Job>) {
    let mut durable_now = true;
    while let Ok(first) = rx.recv() {
        let mut group = vec![first];
        while group.len() < GROUP_LIMIT {
            match rx.try_recv() {
                Ok(job) => group.push(job),
                Err(_) => break,
            }
        }
        let durable = group.iter().any(|j| j.durable);
        if durable != durable_now {
            let pragma = if durable {
                "PRAGMA synchronous=FULL"
            } else {
                "PRAGMA synchronous=NORMAL"
            };
            if cached(&conn, pragma).is_ok() {
                durable_now = durable;
            }
        }
        let replies = run_group(&conn, group);
        let commit_err = match cached(&conn, "COMMIT") {
            Ok(()) => None,
            Err(e) => {
                // A full disk or a failed write: SQLite may have rolled
                // back already; make sure, so the next group starts clean.
                tracing::error!(error = %Chain(&e), "a commit failed; its writes were rolled back");
                if let Err(rollback) = cached(&conn, "ROLLBACK") {
                    tracing::debug!(error = %rollback, "nothing left to roll back");
                }
                Some(e)
            }
        };
        for reply in replies {
            reply(commit_err.as_ref());
        }
    }
}

/// Runs one statement through the statement cache (no re-parse).
fn cached(conn: &Connection, sql: &str) -> rusqlite::Result<()> {
    conn.prepare_cached(sql)?.execute([]).map(|_| ())
}

/// Runs a group's jobs in one transaction, each in its own savepoint so a
/// failing job does not undo the others.
fn run_group(conn: &Connection, group: Vec<Job>) -> Vec<Reply> {
    let mut replies = Vec::with_capacity(group.len());
    if let Err(e) = cached(conn, "BEGIN IMMEDIATE") {
        // Nothing ran: dropping the jobs answers each caller with an error.
        tracing::error!(error = %Chain(&e), "the writer could not begin a transaction");
        return replies;
    }
    for job in group {
        if cached(conn, "SAVEPOINT job").is_err() {
            continue;
        }
        let (ok, reply) = (job.run)(conn);
        if !ok {
            if let Err(e) = cached(conn, "ROLLBACK TO job") {
                tracing::error!(error = %Chain(&e), "undoing a failed write failed");
            }
        }
        if let Err(e) = cached(conn, "RELEASE job") {
            tracing::error!(error = %Chain(&e), "releasing a write's savepoint failed");
        }
        replies.push(reply);
    }
    replies
}

pub(crate) use crate::record::{from_ms, ms};

/// A column that failed to parse back into a domain value.
/// The tenant in column `i` of a row.
pub(crate) fn tenant_at(
    r: &rusqlite::Row<'_>,
    i: usize,
) -> rusqlite::Result<crate::domain::TenantId> {
    crate::domain::TenantId::parse(&r.get::<_, String>(i)?).map_err(|_| corrupt("tenant"))
}

pub(crate) fn corrupt(what: &str) -> rusqlite::Error {
    rusqlite::Error::InvalidColumnName(format!("stored {what} does not parse"))
}

/// The rows of a list read that parse, each row given as its key and its
/// parse. A row that does not parse stays in the database, is reported
/// with its key ([`crate::record::unreadable`]) and is left out: one bad
/// record never fails a list. A failure to read at all still fails it.
pub(crate) fn readable<K: std::fmt::Display, T>(
    kind: &str,
    rows: impl Iterator<Item = rusqlite::Result<(K, rusqlite::Result<T>)>>,
) -> rusqlite::Result<Vec<T>> {
    let mut out = Vec::new();
    for row in rows {
        match row? {
            (_, Ok(value)) => out.push(value),
            (key, Err(e)) => crate::record::unreadable(kind, &key.to_string(), &e.to_string()),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests;
