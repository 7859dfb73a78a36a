//! The embedded runtime behind `hooklane serve`: the engine over the SQLite
//! adapter, a fan-out worker, and one lane task per subscription.
//!
//! Lanes ([`lanes`]): every subscription with pending deliveries has its
//! own task; a re-enabled one also has a backfill lane, fed at a bounded
//! rate by the backfill worker. All state lives in SQLite: on restart every
//! lane with pending rows is started again, and an attempt that was in
//! flight when the process died is due again when its lease runs out.

mod fan_out;
mod lanes;

use std::collections::HashSet;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{mpsc, Notify};
use tracing::{error, info, warn};

use crate::config::Config;
use crate::domain::{SubscriptionId, TenantId};
use crate::engine::{Engine, Outside, Ports};
use crate::ports::{NoNotifier, Wakeup};
use crate::sqlite::{Lane, SqliteStore};
use crate::telemetry::Chain;
use lanes::Lanes;

/// How long one backfill pass is: the engine queues what the rate allows
/// in it.
const BACKFILL_PASS: Duration = Duration::from_secs(1);
/// Pause after a storage error before a worker tries again.
pub(crate) const ERROR_PAUSE: Duration = Duration::from_millis(500);
/// How often expired rows are purged.
const PURGE_EVERY: Duration = Duration::from_secs(3600);
/// How long events, attempts and parked deliveries are kept.
pub const RETENTION: time::Duration = time::Duration::days(14);

/// Wake-ups from the engine to the embedded workers, over channels.
struct ChannelWakeup {
    at_hand: Arc<fan_out::AtHand>,
    fan_out: Arc<Notify>,
    backfill: Arc<Notify>,
    lanes: mpsc::UnboundedSender<(TenantId, SubscriptionId, Option<u16>)>,
}

impl Wakeup for ChannelWakeup {
    fn fan_out(&self, event: &crate::domain::Event) {
        self.at_hand.keep(event);
        self.fan_out.notify_one();
    }

    fn lanes(&self, tenant: &TenantId, lanes: &[(SubscriptionId, Option<u16>)]) {
        for (s, lane) in lanes {
            let _ = self.lanes.send((tenant.clone(), s.clone(), *lane));
        }
    }

    fn backfill(&self) {
        self.backfill.notify_one();
    }
}

/// A running embedded engine: the engine, its store, and its workers.
pub struct Embedded {
    /// The engine (the API calls it).
    pub engine: Arc<Engine>,
    /// The store behind every port.
    pub store: SqliteStore,
    lanes: Arc<Lanes>,
}

impl Embedded {
    /// Opens the database, builds the engine and starts the workers on the
    /// current Tokio runtime.
    pub async fn start(config: Config, db: &Path) -> anyhow::Result<Self> {
        Self::start_with(config, db, Outside::default()).await
    }

    /// [`Embedded::start`] with the given name resolution and clock.
    pub async fn start_with(config: Config, db: &Path, outside: Outside) -> anyhow::Result<Self> {
        let store = SqliteStore::open(db)?;
        let fan_out = Arc::new(Notify::new());
        let backfill = Arc::new(Notify::new());
        let (lane_tx, lane_rx) = mpsc::unbounded_channel();
        let at_hand = Arc::new(fan_out::AtHand::default());
        let wakeup = Arc::new(ChannelWakeup {
            at_hand: at_hand.clone(),
            fan_out: fan_out.clone(),
            backfill: backfill.clone(),
            lanes: lane_tx,
        });
        let ports = Ports::build(
            store.clone(),
            &config,
            outside,
            wakeup,
            Arc::new(NoNotifier),
        )?;
        let engine = Engine::new(ports, config);
        engine.ensure_operator_subscription().await?;
        let lanes = Lanes::new(engine.clone(), store.clone());
        for (tenant, sub, lane) in store.pending_lanes().await? {
            lanes.poke(tenant, sub, lane);
        }
        tokio::spawn(backfill_worker(lanes.clone(), store.clone(), backfill));
        tokio::spawn(dispatch(lanes.clone(), lane_rx));
        tokio::spawn(fan_out::worker(
            engine.clone(),
            store.clone(),
            at_hand,
            fan_out,
        ));
        tokio::spawn(purge_worker(store.clone()));
        Ok(Self {
            engine,
            store,
            lanes,
        })
    }

    /// Starts no delivery attempt from now on (the first step of a clean
    /// stop).
    pub fn stop_attempts(&self) {
        self.lanes.stop();
    }

    /// Waits until the attempts running have finished and recorded their
    /// outcome, for at most `grace`; how many were still running then.
    pub async fn wait_for_attempts(&self, grace: Duration) -> usize {
        let deadline = tokio::time::Instant::now() + grace;
        while self.lanes.running() > 0 && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        self.lanes.running()
    }
}

