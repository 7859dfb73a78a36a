//! The requeue rule: which deliveries a replay or a backfill takes back
//! to the end of their lanes with a fresh ladder, by the state of their
//! record.

use super::DeliveryState;

/// Which deliveries a requeue takes back to the end of their lanes with a
/// fresh ladder: the one rule both stores apply, each inside its own
/// atomic write (a conditional update on DynamoDB, one transaction on
/// SQLite).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Retake {
    /// Parked ones only: a dead-letter replay.
    Parked,
    /// Those the subscription did not get: parked, held, or never queued
    /// (suspended at fan-out); delivered, pending (queued or in flight) and
    /// dropped ones are left as they are. A backfill after re-enabling.
    Missed,
}

impl Retake {
    /// Whether the rule takes a delivery in `state` (`None`: the store has
    /// no delivery of the pair).
    pub fn takes(self, state: Option<DeliveryState>) -> bool {
        match self {
            Self::Parked => state == Some(DeliveryState::Parked),
            Self::Missed => matches!(
                state,
                None | Some(DeliveryState::Parked | DeliveryState::Held)
            ),
        }
    }

    /// The stored states the rule takes.
    pub fn states(self) -> Vec<DeliveryState> {
        DeliveryState::ALL
            .into_iter()
            .filter(|s| self.takes(Some(*s)))
            .collect()
    }
}
