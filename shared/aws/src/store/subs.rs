//! The subscription store on AWS as an object of its own: the table and
//! the caches its reads of subscription items note into, which the lane
//! queue shares (each read of an item notes its lanes' spill flags, its
//! placement and slow lanes, so the lane writes right after need no read
//! of their own). Its port is in [`super::subscriptions`], the type index
//! it reads through in [`super::type_index`].

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hooklane_core::domain::TenantId;

use super::lane_flags::LaneFlags;
use super::placements::Placements;
use super::type_index_known::TypeIndexes;
use super::Table;

/// The subscription store: cheap to clone, clones share the caches.
#[derive(Clone, Debug)]
pub struct AwsSubscriptions {
    pub(crate) table: Table,
    /// Lane spill flags as last read.
    pub(crate) lane_flags: Arc<LaneFlags>,
    /// Lane placements as last read.
    pub(crate) placements: Arc<Placements>,
    /// Tenants' lane counts as last read.
    pub(crate) tenant_lanes: Arc<TenantLanes>,
    /// Tenants whose fan-out reads through the type index.
    pub(crate) type_indexes: Arc<TypeIndexes>,
}

impl AwsSubscriptions {
    /// A store over `table` with empty caches.
    pub(crate) fn over(table: Table) -> Self {
        Self {
            table,
            lane_flags: Default::default(),
            placements: Default::default(),
            tenant_lanes: Default::default(),
            type_indexes: Default::default(),
        }
    }
}

impl std::ops::Deref for AwsSubscriptions {
    type Target = Table;

    fn deref(&self) -> &Table {
        &self.table
    }
}

/// How long a tenant's lane count is taken as read.
pub(crate) const FRESH: Duration = Duration::from_secs(10);

/// Tenants' lane counts as last read (shared by clones).
#[derive(Debug, Default)]
pub(crate) struct TenantLanes {
    noted: Mutex<HashMap<TenantId, (Instant, i64)>>,
    /// A lock per tenant being counted whole, so that a process's
    /// concurrent deliveries of a tenant never counted read its
    /// subscriptions once, not once each.
    seeding: Mutex<HashMap<TenantId, std::sync::Arc<tokio::sync::Mutex<()>>>>,
}

/// How many tenants' counts are kept before the map starts over.
const KEEP: usize = 10_000;

impl TenantLanes {
    pub(crate) fn fresh(&self, tenant: &TenantId) -> Option<i64> {
        let map = self.noted.lock().ok()?;
        map.get(tenant)
            .filter(|(at, _)| at.elapsed() < FRESH)
            .map(|(_, n)| *n)
    }

    pub(crate) fn note(&self, tenant: &TenantId, lanes: i64) {
        if let Ok(mut map) = self.noted.lock() {
            if map.len() >= KEEP && !map.contains_key(tenant) {
                map.clear();
            }
            map.insert(tenant.clone(), (Instant::now(), lanes));
        }
    }

    /// The lock that counting `tenant` whole takes.
    pub(crate) fn seeding(&self, tenant: &TenantId) -> std::sync::Arc<tokio::sync::Mutex<()>> {
        let mut map = self.seeding.lock().expect("seeding lock");
        if map.len() >= KEEP && !map.contains_key(tenant) {
            map.retain(|_, lock| std::sync::Arc::strong_count(lock) > 1);
        }
        map.entry(tenant.clone()).or_default().clone()
    }

    /// Forgets a tenant's count (this process changed it).
    pub(crate) fn forget(&self, tenant: &TenantId) {
        if let Ok(mut map) = self.noted.lock() {
            map.remove(tenant);
        }
    }
}
