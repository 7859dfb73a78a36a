//! The guarded status changes of a subscription (G8), as one rule both
//! stores carry out: what a suspension and a re-enable change (status,
//! `suspended_at`, the reason, and the health record a re-enable resets),
//! and from which status each may start. A store applies a change in one
//! conditional write, only while the subscription has the `from` status
//! and is not deleted, so of two concurrent callers one takes effect.

use time::OffsetDateTime;

use crate::domain::{Health, SubscriptionStatus};

/// A change of a subscription's status.
#[derive(Debug, Clone, PartialEq)]
pub struct StatusChange {
    /// The status the change starts from (its condition).
    pub from: SubscriptionStatus,
    /// The status after it.
    pub to: SubscriptionStatus,
    /// When it happens (also the record's `updated_at`).
    pub at: OffsetDateTime,
    /// `suspended_at` after the change (`None`: cleared).
    pub suspended_at: Option<OffsetDateTime>,
    /// The status reason after the change (`None`: cleared).
    pub reason: Option<String>,
    /// The health record after the change (`None`: kept as it is).
    pub health: Option<Health>,
}

impl StatusChange {
    /// `active` → `suspended` at `at`, for `reason`, writing the health
    /// record that reached the policy's limit (failures in retry counted),
    /// so the page, the reason and the policy read one number.
    pub fn suspend(at: OffsetDateTime, reason: &str, health: &Health) -> Self {
        Self {
            from: SubscriptionStatus::Active,
            to: SubscriptionStatus::Suspended,
            at,
            suspended_at: Some(at),
            reason: Some(reason.to_owned()),
            health: Some(Health {
                at_suspension: true,
                ..health.clone()
            }),
        }
    }

    /// `suspended` → `active` at `at`: the suspension and its reason are
    /// cleared and the health record starts afresh.
    pub fn activate(at: OffsetDateTime) -> Self {
        Self {
            from: SubscriptionStatus::Suspended,
            to: SubscriptionStatus::Active,
            at,
            suspended_at: None,
            reason: None,
            health: Some(Health::default()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_suspension_writes_the_health_that_reached_the_limit_and_a_re_enable_resets_it() {
        let at = OffsetDateTime::UNIX_EPOCH;
        let reached = Health {
            consecutive_failures: 12,
            ..Health::default()
        };
        let s = StatusChange::suspend(at, "host gone", &reached);
        assert_eq!(
            (s.from, s.to),
            (SubscriptionStatus::Active, SubscriptionStatus::Suspended)
        );
        assert_eq!(s.suspended_at, Some(at));
        assert_eq!(s.reason.as_deref(), Some("host gone"));
        assert_eq!(
            s.health.map(|h| (h.consecutive_failures, h.at_suspension)),
            Some((12, true)),
            "a suspension writes the record that reached the limit"
        );
        let a = StatusChange::activate(at);
        assert_eq!(
            (a.from, a.to),
            (SubscriptionStatus::Suspended, SubscriptionStatus::Active)
        );
        assert_eq!((a.suspended_at, a.reason), (None, None));
        assert_eq!(a.health, Some(Health::default()), "health starts afresh");
    }
}
