//! The AWS side's `HOOKLANE_*` settings, beside the engine's
//! [`hooklane_core::config::Config`]: read once where a process starts (a
//! Lambda function's cold start, `serve --backend aws`, `hooklane dlq`),
//! and a bad value is refused naming its variable. Everything below reads
//! them from here, through [`Settings`].

use hooklane_core::config::{parse_bool, ConfigError};

use crate::{Pool, Settings};

/// How API Gateway authenticates callers of the API function
/// (`HOOKLANE_AUTH_MODE`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum AuthMode {
    /// SigV4-signed requests, scoped by IAM policy (`IAM`, the default).
    #[default]
    Iam,
    /// Bearer JWTs, scoped by the `hooklane_tenants` claim (`JWT`).
    Jwt,
}

/// Which queues `serve --backend aws`'s stand-in polls
/// (`HOOKLANE_LOCAL_POLL`, a comma list of `ingest`, `deliveries` and
/// `slow`; unset: all three; empty: none, the API alone). A benchmark fills
/// a queue with its poller off, then starts it, so that receives come full
/// as under load.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LocalPoll {
    /// The ingest queue (fan-out).
    pub ingest: bool,
    /// The delivery queue (the main pool).
    pub deliveries: bool,
    /// The slow pool's queue.
    pub slow: bool,
}

impl Default for LocalPoll {
    fn default() -> Self {
        Self {
            ingest: true,
            deliveries: true,
            slow: true,
        }
    }
}

/// Every AWS-side variable, parsed.
#[derive(Debug, Clone, Default)]
pub struct AwsEnv {
    /// `HOOKLANE_TABLE`.
    pub table: Option<String>,
    /// `HOOKLANE_INGEST_QUEUE_URL`.
    pub ingest_queue_url: Option<String>,
    /// `HOOKLANE_DELIVERY_QUEUE_URL`.
    pub delivery_queue_url: Option<String>,
    /// `HOOKLANE_DLQ_URL`.
    pub dlq_url: Option<String>,
    /// `HOOKLANE_INGEST_DLQ_URL` (none: unreadable ingest messages reach
    /// that queue by redrive only).
    pub ingest_dlq_url: Option<String>,
    /// `HOOKLANE_SLOW_QUEUE_URL` (none or empty: no slow pool).
    pub slow_queue_url: Option<String>,
    /// `HOOKLANE_FAN_OUT_IN_API` (unset or empty: on).
    pub fan_out_in_api: bool,
    /// `HOOKLANE_OPERATOR_TOPIC_ARN`: the SNS topic told of suspensions.
    pub operator_topic_arn: Option<String>,
    /// `HOOKLANE_COUNT_AWS_CALLS`: count every AWS call (for `/metrics`).
    pub count_calls: bool,
    /// `HOOKLANE_LOCAL_POLL`.
    pub local_poll: LocalPoll,
    /// `HOOKLANE_POOL` (`main`, the default, or `slow`): the pool a
    /// delivery function runs.
    pub pool: Pool,
    /// `HOOKLANE_AUTH_MODE`.
    pub auth_mode: AuthMode,
    /// `HOOKLANE_METRICS_NAMESPACE`: the CloudWatch namespace of the EMF
    /// lines a Lambda function prints after each batch (unset: none).
    pub metrics_namespace: Option<String>,
    /// `HOOKLANE_TENANT_BACKLOG` (unset: off): count pending deliveries per
    /// tenant beside the queues.
    pub tenant_backlog: bool,
}

fn bad(var: &'static str, reason: impl Into<String>) -> ConfigError {
    ConfigError {
        var,
        reason: reason.into(),
    }
}

