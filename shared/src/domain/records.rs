//! The records the engine moves through the ports: subscription (with its
//! health), event, delivery, attempt and parked delivery.

use std::collections::BTreeMap;

use time::OffsetDateTime;

use super::{
    AttemptId, EndpointOptions, EventFilter, EventId, EventType, LaneCount, RateLimit,
    SubscriptionId, TenantId,
};
use crate::signing::Secret;

/// Whether a subscription receives deliveries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SubscriptionStatus {
    /// Deliveries are queued and attempted.
    Active,
    /// Endpoint health suspended it; events are archived, not queued.
    Suspended,
}

impl SubscriptionStatus {
    /// The status as stored and served.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Active => "active",
            Self::Suspended => "suspended",
        }
    }

    /// Parses a stored status.
    pub fn parse(raw: &str) -> Option<Self> {
        match raw {
            "active" => Some(Self::Active),
            "suspended" => Some(Self::Suspended),
            _ => None,
        }
    }
}

/// A secret replaced by a rotation, still signing until `expires_at`.
#[derive(Debug, Clone)]
pub struct PreviousSecret {
    /// The old secret.
    pub secret: Secret,
    /// When it stops signing (rotation + 24 h).
    pub expires_at: OffsetDateTime,
}

/// The health record of G8, written when a delivery's retry sequence ends.
/// Serialized as the API's `health` object.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Health {
    /// Failed retry sequences since the last success.
    pub consecutive_failures: u32,
    /// When the current failure streak began.
    #[serde(with = "time::serde::rfc3339::option")]
    pub first_failure_at: Option<OffsetDateTime>,
    /// `delivered` or `parked`.
    pub last_outcome: Option<String>,
    /// The last response status, if any.
    pub last_status_code: Option<u16>,
    /// The last error text, if any.
    pub last_error: Option<String>,
    /// When the last attempt started.
    #[serde(with = "time::serde::rfc3339::option")]
    pub last_attempt_at: Option<OffsetDateTime>,
    /// Failures of the streak that were retryable.
    #[serde(default)]
    pub retryable_failures: u32,
    /// Failures of the streak that were permanent.
    #[serde(default)]
    pub permanent_failures: u32,
    /// Failures of the streak that were fatal (the host no longer resolves).
    #[serde(default)]
    pub fatal_failures: u32,
    /// When the event of the streak's first failed delivery was accepted:
    /// a backfill after re-enabling starts there.
    #[serde(default, with = "time::serde::rfc3339::option")]
    pub streak_events_since: Option<OffsetDateTime>,
    /// After a failure streak ended: until then the subscription runs at a
    /// quarter of its lanes and of its rate limit (the recovery ramp, G5).
    #[serde(
        default,
        with = "time::serde::rfc3339::option",
        skip_serializing_if = "Option::is_none"
    )]
    pub ramp_until: Option<OffsetDateTime>,
    /// Written by a suspension: the count includes every delivery that was
    /// failing then, in retry or not, so their ends add nothing to it (the
    /// page, the reason and the policy keep one number).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub at_suspension: bool,
}

impl Health {
    /// Whether the endpoint has shown it answers: its last delivery
    /// arrived and no failure streak runs. A new endpoint has not.
    pub fn answers(&self) -> bool {
        self.consecutive_failures == 0 && self.last_outcome.as_deref() == Some("delivered")
    }
}

