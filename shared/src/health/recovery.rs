//! When a success ends a failure streak long enough to tell operators
//! (`subscription.recovered`), and the streak's name, which every process
//! that reads the same health record derives alike, so the operator event
//! is sent once however many lanes succeed at once.
//!
//! A subscription fails from the earlier of its health record's streak
//! (sequences that ended failed) and the first attempt of the delivery
//! that just succeeded after retries (deliveries in retry are not in the
//! health record until they end). A delivery in retry whose subscription
//! has delivered since that delivery's first attempt recovered already:
//! its success is no new recovery.

use std::time::Duration;

use time::OffsetDateTime;

use crate::domain::Health;

/// A recovery: when the streak began, and the streak's name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Recovery {
    /// When the subscription began failing.
    pub failing_since: OffsetDateTime,
    /// The streak's name: the health record's first failure, or, when it
    /// records none, its last ended attempt (the streak began after it),
    /// in unix milliseconds.
    pub streak: i128,
}

/// The recovery a success at `at` ends, if the subscription had failed
/// for at least `after`: `prev` is the health record the delivery read,
/// `own_first` the first attempt of the delivery that succeeded when it
/// was a retry.
pub fn recovery(
    prev: &Health,
    own_first: Option<OffsetDateTime>,
    at: OffsetDateTime,
    after: Duration,
) -> Option<Recovery> {
    let own = own_first.filter(|first| {
        // Delivered since this delivery began failing: recovered before.
        let delivered_since = prev.last_outcome.as_deref() == Some("delivered")
            && prev.last_attempt_at.is_some_and(|t| t >= *first);
        prev.first_failure_at.is_some() || !delivered_since
    });
    let since = match (prev.first_failure_at, own) {
        (Some(a), Some(b)) => a.min(b),
        (a, b) => a.or(b)?,
    };
    if at - since < after {
        return None;
    }
    let name = prev
        .first_failure_at
        .or(prev.last_attempt_at)
        .unwrap_or(OffsetDateTime::UNIX_EPOCH);
    Some(Recovery {
        failing_since: since,
        streak: name.unix_timestamp_nanos() / 1_000_000,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIN: Duration = Duration::from_secs(60);

    fn t(secs: i64) -> OffsetDateTime {
        OffsetDateTime::UNIX_EPOCH + time::Duration::seconds(1_700_000_000 + secs)
    }

    fn delivered_at(secs: i64) -> Health {
        Health {
            last_outcome: Some("delivered".into()),
            last_attempt_at: Some(t(secs)),
            ..Health::default()
        }
    }

    #[test]
    fn a_streak_in_the_health_record_recovers_once_it_lasted_a_minute() {
        let failing = Health {
            consecutive_failures: 3,
            first_failure_at: Some(t(0)),
            last_outcome: Some("parked".into()),
            last_attempt_at: Some(t(50)),
            ..Health::default()
        };
        assert_eq!(recovery(&failing, None, t(59), MIN), None, "too short");
        let r = recovery(&failing, None, t(60), MIN).expect("a minute");
        assert_eq!(r.failing_since, t(0));
        // A retry that began earlier than the record's streak moves the
        // start, not the name.
        let r2 = recovery(&failing, Some(t(-30)), t(60), MIN).unwrap();
        assert_eq!((r2.failing_since, r2.streak), (t(-30), r.streak));
    }

    #[test]
    fn retries_alone_recover_and_lanes_reading_one_record_name_one_streak() {
        let healthy = delivered_at(0);
        assert_eq!(recovery(&healthy, None, t(500), MIN), None, "no streak");
        assert_eq!(recovery(&healthy, Some(t(10)), t(69), MIN), None);
        let a = recovery(&healthy, Some(t(10)), t(300), MIN).expect("lane a");
        let b = recovery(&healthy, Some(t(20)), t(301), MIN).expect("lane b");
        assert_eq!(a.failing_since, t(10));
        assert_eq!(a.streak, b.streak, "one occurrence");
    }

    #[test]
    fn a_retry_whose_subscription_delivered_since_it_began_is_no_new_recovery() {
        // Lane a recovered at 300 and wrote the record; lane b, failing
        // since 20, reads it and succeeds at 301.
        let after_a = delivered_at(300);
        assert_eq!(recovery(&after_a, Some(t(20)), t(301), MIN), None);
        // One that began failing after that success is a streak of its own.
        assert!(recovery(&after_a, Some(t(310)), t(400), MIN).is_some());
    }
}
