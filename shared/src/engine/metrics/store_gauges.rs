//! The gauges read from the store when `GET /metrics` is scraped (the
//! backlog in all and per tenant, suspended subscriptions): one snapshot,
//! replaced whole and encoded whole, so a scrape never sees half of one;
//! a value the backend cannot tell is left out rather than served as 0.

use std::sync::{Arc, Mutex};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Unit;

use crate::domain::{Backlog, BacklogRow};

/// What the store told at the last scrape.
#[derive(Debug, Clone)]
pub(super) struct Snapshot {
    pub(super) backlog: Backlog,
    pub(super) suspended: Option<u64>,
}

/// The collector over the last [`Snapshot`].
#[derive(Debug, Clone, Default)]
pub(super) struct StoreGauges(pub(super) Arc<Mutex<Option<Snapshot>>>);

impl StoreGauges {
    pub(super) fn set(&self, snapshot: Snapshot) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = Some(snapshot);
    }
}

fn one<N: prometheus_client::encoding::EncodeGaugeValue>(
    encoder: &mut DescriptorEncoder,
    (name, help, unit): (&str, &str, Option<&Unit>),
    value: N,
) -> Result<(), std::fmt::Error> {
    let metric = encoder.encode_descriptor(name, help, unit, MetricType::Gauge)?;
    ConstGauge::new(value).encode(metric)
}

/// The per-tenant rows: pending, and the oldest's age where known.
fn tenants(encoder: &mut DescriptorEncoder, rows: &[BacklogRow]) -> Result<(), std::fmt::Error> {
    let mut metric = encoder.encode_descriptor(
            "hooklane_tenant_backlog_deliveries",
            "Pending deliveries of the ten tenants with the most, and of the rest (tenant=\"(others)\")",
            None,
            MetricType::Gauge,
        )?;
    for row in rows {
        let labels = [("tenant", row.tenant.as_str())];
        ConstGauge::new(row.pending as i64).encode(metric.encode_family(&labels)?)?;
    }
    let mut metric = encoder.encode_descriptor(
        "hooklane_tenant_backlog_oldest_age",
        "Age of the oldest pending delivery of the ten tenants with the most, and of the rest",
        Some(&Unit::Seconds),
        MetricType::Gauge,
    )?;
    for row in rows.iter().filter(|r| r.oldest_age_seconds.is_some()) {
        let labels = [("tenant", row.tenant.as_str())];
        let age = row.oldest_age_seconds.unwrap_or_default();
        ConstGauge::new(age).encode(metric.encode_family(&labels)?)?;
    }
    Ok(())
}

impl Collector for StoreGauges {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let Some(s) = self.0.lock().unwrap_or_else(|e| e.into_inner()).clone() else {
            return Ok(());
        };
        let secs = Some(&Unit::Seconds);
        let b = &s.backlog;
        if let Some(pending) = b.pending {
            let name = (
                "hooklane_backlog_deliveries",
                "Pending deliveries (queued, waiting for a retry, in flight)",
                None,
            );
            one(&mut encoder, name, pending as i64)?;
        }
        // Where the backend can tell it (not on AWS: SQS's own metric).
        if let Some(age) = b.oldest_age_seconds {
            let name = (
                "hooklane_backlog_oldest_age",
                "Age of the oldest pending delivery, since it was queued",
                secs,
            );
            one(&mut encoder, name, age)?;
        }
        if !b.tenants.is_empty() {
            tenants(&mut encoder, &b.tenants)?;
        }
        if let Some(n) = b.slow_pool {
            let name = (
                "hooklane_slow_pool_deliveries",
                "Pending deliveries on the slow pool's queue (AWS)",
                None,
            );
            one(&mut encoder, name, n as i64)?;
        }
        if let Some(n) = b.slow_pool_lanes {
            let name = (
                "hooklane_slow_pool_lanes",
                "Lanes in the slow pool (AWS): their receivers did not answer in time",
                None,
            );
            one(&mut encoder, name, n as i64)?;
        }
        if let Some(n) = s.suspended {
            one(
                &mut encoder,
                (
                    "hooklane_subscriptions_suspended",
                    "Suspended subscriptions",
                    None,
                ),
                n as i64,
            )?;
        }
        Ok(())
    }
}