impl AwsEnv {
    /// Reads the process environment.
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_lookup(|k| std::env::var(k).ok())
    }

    /// Reads the variables through `get`.
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let named = |k: &str| get(k).filter(|v| !v.trim().is_empty());
        let fan_out_in_api = match named("HOOKLANE_FAN_OUT_IN_API") {
            Some(v) => parse_bool("HOOKLANE_FAN_OUT_IN_API", &v)?,
            None => true,
        };
        let count_calls = match named("HOOKLANE_COUNT_AWS_CALLS") {
            Some(v) => parse_bool("HOOKLANE_COUNT_AWS_CALLS", &v)?,
            None => false,
        };
        let tenant_backlog = match named("HOOKLANE_TENANT_BACKLOG") {
            Some(v) => parse_bool("HOOKLANE_TENANT_BACKLOG", &v)?,
            None => false,
        };
        Ok(Self {
            tenant_backlog,
            table: named("HOOKLANE_TABLE"),
            ingest_queue_url: named("HOOKLANE_INGEST_QUEUE_URL"),
            delivery_queue_url: named("HOOKLANE_DELIVERY_QUEUE_URL"),
            dlq_url: named("HOOKLANE_DLQ_URL"),
            ingest_dlq_url: named("HOOKLANE_INGEST_DLQ_URL"),
            slow_queue_url: named("HOOKLANE_SLOW_QUEUE_URL"),
            fan_out_in_api,
            operator_topic_arn: named("HOOKLANE_OPERATOR_TOPIC_ARN"),
            count_calls,
            metrics_namespace: named("HOOKLANE_METRICS_NAMESPACE"),
            local_poll: get("HOOKLANE_LOCAL_POLL")
                .map_or(Ok(LocalPoll::default()), |v| local_poll(&v))?,
            pool: match named("HOOKLANE_POOL").as_deref().map(str::trim) {
                None | Some("main") => Pool::Main,
                Some("slow") => Pool::Slow,
                Some(other) => {
                    return Err(bad(
                        "HOOKLANE_POOL",
                        format!("`{other}` is not main or slow"),
                    ))
                }
            },
            auth_mode: match named("HOOKLANE_AUTH_MODE").map(|v| v.trim().to_ascii_uppercase()) {
                None => AuthMode::Iam,
                Some(v) if v == "IAM" => AuthMode::Iam,
                Some(v) if v == "JWT" => AuthMode::Jwt,
                Some(v) => {
                    return Err(bad(
                        "HOOKLANE_AUTH_MODE",
                        format!("`{v}` is not IAM or JWT"),
                    ))
                }
            },
        })
    }

    /// The deployed resources these variables name, with the settings that
    /// go with them; names the first missing variable.
    pub fn settings(&self) -> Result<Settings, ConfigError> {
        let need =
            |var: &'static str, v: &Option<String>| v.clone().ok_or_else(|| bad(var, "is not set"));
        Ok(self.onto(Settings {
            table: need("HOOKLANE_TABLE", &self.table)?,
            ingest_queue_url: need("HOOKLANE_INGEST_QUEUE_URL", &self.ingest_queue_url)?,
            delivery_queue_url: need("HOOKLANE_DELIVERY_QUEUE_URL", &self.delivery_queue_url)?,
            dlq_url: need("HOOKLANE_DLQ_URL", &self.dlq_url)?,
            ingest_dlq_url: self.ingest_dlq_url.clone(),
            slow_queue_url: self.slow_queue_url.clone(),
            type_index_settle: crate::TYPE_INDEX_SETTLE,
            ..Settings::default()
        }))
    }

    /// `settings` (resources made by this process, say) with the settings
    /// these variables give beside the resource names.
    pub fn onto(&self, settings: Settings) -> Settings {
        Settings {
            fan_out_in_api: self.fan_out_in_api,
            operator_topic_arn: self.operator_topic_arn.clone(),
            count_calls: self.count_calls,
            local_poll: self.local_poll,
            metrics_namespace: self.metrics_namespace.clone(),
            tenant_backlog: self.tenant_backlog,
            ..settings
        }
    }
}

