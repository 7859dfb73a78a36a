//! How a delivery's turn ends, as the engine hands it to its lane
//! ([`super::LaneQueue::finish`]): the end itself, the state the record
//! takes for it (the one mapping every store writes), the attempt for the
//! log and the health record to write.

use time::OffsetDateTime;

use crate::domain::{Attempt, DeliveryState, Health};
use crate::health::HealthWrite;

/// How a delivery's turn ended.
#[derive(Debug, Clone, PartialEq)]
pub enum End {
    /// A 2xx came back.
    Delivered,
    /// Due again at this time.
    Retry(OffsetDateTime),
    /// No more attempts: parked with this reason.
    Parked(String),
    /// Its subscription is gone: deleted, not parked (G4).
    Dropped,
    /// Its subscription is suspended: not attempted; the backfill after
    /// re-enabling covers it.
    Held,
}

impl End {
    /// The state a delivery's record takes when its turn ends so: the one
    /// mapping every store writes.
    pub fn state(&self) -> DeliveryState {
        match self {
            End::Delivered => DeliveryState::Delivered,
            End::Retry(_) => DeliveryState::Pending,
            End::Parked(_) => DeliveryState::Parked,
            End::Dropped => DeliveryState::Dropped,
            End::Held => DeliveryState::Held,
        }
    }
}

/// What a lane records when a delivery's turn ends: how it ended, the
/// attempt for the log (when one was made), and the subscription's health
/// record (when the retry sequence ended: delivered or parked). Each
/// adapter writes it in as few writes as its store allows and documents
/// its write plan.
#[derive(Debug, Clone)]
pub struct Finish {
    /// How the turn ended.
    pub end: End,
    /// The attempt, when one was made.
    pub attempt: Option<Attempt>,
    /// The health record's write, when the retry sequence ended.
    pub health: Option<HealthWrite>,
    /// Whether the attempt ended because the receiver did not answer in
    /// time (the AWS main pool then moves the lane to its slow pool).
    pub timed_out: bool,
}

/// What [`super::LaneQueue::finish`] did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Finished {
    /// Whether the outcome was recorded: false when the delivery was no
    /// longer pending at this attempt (finished before, or a later attempt
    /// took over).
    pub took: bool,
    /// The health record as written, when one was.
    pub health: Option<Health>,
}

impl Finish {
    /// A turn that ended without an attempt (dropped or held).
    pub fn without_attempt(end: End) -> Self {
        Self {
            end,
            attempt: None,
            health: None,
            timed_out: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::End;
    use crate::domain::DeliveryState;

    #[test]
    fn each_end_of_a_turn_leaves_its_one_record_state() {
        let at = time::OffsetDateTime::UNIX_EPOCH;
        assert_eq!(End::Delivered.state(), DeliveryState::Delivered);
        assert_eq!(End::Retry(at).state(), DeliveryState::Pending);
        assert_eq!(End::Parked("gone".into()).state(), DeliveryState::Parked);
        assert_eq!(End::Dropped.state(), DeliveryState::Dropped);
        assert_eq!(End::Held.state(), DeliveryState::Held);
    }
}
