//! The bodies of hooklane's SQS messages and their deduplication ids.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

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
}

impl DeliveryMessage {
    /// The message group: the subscription's lane.
    pub fn group(&self) -> String {
        match &self.lane {
            Some(lane) => format!("{}#{lane}", self.subscription_id),
            None => self.subscription_id.clone(),
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
}
