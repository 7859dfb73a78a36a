//! Typed configuration, read once at start from `HOOKLANE_*` variables; a
//! bad value is refused with the variable's name.

use std::time::Duration;

use crate::api::serve::ReadTimeouts;
use crate::domain::OperatorEvents;
use crate::egress::EgressPolicy;
use crate::health::{BreakerConfig, RampConfig, SuspendPolicy};
use crate::policy::RetrySchedule;
use crate::signing::Secret;

/// Every setting the engine and API use.
#[derive(Debug, Clone)]
pub struct Config {
    /// Bearer token for the API (`HOOKLANE_API_TOKEN`); `serve` generates
    /// one when unset.
    pub api_token: Option<String>,
    /// Delays before attempts 1..n (`HOOKLANE_RETRY_SCHEDULE`).
    pub retry_schedule: RetrySchedule,
    /// Jitter fraction applied to ladder delays (`HOOKLANE_RETRY_JITTER`,
    /// 0 to 0.1, default 0.1).
    pub retry_jitter: f64,
    /// How long one attempt may take (`HOOKLANE_ATTEMPT_TIMEOUT`, 15s).
    pub attempt_timeout: Duration,
    /// `serve`: how long a stop (SIGTERM, Ctrl-C) waits, from the signal,
    /// for requests and attempts in progress before the process exits
    /// (`HOOKLANE_SHUTDOWN_GRACE`, 10s).
    pub shutdown_grace: Duration,
    /// AWS with a slow pool: how long an attempt may take in the main pool
    /// before it is cut off as a timeout and its lane moves to the slow
    /// pool, and the time within which a success there brings the lane
    /// back (`HOOKLANE_SLOW_AFTER`, 5s).
    pub slow_after: Duration,
    /// `serve --backend aws`: batches run at once per queue, like an event
    /// source mapping's `MaximumConcurrency`: the delivery and ingest
    /// queues' (`HOOKLANE_LOCAL_MAX_INVOCATIONS`, 50, the template's
    /// `DeliveryMaxConcurrency` default) and the slow pool's
    /// (`HOOKLANE_LOCAL_SLOW_MAX_INVOCATIONS`, 10, its `SlowMaxConcurrency`
    /// default).
    pub local_invocations: (usize, usize),
    /// Egress rules (`HOOKLANE_ALLOW_HTTP`, `HOOKLANE_ALLOW_PRIVATE_TARGETS`,
    /// `HOOKLANE_ALLOW_METADATA_TARGETS`).
    pub egress: EgressPolicy,
    /// Concurrent attempts per tenant (`HOOKLANE_TENANT_MAX_IN_FLIGHT`,
    /// never below 8). Default (`auto`): 4,096 on the embedded backend; on
    /// AWS, half the main pool ([`Config::share_of_pool`]).
    pub tenant_max_in_flight: usize,
    /// Whether the bound above is the default (`auto`, or unset).
    pub tenant_max_auto: bool,
    /// AWS: the main pool's invocations at once, the template's
    /// `DeliveryMaxConcurrency` (`HOOKLANE_DELIVERY_MAX_CONCURRENCY`, 50;
    /// `serve --backend aws` uses its own pool's size).
    pub delivery_max_concurrency: usize,
    /// AWS with a slow pool: in the main pool, how long an attempt to a
    /// subscription whose last delivery did not arrive (a new endpoint, or
    /// a failing one) may take before it is cut off and its lane moves to
    /// the slow pool (`HOOKLANE_FIRST_CUT_OFF`, 1s; at most
    /// `HOOKLANE_SLOW_AFTER`).
    pub first_cut_off: Duration,
    /// The cut-off in force for such attempts in this engine's pool: set
    /// for the main pool by the AWS wiring, `None` elsewhere.
    pub unproven_cut_off: Option<Duration>,
    /// When to suspend a failing endpoint (`HOOKLANE_SUSPEND_POLICY`).
    pub suspend_policy: SuspendPolicy,
    /// The operator webhook told of operator events
    /// (`HOOKLANE_OPERATOR_WEBHOOK_URL` and `HOOKLANE_OPERATOR_WEBHOOK_SECRET`).
    pub operator_webhook: Option<(String, Secret)>,
    /// The operator events sent (`HOOKLANE_OPERATOR_EVENTS`, a comma list;
    /// default all).
    pub operator_events: OperatorEvents,
    /// How long a subscription must have failed for its next success to
    /// send `subscription.recovered` (`HOOKLANE_RECOVERED_AFTER`, 1m).
    pub recovered_after: Duration,
    /// Backfill deliveries per second after re-enabling
    /// (`HOOKLANE_BACKFILL_RATE`, default 5).
    pub backfill_rate: f64,
    /// Circuit-breaker settings (`HOOKLANE_BREAKER`).
    pub breaker: BreakerConfig,
    /// The recovery ramp (`HOOKLANE_RECOVERY_RAMP`).
    pub recovery_ramp: RampConfig,
    /// How long `serve` waits for a request's head and body
    /// (`HOOKLANE_HEADER_TIMEOUT`, `HOOKLANE_BODY_TIMEOUT`, 30s each).
    pub read_timeouts: ReadTimeouts,
    /// Whether logs are JSON lines ([`log_json`]).
    pub log_json: bool,
    /// The key portal sessions are signed with (`HOOKLANE_PORTAL_KEY`, at
    /// least 32 bytes); unset, one is generated and kept in the store.
    pub portal_key: Option<Vec<u8>>,
    /// Where the API is reached from outside (`HOOKLANE_PUBLIC_URL`), the
    /// base of portal links; unset, the request's `Host`.
    pub public_url: Option<String>,
    /// Who may embed the portal in a frame
    /// (`HOOKLANE_PORTAL_FRAME_ANCESTORS`: space-separated origins or
    /// `'self'`); unset, nobody.
    pub portal_frame_ancestors: Option<String>,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            api_token: None,
            retry_schedule: RetrySchedule::default(),
            retry_jitter: 0.1,
            attempt_timeout: Duration::from_secs(15),
            shutdown_grace: Duration::from_secs(10),
            slow_after: Duration::from_secs(5),
            local_invocations: (50, 10),
            egress: EgressPolicy::default(),
            tenant_max_in_flight: 4096,
            tenant_max_auto: true,
            delivery_max_concurrency: 50,
            first_cut_off: Duration::from_secs(1),
            unproven_cut_off: None,
            suspend_policy: SuspendPolicy::default(),
            operator_webhook: None,
            operator_events: OperatorEvents::default(),
            recovered_after: Duration::from_secs(60),
            backfill_rate: 5.0,
            breaker: BreakerConfig::default(),
            recovery_ramp: RampConfig::default(),
            read_timeouts: ReadTimeouts::default(),
            log_json: false,
            portal_key: None,
            public_url: None,
            portal_frame_ancestors: None,
        }
    }
}

