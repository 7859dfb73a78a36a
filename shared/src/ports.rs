//! Ports: one narrow trait per capability the engine needs (subscription
//! store, event archive, delivery queue, attempt log, clock, sender, wake-up).
//! The embedded SQLite adapter implements them; the engine never names a
//! backend.

use std::time::Duration;

use async_trait::async_trait;
use time::OffsetDateTime;

use crate::domain::{
    Attempt, DeadLetter, Delivery, Event, EventId, EventType, Health, Subscription, SubscriptionId,
    TenantId,
};
use crate::policy::AttemptResult;

/// A storage failure. Carries its cause; the API answers 500 or 503
/// without the detail, which goes to the log.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The backend failed (corruption, a lost connection, a bug).
    #[error("storage backend: {0}")]
    Backend(String),
    /// The backend cannot take the operation for now (its disk is full, a
    /// write failed, it is locked or throttling): nothing changed, and the
    /// same call can succeed later. The API answers 503 with `Retry-After`.
    #[error("storage unavailable: {0}")]
    Unavailable(String),
    /// The write conflicts with existing state.
    #[error("conflict: {0}")]
    Conflict(String),
    /// A stored record does not parse back. The record is kept (never
    /// deleted, never read as a default), logged with its key and counted
    /// ([`crate::record::unreadable`]); a delivery is parked with the reason.
    #[error("unreadable record: {0}")]
    Unreadable(String),
}

/// Shorthand for port results.
pub type StoreResult<T> = Result<T, StoreError>;

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
    /// Writes the health record when a delivery's retry sequence ends.
    async fn record_health(
        &self,
        tenant: &TenantId,
        id: &SubscriptionId,
        health: &Health,
    ) -> StoreResult<()>;
    /// The guarded transition `active` → `suspended`: `true` only for the
    /// one caller whose transition took effect (G8).
    async fn suspend(
        &self,
        tenant: &TenantId,
        id: &SubscriptionId,
        at: OffsetDateTime,
        reason: &str,
    ) -> StoreResult<bool>;
    /// The guarded transition `suspended` → `active`, resetting health;
    /// `true` when it took effect.
    async fn activate(
        &self,
        tenant: &TenantId,
        id: &SubscriptionId,
        at: OffsetDateTime,
    ) -> StoreResult<bool>;
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

/// The event archive and the fan-out intake.
#[async_trait]
pub trait EventArchive: Send + Sync {
    /// Archives the event and schedules its fan-out, atomically, so an
    /// event answered 202 is never lost. An id seen within 24 h answers
    /// the original; an older one is a conflict.
    async fn accept(&self, event: Event) -> StoreResult<Accepted>;
    /// Reads an archived event.
    async fn get(&self, tenant: &TenantId, id: &EventId) -> StoreResult<Option<Event>>;
}

/// A delivery to enqueue: one (event, subscription) pair.
#[derive(Debug, Clone)]
pub struct NewDelivery {
    /// The tenant.
    pub tenant: TenantId,
    /// The lane.
    pub subscription_id: SubscriptionId,
    /// The event.
    pub event_id: EventId,
    /// The event's type.
    pub event_type: EventType,
    /// The subscription's lane is spilling (see `Subscription::spilling`).
    pub spill: bool,
    /// The event itself, when at hand: a queue that can carry it with the
    /// delivery (the AWS one) saves the delivery an archive read.
    pub event: Option<crate::domain::Event>,
}

impl NewDelivery {
    /// The delivery of `event` to `sub`.
    pub fn of(event: &crate::domain::Event, sub: &crate::domain::Subscription) -> Self {
        Self {
            tenant: event.tenant.clone(),
            subscription_id: sub.id.clone(),
            event_id: event.id.clone(),
            event_type: event.event_type.clone(),
            spill: sub.spilling,
            event: Some(event.clone()),
        }
    }
}

/// How a delivery's attempt ended, as the queue records it.
#[derive(Debug, Clone)]
pub enum Finish {
    /// 2xx.
    Delivered,
    /// Due again at this time.
    RetryAt(OffsetDateTime),
    /// Parked with a reason.
    Parked(String),
    /// Its subscription is gone: deleted, not parked.
    Dropped,
    /// Its subscription is suspended: not attempted; the backfill after
    /// re-enabling covers it.
    Held,
}

/// One delivery's state as `GET /events/{id}` shows it.
#[derive(Debug, Clone)]
pub struct DeliveryView {
    /// The subscription.
    pub subscription_id: SubscriptionId,
    /// `pending`, `retrying`, `delivered`, `parked` or `dropped`.
    pub state: &'static str,
    /// Attempts started.
    pub attempts: u32,
    /// The last status code, if any.
    pub last_status_code: Option<u16>,
    /// When the next attempt is due, while pending.
    pub next_attempt_at: Option<OffsetDateTime>,
}

