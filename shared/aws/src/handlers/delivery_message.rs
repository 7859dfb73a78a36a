//! A message of the delivery queues as the delivery handler reads it: a
//! delivery (its tenant, subscription, event, lane, and the event itself
//! when carried) or the fence of an old lane after a change of lanes.
//! Parsed once per message; a message that does not parse is parked by the
//! handler with the reason this gives.

use aws_lambda_events::event::sqs::SqsMessage;
use hooklane_core::domain::{Event, EventId, EventType, SubscriptionId, TenantId};

use crate::messages::{After, DeliveryMessage};

pub(super) struct Parsed {
    pub(super) tenant: TenantId,
    pub(super) sub: SubscriptionId,
    pub(super) event: EventId,
    pub(super) event_type: EventType,
    /// The event itself, when the message carries it.
    pub(super) carried: Option<Event>,
    /// Its live lane.
    pub(super) lane: u16,
    /// The fence of an old lane it waits for (a change of lanes).
    pub(super) after: Option<After>,
    /// When it was queued (unix milliseconds; 0: not said).
    pub(super) queued_at: i64,
}

/// What a message on the delivery queue is.
pub(super) enum Message {
    /// A delivery.
    Delivery(Box<Parsed>),
    /// The fence of an old lane after a change of lanes.
    Fence(TenantId, SubscriptionId, After),
}

pub(super) fn parse(m: &SqsMessage) -> Result<Message, String> {
    let body = m.body.as_deref().ok_or("the message has no body")?;
    let msg: DeliveryMessage = serde_json::from_str(body).map_err(|e| e.to_string())?;
    let field = |name: &str, e: hooklane_core::domain::Invalid| format!("{name}: {e}");
    let tenant = TenantId::parse(&msg.tenant).map_err(|e| field("tenant", e))?;
    if let Some(fence) = msg.fence {
        let sub =
            SubscriptionId::parse(&msg.subscription_id).map_err(|e| field("subscription_id", e))?;
        return Ok(Message::Fence(tenant, sub, fence));
    }
    let event = EventId::parse(&msg.event_id).map_err(|e| field("event_id", e))?;
    Ok(Message::Delivery(Box::new(Parsed {
        after: msg.after,
        queued_at: msg.queued_at.unwrap_or(0),
        carried: msg.event.as_ref().and_then(|c| c.event(&tenant, &event)),
        // A backfill delivery is on the backfill lane: live lane 0 for the
        // spill and the recovery ramp.
        lane: if msg.lane.is_some() {
            0
        } else {
            msg.lane_no.unwrap_or(0)
        },
        sub: SubscriptionId::parse(&msg.subscription_id)
            .map_err(|e| field("subscription_id", e))?,
        event_type: EventType::parse(&msg.event_type).map_err(|e| field("event_type", e))?,
        tenant,
        event,
    })))
}