/// A configuration variable with a value that cannot be used.
#[derive(Debug, thiserror::Error)]
#[error("{var}: {reason}")]
pub struct ConfigError {
    /// The variable's name.
    pub var: &'static str,
    /// What is wrong with its value.
    pub reason: String,
}

fn bad(var: &'static str, reason: impl Into<String>) -> ConfigError {
    ConfigError {
        var,
        reason: reason.into(),
    }
}

/// A yes-or-no setting: `true`/`false` (or `1`/`0`, `yes`/`no`, `on`/`off`);
/// anything else is refused naming `var`.
pub fn parse_bool(var: &'static str, raw: &str) -> Result<bool, ConfigError> {
    match raw.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" => Ok(true),
        "0" | "false" | "no" | "off" | "" => Ok(false),
        other => Err(bad(var, format!("`{other}` is not true or false"))),
    }
}

/// Whether logs are JSON lines: `HOOKLANE_LOG_FORMAT` (`json` or `text`;
/// unset: text, or JSON on Lambda). Read by [`crate::telemetry::init`],
/// which runs before the rest of the configuration so that its errors are
/// logged, and again by [`Config::from_lookup`], which refuses a bad value.
pub fn log_json(get: &impl Fn(&str) -> Option<String>) -> Result<bool, ConfigError> {
    match get("HOOKLANE_LOG_FORMAT").as_deref().map(str::trim) {
        Some("json") => Ok(true),
        Some("text") => Ok(false),
        None | Some("") => Ok(get("AWS_LAMBDA_FUNCTION_NAME").is_some()),
        Some(other) => Err(bad(
            "HOOKLANE_LOG_FORMAT",
            format!("`{other}` is not json or text"),
        )),
    }
}

