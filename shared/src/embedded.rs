//! The embedded runtime behind `hooklane serve`: the engine over the SQLite
//! adapter, a fan-out worker, and one lane task per subscription.
//!
//! Lanes: every subscription with pending deliveries has its own task that
//! attempts its oldest pending delivery, waits for its retry time, and
//! moves on; lanes share nothing but a per-tenant semaphore, so a
//! subscription whose receiver hangs delays no other subscription (G2, G5).
//! A lane task exits when its lane is empty and is started again by the
//! next wake-up. All state lives in SQLite: on restart every lane with
//! pending rows is started again, and an attempt that was in flight when
//! the process died is due again when its lease runs out.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{mpsc, Notify, Semaphore};
use tracing::{error, info, warn};

use crate::config::Config;
use crate::domain::{SubscriptionId, TenantId};
use crate::engine::{Engine, Ports, Step};
use crate::ports::{StoreResult, SystemClock, Wakeup};
use crate::sender::HttpSender;
use crate::sqlite::SqliteStore;

/// How many fan-out jobs the worker takes at a time.
const FAN_OUT_BATCH: usize = 64;
/// Pause after a storage error before a worker tries again.
const ERROR_PAUSE: Duration = Duration::from_millis(500);
/// How often expired rows are purged.
const PURGE_EVERY: Duration = Duration::from_secs(3600);
/// How long events, attempts and parked deliveries are kept.
pub const RETENTION: time::Duration = time::Duration::days(14);

/// Wake-ups from the engine to the embedded workers, over channels.
struct ChannelWakeup {
    fan_out: Arc<Notify>,
    lanes: mpsc::UnboundedSender<(TenantId, SubscriptionId)>,
}

impl Wakeup for ChannelWakeup {
    fn fan_out(&self) {
        self.fan_out.notify_one();
    }

    fn lanes(&self, tenant: &TenantId, subscriptions: &[SubscriptionId]) {
        for s in subscriptions {
            let _ = self.lanes.send((tenant.clone(), s.clone()));
        }
    }
}

/// A running embedded engine: the engine, its store, and its workers.
pub struct Embedded {
    /// The engine (the API calls it).
    pub engine: Arc<Engine>,
    /// The store behind every port.
    pub store: SqliteStore,
}

/// A lane's registration: `generation` moves on every wake-up, so a lane
/// that found its queue empty exits only if nothing arrived meanwhile.
struct LaneEntry {
    generation: u64,
    wake: Arc<Notify>,
}

struct Lanes {
    engine: Arc<Engine>,
    store: SqliteStore,
    lanes: Mutex<HashMap<SubscriptionId, LaneEntry>>,
    tenants: Mutex<HashMap<TenantId, Arc<Semaphore>>>,
}

impl Embedded {
    /// Opens the database, builds the engine and starts the workers on the
    /// current Tokio runtime.
    pub async fn start(config: Config, db: &Path) -> anyhow::Result<Self> {
        let store = SqliteStore::open(db)?;
        let sender = HttpSender::new(config.egress, config.attempt_timeout)?;
        let fan_out = Arc::new(Notify::new());
        let (lane_tx, lane_rx) = mpsc::unbounded_channel();
        let ports = Ports {
            subscriptions: Arc::new(store.clone()),
            events: Arc::new(store.clone()),
            queue: Arc::new(store.clone()),
            attempts: Arc::new(store.clone()),
            clock: Arc::new(SystemClock),
            sender: Arc::new(sender),
            wakeup: Arc::new(ChannelWakeup {
                fan_out: fan_out.clone(),
                lanes: lane_tx,
            }),
        };
        let engine = Engine::new(ports, config);
        let lanes = Arc::new(Lanes {
            engine: engine.clone(),
            store: store.clone(),
            lanes: Mutex::new(HashMap::new()),
            tenants: Mutex::new(HashMap::new()),
        });
        for (tenant, sub) in store.pending_lanes().await? {
            lanes.poke(tenant, sub);
        }
        tokio::spawn(dispatch(lanes, lane_rx));
        tokio::spawn(fan_out_worker(engine.clone(), store.clone(), fan_out));
        tokio::spawn(purge_worker(store.clone()));
        Ok(Self { engine, store })
    }
}

/// Routes lane wake-ups to lane tasks.
async fn dispatch(lanes: Arc<Lanes>, mut rx: mpsc::UnboundedReceiver<(TenantId, SubscriptionId)>) {
    while let Some((tenant, sub)) = rx.recv().await {
        lanes.poke(tenant, sub);
    }
}

/// Drains fan-out jobs in acceptance order, so each lane's deliveries are
/// enqueued in the order their events were accepted (G5).
async fn fan_out_worker(engine: Arc<Engine>, store: SqliteStore, wake: Arc<Notify>) {
    loop {
        let jobs = match store.pending_fan_outs(FAN_OUT_BATCH).await {
            Ok(jobs) => jobs,
            Err(e) => {
                error!(error = %e, "reading fan-out jobs failed");
                tokio::time::sleep(ERROR_PAUSE).await;
                continue;
            }
        };
        if jobs.is_empty() {
            // The timeout is a safety net only: every accept wakes us.
            let _ = tokio::time::timeout(Duration::from_secs(5), wake.notified()).await;
            continue;
        }
        if let Err(e) = fan_out_jobs(&engine, &store, jobs).await {
            error!(error = %e, "fan-out failed; will retry");
            tokio::time::sleep(ERROR_PAUSE).await;
        }
    }
}

