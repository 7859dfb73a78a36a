//! The bodies of hooklane's SQS messages and their deduplication ids.
//!
//! Fan-out and delivery messages carry the event itself when it is small
//! ([`CarriedEvent`]), so neither function reads the archive for it: two
//! strongly consistent reads fewer per delivery. A larger event, or a
//! message from a spill refill, a replay or a backfill, goes without, and
//! the function reads the archive.

use hooklane_core::domain::{Event, EventId, EventType, OrderingKey, SubscriptionId, TenantId};
use hooklane_core::record::{from_ms, ms};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// The largest message body that carries its event: ten delivery messages
/// must fit one `SendMessageBatch` (256 KiB in all).
pub const CARRY_LIMIT: usize = 24 * 1024;

/// An event travelling in a message: its type, acceptance time and body.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct CarriedEvent {
    /// Event type.
    #[serde(rename = "type")]
    pub event_type: String,
    /// When it was accepted, unix ms.
    pub created_at: i64,
    /// The body (JSON text).
    pub payload: String,
    /// Its ordering key, when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ordering_key: Option<String>,
    /// Its publish span's `traceparent`, when traces were on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub traceparent: Option<String>,
    /// A test event's one subscription.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub only_for: Option<String>,
}

impl CarriedEvent {
    /// The event to carry, unless its body is over the limit or holds a
    /// character an SQS message body may not (U+FFFE, U+FFFF; JSON
    /// escapes the control characters): such an event travels by id and
    /// is read from the archive, byte for byte.
    pub fn of(e: &Event) -> Option<Self> {
        if e.payload.len() > CARRY_LIMIT {
            return None;
        }
        let payload = String::from_utf8(e.payload.to_vec()).ok()?;
        if payload.contains(['\u{FFFE}', '\u{FFFF}']) {
            return None;
        }
        Some(Self {
            event_type: e.event_type.as_str().to_owned(),
            created_at: ms(e.created_at),
            payload,
            ordering_key: e.ordering_key.as_ref().map(|k| k.as_str().to_owned()),
            traceparent: e.traceparent.clone(),
            only_for: e.only_for.as_ref().map(|s| s.as_str().to_owned()),
        })
    }

    /// The event back, as the archive would return it.
    pub fn event(&self, tenant: &TenantId, id: &EventId) -> Option<Event> {
        Some(Event {
            id: id.clone(),
            tenant: tenant.clone(),
            event_type: EventType::parse(&self.event_type).ok()?,
            created_at: from_ms(self.created_at),
            payload: bytes::Bytes::from(self.payload.clone()),
            ordering_key: match &self.ordering_key {
                Some(k) => Some(OrderingKey::parse(k).ok()?),
                None => None,
            },
            traceparent: self.traceparent.clone(),
            only_for: match &self.only_for {
                Some(s) => Some(SubscriptionId::parse(s).ok()?),
                None => None,
            },
        })
    }
}

/// Serializes a message; when carrying its event makes it longer than
/// `limit`, serializes it again without (`strip` removes the event).
pub fn body_within<T: Serialize>(
    msg: &T,
    limit: usize,
    strip: impl Fn(&T) -> T,
) -> serde_json::Result<String> {
    let body = serde_json::to_string(msg)?;
    if body.len() <= limit {
        return Ok(body);
    }
    serde_json::to_string(&strip(msg))
}

/// Ingest queue: one event to fan out (group = tenant), or one backfill
/// to run (group = `backfill-{subscription}`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FanOutMessage {
    /// Tenant id.
    pub tenant: String,
    /// Event id (empty for a backfill).
    #[serde(default)]
    pub event_id: String,
    /// A backfill instead of an event.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backfill: Option<BackfillMessage>,
    /// The event itself, when small.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event: Option<CarriedEvent>,
    /// Whether its fan-out counts the deliveries in the tenant backlog
    /// counts: sent so by the accept that archived the event, not by a
    /// duplicate's (the store's `backlog_tally`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub count: bool,
}

/// A re-enabled subscription's backfill: archived events accepted from
/// `since` to `until` (unix ms), started at `started`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BackfillMessage {
    /// The subscription.
    pub subscription_id: String,
    /// First acceptance time covered.
    pub since: i64,
    /// Last acceptance time covered.
    pub until: i64,
    /// When the backfill started (the pace ramps up from then).
    pub started: i64,
}

/// Delivery queue: one (event, subscription) pair (group = subscription).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct DeliveryMessage {
    /// Tenant id.
    pub tenant: String,
    /// Subscription id.
    pub subscription_id: String,
    /// Event id.
    pub event_id: String,
    /// Event type.
    pub event_type: String,
    /// `backfill` for a backfill delivery (its own message group, so it
    /// never holds up live deliveries); absent for live ones.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lane: Option<String>,
    /// The live lane of a subscription with more than one (absent with
    /// one: its group is the subscription id, as before lanes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lane_no: Option<u16>,
    /// The event's ordering key, when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ordering_key: Option<String>,
    /// The fence of an old lane this delivery waits for after a change of
    /// lanes ([`crate::store`]'s lane change).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<After>,
    /// Set on a fence (no delivery): the end of an old lane.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fence: Option<After>,
    /// What makes a replay's deduplication id differ from the original
    /// send's, kept when the replay waits in the spill store.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nonce: Option<String>,
    /// The event itself, when small.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event: Option<CarriedEvent>,
    /// When it was queued (unix milliseconds), set while pending deliveries
    /// are counted per tenant (the store's `backlog_counts`, which count it
    /// by this minute); absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queued_at: Option<i64>,
}

