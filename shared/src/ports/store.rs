//! The store ports, one per capability, that deliveries pass through:
//! subscriptions and their suspension, the event archive, and the lanes
//! deliveries wait in (the ports that read what they left behind are in
//! [`super::records`]). Each adapter implements all of them over one
//! store.

use std::sync::Arc;

use async_trait::async_trait;
use time::OffsetDateTime;

use super::turn::{Finish, Finished};
use super::StoreResult;
use crate::domain::Health;
use crate::domain::{
    fnv1a64, lane_of, ArchivePosition, ArchivedEvent, Delivery, Event, EventId, EventType,
    LaneCount, OrderingKey, RecentEvents, Retake, Subscription, SubscriptionId, TenantId,
};
use crate::health::StatusChange;

/// Subscriptions, with tombstones: a deleted subscription is never
/// returned again.
#[async_trait]
pub trait SubscriptionStore: Send + Sync {
    /// Stores a new subscription.
    async fn insert(&self, sub: &Subscription) -> StoreResult<()>;
    /// Reads one subscription with a strongly consistent read; `None` when
    /// missing, tombstoned or another tenant's.
    async fn get(
        &self,
        tenant: &TenantId,
        id: &SubscriptionId,
    ) -> StoreResult<Option<Subscription>>;
    /// Lists a tenant's subscriptions in id order after `after`.
    async fn list(
        &self,
        tenant: &TenantId,
        after: Option<&SubscriptionId>,
        limit: usize,
    ) -> StoreResult<Vec<Subscription>>;
    /// Replaces the editable fields and secrets; `false` when gone.
    async fn update(&self, sub: &Subscription) -> StoreResult<bool>;
    /// Tombstones a subscription and drops its queued deliveries; returns
    /// how many were dropped, or `None` when it was already gone.
    async fn delete(&self, tenant: &TenantId, id: &SubscriptionId) -> StoreResult<Option<u64>>;
    /// A tenant's active subscriptions whose filters match `event_type`, in
    /// id order after `after` (fan-out pages through them).
    async fn matching(
        &self,
        tenant: &TenantId,
        event_type: &EventType,
        after: Option<&SubscriptionId>,
        limit: usize,
    ) -> StoreResult<Vec<Subscription>>;
}

/// The guarded status transitions of endpoint health (G8).
#[async_trait]
pub trait Suspensions: Send + Sync {
    /// Applies `change` ([`StatusChange`], the core's rule) in one
    /// conditional write while the subscription has `change.from` and is
    /// not deleted: `true` only for the one caller whose change took effect.
    async fn change_status(
        &self,
        tenant: &TenantId,
        id: &SubscriptionId,
        change: &StatusChange,
    ) -> StoreResult<bool>;
    /// `active` → `suspended` ([`StatusChange::suspend`]), writing
    /// `health`, the record that reached the limit.
    async fn suspend(
        &self,
        tenant: &TenantId,
        id: &SubscriptionId,
        at: OffsetDateTime,
        reason: &str,
        health: &Health,
    ) -> StoreResult<bool> {
        let change = StatusChange::suspend(at, reason, health);
        self.change_status(tenant, id, &change).await
    }
    /// `suspended` → `active`, resetting health ([`StatusChange::activate`]).
    async fn activate(
        &self,
        tenant: &TenantId,
        id: &SubscriptionId,
        at: OffsetDateTime,
    ) -> StoreResult<bool> {
        let change = StatusChange::activate(at);
        self.change_status(tenant, id, &change).await
    }
    /// Records why a suspended subscription stays suspended.
    async fn set_status_reason(
        &self,
        tenant: &TenantId,
        id: &SubscriptionId,
        reason: &str,
    ) -> StoreResult<()>;
}

/// The result of accepting an event.
#[derive(Debug, Clone)]
pub enum Accepted {
    /// Archived and scheduled for fan-out.
    New(Event),
    /// The same id was accepted within 24 h: this is the original.
    Duplicate(Event),
}

impl Accepted {
    /// The event: the one accepted, or the original.
    pub fn event(&self) -> &Event {
        match self {
            Self::New(e) | Self::Duplicate(e) => e,
        }
    }
}

/// Who fans an accepted event out ([`EventArchive::accept_routed`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FanOutBy {
    /// Scheduled with the accept (the embedded intake, the AWS ingest
    /// queue).
    Schedule,
    /// The caller, before it answers: the AWS API function fans out
    /// itself rather than through the ingest queue.
    Caller,
}