/// A registered endpoint of one tenant.
#[derive(Debug, Clone)]
pub struct Subscription {
    /// Its id.
    pub id: SubscriptionId,
    /// The owning tenant.
    pub tenant: TenantId,
    /// The endpoint, checked by the egress guard.
    pub url: url::Url,
    /// Which event types it receives.
    pub filters: Vec<EventFilter>,
    /// Free text.
    pub description: Option<String>,
    /// Free string pairs.
    pub metadata: BTreeMap<String, String>,
    /// The signing secret.
    pub secret: Secret,
    /// The secret before the last rotation, while it still signs.
    pub previous_secret: Option<PreviousSecret>,
    /// Active or suspended.
    pub status: SubscriptionStatus,
    /// Health record.
    pub health: Health,
    /// When suspended, since when.
    pub suspended_at: Option<OffsetDateTime>,
    /// When suspended, why.
    pub status_reason: Option<String>,
    /// Creation time.
    pub created_at: OffsetDateTime,
    /// Last change.
    pub updated_at: OffsetDateTime,
    /// How many lanes it delivers on (G5).
    pub lanes: LaneCount,
    /// At most this many attempts per second, when set.
    pub rate_limit: Option<RateLimit>,
    /// Headers, auth and the content filter.
    pub options: EndpointOptions,
}

impl Subscription {
    /// Whether one of its filters takes events of `event_type` (whatever
    /// its status).
    pub fn takes(&self, event_type: &EventType) -> bool {
        self.filters.iter().any(|f| f.matches(event_type))
    }

    /// The secrets that sign a request sent at `now`: the current one and,
    /// for 24 h after a rotation, the previous one.
    pub fn signing_secrets(&self, now: OffsetDateTime) -> Vec<&Secret> {
        let mut out = vec![&self.secret];
        if let Some(prev) = &self.previous_secret {
            if prev.expires_at > now {
                out.push(&prev.secret);
            }
        }
        out
    }

    /// Puts `fresh` in as the signing secret; the one it replaces keeps
    /// signing beside it until `old_until`.
    pub fn rotate_secret(&mut self, fresh: Secret, old_until: OffsetDateTime) {
        self.previous_secret = Some(PreviousSecret {
            secret: std::mem::replace(&mut self.secret, fresh),
            expires_at: old_until,
        });
    }
}

/// One queued delivery of one event to one subscription.
#[derive(Debug, Clone)]
pub struct Delivery {
    /// The queue's key for it: acceptance order within the lane on the
    /// embedded store; on AWS, when it was queued (unix milliseconds, 0
    /// when its message does not say), by which its tenant's backlog is
    /// counted.
    pub seq: i64,
    /// The tenant.
    pub tenant: TenantId,
    /// The subscription (the lane).
    pub subscription_id: SubscriptionId,
    /// The event.
    pub event_id: EventId,
    /// The event's type.
    pub event_type: EventType,
    /// Its lane among the subscription's live lanes (0 on a backfill lane).
    pub lane: u16,
    /// Attempts already started (from the engine's own record).
    pub attempts: u32,
    /// When the first attempt started.
    pub first_attempt_at: Option<OffsetDateTime>,
    /// When the next attempt is due.
    pub next_attempt_at: OffsetDateTime,
}

/// One attempt as logged for `/attempts`.
#[derive(Debug, Clone)]
pub struct Attempt {
    /// Its id.
    pub id: AttemptId,
    /// The tenant.
    pub tenant: TenantId,
    /// The subscription.
    pub subscription_id: SubscriptionId,
    /// The event.
    pub event_id: EventId,
    /// The event's type (`None` in entries written before the log kept
    /// it, and for re-enable probes).
    pub event_type: Option<EventType>,
    /// 1-based attempt number.
    pub attempt: u32,
    /// When it started.
    pub started_at: OffsetDateTime,
    /// How long it took.
    pub duration_ms: u64,
    /// The response status, if one came.
    pub status_code: Option<u16>,
    /// `delivered`, `retrying` or `parked`.
    pub outcome: String,
    /// What went wrong, if anything.
    pub error: Option<String>,
    /// The start of the response body, at most 1 KiB.
    pub response_excerpt: Option<String>,
    /// A failed response's headers, as a JSON object's text (at most 2
    /// KiB; `None` for a success, without a response, and in entries
    /// written before the log kept them).
    pub response_headers: Option<String>,
}

