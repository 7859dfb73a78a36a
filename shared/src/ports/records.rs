//! The store ports that read what deliveries left behind: parked
//! deliveries (dead letters), the delivery views of `GET /events/{id}`,
//! backfills in progress, and the attempt log.

use async_trait::async_trait;

use super::StoreResult;
use crate::domain::{
    Attempt, BackfillJob, DeadLetter, DeliveryRecord, EventId, Overview, Subscription,
    SubscriptionId, TenantId,
};

/// Parked deliveries, listed for operators (the engine replays them
/// through [`LaneQueue::requeue`]).
#[async_trait]
pub trait DeadLetters: Send + Sync {
    /// A tenant's parked deliveries after the cursor, oldest first; each
    /// with its cursor.
    async fn list(
        &self,
        tenant: &TenantId,
        subscription: Option<&SubscriptionId>,
        after: Option<i64>,
        limit: usize,
    ) -> StoreResult<Vec<(i64, DeadLetter)>>;
}

/// What `GET /events/{id}` shows of an event's deliveries.
#[async_trait]
pub trait DeliveryViews: Send + Sync {
    /// The record of each delivery of one event, by subscription, in
    /// subscription order. The core maps records to what the API shows
    /// ([`DeliveryRecord::shown_state`]).
    async fn of_event(
        &self,
        tenant: &TenantId,
        event_id: &EventId,
    ) -> StoreResult<Vec<(SubscriptionId, DeliveryRecord)>>;

    /// What the store can tell of the whole service (the status and the
    /// backlog gauges); `parked` only when asked (it reads every parked
    /// delivery's index entry). A backend leaves out what it cannot tell.
    async fn overview(&self, _parked: bool) -> StoreResult<Overview> {
        Ok(Overview::default())
    }
}

/// Backfills in progress: where each stands (the engine runs and paces
/// them, [`crate::engine::Engine::backfill_pass`]).
#[async_trait]
pub trait Backfills: Send + Sync {
    /// Records a new backfill and schedules its first pass (replacing one
    /// in progress for the same subscription).
    async fn start(&self, job: &BackfillJob) -> StoreResult<()>;
    /// The subscription's backfill in progress, if any.
    async fn load(
        &self,
        tenant: &TenantId,
        sub: &SubscriptionId,
    ) -> StoreResult<Option<BackfillJob>>;
    /// Saves how far a backfill got, unless another has replaced it (a
    /// job is known by its subscription and `started_at`).
    async fn save(&self, job: &BackfillJob) -> StoreResult<()>;
    /// Ends a backfill, unless another has replaced it.
    async fn end(&self, job: &BackfillJob) -> StoreResult<()>;
    /// How many deliveries wait for a subscription (for the suspension
    /// notice; at least those the store can count cheaply).
    async fn waiting(&self, sub: &Subscription) -> StoreResult<u64>;
    /// How many of a subscription's deliveries are failing and not ended:
    /// those in retry after a failed attempt, and those waiting behind one
    /// on its lane (the count suspension adds to the finished failures,
    /// G8).
    async fn failing(&self, sub: &Subscription) -> StoreResult<u64>;
}

/// The attempt log behind `/attempts`.
#[async_trait]
pub trait AttemptLog: Send + Sync {
    /// Appends one attempt.
    async fn record(&self, attempt: &Attempt) -> StoreResult<()>;
    /// A subscription's attempts, newest first, before the cursor; each
    /// with its cursor.
    async fn list(
        &self,
        tenant: &TenantId,
        subscription: &SubscriptionId,
        before: Option<i64>,
        limit: usize,
    ) -> StoreResult<Vec<(i64, Attempt)>>;
}