async fn fan_out_jobs(
    engine: &Engine,
    store: &SqliteStore,
    jobs: Vec<(i64, crate::domain::Event)>,
) -> StoreResult<()> {
    let mut done = Vec::with_capacity(jobs.len());
    for (seq, event) in jobs {
        let n = engine.fan_out(&event).await?;
        info!(
            tenant = event.tenant.as_str(),
            event_id = event.id.as_str(),
            deliveries = n,
            "fanned out"
        );
        done.push(seq);
    }
    store.complete_fan_outs(done).await
}

async fn purge_worker(store: SqliteStore) {
    loop {
        match store
            .purge_expired(time::OffsetDateTime::now_utc(), RETENTION)
            .await
        {
            Ok(n) if n > 0 => info!(rows = n, "purged expired rows"),
            Ok(_) => {}
            Err(e) => warn!(error = %e, "purge failed"),
        }
        tokio::time::sleep(PURGE_EVERY).await;
    }
}

impl Lanes {
    /// Wakes the subscription's lane, starting it if it is not running.
    fn poke(self: &Arc<Self>, tenant: TenantId, sub: SubscriptionId) {
        let Ok(mut map) = self.lanes.lock() else {
            return;
        };
        if let Some(entry) = map.get_mut(&sub) {
            entry.generation += 1;
            entry.wake.notify_one();
            return;
        }
        let wake = Arc::new(Notify::new());
        map.insert(
            sub.clone(),
            LaneEntry {
                generation: 0,
                wake: wake.clone(),
            },
        );
        tokio::spawn(self.clone().run_lane(tenant, sub, wake));
    }

    fn tenant_permits(&self, tenant: &TenantId) -> Arc<Semaphore> {
        let limit = self.engine.config.tenant_max_in_flight;
        match self.tenants.lock() {
            Ok(mut map) => map
                .entry(tenant.clone())
                .or_insert_with(|| Arc::new(Semaphore::new(limit)))
                .clone(),
            Err(_) => Arc::new(Semaphore::new(limit)),
        }
    }

    fn generation(&self, sub: &SubscriptionId) -> u64 {
        self.lanes
            .lock()
            .ok()
            .and_then(|m| m.get(sub).map(|e| e.generation))
            .unwrap_or(0)
    }

    /// Removes the lane unless it was woken since `seen` (or always, when
    /// `seen` is `None`); `true` when removed.
    fn retire(&self, sub: &SubscriptionId, seen: Option<u64>) -> bool {
        let Ok(mut map) = self.lanes.lock() else {
            return true;
        };
        let current = map.get(sub).map(|e| e.generation);
        if seen.is_none() || current == seen {
            map.remove(sub);
            return true;
        }
        false
    }

    /// One lane: attempt the head, wait for its retry time, repeat.
    async fn run_lane(self: Arc<Self>, tenant: TenantId, sub: SubscriptionId, wake: Arc<Notify>) {
        let permits = self.tenant_permits(&tenant);
        loop {
            let seen = self.generation(&sub);
            let head = match self.store.lane_head(&sub).await {
                Ok(h) => h,
                Err(e) => {
                    error!(subscription_id = sub.as_str(), error = %e, "reading lane failed");
                    tokio::time::sleep(ERROR_PAUSE).await;
                    continue;
                }
            };
            let Some(d) = head else {
                if self.retire(&sub, Some(seen)) {
                    return;
                }
                continue;
            };
            let now = self.engine.ports.clock.now();
            if d.next_attempt_at > now {
                let wait: Duration = (d.next_attempt_at - now).try_into().unwrap_or_default();
                tokio::select! {
                    _ = tokio::time::sleep(wait) => {}
                    _ = wake.notified() => {}
                }
                continue;
            }
            let Ok(permit) = permits.clone().acquire_owned().await else {
                return;
            };
            let step = self.engine.deliver(&d).await;
            drop(permit);
            match step {
                Ok(Step::Skipped) => {
                    // Not attemptable now (suspended, or taken): the lane
                    // restarts on its next wake-up.
                    self.retire(&sub, None);
                    return;
                }
                Ok(_) => {}
                Err(e) => {
                    error!(subscription_id = sub.as_str(), error = %e, "delivery step failed");
                    tokio::time::sleep(ERROR_PAUSE).await;
                }
            }
        }
    }
}

/// Serves the API on `listener` over an embedded engine at `db` until
/// `shutdown` resolves. Tests call it on port 0.
pub async fn serve(
    listener: tokio::net::TcpListener,
    config: Config,
    db: &Path,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let token: Arc<str> = match &config.api_token {
        Some(t) => t.as_str().into(),
        None => anyhow::bail!("an API token is required"),
    };
    let embedded = Embedded::start(config, db).await?;
    let app = crate::api::router(crate::api::AppState {
        engine: embedded.engine.clone(),
        auth: crate::api::Auth::Token(token),
    });
    info!(addr = %listener.local_addr()?, "hooklane serving");
    axum::serve(listener, app)
        .with_graceful_shutdown(shutdown)
        .await?;
    Ok(())
}
