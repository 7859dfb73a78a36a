//! Endpoint health's unit tests: the health record, the graded policy,
//! the backfill ramp and the circuit breaker.

use super::*;
use crate::domain::{AttemptId, EventId, SubscriptionId, TenantId};

fn attempt(at: OffsetDateTime, status: Option<u16>) -> Attempt {
    Attempt {
        id: AttemptId::generate(),
        tenant: TenantId::parse("t").unwrap(),
        subscription_id: SubscriptionId::generate(),
        event_id: EventId::generate(),
        event_type: None,
        attempt: 1,
        started_at: at,
        duration_ms: 1,
        status_code: status,
        outcome: if status == Some(200) {
            "delivered"
        } else {
            "parked"
        }
        .into(),
        error: None,
        response_excerpt: None,
        response_headers: None,
    }
}

fn seq(at: OffsetDateTime) -> Sequence {
    Sequence {
        first_attempt_at: at,
        event_at: at,
    }
}

fn streak(n: u32, class: FailureClass, first: OffsetDateTime) -> Health {
    let mut h = Health::default();
    for _ in 0..n {
        h = next_health(&h, &attempt(first, Some(500)), Some(class), seq(first));
    }
    h
}

#[test]
fn four_failures_then_a_success_reset_the_count_and_the_first_failure_time() {
    let t0 = OffsetDateTime::now_utc();
    let h = streak(4, FailureClass::Retryable, t0);
    assert_eq!(h.consecutive_failures, 4);
    let h = next_health(&h, &attempt(t0, Some(200)), None, seq(t0));
    assert_eq!(h.consecutive_failures, 0);
    assert!(h.first_failure_at.is_none());
    assert_eq!(h.last_outcome.as_deref(), Some("delivered"));
}

#[test]
fn thirty_retryable_failures_suspend_only_after_twelve_hours() {
    let p = SuspendPolicy::default();
    let now = OffsetDateTime::now_utc();
    let recent = streak(
        30,
        FailureClass::Retryable,
        now - time::Duration::minutes(10),
    );
    assert_eq!(p.reached(&recent, now), None);
    let old = streak(30, FailureClass::Retryable, now - time::Duration::hours(13));
    assert_eq!(p.reached(&old, now), Some(FailureClass::Retryable));
}

#[test]
fn severe_classes_suspend_sooner_and_count_toward_milder_limits() {
    let p = SuspendPolicy::default();
    let now = OffsetDateTime::now_utc();
    let fatal = streak(3, FailureClass::Fatal, now - time::Duration::minutes(16));
    assert_eq!(p.reached(&fatal, now), Some(FailureClass::Fatal));
    let mut mixed = streak(
        3,
        FailureClass::Permanent,
        now - time::Duration::minutes(61),
    );
    for _ in 0..2 {
        mixed = next_health(
            &mixed,
            &attempt(now, None),
            Some(FailureClass::Fatal),
            seq(now),
        );
    }
    assert_eq!(p.reached(&mixed, now), Some(FailureClass::Permanent));
    let few = streak(4, FailureClass::Permanent, now - time::Duration::hours(2));
    assert_eq!(p.reached(&few, now), None, "count not reached");
}

#[test]
fn the_policy_parses_and_names_what_is_wrong() {
    let p = SuspendPolicy::parse("retryable=2/1s,fatal=1/0s").unwrap();
    assert_eq!(p.retryable.count, 2);
    assert_eq!(p.permanent, SuspendPolicy::default().permanent);
    assert!(SuspendPolicy::parse("sometimes=1/1s")
        .unwrap_err()
        .contains("sometimes"));
    assert!(SuspendPolicy::parse("fatal=0/1s").is_err());
    assert!(SuspendPolicy::parse("fatal=3").is_err());
}

#[test]
fn the_breaker_opens_after_n_failures_defers_then_lets_one_attempt_through() {
    let cfg = BreakerConfig::parse("failures=2,open=10s,max_open=15s").unwrap();
    let t0 = OffsetDateTime::now_utc();
    let b = Breaker::Closed { failures: 0 }.after(false, &cfg, t0);
    assert_eq!(b, Breaker::Closed { failures: 1 });
    let b = b.after(false, &cfg, t0);
    assert!(matches!(b, Breaker::Open { .. }));
    assert!(matches!(
        b.admit(t0 + time::Duration::seconds(5)).0,
        Admit::Defer(_)
    ));
    let (admit, half) = b.admit(t0 + time::Duration::seconds(11));
    assert_eq!(admit, Admit::Go);
    assert!(matches!(half, Breaker::HalfOpen { .. }));
    let reopened = half.after(false, &cfg, t0);
    assert_eq!(
        reopened,
        Breaker::Open {
            until: t0 + Duration::from_secs(15),
            open_for: Duration::from_secs(15)
        },
        "doubled, capped at max_open"
    );
    assert_eq!(half.after(true, &cfg, t0), Breaker::Closed { failures: 0 });
}

