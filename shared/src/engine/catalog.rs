//! The event-type catalog a tenant reads (`GET …/event-types`, the
//! portal's type fields): every type an operator registered for it, with
//! its description and example, merged with the exact types its
//! subscriptions name and the types of its recent events (test events
//! aside). Bounded in cost:
//! at most [`SUBSCRIPTIONS_READ`] subscriptions and the latest
//! [`EVENTS_READ`] events of the last 7 days are read.

use std::collections::BTreeMap;

use time::{Duration, OffsetDateTime};

use super::Engine;
use crate::domain::{EventType, EventTypeInfo, RecentEvents, SubscriptionId, TenantId};
use crate::ports::StoreResult;

/// The most subscriptions one catalog read lists.
pub const SUBSCRIPTIONS_READ: usize = 1_000;
/// The most recent events one catalog read looks at.
pub const EVENTS_READ: usize = 500;

/// One type of a tenant's catalog.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CatalogEntry {
    /// The type.
    pub name: EventType,
    /// What an operator registered of it.
    pub registered: Option<EventTypeInfo>,
    /// Subscriptions that name it exactly (patterns aside).
    pub subscriptions: usize,
    /// When its latest event among those read was accepted.
    pub last_seen: Option<OffsetDateTime>,
}

/// The entry of `name` in `catalog`, made when missing.
fn entry<'a>(
    catalog: &'a mut BTreeMap<String, CatalogEntry>,
    name: &EventType,
) -> &'a mut CatalogEntry {
    catalog
        .entry(name.as_str().to_owned())
        .or_insert_with(|| CatalogEntry {
            name: name.clone(),
            registered: None,
            subscriptions: 0,
            last_seen: None,
        })
}

impl Engine {
    /// `tenant`'s catalog, by name.
    pub async fn event_type_catalog(&self, tenant: &TenantId) -> StoreResult<Vec<CatalogEntry>> {
        let mut catalog = BTreeMap::new();
        for info in self.ports.access.event_types(tenant).await? {
            let name = info.name.clone();
            entry(&mut catalog, &name).registered = Some(info);
        }
        let mut after: Option<SubscriptionId> = None;
        let mut read = 0;
        while read < SUBSCRIPTIONS_READ {
            let page = self.subscriptions(tenant, after.as_ref(), 250).await?;
            read += page.len();
            for sub in &page {
                for name in sub
                    .filters
                    .iter()
                    .filter_map(|f| EventType::parse(f.as_str()).ok())
                {
                    entry(&mut catalog, &name).subscriptions += 1;
                }
            }
            match page.last() {
                Some(last) if page.len() == 250 => after = Some(last.id.clone()),
                _ => break,
            }
        }
        let now = self.ports.clock.now();
        let recent = RecentEvents {
            event_type: None,
            since: now - Duration::WEEK,
            until: now,
            before: None,
            limit: EVENTS_READ,
        };
        // Test events (one subscription's) say nothing of what is sent.
        let events = self.recent_events(tenant, &recent).await?;
        for event in events.iter().filter(|e| e.only_for.is_none()) {
            let e = entry(&mut catalog, &event.event_type);
            e.last_seen = e.last_seen.max(Some(event.created_at));
        }
        Ok(catalog.into_values().collect())
    }

    /// Registers `info` in its tenant's catalog.
    pub async fn register_event_type(&self, info: &EventTypeInfo) -> StoreResult<()> {
        self.ports.access.put_event_type(info).await
    }

    /// Removes a registration; `false` when there was none.
    pub async fn unregister_event_type(
        &self,
        tenant: &TenantId,
        name: &EventType,
    ) -> StoreResult<bool> {
        self.ports.access.delete_event_type(tenant, name).await
    }
}