/// A duration from 100 ms to 10 min.
fn duration(var: &'static str, raw: &str) -> Result<Duration, ConfigError> {
    humantime::parse_duration(raw.trim())
        .ok()
        .filter(|d| *d >= Duration::from_millis(100) && *d <= Duration::from_secs(600))
        .ok_or_else(|| bad(var, "a duration from 100ms to 10m"))
}

/// A duration from 100 ms to 5 min (an attempt and its cut-offs).
fn attempt_duration(var: &'static str, raw: &str) -> Result<Duration, ConfigError> {
    humantime::parse_duration(raw.trim())
        .ok()
        .filter(|d| *d >= Duration::from_millis(100) && *d <= Duration::from_secs(300))
        .ok_or_else(|| bad(var, "a duration from 100ms to 5m"))
}

/// A whole number within `range`.
fn whole(
    var: &'static str,
    raw: &str,
    range: std::ops::RangeInclusive<usize>,
) -> Result<usize, ConfigError> {
    raw.trim()
        .parse::<usize>()
        .ok()
        .filter(|n| range.contains(n))
        .ok_or_else(|| {
            bad(
                var,
                format!("a whole number from {} to {}", range.start(), range.end()),
            )
        })
}

/// Reads how long `serve` waits for a request's head and body, and for
/// what is in progress at a stop.
fn serve_timings(
    get: &impl Fn(&str) -> Option<String>,
) -> Result<(ReadTimeouts, Duration), ConfigError> {
    let mut t = ReadTimeouts::default();
    let mut grace = Config::default().shutdown_grace;
    if let Some(v) = get("HOOKLANE_SHUTDOWN_GRACE") {
        grace = duration("HOOKLANE_SHUTDOWN_GRACE", &v)?;
    }
    if let Some(v) = get("HOOKLANE_HEADER_TIMEOUT") {
        t.header = duration("HOOKLANE_HEADER_TIMEOUT", &v)?;
    }
    if let Some(v) = get("HOOKLANE_BODY_TIMEOUT") {
        t.body = duration("HOOKLANE_BODY_TIMEOUT", &v)?;
    }
    Ok((t, grace))
}

impl Config {
    /// AWS: the per-tenant bound in force when the main pool runs
    /// `invocations` batches of up to 10 messages at once. Unless
    /// `HOOKLANE_TENANT_MAX_IN_FLIGHT` names a number, a tenant may hold
    /// half the pool's attempts (at least 8), so one tenant's hung
    /// receivers always leave the other half to the rest (DESIGN G2, G3).
    pub fn share_of_pool(&self, invocations: usize) -> usize {
        if self.tenant_max_auto {
            (invocations * 10 / 2).max(8)
        } else {
            self.tenant_max_in_flight
        }
    }

