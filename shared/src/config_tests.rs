//! Unit tests of the typed configuration: defaults, ranges, and a bad
//! value named by its variable.

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
fn the_slow_pool_and_the_local_pools_take_their_ranges() {
    let c = read(&[]).unwrap();
    assert_eq!(
        (c.slow_after, c.local_invocations),
        (Duration::from_secs(5), (50, 10))
    );
    let c = read(&[
        ("HOOKLANE_SLOW_AFTER", "1s"),
        ("HOOKLANE_LOCAL_MAX_INVOCATIONS", "5"),
        ("HOOKLANE_LOCAL_SLOW_MAX_INVOCATIONS", "7"),
    ])
    .unwrap();
    assert_eq!(
        (c.slow_after, c.local_invocations),
        (Duration::from_secs(1), (5, 7))
    );
    for (var, bad) in [
        ("HOOKLANE_SLOW_AFTER", "0s"),
        ("HOOKLANE_LOCAL_MAX_INVOCATIONS", "0"),
        ("HOOKLANE_LOCAL_MAX_INVOCATIONS", "1001"),
        ("HOOKLANE_LOCAL_SLOW_MAX_INVOCATIONS", "five"),
    ] {
        assert_eq!(read(&[(var, bad)]).unwrap_err().var, var);
    }
}

#[test]
fn an_empty_environment_gives_the_documented_defaults() {
    let c = read(&[]).unwrap();
    assert_eq!(c.retry_schedule.max_attempts(), 6);
    assert_eq!(c.attempt_timeout, Duration::from_secs(15));
    assert_eq!(c.tenant_max_in_flight, 4096);
    assert_eq!(c.share_of_pool(c.delivery_max_concurrency), 250);
    assert_eq!(c.first_cut_off, Duration::from_secs(1));
    assert_eq!(c.shutdown_grace, Duration::from_secs(10));
    assert!(!c.egress.allow_http && !c.egress.allow_private);
}

#[test]
fn the_tenant_bound_on_aws_is_half_the_main_pool_unless_set() {
    let c = read(&[("HOOKLANE_TENANT_MAX_IN_FLIGHT", "auto")]).unwrap();
    assert_eq!((c.share_of_pool(50), c.share_of_pool(1)), (250, 8));
    assert_eq!(c.tenant_max_in_flight, 4096, "the embedded default");
    let c = read(&[("HOOKLANE_TENANT_MAX_IN_FLIGHT", "4096")]).unwrap();
    assert_eq!(c.share_of_pool(50), 4096);
}

#[test]
fn logs_are_json_when_asked_or_on_lambda() {
    assert!(!read(&[]).unwrap().log_json);
    assert!(read(&[("HOOKLANE_LOG_FORMAT", "json")]).unwrap().log_json);
    assert!(read(&[("AWS_LAMBDA_FUNCTION_NAME", "f")]).unwrap().log_json);
    let text = [
        ("AWS_LAMBDA_FUNCTION_NAME", "f"),
        ("HOOKLANE_LOG_FORMAT", "text"),
    ];
    assert!(!read(&text).unwrap().log_json);
}

#[test]
fn a_bad_value_names_its_variable() {
    for (k, v) in [
        ("HOOKLANE_RETRY_SCHEDULE", "0s,later"),
        ("HOOKLANE_ATTEMPT_TIMEOUT", "forever"),
        ("HOOKLANE_SHUTDOWN_GRACE", "11m"),
        ("HOOKLANE_ALLOW_HTTP", "maybe"),
        ("HOOKLANE_TENANT_MAX_IN_FLIGHT", "4"),
        ("HOOKLANE_FIRST_CUT_OFF", "0s"),
        ("HOOKLANE_DELIVERY_MAX_CONCURRENCY", "1"),
        ("HOOKLANE_API_TOKEN", "short"),
        ("HOOKLANE_SUSPEND_POLICY", "fatal=zero/1s"),
        ("HOOKLANE_BREAKER", "open=soon"),
        ("HOOKLANE_BACKFILL_RATE", "fast"),
        ("HOOKLANE_HEADER_TIMEOUT", "1ms"),
        ("HOOKLANE_BODY_TIMEOUT", "never"),
        ("HOOKLANE_LOG_FORMAT", "yaml"),
    ] {
        let err = read(&[(k, v)]).unwrap_err();
        assert_eq!(err.var, k);
    }
    let err = read(&[(
        "HOOKLANE_OPERATOR_WEBHOOK_URL",
        "https://ops.example.com/hook",
    )])
    .unwrap_err();
    assert_eq!(
        err.var, "HOOKLANE_OPERATOR_WEBHOOK_SECRET",
        "a webhook URL needs its secret"
    );
}

#[test]
fn operator_events_are_chosen_by_name_and_a_bad_one_names_the_variable() {
    use crate::domain::OperatorEvent;
    let all = read(&[]).unwrap();
    assert!(all.operator_events.sends(OperatorEvent::Parked));
    assert_eq!(all.recovered_after, Duration::from_secs(60));
    let one = read(&[
        ("HOOKLANE_OPERATOR_EVENTS", "subscription.suspended"),
        ("HOOKLANE_RECOVERED_AFTER", "5m"),
    ])
    .unwrap();
    assert!(one.operator_events.sends(OperatorEvent::Suspended));
    assert!(!one.operator_events.sends(OperatorEvent::Parked));
    assert_eq!(one.recovered_after, Duration::from_secs(300));
    for (var, value) in [
        ("HOOKLANE_OPERATOR_EVENTS", "delivery.failed"),
        ("HOOKLANE_RECOVERED_AFTER", "soon"),
    ] {
        assert_eq!(read(&[(var, value)]).unwrap_err().var, var);
    }
}