/// The event archive and the fan-out intake.
#[async_trait]
pub trait EventArchive: Send + Sync {
    /// Archives the event and schedules its fan-out, atomically, so an
    /// event answered 202 is never lost. An id seen within 24 h answers
    /// the original; an older one is a conflict.
    async fn accept(&self, event: Event) -> StoreResult<Accepted>;
    /// Archives the event like [`EventArchive::accept`], and either
    /// schedules its fan-out or leaves it to the caller, who fans it out
    /// before answering (a duplicate included: fanning out again queues
    /// nothing twice). Where the caller fans out, every one of a tenant's
    /// events is fanned out by its publish until the tenant moves to the
    /// scheduled path ([`EventArchive::fan_out_later`]), for good, so one
    /// path holds the tenant's order. `decided` is the path an earlier
    /// event of the same request took: the store keeps to it rather than
    /// look again, so one request's events go one way, in order. Default:
    /// always scheduled.
    async fn accept_routed(
        &self,
        event: Event,
        _decided: Option<FanOutBy>,
    ) -> StoreResult<(Accepted, FanOutBy)> {
        Ok((self.accept(event).await?, FanOutBy::Schedule))
    }
    /// Schedules the fan-out of an archived event the caller was to fan
    /// out and could not (it failed, or it is too large to finish before
    /// answering), moving its tenant to the scheduled path for good first.
    /// Default: nothing is ever left to the caller, so this is an error.
    async fn fan_out_later(&self, _event: &Event) -> StoreResult<()> {
        Err(super::StoreError::backend(
            "this archive schedules every fan-out itself",
        ))
    }
    /// Reads an archived event.
    async fn get(&self, tenant: &TenantId, id: &EventId) -> StoreResult<Option<Event>>;
    /// A tenant's archived events after `after` and accepted at `until` at
    /// the latest, in acceptance order (time, then id), at most `limit`.
    async fn window(
        &self,
        tenant: &TenantId,
        after: &ArchivePosition,
        until: OffsetDateTime,
        limit: usize,
    ) -> StoreResult<Vec<ArchivedEvent>>;
    /// A tenant's archived events as `query` asks, newest first.
    async fn recent(
        &self,
        tenant: &TenantId,
        query: &RecentEvents,
    ) -> StoreResult<Vec<ArchivedEvent>>;
}

/// A delivery to enqueue: one (event, subscription) pair.
#[derive(Debug, Clone)]
pub struct NewDelivery {
    /// The tenant.
    pub tenant: TenantId,
    /// The subscription.
    pub subscription_id: SubscriptionId,
    /// The event.
    pub event_id: EventId,
    /// The event's type.
    pub event_type: EventType,
    /// The event itself, when at hand: a queue that can carry it with the
    /// delivery (the AWS one) saves the delivery an archive read. Shared by
    /// the deliveries of one fan-out page: a page holds one copy.
    pub event: Option<Arc<Event>>,
    /// Its lane among the subscription's lanes (G5).
    pub lane: u16,
    /// How many lanes the subscription had when it was queued.
    pub lanes: LaneCount,
    /// Its event's ordering key, when it has one.
    pub ordering_key: Option<OrderingKey>,
    /// When its event was accepted, where known with the event not at
    /// hand (a backfill reads it from the archive): the AWS tenant backlog
    /// counts go by it.
    pub accepted_at: Option<time::OffsetDateTime>,
}

impl NewDelivery {
    /// The delivery of `event` to `sub`.
    pub fn of(event: &Arc<Event>, sub: &Subscription) -> Self {
        Self {
            event: Some(Arc::clone(event)),
            ..Self::to(
                sub,
                &event.id,
                &event.event_type,
                event.ordering_key.as_ref(),
            )
        }
    }

    /// The delivery of an event not at hand to `sub`, on the lane its key
    /// (or id) picks among the subscription's lanes now.
    pub fn to(
        sub: &Subscription,
        event_id: &EventId,
        event_type: &EventType,
        ordering_key: Option<&OrderingKey>,
    ) -> Self {
        Self {
            tenant: sub.tenant.clone(),
            subscription_id: sub.id.clone(),
            event_id: event_id.clone(),
            event_type: event_type.clone(),
            event: None,
            lane: lane_of(ordering_key, event_id, sub.lanes),
            lanes: sub.lanes,
            ordering_key: ordering_key.cloned(),
            accepted_at: None,
        }
    }

    /// The hash of its ordering key, as the embedded store keeps it (a
    /// lane head waits for older deliveries of the same hash).
    pub fn key_hash(&self) -> Option<i64> {
        self.ordering_key
            .as_ref()
            .map(|k| fnv1a64(k.as_str().as_bytes()) as i64)
    }
}

/// A tenant's attempt slot ([`LaneQueue::tenant_slot`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TenantSlot {
    /// The tenant cannot reach its bound here (or the runtime bounds it):
    /// nothing taken, nothing to give back.
    Unbounded,
    /// Slot `lease` of the tenant's slot shard `shard`, to give back.
    Held {
        /// The shard the slot is in.
        shard: u16,
        /// The lease's id.
        lease: String,
        /// When the lease ends, as written: another process may take the
        /// slot from then on, so no request may still be out.
        until: OffsetDateTime,
    },
    /// Every slot is taken: put the delivery off until then.
    Full(OffsetDateTime),
}