/// Routes lane wake-ups to lane tasks.
async fn dispatch(
    lanes: Arc<Lanes>,
    mut rx: mpsc::UnboundedReceiver<(TenantId, SubscriptionId, Option<u16>)>,
) {
    while let Some((tenant, sub, lane)) = rx.recv().await {
        match lane {
            Some(n) => lanes.poke(tenant, sub, Lane::Live(n)),
            None => lanes.poke_all(&sub),
        }
    }
}

/// Runs every backfill in progress, each paced at the configured rate
/// (ramping up from a quarter of it), feeding its subscription's backfill
/// lane one delivery at a time.
async fn backfill_worker(lanes: Arc<Lanes>, store: SqliteStore, wake: Arc<Notify>) {
    let running: Arc<Mutex<HashSet<SubscriptionId>>> = Default::default();
    loop {
        match store.backfill_jobs().await {
            Ok(jobs) => {
                for job in jobs {
                    let fresh = running
                        .lock()
                        .is_ok_and(|mut r| r.insert(job.subscription_id.clone()));
                    if fresh {
                        tokio::spawn(run_backfill(lanes.clone(), job, running.clone()));
                    }
                }
            }
            Err(e) => error!(error = %Chain(&e), "reading backfill jobs failed"),
        }
        let _ = tokio::time::timeout(Duration::from_secs(5), wake.notified()).await;
    }
}

/// Runs one backfill's passes, a second apart, poking its backfill lane
/// after each pass that queued something, until the engine says it is
/// over.
async fn run_backfill(
    lanes: Arc<Lanes>,
    job: crate::domain::BackfillJob,
    running: Arc<Mutex<HashSet<SubscriptionId>>>,
) {
    let (tenant, sub) = (job.tenant, job.subscription_id);
    loop {
        match lanes
            .engine()
            .backfill_pass(&tenant, &sub, BACKFILL_PASS)
            .await
        {
            Ok(pass) => {
                if pass.queued > 0 {
                    lanes.poke(tenant.clone(), sub.clone(), Lane::Backfill);
                }
                match pass.again_in {
                    Some(wait) => tokio::time::sleep(wait).await,
                    None => break,
                }
            }
            Err(e) => {
                error!(error = %Chain(&e), "backfill pass failed");
                tokio::time::sleep(ERROR_PAUSE).await;
            }
        }
    }
    if let Ok(mut r) = running.lock() {
        r.remove(&sub);
    }
}

async fn purge_worker(store: SqliteStore) {
    loop {
        match store
            .purge_expired(time::OffsetDateTime::now_utc(), RETENTION)
            .await
        {
            Ok(n) if n > 0 => info!(rows = n, "purged expired rows"),
            Ok(_) => {}
            Err(e) => warn!(error = %Chain(&e), "purge failed"),
        }
        tokio::time::sleep(PURGE_EVERY).await;
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
    serve_with(listener, config, db, Outside::default(), shutdown).await
}

/// [`serve`] with the given name resolution and clock (tests).
pub async fn serve_with(
    listener: tokio::net::TcpListener,
    config: Config,
    db: &Path,
    outside: Outside,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let token: Arc<str> = match &config.api_token {
        Some(t) => t.as_str().into(),
        None => anyhow::bail!("an API token is required"),
    };
    let (timeouts, grace) = (config.read_timeouts, config.shutdown_grace);
    let embedded = Embedded::start_with(config, db, outside).await?;
    let app = crate::api::router(crate::api::AppState {
        engine: embedded.engine.clone(),
        auth: crate::api::Auth::Token(token),
    });
    info!(addr = %listener.local_addr()?, "hooklane serving");
    // A clean stop: on the signal no attempt starts, the API stops
    // accepting and lets requests in progress finish, and the attempts
    // running finish and record their outcome, all within the grace from
    // the signal. Queued deliveries wait in the database for the next
    // start; an attempt still running at the end of the grace keeps its
    // lease, and is made again (with the next number) once that ends.
    let lanes = embedded.lanes.clone();
    let stop = async move {
        shutdown.await;
        lanes.stop();
        info!("stopping: no new attempts; requests and attempts in progress finish");
    };
    let stopped = crate::api::serve::serve(listener, app, (timeouts, grace), stop).await?;
    match embedded
        .wait_for_attempts(grace.saturating_sub(stopped.elapsed()))
        .await
    {
        0 => info!("stopped: every attempt in progress finished"),
        n => warn!(
            running = n,
            "stopped at the end of the grace with attempts still running; they are attempted again after the next start, once their leases end"
        ),
    }
    Ok(())
}
