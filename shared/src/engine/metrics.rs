//! The counters the engine keeps as it publishes, fans out and attempts,
//! rendered in the Prometheus text format for `GET /metrics`.

use std::sync::atomic::{AtomicU64, Ordering};

use super::in_flight;

/// Counters the engine keeps (served by `GET /metrics`).
#[derive(Debug, Default)]
pub struct Metrics {
    /// Events accepted.
    pub events_accepted: AtomicU64,
    /// Deliveries enqueued by fan-out.
    pub deliveries_enqueued: AtomicU64,
    /// Attempts started.
    pub attempts: AtomicU64,
    /// Deliveries that got a 2xx.
    pub delivered: AtomicU64,
    /// Deliveries rescheduled for a retry.
    pub retried: AtomicU64,
    /// Deliveries parked.
    pub parked: AtomicU64,
    /// Deliveries dropped because their subscription was deleted (G4).
    pub dropped: AtomicU64,
    /// Attempts deferred by an open circuit breaker.
    pub deferred: AtomicU64,
    /// Suspensions, by failure class: retryable, permanent, fatal.
    pub suspensions: [AtomicU64; 3],
    /// More counters an adapter serves with these (AWS API calls).
    pub extra: std::sync::OnceLock<fn() -> String>,
}

impl Metrics {
    /// The counters in Prometheus text format.
    pub fn render(&self) -> String {
        let rows = [
            ("hooklane_events_accepted_total", &self.events_accepted),
            (
                "hooklane_deliveries_enqueued_total",
                &self.deliveries_enqueued,
            ),
            ("hooklane_attempts_total", &self.attempts),
            ("hooklane_deliveries_delivered_total", &self.delivered),
            ("hooklane_deliveries_retried_total", &self.retried),
            ("hooklane_deliveries_parked_total", &self.parked),
            ("hooklane_deliveries_dropped_total", &self.dropped),
            ("hooklane_attempts_deferred_total", &self.deferred),
            (
                "hooklane_unreadable_records_total",
                &crate::record::UNREADABLE,
            ),
        ];
        let mut out: String = rows
            .iter()
            .map(|(name, v)| {
                format!(
                    "# TYPE {name} counter\n{name} {}\n",
                    v.load(Ordering::Relaxed)
                )
            })
            .collect();
        out.push_str(&format!(
            "# TYPE hooklane_tenant_attempts_in_flight_peak gauge\nhooklane_tenant_attempts_in_flight_peak {}\n",
            in_flight::peak()
        ));
        if let Some(extra) = self.extra.get() {
            out.push_str(&extra());
        }
        out.push_str("# TYPE hooklane_suspensions_total counter\n");
        for (class, v) in ["retryable", "permanent", "fatal"]
            .iter()
            .zip(&self.suspensions)
        {
            out.push_str(&format!(
                "hooklane_suspensions_total{{class=\"{class}\"}} {}\n",
                v.load(Ordering::Relaxed)
            ));
        }
        out
    }
}
