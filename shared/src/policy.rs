//! Retry policy (G6): the ladder, jitter, `Retry-After`, and the
//! classification of one attempt's result into delivered, retry or park.
//!
//! Pure: time and randomness are arguments, so every rule has a golden test.
//! Whether to retry (this module) and how a failure counts toward suspension
//! ([`FailureClass`], G8) are separate decisions.

use std::time::{Duration, SystemTime};

/// The longest a `Retry-After` may push an attempt back.
pub const RETRY_AFTER_CAP: Duration = Duration::from_secs(12 * 3600);

/// Delays before attempts 1..n (attempt 1's is normally zero).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetrySchedule(Vec<Duration>);

impl Default for RetrySchedule {
    fn default() -> Self {
        Self(
            [0, 30, 120, 600, 3600, 6 * 3600]
                .into_iter()
                .map(Duration::from_secs)
                .collect(),
        )
    }
}

impl RetrySchedule {
    /// Parses `0s,30s,2m,10m,1h,6h` (humantime units; `ms` allowed).
    pub fn parse(raw: &str) -> Result<Self, String> {
        let delays = raw
            .split(',')
            .map(|s| humantime::parse_duration(s.trim()).map_err(|e| format!("`{s}`: {e}")))
            .collect::<Result<Vec<_>, _>>()?;
        if delays.is_empty() || delays.len() > 50 {
            return Err("give 1 to 50 delays".into());
        }
        if delays.iter().any(|d| *d > RETRY_AFTER_CAP) {
            return Err("a delay is at most 12h".into());
        }
        Ok(Self(delays))
    }

    /// How many attempts a delivery gets.
    pub fn max_attempts(&self) -> u32 {
        self.0.len() as u32
    }

    /// The delay before attempt `n` (1-based), if there is one.
    pub fn delay_before(&self, n: u32) -> Option<Duration> {
        self.0.get((n as usize).checked_sub(1)?).copied()
    }
}

/// Applies jitter: `delay × (1 + fraction × (2u − 1))` for `u` in [0, 1).
pub fn jittered(delay: Duration, fraction: f64, unit: f64) -> Duration {
    let factor = 1.0 + fraction * (2.0 * unit.clamp(0.0, 1.0) - 1.0);
    delay.mul_f64(factor.max(0.0))
}

/// Parses `Retry-After` (delta seconds or an HTTP date) into a delay from
/// `now`, capped at 12 h. Unparseable values are ignored.
pub fn parse_retry_after(value: &str, now: SystemTime) -> Option<Duration> {
    let value = value.trim();
    let delay = match value.parse::<u64>() {
        Ok(secs) => Duration::from_secs(secs),
        Err(_) => httpdate::parse_http_date(value)
            .ok()?
            .duration_since(now)
            .unwrap_or(Duration::ZERO),
    };
    Some(delay.min(RETRY_AFTER_CAP))
}

/// What one attempt came back with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AttemptResult {
    /// A response arrived.
    Response {
        /// Its status.
        status: u16,
        /// Its `Retry-After`, already parsed.
        retry_after: Option<Duration>,
    },
    /// No response within the attempt timeout.
    Timeout,
    /// The connection failed or was reset.
    Connect(String),
    /// The TLS handshake failed.
    Tls(String),
    /// The host no longer resolves.
    Dns(String),
    /// The host resolves only to refused addresses (egress guard).
    Refused(String),
}

/// How a failure counts toward suspension (G8).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureClass {
    /// 5xx, 408, 425, 429, timeouts, connection errors.
    Retryable,
    /// 4xx other than the retryable ones, TLS failures, refused addresses.
    Permanent,
    /// The host no longer resolves.
    Fatal,
}

impl FailureClass {
    /// `retryable`, `permanent` or `fatal`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Retryable => "retryable",
            Self::Permanent => "permanent",
            Self::Fatal => "fatal",
        }
    }
}