/// `HOOKLANE_LOCAL_POLL`'s comma list.
fn local_poll(list: &str) -> Result<LocalPoll, ConfigError> {
    let mut poll = LocalPoll {
        ingest: false,
        deliveries: false,
        slow: false,
    };
    for name in list.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        match name {
            "ingest" => poll.ingest = true,
            "deliveries" => poll.deliveries = true,
            "slow" => poll.slow = true,
            other => {
                return Err(bad(
                    "HOOKLANE_LOCAL_POLL",
                    format!("`{other}` is not ingest, deliveries or slow"),
                ))
            }
        }
    }
    Ok(poll)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(pairs: &[(&str, &str)]) -> Result<AwsEnv, ConfigError> {
        let pairs: Vec<(String, String)> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        AwsEnv::from_lookup(move |k| pairs.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone()))
    }

    #[test]
    fn unset_means_the_defaults() {
        let env = read(&[]).unwrap();
        assert!(env.fan_out_in_api && !env.count_calls);
        assert_eq!(
            (env.pool, env.auth_mode, env.local_poll),
            (Pool::Main, AuthMode::Iam, LocalPoll::default())
        );
        assert_eq!(env.operator_topic_arn, None);
        assert_eq!(env.metrics_namespace, None, "no EMF lines unless asked");
        assert!(!env.tenant_backlog, "no per-tenant counts unless asked");
    }

    #[test]
    fn every_value_is_read() {
        let env = read(&[
            ("HOOKLANE_FAN_OUT_IN_API", "false"),
            ("HOOKLANE_COUNT_AWS_CALLS", "1"),
            ("HOOKLANE_LOCAL_POLL", "deliveries, slow"),
            ("HOOKLANE_POOL", "slow"),
            ("HOOKLANE_AUTH_MODE", "jwt"),
            ("HOOKLANE_OPERATOR_TOPIC_ARN", "arn:aws:sns:us-east-1:1:t"),
            ("HOOKLANE_METRICS_NAMESPACE", "hooklane/prod"),
            ("HOOKLANE_TENANT_BACKLOG", "true"),
        ])
        .unwrap();
        assert!(env.onto(Settings::default()).tenant_backlog);
        assert_eq!(
            env.onto(Settings::default()).metrics_namespace.as_deref(),
            Some("hooklane/prod")
        );
        assert!(!env.fan_out_in_api && env.count_calls);
        assert_eq!((env.pool, env.auth_mode), (Pool::Slow, AuthMode::Jwt));
        assert_eq!(
            env.local_poll,
            LocalPoll {
                ingest: false,
                deliveries: true,
                slow: true
            }
        );
        let none = read(&[("HOOKLANE_LOCAL_POLL", "")]).unwrap().local_poll;
        assert!(!none.ingest && !none.deliveries && !none.slow);
        let settings = env.onto(Settings::default());
        assert!(!settings.fan_out_in_api && settings.count_calls);
        assert_eq!(
            settings.operator_topic_arn.as_deref(),
            Some("arn:aws:sns:us-east-1:1:t")
        );
    }

    #[test]
    fn the_api_fans_out_unless_told_false() {
        for (value, on) in [
            ("", true),
            ("true", true),
            ("false", false),
            ("FALSE", false),
        ] {
            let env = read(&[("HOOKLANE_FAN_OUT_IN_API", value)]).unwrap();
            assert_eq!(env.fan_out_in_api, on, "{value:?}");
        }
    }

    #[test]
    fn a_bad_value_names_its_variable() {
        for (var, value) in [
            ("HOOKLANE_FAN_OUT_IN_API", "maybe"),
            ("HOOKLANE_COUNT_AWS_CALLS", "lots"),
            ("HOOKLANE_LOCAL_POLL", "ingest,fanout"),
            ("HOOKLANE_POOL", "fast"),
            ("HOOKLANE_AUTH_MODE", "basic"),
            ("HOOKLANE_TENANT_BACKLOG", "sometimes"),
        ] {
            let e = read(&[(var, value)]).unwrap_err();
            assert_eq!(e.var, var, "{e}");
        }
    }

    #[test]
    fn the_deployed_resources_need_every_name() {
        let names = [
            ("HOOKLANE_TABLE", "t"),
            ("HOOKLANE_INGEST_QUEUE_URL", "i"),
            ("HOOKLANE_DELIVERY_QUEUE_URL", "d"),
            ("HOOKLANE_DLQ_URL", "q"),
        ];
        let all = read(&names).unwrap().settings().unwrap();
        assert_eq!((all.table.as_str(), all.slow_queue_url), ("t", None));
        for (i, (var, _)) in names.iter().enumerate() {
            let mut some = names.to_vec();
            some.remove(i);
            let e = read(&some).unwrap().settings().unwrap_err();
            assert_eq!(e.var, *var);
        }
    }
}
