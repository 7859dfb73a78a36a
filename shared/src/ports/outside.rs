//! The ports to the world outside the stores: the clock, the HTTP sender,
//! wake-ups for the embedded workers and operator events beyond the
//! operator webhook. (Name resolution, [`crate::egress::Dns`], is the
//! egress guard's.)

use std::time::Duration;

use async_trait::async_trait;
use time::OffsetDateTime;

use super::StoreResult;
use crate::domain::{Event, OperatorEvent, SubscriptionId, TenantId};
use crate::policy::AttemptResult;

/// Tells operators of operator events on channels beyond the operator
/// webhook (the stack's SNS topic on AWS).
#[async_trait]
pub trait Notifier: Send + Sync {
    /// Sends one operator event: its kind and its data (a JSON document).
    async fn send(&self, kind: OperatorEvent, data: &serde_json::Value) -> StoreResult<()>;

    /// Whether it sends anywhere.
    fn enabled(&self) -> bool {
        true
    }
}

/// No channel beyond the operator webhook.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoNotifier;

#[async_trait]
impl Notifier for NoNotifier {
    async fn send(&self, _: OperatorEvent, _: &serde_json::Value) -> StoreResult<()> {
        Ok(())
    }

    fn enabled(&self) -> bool {
        false
    }
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
    /// Headers beyond content-type and user-agent: the subscription's own
    /// first, then hooklane's.
    pub headers: Vec<(std::borrow::Cow<'static, str>, String)>,
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
    /// A failed response's headers, as a JSON object's text (at most 2 KiB).
    pub headers: Option<String>,
    /// How long the attempt took.
    pub elapsed: Duration,
}

/// Sends one attempt (the egress-guarded HTTP client in production).
#[async_trait]
pub trait Sender: Send + Sync {
    /// Sends and reports; never fails: failures are results.
    async fn send(&self, request: Outbound) -> SendReport;
}

/// Tells the workers that work arrived (no-op where the queue triggers
/// them itself, as SQS does on AWS).
pub trait Wakeup: Send + Sync {
    /// This event, just accepted, awaits fan-out (at hand: a worker that
    /// keeps it need not read it back).
    fn fan_out(&self, event: &Event);
    /// These lanes have new deliveries: (subscription, live lane), or every
    /// lane of the subscription when the lane is `None` (it was deleted).
    fn lanes(&self, tenant: &TenantId, lanes: &[(SubscriptionId, Option<u16>)]);
    /// A backfill was scheduled.
    fn backfill(&self);
}

/// Nothing to wake: the queue triggers its workers itself (SQS on AWS).
#[derive(Debug, Clone, Copy, Default)]
pub struct NoWakeup;

impl Wakeup for NoWakeup {
    fn fan_out(&self, _: &Event) {}
    fn lanes(&self, _: &TenantId, _: &[(SubscriptionId, Option<u16>)]) {}
    fn backfill(&self) {}
}
