//! An archived event's item (`T#{tenant}`, `E#{id}`): the event, read back
//! whole or without its payload, and when it expires (TTL deletion can be
//! days late, so reads check it). The payload's attribute is
//! [`super::event_payload`]'s.

use hooklane_core::domain::{
    ArchivedEvent, Event, EventId, EventType, OrderingKey, SubscriptionId, TenantId,
};
use hooklane_core::ports::StoreResult;
use hooklane_core::record::from_ms;

use super::attrs::{corrupt, get_n, get_s};
use super::event_payload::payload_of;
use crate::store::Item;

/// The event an item holds.
pub(crate) fn event_of(item: &Item) -> StoreResult<Event> {
    let field = |k: &str| get_s(item, k).ok_or_else(|| corrupt("event"));
    Ok(Event {
        id: EventId::parse(field("id")?).map_err(|_| corrupt("event id"))?,
        tenant: TenantId::parse(field("tenant")?).map_err(|_| corrupt("tenant"))?,
        event_type: EventType::parse(field("type")?).map_err(|_| corrupt("event type"))?,
        created_at: from_ms(get_n(item, "created_at").ok_or_else(|| corrupt("event time"))?),
        payload: payload_of(item)?,
        ordering_key: ordering_key(item)?,
        traceparent: get_s(item, "traceparent").map(str::to_owned),
        only_for: only_for(item)?,
    })
}

/// An archived event's id, type and time (read without its payload).
pub(crate) fn archived_of(item: &Item) -> StoreResult<ArchivedEvent> {
    let field = |k: &str| get_s(item, k).ok_or_else(|| corrupt("event"));
    Ok(ArchivedEvent {
        id: EventId::parse(field("id")?).map_err(|_| corrupt("event id"))?,
        event_type: EventType::parse(field("type")?).map_err(|_| corrupt("event type"))?,
        created_at: from_ms(get_n(item, "created_at").ok_or_else(|| corrupt("event time"))?),
        ordering_key: ordering_key(item)?,
        only_for: only_for(item)?,
    })
}

/// A test event's subscription, when it is one.
fn only_for(item: &Item) -> StoreResult<Option<SubscriptionId>> {
    get_s(item, "only_for")
        .map(|s| SubscriptionId::parse(s).map_err(|_| corrupt("subscription id")))
        .transpose()
}

/// An event item's ordering key, when it has one.
fn ordering_key(item: &Item) -> StoreResult<Option<OrderingKey>> {
    get_s(item, "ordering_key")
        .map(|k| OrderingKey::parse(k).map_err(|_| corrupt("ordering key")))
        .transpose()
}

/// Whether an item's time to live (`expires_at`) has passed: DynamoDB's
/// TTL deletes it some time later (within days), and until then no read
/// serves it.
pub(crate) fn expired(item: &Item, now: time::OffsetDateTime) -> bool {
    get_n(item, "expires_at").is_some_and(|exp| exp < now.unix_timestamp())
}
