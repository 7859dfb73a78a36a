//! Endpoint health (G8), pure: the health record after a retry sequence
//! ends, the graded suspension policy (count AND duration per failure
//! class), the backfill rate ramp, and the per-subscription circuit
//! breaker. Time is an argument everywhere.
//!
//! Classes are graded by severity (fatal > permanent > retryable). A class's
//! limit counts the streak's failures of that class or a more severe one:
//! a streak of 3 permanent failures and 2 "host gone" failures has 5
//! failures for the permanent limit and 2 for the fatal one. A success
//! resets the whole record.

use std::time::Duration;

use time::OffsetDateTime;

use crate::domain::{Attempt, Health};
use crate::policy::FailureClass;

/// One class's suspension limits: both must be reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limit {
    /// Consecutive failed deliveries.
    pub count: u32,
    /// Time since the streak's first failure.
    pub after: Duration,
}

/// The graded policy (`HOOKLANE_SUSPEND_POLICY`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SuspendPolicy {
    /// 5xx, 408, 425, 429, timeouts, connection errors.
    pub retryable: Limit,
    /// Other 4xx, TLS failures, refused addresses.
    pub permanent: Limit,
    /// The host no longer resolves.
    pub fatal: Limit,
}

impl Default for SuspendPolicy {
    fn default() -> Self {
        let limit = |count, secs| Limit {
            count,
            after: Duration::from_secs(secs),
        };
        Self {
            retryable: limit(25, 12 * 3600),
            permanent: limit(5, 3600),
            fatal: limit(3, 15 * 60),
        }
    }
}

impl SuspendPolicy {
    /// Parses `retryable=25/12h,permanent=5/1h,fatal=3/15m` (any subset;
    /// the rest keep their defaults).
    pub fn parse(raw: &str) -> Result<Self, String> {
        let mut p = Self::default();
        for part in raw.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let (class, limit) = part
                .split_once('=')
                .ok_or_else(|| format!("`{part}`: use class=count/duration"))?;
            let (count, after) = limit
                .split_once('/')
                .ok_or_else(|| format!("`{part}`: use class=count/duration"))?;
            let limit = Limit {
                count: count
                    .parse()
                    .ok()
                    .filter(|n| *n >= 1)
                    .ok_or_else(|| format!("`{count}` is not a count of at least 1"))?,
                after: humantime::parse_duration(after).map_err(|e| format!("`{after}`: {e}"))?,
            };
            match class {
                "retryable" => p.retryable = limit,
                "permanent" => p.permanent = limit,
                "fatal" => p.fatal = limit,
                other => return Err(format!("`{other}` is not retryable, permanent or fatal")),
            }
        }
        Ok(p)
    }

    /// The class whose limits the record reaches at `now`, most severe
    /// first; `None` while the endpoint stays active.
    pub fn reached(&self, h: &Health, now: OffsetDateTime) -> Option<FailureClass> {
        let since = h.first_failure_at?;
        let elapsed: Duration = (now - since).try_into().unwrap_or_default();
        let fatal = h.fatal_failures;
        let permanent = fatal.saturating_add(h.permanent_failures);
        let all = h.consecutive_failures;
        [
            (FailureClass::Fatal, self.fatal, fatal),
            (FailureClass::Permanent, self.permanent, permanent),
            (FailureClass::Retryable, self.retryable, all),
        ]
        .into_iter()
        .find(|(_, limit, n)| *n >= limit.count && elapsed >= limit.after)
        .map(|(class, _, _)| class)
    }
}

/// Where a finished delivery's retry sequence began: its first attempt,
/// and when its event was accepted.
#[derive(Debug, Clone, Copy)]
pub struct Sequence {
    /// The first attempt's start.
    pub first_attempt_at: OffsetDateTime,
    /// When the event was accepted.
    pub event_at: OffsetDateTime,
}

/// The health record after a retry sequence ended: a success resets it; a
/// parked delivery extends the streak, which began at the first attempt of
/// its first failed delivery.
pub fn next_health(
    prev: &Health,
    last: &Attempt,
    class: Option<FailureClass>,
    seq: Sequence,
) -> Health {
    let mut h = Health {
        last_outcome: Some(last.outcome.clone()),
        last_status_code: last.status_code,
        last_error: last.error.clone(),
        last_attempt_at: Some(last.started_at),
        ..Health::default()
    };
    let Some(class) = class else { return h };
    h.consecutive_failures = prev.consecutive_failures + 1;
    h.first_failure_at = prev.first_failure_at.or(Some(seq.first_attempt_at));
    h.streak_events_since = prev.streak_events_since.or(Some(seq.event_at));
    h.retryable_failures = prev.retryable_failures + u32::from(class == FailureClass::Retryable);
    h.permanent_failures = prev.permanent_failures + u32::from(class == FailureClass::Permanent);
    h.fatal_failures = prev.fatal_failures + u32::from(class == FailureClass::Fatal);
    h
}

/// How a finished delivery's retry sequence writes the health record.
#[derive(Debug, Clone)]
pub enum HealthWrite {
    /// This record replaces the stored one: a success (which ends any
    /// streak, whatever another lane wrote meanwhile).
    Set(Health),
    /// A failure ended the sequence: the record written is
    /// [`FailedSequence::over`] the record as stored at the write, not as
    /// read before the attempt, so that sequences of several lanes (or
    /// processes) ending at once each count (G8).
    Failed(FailedSequence),
}

impl HealthWrite {
    /// The record to store over `stored`.
    pub fn over(&self, stored: &Health) -> Health {
        match self {
            Self::Set(h) => h.clone(),
            Self::Failed(f) => f.over(stored),
        }
    }
}

