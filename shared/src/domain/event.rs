//! An accepted event as the archive keeps it and fan-out and delivery
//! read it: its exact body (G13), its ordering key, the trace it was
//! published in, and, for a test event, its one subscription; and the one
//! rule of which subscriptions receive it (fan-out, backfill, recovery).

use time::OffsetDateTime;

use super::{
    filter_document, EventId, EventType, Json, LaneCount, OrderingKey, Subscription,
    SubscriptionId, TenantId,
};

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

impl Subscription {
    /// Whether it receives an event of `event_type` (a test event's
    /// `only_for`), as far as that says without the event's data: a test
    /// event only its own; any other not unless one of its event types
    /// takes it, and then yes without a content filter. `None`: its
    /// content filter decides ([`Subscription::receives`]).
    pub fn receives_by_type(
        &self,
        event_type: &EventType,
        only_for: Option<&SubscriptionId>,
    ) -> Option<bool> {
        match only_for {
            Some(to) => Some(*to == self.id),
            None if !self.takes(event_type) => Some(false),
            None if self.options.filter.is_none() => Some(true),
            None => None,
        }
    }

    /// Whether its content filter, if it has one, lets `event` through.
    /// `doc` is the event's [`filter_document`], built on first need and
    /// kept by the caller for the event's other subscriptions.
    pub fn passes_filter(&self, event: &Event, doc: &mut Option<Json>) -> bool {
        self.options.filter.as_ref().is_none_or(|f| {
            f.matches(
                doc.get_or_insert_with(|| {
                    filter_document(event.event_type.as_str(), &event.payload)
                }),
            )
        })
    }

    /// Whether it receives `event` (whatever its status):
    /// [`Subscription::receives_by_type`], then its content filter.
    pub fn receives(&self, event: &Event, doc: &mut Option<Json>) -> bool {
        self.receives_by_type(&event.event_type, event.only_for.as_ref())
            .unwrap_or_else(|| self.passes_filter(event, doc))
    }
}
