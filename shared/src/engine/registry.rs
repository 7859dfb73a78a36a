//! What the API asks of the engine about subscriptions and what their
//! deliveries left behind: register, change, rotate the secret of and
//! unregister a subscription, and read subscriptions, attempts, dead
//! letters and an event's deliveries. The API goes through these, never
//! the ports, so each rule (the secret's rotation overlap, the stamp of a
//! change, the wake-up after an unregister) lives here once.

use time::OffsetDateTime;

use super::Engine;
use crate::domain::{
    Attempt, DeadLetter, DeliveryRecord, Event, EventId, Subscription, SubscriptionId, TenantId,
};
use crate::ports::StoreResult;
use crate::signing::Secret;

/// How long a rotated-out secret keeps signing beside the new one, so a
/// receiver can roll its own configuration over.
pub const ROTATION_OVERLAP: time::Duration = time::Duration::hours(24);

impl Engine {
    /// The engine's clock, read now.
    pub fn now(&self) -> OffsetDateTime {
        self.ports.clock.now()
    }

    /// Whether `raw` is a URL deliveries may go to under the egress
    /// settings, its host resolved now.
    pub async fn check_url(&self, raw: &str) -> Result<url::Url, crate::egress::EgressError> {
        crate::egress::check_url_resolved(raw, self.config.egress, self.ports.dns.as_ref()).await
    }

    /// A live subscription of `tenant`.
    pub async fn subscription(
        &self,
        tenant: &TenantId,
        id: &SubscriptionId,
    ) -> StoreResult<Option<Subscription>> {
        self.ports.subscriptions.get(tenant, id).await
    }

    /// A page of `tenant`'s live subscriptions, in id order after `after`.
    pub async fn subscriptions(
        &self,
        tenant: &TenantId,
        after: Option<&SubscriptionId>,
        limit: usize,
    ) -> StoreResult<Vec<Subscription>> {
        self.ports.subscriptions.list(tenant, after, limit).await
    }

    /// Registers a new subscription.
    pub async fn register(&self, sub: &Subscription) -> StoreResult<()> {
        self.ports.subscriptions.insert(sub).await
    }

    /// Saves a changed subscription, stamped with the time of the change:
    /// `false` when it is gone.
    pub async fn save(&self, sub: &mut Subscription) -> StoreResult<bool> {
        sub.updated_at = self.now();
        self.ports.subscriptions.update(sub).await
    }

    /// Rotates a subscription's secret: a fresh one signs from now on, and
    /// the one it replaces signs beside it for [`ROTATION_OVERLAP`].
    /// `false` when the subscription is gone.
    pub async fn rotate_secret(&self, sub: &mut Subscription) -> StoreResult<bool> {
        let now = self.now();
        sub.rotate_secret(Secret::generate(), now + ROTATION_OVERLAP);
        sub.updated_at = now;
        self.ports.subscriptions.update(sub).await
    }

    /// Unregisters a subscription: its queued deliveries are dropped (how
    /// many, counted), and its lanes are woken so a task waiting on a
    /// retry finds them empty. `None` when it is gone.
    pub async fn unregister(
        &self,
        tenant: &TenantId,
        id: &SubscriptionId,
    ) -> StoreResult<Option<u64>> {
        let Some(dropped) = self.ports.subscriptions.delete(tenant, id).await? else {
            return Ok(None);
        };
        self.metrics.dropped.inc_by(dropped);
        self.ports.wakeup.lanes(tenant, &[(id.clone(), None)]);
        Ok(Some(dropped))
    }

    /// A page of a subscription's attempt log, newest first, before `before`.
    pub async fn attempts(
        &self,
        sub: &Subscription,
        before: Option<i64>,
        limit: usize,
    ) -> StoreResult<Vec<(i64, Attempt)>> {
        self.ports
            .attempts
            .list(&sub.tenant, &sub.id, before, limit)
            .await
    }

    /// Reads `sub`'s attempt log newest first from `before`, in pages,
    /// handing each entry to `visit` until it answers `false`, the log
    /// ends, or `max` entries were read: what the routes that filter or
    /// search the log (and the statistics) read, bounded.
    pub async fn scan_attempts(
        &self,
        sub: &Subscription,
        mut before: Option<i64>,
        max: usize,
        mut visit: impl FnMut(i64, Attempt) -> bool + Send,
    ) -> StoreResult<Scanned> {
        let mut read = 0;
        loop {
            let page = self.attempts(sub, before, 250.min(max - read)).await?;
            let ended = page.len() < 250.min(max - read);
            for (seq, a) in page {
                read += 1;
                before = Some(seq);
                if !visit(seq, a) {
                    return Ok(Scanned {
                        last: before,
                        ended: false,
                        stopped: true,
                    });
                }
            }
            if ended || read >= max {
                return Ok(Scanned {
                    last: before,
                    ended,
                    stopped: false,
                });
            }
        }
    }

    /// A page of `tenant`'s parked deliveries (of one subscription, when
    /// given) after `after`.
    pub async fn dead_letters(
        &self,
        tenant: &TenantId,
        sub: Option<&SubscriptionId>,
        after: Option<i64>,
        limit: usize,
    ) -> StoreResult<Vec<(i64, DeadLetter)>> {
        self.ports
            .dead_letters
            .list(tenant, sub, after, limit)
            .await
    }

    /// A page of `tenant`'s archived events, newest first.
    pub async fn recent_events(
        &self,
        tenant: &TenantId,
        query: &crate::domain::RecentEvents,
    ) -> StoreResult<Vec<crate::domain::ArchivedEvent>> {
        self.ports.events.recent(tenant, query).await
    }

    /// An archived event (within the archive's 14 days).
    pub async fn event(&self, tenant: &TenantId, id: &EventId) -> StoreResult<Option<Event>> {
        self.ports.events.get(tenant, id).await
    }

    /// An archived event and the record of each of its deliveries.
    pub async fn event_and_deliveries(
        &self,
        tenant: &TenantId,
        id: &EventId,
    ) -> StoreResult<Option<(Event, Vec<(SubscriptionId, DeliveryRecord)>)>> {
        let Some(event) = self.ports.events.get(tenant, id).await? else {
            return Ok(None);
        };
        let deliveries = self.ports.views.of_event(tenant, id).await?;
        Ok(Some((event, deliveries)))
    }
}

/// How a [`Engine::scan_attempts`] ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Scanned {
    /// The sequence of the last entry read (where to read on from).
    pub last: Option<i64>,
    /// Whether the log ended.
    pub ended: bool,
    /// Whether the visitor stopped it.
    pub stopped: bool,
}