#[test]
fn backfill_ramps_from_a_quarter_to_the_full_rate_over_two_minutes() {
    assert_eq!(
        backfill_interval(4.0, Duration::ZERO),
        Duration::from_secs(1)
    );
    assert_eq!(
        backfill_interval(4.0, Duration::from_secs(600)),
        Duration::from_millis(250)
    );
    let mid = backfill_interval(4.0, Duration::from_secs(60));
    assert!(mid > Duration::from_millis(250) && mid < Duration::from_secs(1));
}

#[test]
fn a_streak_of_a_minute_starts_the_ramp_whether_its_deliveries_parked_or_retried() {
    let ramp = super::RampConfig::default();
    let t0 = time::OffsetDateTime::UNIX_EPOCH + time::Duration::days(20_000);
    let ok = Health::default();
    let failing = Health {
        consecutive_failures: 2,
        first_failure_at: Some(t0),
        ..Health::default()
    };
    let after = |s: i64| t0 + time::Duration::seconds(s);
    // Parked deliveries began the streak: a success 61 s on starts a ramp.
    assert_eq!(ramp.until(&failing, &ok, None, after(61)), Some(after(181)));
    // Nothing parked, but this delivery failed since t0 and now succeeded.
    assert_eq!(ramp.until(&ok, &ok, Some(t0), after(61)), Some(after(181)));
    // Shorter than a minute: no ramp.
    assert_eq!(ramp.until(&ok, &ok, Some(t0), after(30)), None);
    // A ramp under way goes on; one over is gone.
    let ramping = Health {
        ramp_until: Some(after(100)),
        ..Health::default()
    };
    assert_eq!(ramp.until(&ramping, &ok, None, after(50)), Some(after(100)));
    assert_eq!(ramp.until(&ramping, &ok, None, after(101)), None);
}

#[test]
fn an_unchanged_record_is_written_again_only_once_its_time_is_stale() {
    let t0 = time::OffsetDateTime::UNIX_EPOCH + time::Duration::days(20_000);
    let at = |s: i64| t0 + time::Duration::seconds(s);
    let ok = |s: i64| {
        next_health(
            &Health::default(),
            &attempt(at(s), Some(200)),
            None,
            seq(at(s)),
        )
    };
    let minute = Duration::from_secs(60);
    // The same success 30 s on: not written; 60 s on: written.
    assert!(!health_write_due(&ok(0), &ok(30), minute));
    assert!(health_write_due(&ok(0), &ok(60), minute));
    // Zero refresh: every record written.
    assert!(health_write_due(&ok(0), &ok(0), Duration::ZERO));
    // Anything else changed: written at once.
    let mut other_status = ok(1);
    other_status.last_status_code = Some(204);
    assert!(health_write_due(&ok(0), &other_status, minute));
    let failed = next_health(
        &ok(0),
        &attempt(at(1), Some(500)),
        Some(FailureClass::Retryable),
        seq(at(1)),
    );
    assert!(health_write_due(&ok(0), &failed, minute));
    // A success after a failure resets the streak: written.
    assert!(health_write_due(&failed, &ok(2), minute));
    // A record never written before: written.
    assert!(health_write_due(&Health::default(), &ok(0), minute));
}

#[test]
fn a_failure_ending_after_the_suspension_adds_nothing_to_the_count_it_wrote() {
    let t0 = OffsetDateTime::UNIX_EPOCH;
    let failed = HealthWrite::Failed(FailedSequence {
        last: attempt(t0, Some(500)),
        class: FailureClass::Retryable,
        seq: seq(t0),
        ramp: RampConfig::default(),
    });
    let streak = streak(3, FailureClass::Retryable, t0);
    assert_eq!(
        failed.over(&streak).consecutive_failures,
        4,
        "counted while active"
    );
    let reached = projected(&streak, FailureClass::Retryable, 2, t0);
    let written = crate::health::StatusChange::suspend(t0, "why", &reached)
        .health
        .expect("written");
    assert_eq!(written.consecutive_failures, 5);
    assert_eq!(
        failed.over(&written),
        written,
        "its failure was one of the 5"
    );
    let delivered = HealthWrite::Set(Health::default());
    assert_eq!(
        delivered.over(&written),
        Health::default(),
        "a success still resets"
    );
}
