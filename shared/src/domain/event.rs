//! An accepted event as the archive keeps it and fan-out and delivery
//! read it: its exact body (G13), its ordering key, the trace it was
//! published in, and, for a test event, its one subscription.

use time::OffsetDateTime;

use super::{EventId, EventType, LaneCount, OrderingKey, SubscriptionId, TenantId};

/// An accepted event as archived: the body bytes are fixed at publish so
/// every attempt sends the same bytes.
#[derive(Debug, Clone)]
pub struct Event {
    /// Its id (generated or the publisher's).
    pub id: EventId,
    /// The owning tenant.
    pub tenant: TenantId,
    /// Its type.
    pub event_type: EventType,
    /// When it was accepted.
    pub created_at: OffsetDateTime,
    /// The exact request body: `{"type","timestamp","data"}`.
    pub payload: bytes::Bytes,
    /// Its ordering key, when the publisher gave one.
    pub ordering_key: Option<OrderingKey>,
    /// The W3C `traceparent` of its publish span, when traces are on: its
    /// fan-out and attempts join that trace, wherever they run.
    pub traceparent: Option<String>,
    /// A test event's one subscription: fan-out delivers it there alone.
    pub only_for: Option<SubscriptionId>,
}

impl Event {
    /// Its delivery's lane among `lanes`.
    pub fn lane(&self, lanes: LaneCount) -> u16 {
        super::lane_of(self.ordering_key.as_ref(), &self.id, lanes)
    }
}
