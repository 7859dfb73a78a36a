//! A parked delivery's record as the dead-letter list reads it (its
//! place in the tenant's parked index, `gsi2`, and why it was parked).

use hooklane_core::domain::{DeadLetter, EventId, EventType, SubscriptionId};
use hooklane_core::ports::StoreResult;
use hooklane_core::record::from_ms;

use super::attrs::{corrupt, get_n, get_s, required_n};
use crate::store::Item;

/// A parked record's place in the parked index and its dead letter.
pub(crate) fn dead_letter_of(item: &Item) -> StoreResult<(i64, DeadLetter)> {
    let text = |k: &str| get_s(item, k).ok_or_else(|| corrupt("dead letter"));
    let seq = text("gsi2sk")?
        .parse::<i64>()
        .map_err(|_| corrupt("parked order"))?;
    Ok((
        seq,
        DeadLetter {
            subscription_id: SubscriptionId::parse(text("subscription_id")?)
                .map_err(|_| corrupt("subscription id"))?,
            event_id: EventId::parse(text("event_id")?).map_err(|_| corrupt("event id"))?,
            event_type: EventType::parse(text("event_type")?).map_err(|_| corrupt("event type"))?,
            attempts: required_n(item, "attempts")? as u32,
            last_status_code: get_n(item, "last_status").map(|c| c as u16),
            reason: text("reason")?.to_owned(),
            first_attempt_at: get_n(item, "first_attempt_at").map(from_ms),
            parked_at: from_ms(required_n(item, "parked_at")?),
        },
    ))
}