/// A retry sequence that ended failed (parked), as [`HealthWrite::Failed`]
/// applies it.
#[derive(Debug, Clone)]
pub struct FailedSequence {
    /// Its last attempt.
    pub last: Attempt,
    /// How that attempt failed.
    pub class: FailureClass,
    /// Where the sequence began.
    pub seq: Sequence,
    /// The recovery ramp in force (a ramp in progress is kept).
    pub ramp: RampConfig,
}

impl FailedSequence {
    /// The record after this sequence, over `stored`. Over the record a
    /// suspension wrote, nothing: this failure is in its count already.
    pub fn over(&self, stored: &Health) -> Health {
        if stored.at_suspension {
            return stored.clone();
        }
        let mut h = next_health(stored, &self.last, Some(self.class), self.seq);
        h.ramp_until = self.ramp.until(stored, &h, None, self.last.started_at);
        h
    }
}

/// Whether the health record after a sequence ended needs writing, when
/// the store refreshes an unchanged record's `last_attempt_at` at most
/// every `refresh` (a store that bills each write: AWS). A record that
/// differs from `prev` in anything but that time is always written; one
/// that differs only in it is written once `refresh` has passed since
/// the stored time. With `refresh` zero every record is written.
pub fn health_write_due(prev: &Health, next: &Health, refresh: Duration) -> bool {
    let same_but_time = Health {
        last_attempt_at: prev.last_attempt_at,
        ..next.clone()
    } == *prev;
    let stale = match (prev.last_attempt_at, next.last_attempt_at) {
        (Some(then), Some(now)) => (now - then).try_into().unwrap_or(Duration::ZERO) >= refresh,
        _ => true,
    };
    !same_but_time || stale
}

/// The record suspension compares while deliveries are failing and not
/// ended (G8): the finished failures of `prev`, plus the `failing`
/// deliveries in retry or waiting behind one (each counted once, in the
/// class of the attempt that just failed), since the earlier of the
/// streak's start and `since` (the failing delivery's first attempt). Under
/// steady traffic the count is soon reached, so the duration decides, on
/// one lane or many. Never stored: the health record is written when a
/// delivery's retries end.
pub fn projected(
    prev: &Health,
    class: FailureClass,
    failing: u64,
    since: OffsetDateTime,
) -> Health {
    let n = u32::try_from(failing).unwrap_or(u32::MAX);
    let mut h = prev.clone();
    h.consecutive_failures = prev.consecutive_failures.saturating_add(n);
    h.first_failure_at = Some(prev.first_failure_at.map_or(since, |f| f.min(since)));
    match class {
        FailureClass::Retryable => h.retryable_failures = h.retryable_failures.saturating_add(n),
        FailureClass::Permanent => h.permanent_failures = h.permanent_failures.saturating_add(n),
        FailureClass::Fatal => h.fatal_failures = h.fatal_failures.saturating_add(n),
    }
    h
}

/// The recovery ramp (`HOOKLANE_RECOVERY_RAMP`, `after=1m,for=2m`, or
/// `off`): when a failure streak at least `after` long ends, the
/// subscription runs at a quarter of its lanes and of its rate limit for
/// `period`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RampConfig {
    /// The shortest streak whose end starts a ramp.
    pub after: Duration,
    /// How long the ramp lasts (zero: no ramp).
    pub period: Duration,
}

impl Default for RampConfig {
    fn default() -> Self {
        Self {
            after: Duration::from_secs(60),
            period: Duration::from_secs(120),
        }
    }
}

impl RampConfig {
    /// Parses `after=D,for=D` (any subset) or `off`.
    pub fn parse(raw: &str) -> Result<Self, String> {
        if raw.trim() == "off" {
            return Ok(Self {
                period: Duration::ZERO,
                ..Self::default()
            });
        }
        let mut c = Self::default();
        for part in raw.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let (k, v) = part
                .split_once('=')
                .ok_or_else(|| format!("`{part}`: use key=value, or off"))?;
            let d = humantime::parse_duration(v).map_err(|e| format!("`{v}`: {e}"))?;
            match k {
                "after" => c.after = d,
                "for" => c.period = d,
                other => return Err(format!("`{other}` is not after or for")),
            }
        }
        Ok(c)
    }

    /// When the ramp of `next` (the record after a sequence ended at `at`)
    /// ends: a success that ended a streak of at least `after` starts one;
    /// otherwise a ramp under way goes on. The streak began at the record's
    /// first failure or, when earlier, at `failing_since` (the first
    /// attempt of the delivery that just succeeded after failing: an
    /// outage that retries cover parks nothing).
    pub fn until(
        self,
        prev: &Health,
        next: &Health,
        failing_since: Option<OffsetDateTime>,
        at: OffsetDateTime,
    ) -> Option<OffsetDateTime> {
        let since = match (prev.first_failure_at, failing_since) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let ended_streak =
            next.consecutive_failures == 0 && since.is_some_and(|since| at - since >= self.after);
        if ended_streak && !self.period.is_zero() {
            return Some(at + self.period);
        }
        prev.ramp_until.filter(|t| *t > at)
    }
}

/// Backfill pacing: `rate` per second, starting at a quarter of it and
/// ramping up linearly over the first two minutes.
pub fn backfill_interval(rate: f64, since_start: Duration) -> Duration {
    const RAMP: f64 = 120.0;
    let progress = (since_start.as_secs_f64() / RAMP).min(1.0);
    let current = rate * (0.25 + 0.75 * progress);
    Duration::from_secs_f64(1.0 / current.max(0.01))
}

mod breaker;
mod recovery;
mod status;
pub use breaker::*;
pub use recovery::{recovery, Recovery};
pub use status::StatusChange;

#[cfg(test)]
mod tests;