/// The delivery queue: lanes of deliveries per subscription.
#[async_trait]
pub trait DeliveryQueue: Send + Sync {
    /// Enqueues deliveries; a pair already queued is not queued again.
    async fn enqueue(&self, deliveries: &[NewDelivery]) -> StoreResult<()>;
    /// Records that attempt `d.attempts + 1` starts now and leases the
    /// delivery until `lease_until` (a crash means it is retried then).
    /// `false` when it is no longer pending or its subscription is gone
    /// or not active.
    async fn begin_attempt(
        &self,
        d: &Delivery,
        now: OffsetDateTime,
        lease_until: OffsetDateTime,
    ) -> StoreResult<bool>;
    /// Records how a delivery's turn ended: its state, and (for an attempt)
    /// the attempt in the attempt log with its status and error, and the
    /// subscription's health record when the retry sequence ended, in one
    /// write where the store allows. `sub` is the subscription as read
    /// before the attempt (its lane state decides spilling and refilling
    /// where the queue has them).
    async fn finish(
        &self,
        d: &Delivery,
        sub: Option<&Subscription>,
        finish: &Finish,
        last: Option<&Attempt>,
        health: Option<&Health>,
    ) -> StoreResult<()>;
    /// A tenant's parked deliveries after the cursor, oldest first; each
    /// with its cursor.
    async fn dead_letters(
        &self,
        tenant: &TenantId,
        subscription: Option<&SubscriptionId>,
        after: Option<i64>,
        limit: usize,
    ) -> StoreResult<Vec<(i64, DeadLetter)>>;
    /// Puts parked deliveries back at the end of their lanes with a fresh
    /// ladder; returns the subscription of each one replayed.
    async fn replay(
        &self,
        tenant: &TenantId,
        subscription: Option<&SubscriptionId>,
        event_ids: Option<&[EventId]>,
        now: OffsetDateTime,
    ) -> StoreResult<Vec<SubscriptionId>>;
    /// Every delivery of one event.
    async fn event_deliveries(
        &self,
        tenant: &TenantId,
        event_id: &EventId,
    ) -> StoreResult<Vec<DeliveryView>>;
    /// Puts a due delivery off until `until` without an attempt (the
    /// circuit breaker is open). Queues that back off by visibility do
    /// nothing here.
    async fn defer(&self, d: &Delivery, until: OffsetDateTime) -> StoreResult<()>;
    /// Schedules the backfill of a re-enabled subscription: its tenant's
    /// archived events matching its filters, accepted from `since` to
    /// `until`, not yet delivered to it, on a lane of their own at the
    /// configured rate.
    async fn start_backfill(
        &self,
        sub: &Subscription,
        since: OffsetDateTime,
        until: OffsetDateTime,
    ) -> StoreResult<()>;
    /// How many deliveries wait for a subscription (for the suspension
    /// notice; at least those the store can count cheaply).
    async fn waiting(&self, sub: &Subscription) -> StoreResult<u64>;
}

/// Tells operators about suspensions on channels beyond the operator
/// webhook (the stack's SNS topic on AWS).
#[async_trait]
pub trait Notifier: Send + Sync {
    /// Sends one suspension notice (a JSON document).
    async fn suspended(&self, notice: &serde_json::Value) -> StoreResult<()>;
}

/// No channel beyond the operator webhook.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoNotifier;

#[async_trait]
impl Notifier for NoNotifier {
    async fn suspended(&self, _: &serde_json::Value) -> StoreResult<()> {
        Ok(())
    }
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

/// The time, injected so policies and tests control it.
pub trait Clock: Send + Sync {
    /// Now, UTC.
    fn now(&self) -> OffsetDateTime;
}

/// The system clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> OffsetDateTime {
        OffsetDateTime::now_utc()
    }
}

/// One signed request to send.
#[derive(Debug, Clone)]
pub struct Outbound {
    /// The endpoint.
    pub url: url::Url,
    /// Headers beyond content-type and user-agent.
    pub headers: Vec<(&'static str, String)>,
    /// The body bytes.
    pub body: bytes::Bytes,
}

/// What a send came back with.
#[derive(Debug, Clone)]
pub struct SendReport {
    /// The classified result.
    pub result: AttemptResult,
    /// The start of the response body (at most 1 KiB).
    pub excerpt: Option<String>,
    /// How long the attempt took.
    pub elapsed: Duration,
}

/// Sends one attempt (the egress-guarded HTTP client in production).
#[async_trait]
pub trait Sender: Send + Sync {
    /// Sends and reports; never fails: failures are results.
    async fn send(&self, request: Outbound) -> SendReport;
}

pub use crate::egress::{Dns, SystemDns};

/// Tells the workers that work arrived (no-op where the queue triggers
/// them itself, as SQS does on AWS).
pub trait Wakeup: Send + Sync {
    /// An event awaits fan-out.
    fn fan_out(&self);
    /// These lanes have new deliveries.
    fn lanes(&self, tenant: &TenantId, subscriptions: &[SubscriptionId]);
    /// A backfill was scheduled.
    fn backfill(&self);
}
