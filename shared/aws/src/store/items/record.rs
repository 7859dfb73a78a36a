//! A delivery record's item (`D#{subscription}`, `E#{event}`) as the
//! lanes and the views read it: its state and its ladder so far.

use hooklane_core::domain::{DeliveryRecord, DeliveryState};
use hooklane_core::ports::StoreResult;
use hooklane_core::record::from_ms;

use super::attrs::{corrupt, get_n, get_s, required_n};
use crate::store::Item;

/// A record's state: one of those the adapter writes.
pub(crate) fn state_of(item: &Item) -> StoreResult<DeliveryState> {
    get_s(item, "state")
        .and_then(DeliveryState::parse)
        .ok_or_else(|| corrupt("delivery state"))
}

/// A delivery record as stored.
pub(crate) fn record_of(item: &Item) -> StoreResult<DeliveryRecord> {
    Ok(DeliveryRecord {
        state: state_of(item)?,
        attempts: required_n(item, "attempts")? as u32,
        first_attempt_at: get_n(item, "first_attempt_at").map(from_ms),
        next_attempt_at: get_n(item, "next_attempt_at").map(from_ms),
        last_status_code: get_n(item, "last_status").map(|c| c as u16),
        lane: get_n(item, "lane").map(|n| n as u16),
    })
}
