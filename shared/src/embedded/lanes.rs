//! Lanes of the embedded runtime: one task per (subscription, lane) with
//! pending deliveries. A lane attempts its oldest pending delivery, waits
//! for its retry time (or its open breaker), and moves on; lanes share
//! nothing but a per-tenant semaphore, so a subscription whose receiver
//! hangs delays no other subscription (G2, G5). A lane task exits when its
//! lane is empty and is started again by the next wake-up.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{Notify, Semaphore};
use tracing::error;

use super::ERROR_PAUSE;
use crate::domain::{SubscriptionId, TenantId};
use crate::engine::{Engine, Step};
use crate::sqlite::{Lane, SqliteStore};
use crate::telemetry::Chain;

type Key = (SubscriptionId, Lane);

/// How often a lane whose head waits for its key's older delivery on
/// another lane looks again.
const KEY_WAIT: Duration = Duration::from_millis(100);

/// A lane's registration: `generation` moves on every wake-up, so a lane
/// that found its queue empty exits only if nothing arrived meanwhile.
struct Entry {
    generation: u64,
    wake: Arc<Notify>,
}

/// Every running lane, and the per-tenant bound on attempts in flight.
pub(super) struct Lanes {
    engine: Arc<Engine>,
    store: SqliteStore,
    lanes: Mutex<HashMap<Key, Entry>>,
    tenants: Mutex<HashMap<TenantId, Arc<Semaphore>>>,
    /// Set when the runtime stops: no attempt starts from then on.
    stopping: AtomicBool,
    /// Attempts running now.
    running: AtomicUsize,
}

/// Counts one attempt as running while it lives.
struct Running<'a>(&'a AtomicUsize);

impl<'a> Running<'a> {
    fn start(count: &'a AtomicUsize) -> Self {
        count.fetch_add(1, Ordering::SeqCst);
        Self(count)
    }
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Lanes {
    /// No lanes yet.
    pub(super) fn new(engine: Arc<Engine>, store: SqliteStore) -> Arc<Self> {
        Arc::new(Self {
            engine,
            store,
            lanes: Mutex::new(HashMap::new()),
            tenants: Mutex::new(HashMap::new()),
            stopping: AtomicBool::new(false),
            running: AtomicUsize::new(0),
        })
    }

    /// Starts no attempt from now on; those running finish and record
    /// their outcome. What is still queued stays in the database for the
    /// next start.
    pub(super) fn stop(&self) {
        self.stopping.store(true, Ordering::SeqCst);
    }

    /// Attempts running now.
    pub(super) fn running(&self) -> usize {
        self.running.load(Ordering::SeqCst)
    }

    /// The engine the lanes run.
    pub(super) fn engine(&self) -> &Engine {
        &self.engine
    }

    /// Wakes a lane, starting it if it is not running.
    pub(super) fn poke(self: &Arc<Self>, tenant: TenantId, sub: SubscriptionId, lane: Lane) {
        if self.stopping.load(Ordering::SeqCst) {
            return;
        }
        let Ok(mut map) = self.lanes.lock() else {
            return;
        };
        let key = (sub, lane);
        if let Some(entry) = map.get_mut(&key) {
            entry.generation += 1;
            entry.wake.notify_one();
            return;
        }
        let wake = Arc::new(Notify::new());
        map.insert(
            key.clone(),
            Entry {
                generation: 0,
                wake: wake.clone(),
            },
        );
        self.engine.metrics.lanes_running(map.len());
        tokio::spawn(self.clone().run(tenant, key, wake));
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

    fn generation(&self, key: &Key) -> u64 {
        self.lanes
            .lock()
            .ok()
            .and_then(|m| m.get(key).map(|e| e.generation))
            .unwrap_or(0)
    }

    /// Wakes every running lane of a subscription (it was deleted: a lane
    /// waiting on a retry finds itself empty).
    pub(super) fn poke_all(&self, sub: &SubscriptionId) {
        let Ok(mut map) = self.lanes.lock() else {
            return;
        };
        for ((s, _), entry) in map.iter_mut() {
            if s == sub {
                entry.generation += 1;
                entry.wake.notify_one();
            }
        }
    }

    /// Removes the lane unless it was woken since `seen` (or always, when
    /// `seen` is `None`); `true` when removed.
    fn retire(&self, key: &Key, seen: Option<u64>) -> bool {
        let Ok(mut map) = self.lanes.lock() else {
            return true;
        };
        let current = map.get(key).map(|e| e.generation);
        if seen.is_none() || current == seen {
            map.remove(key);
            self.engine.metrics.lanes_running(map.len());
            return true;
        }
        false
    }

    /// One lane: attempt the head, wait for its due time, repeat.
    async fn run(self: Arc<Self>, tenant: TenantId, key: Key, wake: Arc<Notify>) {
        let permits = self.tenant_permits(&tenant);
        loop {
            let seen = self.generation(&key);
            let head = match self.store.lane_head_with_event(&key.0, key.1).await {
                Ok(h) => h,
                Err(e) => {
                    error!(subscription_id = key.0.as_str(), error = %Chain(&e), "reading lane failed");
                    tokio::time::sleep(ERROR_PAUSE).await;
                    continue;
                }
            };
            let Some((d, event, waits)) = head else {
                if self.retire(&key, Some(seen)) {
                    return;
                }
                continue;
            };
            if waits {
                // An older delivery of its key is still pending on another
                // lane (the lanes changed): look again shortly.
                drop(event);
                tokio::select! {
                    _ = tokio::time::sleep(KEY_WAIT) => {}
                    _ = wake.notified() => {}
                }
                continue;
            }
            let now = self.engine.ports.clock.now();
            if d.next_attempt_at > now {
                // Not held while waiting (hours, on a failing lane): the
                // head is read again when it is due.
                drop(event);
                let wait: Duration = (d.next_attempt_at - now).try_into().unwrap_or_default();
                tokio::select! {
                    _ = tokio::time::sleep(wait) => {}
                    _ = wake.notified() => {}
                }
                continue;
            }
            if !self.attempt(&key, &d, event, &permits).await {
                return;
            }
        }
    }

    /// Attempts a due head under a tenant permit; `false` when the lane
    /// should stop (the delivery is taken elsewhere, or the runtime is
    /// going away).
    async fn attempt(
        &self,
        key: &Key,
        d: &crate::domain::Delivery,
        event: Option<crate::domain::Event>,
        permits: &Arc<Semaphore>,
    ) -> bool {
        // The event is not held while waiting for a permit; the engine
        // reads it then.
        let (permit, event) = match permits.clone().try_acquire_owned() {
            Ok(permit) => (permit, event),
            Err(_) => {
                drop(event);
                let Ok(permit) = permits.clone().acquire_owned().await else {
                    return false;
                };
                (permit, None)
            }
        };
        // Counted as running before the flag is read: a stop that sees no
        // attempt running knows none is about to start.
        let running = Running::start(&self.running);
        if self.stopping.load(Ordering::SeqCst) {
            drop(running);
            self.retire(key, None);
            return false;
        }
        let step = self.engine.deliver(d, event).await;
        drop(running);
        drop(permit);
        match step {
            Ok(Step::Skipped) => {
                // Not attemptable now (taken elsewhere): the lane
                // restarts on its next wake-up.
                self.retire(key, None);
                false
            }
            Ok(_) => true,
            Err(e) => {
                error!(subscription_id = key.0.as_str(), error = %Chain(&e), "delivery step failed");
                tokio::time::sleep(ERROR_PAUSE).await;
                true
            }
        }
    }
}