    /// Reads the process environment.
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_lookup(|k| std::env::var(k).ok())
    }

    /// Reads settings through `get` (the environment, or a map in tests).
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let mut c = Self::default();
        if let Some(v) = get("HOOKLANE_API_TOKEN").filter(|v| !v.is_empty()) {
            if v.len() < 16 {
                return Err(bad("HOOKLANE_API_TOKEN", "use at least 16 characters"));
            }
            c.api_token = Some(v);
        }
        if let Some(v) = get("HOOKLANE_RETRY_SCHEDULE") {
            c.retry_schedule =
                RetrySchedule::parse(&v).map_err(|e| bad("HOOKLANE_RETRY_SCHEDULE", e))?;
        }
        if let Some(v) = get("HOOKLANE_RETRY_JITTER") {
            c.retry_jitter = v
                .trim()
                .parse::<f64>()
                .ok()
                .filter(|j| (0.0..=0.1).contains(j))
                .ok_or_else(|| bad("HOOKLANE_RETRY_JITTER", "a fraction from 0 to 0.1"))?;
        }
        for (var, slot) in [
            ("HOOKLANE_ATTEMPT_TIMEOUT", &mut c.attempt_timeout),
            ("HOOKLANE_SLOW_AFTER", &mut c.slow_after),
            ("HOOKLANE_FIRST_CUT_OFF", &mut c.first_cut_off),
        ] {
            if let Some(v) = get(var) {
                *slot = attempt_duration(var, &v)?;
            }
        }
        for (var, slot) in [
            ("HOOKLANE_LOCAL_MAX_INVOCATIONS", &mut c.local_invocations.0),
            (
                "HOOKLANE_LOCAL_SLOW_MAX_INVOCATIONS",
                &mut c.local_invocations.1,
            ),
        ] {
            if let Some(v) = get(var) {
                *slot = whole(var, &v, 1..=1000)?;
            }
        }
        if let Some(v) = get("HOOKLANE_DELIVERY_MAX_CONCURRENCY") {
            c.delivery_max_concurrency = whole("HOOKLANE_DELIVERY_MAX_CONCURRENCY", &v, 2..=1000)?;
        }
        c.read_egress(&get)?;
        if let Some(v) = get("HOOKLANE_TENANT_MAX_IN_FLIGHT").filter(|v| v.trim() != "auto") {
            c.tenant_max_auto = false;
            c.tenant_max_in_flight = whole("HOOKLANE_TENANT_MAX_IN_FLIGHT", &v, 8..=1_000_000)?;
        }
        c.read_health(&get)?;
        (c.read_timeouts, c.shutdown_grace) = serve_timings(&get)?;
        c.log_json = log_json(&get)?;
        c.read_access(&get)?;
        Ok(c)
    }

    /// Reads the endpoint-health settings.
    fn read_health(&mut self, get: &impl Fn(&str) -> Option<String>) -> Result<(), ConfigError> {
        if let Some(v) = get("HOOKLANE_SUSPEND_POLICY") {
            self.suspend_policy =
                SuspendPolicy::parse(&v).map_err(|e| bad("HOOKLANE_SUSPEND_POLICY", e))?;
        }
        if let Some(v) = get("HOOKLANE_BREAKER") {
            self.breaker = BreakerConfig::parse(&v).map_err(|e| bad("HOOKLANE_BREAKER", e))?;
        }
        if let Some(v) = get("HOOKLANE_RECOVERY_RAMP") {
            self.recovery_ramp =
                RampConfig::parse(&v).map_err(|e| bad("HOOKLANE_RECOVERY_RAMP", e))?;
        }
        if let Some(v) = get("HOOKLANE_BACKFILL_RATE") {
            self.backfill_rate = v
                .trim()
                .parse::<f64>()
                .ok()
                .filter(|r| (0.1..=1000.0).contains(r))
                .ok_or_else(|| {
                    bad(
                        "HOOKLANE_BACKFILL_RATE",
                        "deliveries per second, 0.1 to 1000",
                    )
                })?;
        }
        self.read_operator(get)
    }

    /// Reads the operator webhook and which operator events go out.
    fn read_operator(&mut self, get: &impl Fn(&str) -> Option<String>) -> Result<(), ConfigError> {
        if let Some(v) = get("HOOKLANE_OPERATOR_EVENTS") {
            self.operator_events =
                OperatorEvents::parse(&v).map_err(|e| bad("HOOKLANE_OPERATOR_EVENTS", e))?;
        }
        if let Some(v) = get("HOOKLANE_RECOVERED_AFTER") {
            self.recovered_after = humantime::parse_duration(v.trim())
                .map_err(|e| bad("HOOKLANE_RECOVERED_AFTER", e.to_string()))?;
        }
        if let Some(url) = get("HOOKLANE_OPERATOR_WEBHOOK_URL").filter(|u| !u.is_empty()) {
            let secret = get("HOOKLANE_OPERATOR_WEBHOOK_SECRET").ok_or_else(|| {
                bad(
                    "HOOKLANE_OPERATOR_WEBHOOK_SECRET",
                    "required with HOOKLANE_OPERATOR_WEBHOOK_URL",
                )
            })?;
            let secret =
                Secret::parse(&secret).map_err(|e| bad("HOOKLANE_OPERATOR_WEBHOOK_SECRET", e.0))?;
            crate::egress::check_url(&url, self.egress)
                .map_err(|e| bad("HOOKLANE_OPERATOR_WEBHOOK_URL", e.to_string()))?;
            self.operator_webhook = Some((url, secret));
        }
        Ok(())
    }
}

#[path = "config_edges.rs"]
mod edges;

#[cfg(test)]
#[path = "config_tests.rs"]
mod tests;
