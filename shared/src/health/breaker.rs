//! The per-subscription circuit breaker (`HOOKLANE_BREAKER`), pure apart
//! from its in-memory map: after `failures` failed attempts in a row a
//! subscription's breaker opens for `open`, doubling up to `max_open`
//! while the probe attempt after each opening fails; a success closes it.
//! Time is an argument everywhere.

use std::time::Duration;

use time::OffsetDateTime;

/// Circuit-breaker settings (`HOOKLANE_BREAKER`,
/// `failures=5,open=30s,max_open=10m`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BreakerConfig {
    /// Consecutive failed attempts that open the breaker.
    pub failures: u32,
    /// How long it first stays open.
    pub open: Duration,
    /// The longest it stays open (each failed half-open try doubles it).
    pub max_open: Duration,
}

impl Default for BreakerConfig {
    fn default() -> Self {
        Self {
            failures: 5,
            open: Duration::from_secs(30),
            max_open: Duration::from_secs(600),
        }
    }
}

impl BreakerConfig {
    /// Parses `failures=N,open=D,max_open=D` (any subset).
    pub fn parse(raw: &str) -> Result<Self, String> {
        let mut c = Self::default();
        for part in raw.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let (k, v) = part
                .split_once('=')
                .ok_or_else(|| format!("`{part}`: use key=value"))?;
            let dur = || humantime::parse_duration(v).map_err(|e| format!("`{v}`: {e}"));
            match k {
                "failures" => {
                    c.failures = v
                        .parse()
                        .ok()
                        .filter(|n| *n >= 1)
                        .ok_or_else(|| format!("`{v}` is not a count of at least 1"))?
                }
                "open" => c.open = dur()?,
                "max_open" => c.max_open = dur()?,
                other => return Err(format!("`{other}` is not failures, open or max_open")),
            }
        }
        if c.max_open < c.open {
            return Err("max_open is shorter than open".into());
        }
        Ok(c)
    }
}

/// One subscription's breaker.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Breaker {
    /// Attempts go through; `failures` in a row so far.
    Closed {
        /// Consecutive failed attempts.
        failures: u32,
    },
    /// Attempts are deferred until `until`, without connecting.
    Open {
        /// When one attempt may go through again.
        until: OffsetDateTime,
        /// How long this opening lasts.
        open_for: Duration,
    },
    /// One attempt is going through to test the endpoint.
    HalfOpen {
        /// How long the last opening lasted.
        open_for: Duration,
    },
}

/// Whether an attempt may start.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Admit {
    /// Go ahead.
    Go,
    /// Deferred until then (the breaker is open).
    Defer(OffsetDateTime),
}

impl Breaker {
    /// Whether an attempt may start now, and the state after asking.
    pub fn admit(self, now: OffsetDateTime) -> (Admit, Self) {
        match self {
            Self::Open { until, .. } if now < until => (Admit::Defer(until), self),
            Self::Open { open_for, .. } => (Admit::Go, Self::HalfOpen { open_for }),
            other => (Admit::Go, other),
        }
    }

    /// The state after an attempt ended.
    pub fn after(self, success: bool, cfg: &BreakerConfig, now: OffsetDateTime) -> Self {
        if success {
            return Self::Closed { failures: 0 };
        }
        let open = |open_for: Duration| Self::Open {
            until: now + open_for,
            open_for,
        };
        match self {
            Self::Closed { failures } if failures + 1 >= cfg.failures => open(cfg.open),
            Self::Closed { failures } => Self::Closed {
                failures: failures + 1,
            },
            Self::HalfOpen { open_for } | Self::Open { open_for, .. } => {
                open((open_for * 2).min(cfg.max_open))
            }
        }
    }

    /// `closed`, `open` or `half_open`.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Closed { .. } => "closed",
            Self::Open { .. } => "open",
            Self::HalfOpen { .. } => "half_open",
        }
    }
}

/// The breakers of every subscription this process delivers to. They live
/// in memory: a restart closes them all, and on AWS each function instance
/// keeps its own (state that needs no write on the delivery path).
#[derive(Debug, Default)]
pub struct Breakers {
    cfg: BreakerConfig,
    map: std::sync::Mutex<std::collections::HashMap<crate::domain::SubscriptionId, Breaker>>,
}

impl Breakers {
    /// Breakers with these settings.
    pub fn new(cfg: BreakerConfig) -> Self {
        Self {
            cfg,
            map: Default::default(),
        }
    }

    /// Asks whether an attempt to `sub` may start now.
    pub fn admit(&self, sub: &crate::domain::SubscriptionId, now: OffsetDateTime) -> Admit {
        let Ok(mut map) = self.map.lock() else {
            return Admit::Go;
        };
        let Some(state) = map.get(sub).copied() else {
            return Admit::Go;
        };
        let (admit, next) = state.admit(now);
        map.insert(sub.clone(), next);
        admit
    }

    /// Records how an attempt to `sub` ended.
    pub fn record(&self, sub: &crate::domain::SubscriptionId, success: bool, now: OffsetDateTime) {
        let Ok(mut map) = self.map.lock() else { return };
        let state = map
            .get(sub)
            .copied()
            .unwrap_or(Breaker::Closed { failures: 0 });
        match state.after(success, &self.cfg, now) {
            Breaker::Closed { failures: 0 } => map.remove(sub),
            next => map.insert(sub.clone(), next),
        };
    }

    /// How many breakers are open at `now` (deferring attempts).
    pub fn open_count(&self, now: OffsetDateTime) -> usize {
        self.map.lock().map_or(0, |m| {
            m.values()
                .filter(|b| matches!(b, Breaker::Open { until, .. } if now < *until))
                .count()
        })
    }

    /// The breaker of `sub` (closed when unknown).
    pub fn state(&self, sub: &crate::domain::SubscriptionId) -> Breaker {
        self.map
            .lock()
            .ok()
            .and_then(|m| m.get(sub).copied())
            .unwrap_or(Breaker::Closed { failures: 0 })
    }
}