/// A parked delivery as listed by `/dead-letters`.
#[derive(Debug, Clone)]
pub struct DeadLetter {
    /// The subscription.
    pub subscription_id: SubscriptionId,
    /// The event.
    pub event_id: EventId,
    /// The event's type.
    pub event_type: EventType,
    /// Attempts made.
    pub attempts: u32,
    /// The last response status, if any.
    pub last_status_code: Option<u16>,
    /// Why it was parked.
    pub reason: String,
    /// When the first attempt started.
    pub first_attempt_at: Option<OffsetDateTime>,
    /// When it was parked.
    pub parked_at: OffsetDateTime,
}

/// Where a delivery stands, as both stores keep it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DeliveryState {
    /// Queued or waiting for its next attempt (or in flight).
    Pending,
    /// Its subscription was suspended when its turn came: not attempted;
    /// the backfill after re-enabling covers it.
    Held,
    /// A 2xx came back.
    Delivered,
    /// No more attempts: parked with its reason, replayable.
    Parked,
    /// Its subscription was deleted (G4), or its event is gone.
    Dropped,
}

impl DeliveryState {
    /// The state as stored.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Held => "held",
            Self::Delivered => "delivered",
            Self::Parked => "parked",
            Self::Dropped => "dropped",
        }
    }

    /// Every state.
    pub const ALL: [Self; 5] = [
        Self::Pending,
        Self::Held,
        Self::Delivered,
        Self::Parked,
        Self::Dropped,
    ];

    /// Parses a stored state; `None` for anything the stores never write.
    pub fn parse(raw: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.as_str() == raw)
    }
}

/// One delivery's record as the stores keep it: what `GET /events/{id}`
/// shows and what a delivery's next attempt starts from.
#[derive(Debug, Clone, PartialEq)]
pub struct DeliveryRecord {
    /// Its state.
    pub state: DeliveryState,
    /// Attempts started (exact, from the store's own record).
    pub attempts: u32,
    /// When the first attempt started.
    pub first_attempt_at: Option<OffsetDateTime>,
    /// When the next attempt is due (the lease while one is in flight).
    pub next_attempt_at: Option<OffsetDateTime>,
    /// Its lane among its subscription's lanes, when the store knows it.
    pub lane: Option<u16>,
    /// The last response status, if any.
    pub last_status_code: Option<u16>,
}

impl DeliveryRecord {
    /// A delivery queued and never attempted.
    pub fn queued() -> Self {
        Self {
            state: DeliveryState::Pending,
            attempts: 0,
            first_attempt_at: None,
            next_attempt_at: None,
            lane: None,
            last_status_code: None,
        }
    }

    /// The state the API shows: `pending` (never attempted), `retrying`
    /// (attempted, more to come), `delivered`, `parked` or `dropped`. The
    /// one mapping both stores' records go through.
    pub fn shown_state(&self) -> &'static str {
        match (self.state, self.attempts) {
            (DeliveryState::Pending | DeliveryState::Held, 0) => "pending",
            (DeliveryState::Pending | DeliveryState::Held, _) => "retrying",
            (DeliveryState::Delivered, _) => "delivered",
            (DeliveryState::Parked, _) => "parked",
            (DeliveryState::Dropped, _) => "dropped",
        }
    }

    /// When the next attempt is due, while one is to come.
    pub fn shown_next_attempt_at(&self) -> Option<OffsetDateTime> {
        match self.state {
            DeliveryState::Pending | DeliveryState::Held => self.next_attempt_at,
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_endpoint_answers_once_its_last_delivery_arrived_and_no_streak_runs() {
        let mut h = Health::default();
        assert!(!h.answers(), "a new endpoint has not shown it");
        h.last_outcome = Some("delivered".into());
        assert!(h.answers());
        h.consecutive_failures = 1;
        assert!(!h.answers(), "a failure streak runs");
        h.consecutive_failures = 0;
        h.last_outcome = Some("parked".into());
        assert!(!h.answers());
    }
}
