//! Endpoint statistics (`GET …/subscriptions/{id}/stats`, the portal's
//! endpoint page): success rate, latency and volume over the last 24
//! hours and 7 days, computed from the subscription's attempt log, newest
//! first. A request reads at most [`MAX_READ`] attempts
//! ([`Engine::scan_attempts`]): on DynamoDB a bounded number of queries
//! whatever the endpoint's volume. When the cap is reached before the window's start,
//! the figures are of the attempts read and `complete` is false.
//! Re-enable probes and the entry a suspension adds (a copy of the attempt
//! that caused it) are left out; every other attempt that did not end in
//! a 2xx counts as failed.

use time::{Duration, OffsetDateTime, Time};

use super::Engine;
use crate::domain::{Attempt, Subscription};
use crate::ports::StoreResult;

/// The most attempts one request reads.
pub const MAX_READ: usize = 2_000;

/// Attempts of one window.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Window {
    /// Attempts started in it.
    pub attempts: u64,
    /// Of those, the ones that got a 2xx.
    pub delivered: u64,
    /// Durations (send to answer or timeout) at the 50th and 95th
    /// percentile, in milliseconds; `None` without attempts.
    pub latency_ms: Option<(u64, u64)>,
}

impl Window {
    /// The share delivered, `None` without attempts.
    pub fn success_rate(&self) -> Option<f64> {
        (self.attempts > 0).then(|| self.delivered as f64 / self.attempts as f64)
    }
}

/// Attempts started in one hour or day.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bucket {
    /// Its start (UTC).
    pub start: OffsetDateTime,
    /// Attempts that got a 2xx.
    pub delivered: u64,
    /// The others.
    pub failed: u64,
}

/// An endpoint's statistics at `at`.
#[derive(Debug, Clone, PartialEq)]
pub struct EndpointStats {
    /// When they were computed.
    pub at: OffsetDateTime,
    /// The last 24 hours.
    pub day: Window,
    /// The last 7 days.
    pub week: Window,
    /// The 24 hours up to this one, oldest first.
    pub hourly: Vec<Bucket>,
    /// The 7 days up to today (UTC), oldest first.
    pub daily: Vec<Bucket>,
    /// Attempts read.
    pub read: usize,
    /// Whether every attempt of the 7 days was read.
    pub complete: bool,
}

fn window(attempts: &[&Attempt]) -> Window {
    let mut took: Vec<u64> = attempts.iter().map(|a| a.duration_ms).collect();
    took.sort_unstable();
    let at = |p: usize| took[(took.len() - 1) * p / 100];
    Window {
        attempts: attempts.len() as u64,
        delivered: attempts.iter().filter(|a| delivered(a)).count() as u64,
        latency_ms: (!took.is_empty()).then(|| (at(50), at(95))),
    }
}

fn delivered(a: &Attempt) -> bool {
    a.outcome == "delivered"
}

fn buckets(attempts: &[&Attempt], first: OffsetDateTime, step: Duration, n: i64) -> Vec<Bucket> {
    let mut out: Vec<Bucket> = (0..n)
        .map(|i| Bucket {
            start: first + step * i as i32,
            delivered: 0,
            failed: 0,
        })
        .collect();
    for a in attempts {
        let i = ((a.started_at - first).whole_seconds()).div_euclid(step.whole_seconds());
        if let Some(b) = usize::try_from(i).ok().and_then(|i| out.get_mut(i)) {
            if delivered(a) {
                b.delivered += 1;
            } else {
                b.failed += 1;
            }
        }
    }
    out
}

/// The statistics of `attempts` (newest first, or in any order) at `at`.
pub fn compute(attempts: &[Attempt], at: OffsetDateTime, complete: bool) -> EndpointStats {
    // A suspension's entry repeats the attempt that caused it.
    let counted: Vec<&Attempt> = attempts
        .iter()
        .filter(|a| !a.outcome.starts_with("probe_") && a.outcome != "suspended")
        .filter(|a| a.started_at <= at)
        .collect();
    let since = |d: Duration| -> Vec<&Attempt> {
        counted
            .iter()
            .copied()
            .filter(|a| a.started_at > at - d)
            .collect()
    };
    let (day, week) = (since(Duration::DAY), since(Duration::WEEK));
    let hour = at.replace_time(Time::from_hms(at.hour(), 0, 0).unwrap_or(Time::MIDNIGHT));
    let midnight = at.replace_time(Time::MIDNIGHT);
    EndpointStats {
        at,
        hourly: buckets(&week, hour - Duration::hours(23), Duration::HOUR, 24),
        daily: buckets(&week, midnight - Duration::days(6), Duration::DAY, 7),
        day: window(&day),
        week: window(&week),
        read: attempts.len(),
        complete,
    }
}