impl AttemptResult {
    /// `success`, or the failure's class name (metrics and traces).
    pub fn outcome_class(&self) -> &'static str {
        self.failure_class().map_or("success", FailureClass::name)
    }

    /// Whether this is a success (2xx).
    pub fn is_success(&self) -> bool {
        matches!(self, Self::Response { status, .. } if (200..300).contains(status))
    }

    /// Whether the ladder goes on after this result (G6).
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::Response { status, .. } => {
                matches!(status, 408 | 425 | 429) || (500..600).contains(status)
            }
            Self::Timeout | Self::Connect(_) | Self::Tls(_) | Self::Dns(_) => true,
            // A target that now resolves to a refused address is a
            // configuration or rebinding problem; retrying it would only
            // knock on the refused address again.
            Self::Refused(_) => false,
        }
    }

    /// How the failure counts toward suspension; `None` on success.
    pub fn failure_class(&self) -> Option<FailureClass> {
        if self.is_success() {
            return None;
        }
        Some(match self {
            Self::Dns(_) => FailureClass::Fatal,
            Self::Tls(_) | Self::Refused(_) => FailureClass::Permanent,
            other if other.is_retryable() => FailureClass::Retryable,
            _ => FailureClass::Permanent,
        })
    }

    /// The status code, if a response arrived.
    pub fn status(&self) -> Option<u16> {
        match self {
            Self::Response { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// A short description of the failure, for logs and reasons.
    pub fn describe(&self) -> String {
        match self {
            Self::Response { status, .. } => format!("status {status}"),
            Self::Timeout => TIMEOUT.into(),
            Self::Connect(e) => format!("connection error: {e}"),
            Self::Tls(e) => format!("tls error: {e}"),
            Self::Dns(e) => format!("dns error: {e}"),
            Self::Refused(e) => format!("refused address: {e}"),
        }
    }
}

/// How a timed-out attempt is described ([`AttemptResult::describe`]).
pub const TIMEOUT: &str = "timeout";

/// What happens to a delivery after one attempt.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// 2xx: done.
    Delivered,
    /// Try again after this delay.
    RetryIn(Duration),
    /// No more attempts: parked with this reason.
    Park(String),
}

/// Decides what follows attempt number `attempt` (1-based) given its
/// result; `unit` is a uniform random number in [0, 1) for jitter.
pub fn decide(
    schedule: &RetrySchedule,
    jitter: f64,
    attempt: u32,
    result: &AttemptResult,
    unit: f64,
) -> Decision {
    if result.is_success() {
        return Decision::Delivered;
    }
    if !result.is_retryable() {
        return Decision::Park(format!("{} (not retried)", result.describe()));
    }
    let Some(base) = schedule.delay_before(attempt + 1) else {
        return Decision::Park(format!(
            "gave up after {attempt} attempts; last: {}",
            result.describe()
        ));
    };
    let honours_retry_after = matches!(result.status(), Some(429 | 503));
    match result {
        AttemptResult::Response {
            retry_after: Some(d),
            ..
        } if honours_retry_after => Decision::RetryIn((*d).min(RETRY_AFTER_CAP)),
        _ => Decision::RetryIn(jittered(base, jitter, unit)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(s: u16) -> AttemptResult {
        AttemptResult::Response {
            status: s,
            retry_after: None,
        }
    }

    #[test]
    fn the_default_ladder_is_immediate_then_30s_2m_10m_1h_6h() {
        let s = RetrySchedule::default();
        assert_eq!(s, RetrySchedule::parse("0s,30s,2m,10m,1h,6h").unwrap());
        assert_eq!(s.max_attempts(), 6);
        assert_eq!(s.delay_before(2), Some(Duration::from_secs(30)));
        assert_eq!(s.delay_before(7), None);
    }

    #[test]
    fn bad_schedules_are_refused() {
        assert!(RetrySchedule::parse("0s,soon").is_err());
        assert!(RetrySchedule::parse("0s,13h").is_err());
    }

    #[test]
    fn jitter_stays_within_ten_percent() {
        let d = Duration::from_secs(100);
        assert_eq!(jittered(d, 0.1, 0.0), Duration::from_secs(90));
        assert_eq!(jittered(d, 0.1, 0.5), Duration::from_secs(100));
        assert!(jittered(d, 0.1, 0.999_999) <= Duration::from_secs(110));
    }

    #[test]
    fn retryable_statuses_and_errors_climb_the_ladder() {
        let s = RetrySchedule::default();
        for r in [
            status(500),
            status(503),
            status(408),
            status(425),
            status(429),
            AttemptResult::Timeout,
            AttemptResult::Connect("reset".into()),
            AttemptResult::Tls("bad cert".into()),
        ] {
            assert_eq!(
                decide(&s, 0.0, 1, &r, 0.5),
                Decision::RetryIn(Duration::from_secs(30)),
                "{r:?}"
            );
        }
    }

    #[test]
    fn other_statuses_park_after_one_attempt_redirects_included() {
        let s = RetrySchedule::default();
        for code in [301, 302, 400, 401, 404, 410, 422] {
            assert!(
                matches!(decide(&s, 0.1, 1, &status(code), 0.3), Decision::Park(r) if r.contains(&code.to_string()))
            );
        }
        assert_eq!(decide(&s, 0.1, 1, &status(204), 0.3), Decision::Delivered);
    }

    #[test]
    fn the_last_attempt_parks() {
        let s = RetrySchedule::parse("0s,1s,2s").unwrap();
        assert!(
            matches!(decide(&s, 0.1, 3, &status(500), 0.3), Decision::Park(r) if r.contains("3 attempts"))
        );
        assert_eq!(
            decide(&s, 0.0, 2, &status(500), 0.3),
            Decision::RetryIn(Duration::from_secs(2))
        );
    }

    #[test]
    fn retry_after_replaces_the_delay_on_429_and_503_only() {
        let s = RetrySchedule::default();
        let with = |code| AttemptResult::Response {
            status: code,
            retry_after: Some(Duration::from_secs(7)),
        };
        assert_eq!(
            decide(&s, 0.1, 1, &with(429), 0.9),
            Decision::RetryIn(Duration::from_secs(7))
        );
        assert_eq!(
            decide(&s, 0.1, 1, &with(503), 0.9),
            Decision::RetryIn(Duration::from_secs(7))
        );
        assert_eq!(
            decide(&s, 0.0, 1, &with(500), 0.9),
            Decision::RetryIn(Duration::from_secs(30))
        );
    }

    #[test]
    fn retry_after_reads_seconds_and_http_dates_capped_at_12h() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        assert_eq!(
            parse_retry_after("120", now),
            Some(Duration::from_secs(120))
        );
        let later = httpdate::fmt_http_date(now + Duration::from_secs(90));
        assert_eq!(
            parse_retry_after(&later, now),
            Some(Duration::from_secs(90))
        );
        assert_eq!(parse_retry_after("999999", now), Some(RETRY_AFTER_CAP));
        assert_eq!(parse_retry_after("soon", now), None);
    }

    #[test]
    fn failure_classes_separate_retry_from_suspension() {
        assert_eq!(
            AttemptResult::Tls("x".into()).failure_class(),
            Some(FailureClass::Permanent)
        );
        assert_eq!(
            AttemptResult::Dns("x".into()).failure_class(),
            Some(FailureClass::Fatal)
        );
        assert_eq!(status(404).failure_class(), Some(FailureClass::Permanent));
        assert_eq!(status(502).failure_class(), Some(FailureClass::Retryable));
        assert_eq!(status(200).failure_class(), None);
    }
}
