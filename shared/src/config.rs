//! Typed configuration, read once at start from `HOOKLANE_*` variables; a
//! bad value is refused with the variable's name.

use std::time::Duration;

use crate::egress::EgressPolicy;
use crate::policy::RetrySchedule;

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
    /// Egress rules (`HOOKLANE_ALLOW_HTTP`, `HOOKLANE_ALLOW_PRIVATE_TARGETS`).
    pub egress: EgressPolicy,
    /// Concurrent attempts per tenant (`HOOKLANE_TENANT_MAX_IN_FLIGHT`,
    /// default 4,096, never below 8).
    pub tenant_max_in_flight: usize,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            api_token: None,
            retry_schedule: RetrySchedule::default(),
            retry_jitter: 0.1,
            attempt_timeout: Duration::from_secs(15),
            egress: EgressPolicy::default(),
            tenant_max_in_flight: 4096,
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

fn parse_bool(var: &'static str, raw: &str) -> Result<bool, ConfigError> {
    match raw.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" => Ok(true),
        "0" | "false" | "no" | "off" | "" => Ok(false),
        other => Err(bad(var, format!("`{other}` is not true or false"))),
    }
}

impl Config {
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
        if let Some(v) = get("HOOKLANE_ATTEMPT_TIMEOUT") {
            c.attempt_timeout = humantime::parse_duration(v.trim())
                .ok()
                .filter(|d| *d >= Duration::from_millis(100) && *d <= Duration::from_secs(300))
                .ok_or_else(|| bad("HOOKLANE_ATTEMPT_TIMEOUT", "a duration from 100ms to 5m"))?;
        }
        if let Some(v) = get("HOOKLANE_ALLOW_HTTP") {
            c.egress.allow_http = parse_bool("HOOKLANE_ALLOW_HTTP", &v)?;
        }
        if let Some(v) = get("HOOKLANE_ALLOW_PRIVATE_TARGETS") {
            c.egress.allow_private = parse_bool("HOOKLANE_ALLOW_PRIVATE_TARGETS", &v)?;
        }
        if let Some(v) = get("HOOKLANE_TENANT_MAX_IN_FLIGHT") {
            c.tenant_max_in_flight = v
                .trim()
                .parse::<usize>()
                .ok()
                .filter(|n| (8..=1_000_000).contains(n))
                .ok_or_else(|| {
                    bad(
                        "HOOKLANE_TENANT_MAX_IN_FLIGHT",
                        "a whole number from 8 to 1000000",
                    )
                })?;
        }
        Ok(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn read(pairs: &[(&str, &str)]) -> Result<Config, ConfigError> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Config::from_lookup(|k| map.get(k).cloned())
    }

    #[test]
    fn an_empty_environment_gives_the_documented_defaults() {
        let c = read(&[]).unwrap();
        assert_eq!(c.retry_schedule.max_attempts(), 6);
        assert_eq!(c.attempt_timeout, Duration::from_secs(15));
        assert_eq!(c.tenant_max_in_flight, 4096);
        assert!(!c.egress.allow_http && !c.egress.allow_private);
    }

    #[test]
    fn a_bad_value_names_its_variable() {
        for (k, v) in [
            ("HOOKLANE_RETRY_SCHEDULE", "0s,later"),
            ("HOOKLANE_ATTEMPT_TIMEOUT", "forever"),
            ("HOOKLANE_ALLOW_HTTP", "maybe"),
            ("HOOKLANE_TENANT_MAX_IN_FLIGHT", "4"),
            ("HOOKLANE_API_TOKEN", "short"),
        ] {
            let err = read(&[(k, v)]).unwrap_err();
            assert_eq!(err.var, k);
        }
    }
}