/// A fence: the end of old lane `lane` at the lanes switch `generation`.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
pub struct After {
    /// The switch.
    pub generation: u32,
    /// The old lane.
    pub lane: u16,
}

impl DeliveryMessage {
    /// A live delivery of an event to a subscription, without the event.
    pub fn new(tenant: &str, subscription_id: &str, event_id: &str, event_type: &str) -> Self {
        Self {
            tenant: tenant.to_owned(),
            subscription_id: subscription_id.to_owned(),
            event_id: event_id.to_owned(),
            event_type: event_type.to_owned(),
            lane: None,
            lane_no: None,
            ordering_key: None,
            after: None,
            fence: None,
            nonce: None,
            event: None,
            queued_at: None,
        }
    }

    /// The fence of old lane `lane_no` (none: the one lane) at switch
    /// `generation`; its made-up event id (`#` is never in an event id)
    /// keeps it distinct in the spill store and in deduplication.
    pub fn fence(
        tenant: &str,
        subscription_id: &str,
        generation: u32,
        lane_no: Option<u16>,
    ) -> Self {
        let lane = lane_no.unwrap_or(0);
        Self {
            lane_no,
            fence: Some(After { generation, lane }),
            ..Self::new(
                tenant,
                subscription_id,
                &format!("fence#{generation}#{lane}"),
                "",
            )
        }
    }

    /// Its body, carrying the event only within [`CARRY_LIMIT`].
    pub fn body(&self) -> serde_json::Result<String> {
        body_within(self, CARRY_LIMIT, |m| Self {
            event: None,
            ..m.clone()
        })
    }

    /// The message group: the subscription's lane. `{subscription}` for
    /// a subscription with one lane, `{subscription}#{lane}` for one with
    /// more, `{subscription}#backfill` for its backfill.
    pub fn group(&self) -> String {
        match (&self.lane, self.lane_no) {
            (Some(lane), _) => format!("{}#{lane}", self.subscription_id),
            (None, Some(n)) => format!("{}#{n}", self.subscription_id),
            (None, None) => self.subscription_id.clone(),
        }
    }
}

/// A deduplication id: hex SHA-256 of the parts (at most 128 characters
/// allowed; this is 64).
pub fn dedup_id(parts: &[&str]) -> String {
    let mut h = Sha256::new();
    for p in parts {
        h.update(p.as_bytes());
        h.update([0u8]);
    }
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dedup_ids_differ_per_pair_and_fit_sqs_limits() {
        let a = dedup_id(&["evt_1", "sub_1"]);
        assert_eq!(a.len(), 64);
        assert_eq!(a, dedup_id(&["evt_1", "sub_1"]));
        assert_ne!(a, dedup_id(&["evt_1", "sub_2"]));
        assert_ne!(dedup_id(&["ab", "c"]), dedup_id(&["a", "bc"]));
    }

    #[test]
    fn a_small_event_travels_with_its_delivery_and_a_large_one_does_not() {
        let tenant = TenantId::parse("acme").unwrap();
        let event = |size: usize| Event {
            id: EventId::generate(),
            tenant: tenant.clone(),
            event_type: EventType::parse("a.b").unwrap(),
            created_at: from_ms(1_700_000_000_123),
            payload: bytes::Bytes::from(format!("\"{}\"", "\\".repeat(size))),
            ordering_key: None,
            traceparent: None,
            only_for: None,
        };
        let carry = |e: &Event| {
            let mut m = DeliveryMessage::new("acme", "sub_1", e.id.as_str(), "a.b");
            m.event = CarriedEvent::of(e);
            serde_json::from_str::<DeliveryMessage>(&m.body().unwrap()).unwrap()
        };
        let small = event(1024);
        let back = carry(&small)
            .event
            .unwrap()
            .event(&tenant, &small.id)
            .unwrap();
        assert_eq!(
            (back.payload, back.created_at, back.event_type),
            (small.payload, small.created_at, small.event_type)
        );
        // A character SQS refuses in a body: sent without it.
        let odd = Event {
            payload: bytes::Bytes::from("{\"a\":\"\u{FFFF}\"}"),
            ..event(10)
        };
        assert!(carry(&odd).event.is_none());
        // Escaping doubles this body past the limit: sent without it.
        assert!(carry(&event(20 * 1024)).event.is_none());
        assert!(carry(&event(200 * 1024)).event.is_none());
    }
}
