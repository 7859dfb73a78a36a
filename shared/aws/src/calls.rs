//! Counts the AWS API calls hooklane makes, by service and operation (an
//! SDK interceptor), when `HOOKLANE_COUNT_AWS_CALLS=1`. The counts are
//! served by `GET /metrics` as `hooklane_aws_calls_total`; the benchmark
//! turns them into calls and dollars per delivery.

use std::collections::BTreeMap;
use std::sync::Mutex;

use aws_smithy_runtime_api::box_error::BoxError;
use aws_smithy_runtime_api::client::interceptors::context::BeforeSerializationInterceptorContextRef;
use aws_smithy_runtime_api::client::interceptors::Intercept;
use aws_smithy_runtime_api::client::orchestrator::Metadata;
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use aws_smithy_types::config_bag::ConfigBag;

static CALLS: Mutex<BTreeMap<(String, String), u64>> = Mutex::new(BTreeMap::new());

/// Whether counting is on (`HOOKLANE_COUNT_AWS_CALLS=1`).
pub fn enabled() -> bool {
    std::env::var("HOOKLANE_COUNT_AWS_CALLS").is_ok_and(|v| v == "1")
}

/// The interceptor that counts each call once, before it is sent (retries
/// of the same call are not counted again).
#[derive(Debug, Default, Clone, Copy)]
pub struct CountCalls;

impl Intercept for CountCalls {
    fn name(&self) -> &'static str {
        "hooklane-count-calls"
    }

    fn read_before_serialization(
        &self,
        _context: &BeforeSerializationInterceptorContextRef<'_>,
        _components: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        if let Some(meta) = cfg.load::<Metadata>() {
            if let Ok(mut calls) = CALLS.lock() {
                *calls
                    .entry((meta.service().to_owned(), meta.name().to_owned()))
                    .or_default() += 1;
            }
        }
        Ok(())
    }
}

/// The counts in Prometheus text format.
pub fn render() -> String {
    let Ok(calls) = CALLS.lock() else {
        return String::new();
    };
    let mut out = String::from("# TYPE hooklane_aws_calls_total counter\n");
    for ((service, op), n) in calls.iter() {
        out.push_str(&format!(
            "hooklane_aws_calls_total{{service=\"{service}\",operation=\"{op}\"}} {n}\n"
        ));
    }
    out
}