/// The lanes deliveries wait in: in acceptance order per lane, one attempt
/// in flight per lane.
#[async_trait]
pub trait LaneQueue: Send + Sync {
    /// Enqueues deliveries at the end of their lanes; a pair already
    /// queued is not queued again.
    async fn enqueue(&self, deliveries: &[NewDelivery]) -> StoreResult<()>;
    /// Records that attempt `d.attempts + 1` starts now and leases the
    /// delivery until `lease_until` (a crash means it is retried then).
    /// `false` when it is no longer pending or its subscription is gone
    /// or not active.
    async fn begin(
        &self,
        d: &Delivery,
        now: OffsetDateTime,
        lease_until: OffsetDateTime,
    ) -> StoreResult<bool>;
    /// Records how a delivery's turn ended: `took` when this call recorded
    /// its attempt's outcome, not when the delivery was no longer pending
    /// at that attempt (ended before, or a later attempt took over), so one
    /// process of those that race on an outcome acts on it. Held and
    /// dropped ends, which nothing acts on, may answer `took` either way.
    /// The health write is applied to the record as stored when it is
    /// written, with nothing written in between
    /// ([`crate::health::HealthWrite`]), and the record written is
    /// returned. A failed sequence's is counted once its outcome took (an
    /// adapter that writes it apart, AWS, may lose that one count to a
    /// crash in between, never count it twice).
    async fn finish(&self, d: &Delivery, finish: &Finish) -> StoreResult<Finished>;
    /// Whether this process makes `d`'s attempt, right after its
    /// subscription `sub` was read: a queue with a pool for slow lanes
    /// (AWS) answers `false` in the main pool for a lane that moved there,
    /// or that it moves there now (a first attempt to an endpoint that has
    /// not shown it answers, while the pool is behind), and the runner
    /// hands the delivery over. Default: here.
    async fn here(&self, _d: &Delivery, _sub: &Subscription) -> StoreResult<bool> {
        Ok(true)
    }

    /// Takes one of the tenant's `limit` attempt slots for `d` for `hold`
    /// from the moment it is written (G3), where the queue keeps the bound
    /// across processes (AWS: function instances share no memory). The
    /// lease's end is reckoned by the store at its write, not from a time
    /// read before: the reads that come first can be slow, and a lease that
    /// ended before its request went out bounds nothing. Default: the
    /// runtime bounds tenants itself (the embedded lanes' per-tenant
    /// semaphore) and nothing is taken here.
    async fn tenant_slot(
        &self,
        _d: &Delivery,
        _limit: usize,
        _hold: std::time::Duration,
    ) -> StoreResult<TenantSlot> {
        Ok(TenantSlot::Unbounded)
    }
    /// Extends a held slot to `hold` from now, on condition it is still
    /// held (no one cleared it as expired): `None` when it was lost.
    /// Default: there is nothing to extend.
    async fn renew_tenant_slot(
        &self,
        _d: &Delivery,
        slot: &TenantSlot,
        _hold: std::time::Duration,
    ) -> StoreResult<Option<TenantSlot>> {
        Ok(Some(slot.clone()))
    }
    /// Gives back a slot [`LaneQueue::tenant_slot`] took; a slot never
    /// given back (a crash) frees itself at its lease's end.
    async fn release_tenant_slot(&self, _d: &Delivery, _slot: TenantSlot) -> StoreResult<()> {
        Ok(())
    }

    /// How long a store leaves an unchanged health record's
    /// `last_attempt_at` before writing it again
    /// ([`crate::health::health_write_due`]). Default zero: every ended
    /// sequence writes it.
    fn health_refresh(&self) -> std::time::Duration {
        std::time::Duration::ZERO
    }

    /// Puts a due delivery off until `until` without an attempt (the
    /// circuit breaker is open). Queues that back off by visibility do
    /// nothing here.
    async fn defer(&self, d: &Delivery, until: OffsetDateTime) -> StoreResult<()>;
    /// Puts each delivery that `rule` takes (by its current state, read
    /// and changed in one atomic write) back at the end of its lane with a
    /// fresh ladder: the live lane, or with `backfill` the subscription's
    /// backfill lane. Says, for each, whether it was taken. A replayed
    /// parked delivery's dead-letter copy, where the store keeps one, goes.
    async fn requeue(
        &self,
        deliveries: &[NewDelivery],
        rule: Retake,
        backfill: bool,
    ) -> StoreResult<Vec<bool>>;
}
