//! The AWS call counts ([`crate::calls`]) as metrics: a collector in the
//! engine's registry, read when `GET /metrics` is scraped
//! (`hooklane_aws_calls_total`, `hooklane_aws_billed_total`).

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;

use crate::calls::{snapshot, UNITS};

/// The counts as metrics of the engine's registry (a collector: read
/// when scraped).
#[derive(Debug)]
struct Served;

impl Collector for Served {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let (calls, billed) = snapshot();
        let mut metric = encoder.encode_descriptor(
            "hooklane_aws_calls",
            "AWS API calls by service and operation",
            None,
            MetricType::Counter,
        )?;
        for ((service, op), n) in &calls {
            let labels = [("service", service.as_str()), ("operation", op.as_str())];
            ConstCounter::new(*n).encode(metric.encode_family(&labels)?)?;
        }
        let mut metric = encoder.encode_descriptor(
            "hooklane_aws_billed",
            "What AWS bills for the calls, by unit",
            None,
            MetricType::Counter,
        )?;
        for ((service, op), units) in &billed {
            for (unit, n) in UNITS.iter().zip(units).filter(|(_, n)| **n > 0.0) {
                let labels = [
                    ("service", service.as_str()),
                    ("operation", op.as_str()),
                    ("unit", unit),
                ];
                ConstCounter::new(*n).encode(metric.encode_family(&labels)?)?;
            }
        }
        Ok(())
    }
}

/// Adds the counts to a registry (the engine's, when counting is on).
pub fn register(registry: &mut Registry) {
    registry.register_collector(Box::new(Served));
}

/// The counts in the Prometheus text format.
pub fn render() -> String {
    let mut registry = Registry::default();
    register(&mut registry);
    let mut out = String::new();
    let _ = prometheus_client::encoding::prometheus_text::encode(&mut out, &registry);
    out
}
