//! Attempts in flight per tenant in this process, counted by the engine
//! itself from the moment a request goes out to the moment its answer (or
//! the attempt timeout) is in: the side of G3 a receiver cannot see
//! exactly, because it notices a closed connection a moment late.
//! [`peak`], the most one tenant had open at once, is served by
//! `GET /metrics` as `hooklane_tenant_attempts_in_flight_peak`. It is per
//! process: one `hooklane serve` (both AWS delivery pools included), or
//! one Lambda instance.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{LazyLock, Mutex, MutexGuard};

use crate::domain::TenantId;

/// Per tenant: requests open now, and the most open at once.
static OPEN: LazyLock<Mutex<HashMap<TenantId, (usize, usize)>>> = LazyLock::new(Default::default);

/// How many tenants are kept before those with nothing open are let go
/// (their peaks with them; [`peak`] keeps the overall one).
const KEEP: usize = 10_000;

/// The most requests one tenant has had open at once.
static PEAK: AtomicUsize = AtomicUsize::new(0);

fn lock() -> MutexGuard<'static, HashMap<TenantId, (usize, usize)>> {
    OPEN.lock().unwrap_or_else(|e| e.into_inner())
}

/// One request open for a tenant; dropping it (the answer is in, or the
/// attempt was abandoned) counts it out.
#[derive(Debug)]
pub(crate) struct Open(TenantId);

/// Counts a request of `tenant` in.
pub(crate) fn open(tenant: &TenantId) -> Open {
    let mut map = lock();
    if map.len() >= KEEP && !map.contains_key(tenant) {
        map.retain(|_, (open, _)| *open > 0);
    }
    let (open, peak) = map.entry(tenant.clone()).or_default();
    *open += 1;
    *peak = (*peak).max(*open);
    PEAK.fetch_max(*open, Ordering::Relaxed);
    Open(tenant.clone())
}

impl Drop for Open {
    fn drop(&mut self) {
        if let Some((open, _)) = lock().get_mut(&self.0) {
            *open = open.saturating_sub(1);
        }
    }
}

/// Requests open now in this process, all tenants together.
pub fn open_total() -> usize {
    lock().values().map(|(open, _)| open).sum()
}

/// The most requests one tenant has had open at once in this process.
pub fn peak() -> usize {
    PEAK.load(Ordering::Relaxed)
}

/// The most requests `tenant` has had open at once in this process.
pub fn peak_of(tenant: &TenantId) -> usize {
    lock().get(tenant).map_or(0, |(_, peak)| *peak)
}

/// Requests `tenant` has open now in this process.
pub fn open_now(tenant: &TenantId) -> usize {
    lock().get(tenant).map_or(0, |(open, _)| *open)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_a_tenants_open_requests_and_keeps_its_peak() {
        // A tenant of this test's own: other tests may count theirs in the
        // same process at the same time.
        let t = TenantId::parse("in-flight-test").unwrap();
        let a = open(&t);
        let b = open(&t);
        let c = open(&t);
        assert_eq!(open_now(&t), 3);
        drop(b);
        let d = open(&t);
        assert_eq!(open_now(&t), 3);
        assert_eq!(peak_of(&t), 3);
        drop((a, c, d));
        assert_eq!(open_now(&t), 0);
        assert_eq!(peak_of(&t), 3, "the peak stays");
        assert!(peak() >= 3);
    }
}
