//! What this process knows of tenants' type indexes ([`super::type_index`]):
//! which tenants' indexes are complete and how wide they were, which
//! failed to index lately, when the process started (it waits before it
//! indexes), and how many subscription items fan-out has read.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Instant;

use hooklane_core::domain::TenantId;

/// How long after a failed indexing of a tenant this process tries again.
const RETRY_AFTER: std::time::Duration = std::time::Duration::from_secs(600);

/// What this process knows of tenants' indexes (shared by clones).
#[derive(Debug)]
pub(crate) struct TypeIndexes {
    /// Tenants whose index is complete (the marker seen or written), with
    /// their live subscriptions as last counted.
    complete: Mutex<HashMap<TenantId, usize>>,
    /// When this process started.
    pub(super) started: Instant,
    /// Tenants whose indexing failed, and when.
    failed: Mutex<HashMap<TenantId, Instant>>,
    /// Subscription items fan-out has read, both ways.
    read: std::sync::atomic::AtomicU64,
}

impl Default for TypeIndexes {
    fn default() -> Self {
        Self {
            complete: Mutex::default(),
            started: Instant::now(),
            failed: Mutex::default(),
            read: Default::default(),
        }
    }
}

impl TypeIndexes {
    pub(super) fn wide(&self, tenant: &TenantId) -> Option<usize> {
        self.complete
            .lock()
            .expect("type index lock")
            .get(tenant)
            .copied()
    }

    pub(super) fn mark_complete(&self, tenant: &TenantId, size: usize) {
        self.complete
            .lock()
            .expect("type index lock")
            .insert(tenant.clone(), size);
    }

    pub(super) fn failed(&self, tenant: &TenantId) {
        let mut failed = self.failed.lock().expect("type index lock");
        if failed.len() >= 10_000 {
            failed.clear();
        }
        failed.insert(tenant.clone(), Instant::now());
    }

    pub(super) fn may_try(&self, tenant: &TenantId) -> bool {
        self.failed
            .lock()
            .expect("type index lock")
            .get(tenant)
            .is_none_or(|at| at.elapsed() >= RETRY_AFTER)
    }

    /// Subscription items fan-out has read so far.
    pub(crate) fn read_so_far(&self) -> u64 {
        self.read.load(std::sync::atomic::Ordering::Relaxed)
    }

    pub(crate) fn count_read(&self, n: usize) {
        self.read
            .fetch_add(n as u64, std::sync::atomic::Ordering::Relaxed);
    }
}