impl Engine {
    /// `sub`'s statistics now, from at most [`MAX_READ`] of its attempts.
    pub async fn stats(&self, sub: &Subscription) -> StoreResult<EndpointStats> {
        let at = self.ports.clock.now();
        let (mut read, since) = (Vec::new(), at - Duration::WEEK);
        let scanned = self
            .scan_attempts(sub, None, MAX_READ, |_, a| {
                let inside = a.started_at > since;
                if inside {
                    read.push(a);
                }
                inside
            })
            .await?;
        let complete = scanned.ended || scanned.stopped;
        Ok(compute(&read, at, complete))
    }
}

#[cfg(test)]
mod tests {
    use time::macros::datetime;

    use super::*;
    use crate::domain::{AttemptId, EventId, SubscriptionId, TenantId};

    fn attempt(started_at: OffsetDateTime, outcome: &str, duration_ms: u64) -> Attempt {
        Attempt {
            id: AttemptId::generate(),
            tenant: TenantId::parse("t").unwrap(),
            subscription_id: SubscriptionId::generate(),
            event_id: EventId::generate(),
            event_type: None,
            attempt: 1,
            started_at,
            duration_ms,
            status_code: None,
            outcome: outcome.into(),
            error: None,
            response_excerpt: None,
            response_headers: None,
        }
    }

    #[test]
    fn windows_and_buckets_count_each_attempt_where_it_started() {
        let at = datetime!(2026-12-07 15:40 UTC);
        let log = [
            attempt(datetime!(2026-12-07 15:10 UTC), "delivered", 10),
            attempt(datetime!(2026-12-07 15:05 UTC), "retrying", 30),
            attempt(datetime!(2026-12-07 15:05 UTC), "suspended", 30),
            attempt(datetime!(2026-12-07 14:59 UTC), "delivered", 20),
            attempt(datetime!(2026-12-07 14:00 UTC), "probe_failed", 5),
            attempt(datetime!(2026-12-06 16:00 UTC), "parked", 1000),
            attempt(datetime!(2026-12-06 15:00 UTC), "delivered", 40),
            attempt(datetime!(2026-12-01 09:00 UTC), "delivered", 50),
            attempt(datetime!(2026-11-30 15:40 UTC), "delivered", 60),
        ];
        let s = compute(&log, at, true);
        assert_eq!(
            (s.day.attempts, s.day.delivered),
            (4, 2),
            "probe and 24 h bound out"
        );
        assert_eq!(s.day.success_rate(), Some(0.5));
        assert_eq!(s.day.latency_ms, Some((20, 30)));
        assert_eq!(
            (s.week.attempts, s.week.delivered),
            (6, 4),
            "7 d bound is exclusive"
        );
        assert_eq!(s.week.latency_ms, Some((30, 50)));
        assert_eq!(s.hourly.len(), 24);
        assert_eq!(s.hourly[0].start, datetime!(2026-12-06 16:00 UTC));
        assert_eq!((s.hourly[0].delivered, s.hourly[0].failed), (0, 1));
        assert_eq!((s.hourly[22].delivered, s.hourly[22].failed), (1, 0));
        assert_eq!((s.hourly[23].delivered, s.hourly[23].failed), (1, 1));
        assert_eq!(s.daily.len(), 7);
        assert_eq!(s.daily[0].start, datetime!(2026-12-01 00:00 UTC));
        assert_eq!(
            (
                s.daily[0].delivered,
                s.daily[5].failed,
                s.daily[6].delivered
            ),
            (1, 1, 2)
        );
        let empty = compute(&[], at, true);
        assert_eq!(
            (empty.day.success_rate(), empty.week.latency_ms),
            (None, None)
        );
    }
}
