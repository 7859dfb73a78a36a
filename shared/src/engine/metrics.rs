//! The engine's metrics as it publishes, fans out and attempts, kept with
//! `prometheus-client` and served by `GET /metrics` in the Prometheus text
//! format: counters, the attempt-duration and publish-to-first-attempt
//! histograms, and the gauges read when scraped (the backlog per tenant,
//! bounded to the top tenants and the rest, suspended subscriptions, open
//! breakers, attempts in flight).

use std::sync::RwLock;
use std::time::Duration;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::{Registry, Unit};

use crate::domain::Backlog;
use crate::policy::{AttemptResult, FailureClass};

/// One label: `(name, value)`.
type Labels = Vec<(&'static str, String)>;

/// A gauge holding seconds.
type Seconds = Gauge<f64, std::sync::atomic::AtomicU64>;

/// The engine's metrics (served by `GET /metrics`).
#[derive(Debug)]
pub struct Metrics {
    registry: RwLock<Registry>,
    /// Events accepted.
    pub events_accepted: Counter,
    /// Deliveries enqueued by fan-out.
    pub deliveries_enqueued: Counter,
    /// Attempts started.
    pub attempts: Counter,
    /// Deliveries that got a 2xx.
    pub delivered: Counter,
    /// Deliveries rescheduled for a retry.
    pub retried: Counter,
    /// Deliveries parked.
    pub parked: Counter,
    /// Deliveries dropped because their subscription was deleted (G4).
    pub dropped: Counter,
    /// Attempts deferred by an open circuit breaker.
    pub deferred: Counter,
    /// Suspensions, by failure class.
    suspensions: Family<Labels, Counter>,
    /// Attempts ended, by outcome class.
    outcomes: Family<Labels, Counter>,
    attempt_seconds: Histogram,
    first_attempt_seconds: Histogram,
    pending: Gauge,
    oldest_age: Seconds,
    tenant_pending: Family<Labels, Gauge>,
    tenant_oldest_age: Family<Labels, Seconds>,
    suspended: Gauge,
    open_breakers: Gauge,
    in_flight: Gauge,
    in_flight_peak: Gauge,
    /// Whether [`Samples`] are kept (for EMF lines, on Lambda).
    pub(super) sampling: std::sync::atomic::AtomicBool,
    /// The values since the last EMF line.
    pub(super) samples: std::sync::Mutex<Samples>,
    /// The counters at the last EMF line.
    pub(super) emf_last: std::sync::Mutex<Vec<u64>>,
}

/// Attempt durations and first-attempt latencies, in milliseconds, kept
/// for the next EMF line (at most [`super::emf::MAX_VALUES`] each).
#[derive(Debug, Default)]
pub(super) struct Samples {
    pub(super) attempt_ms: Vec<f64>,
    pub(super) first_attempt_ms: Vec<f64>,
}

impl Default for Metrics {
    fn default() -> Self {
        let m = Self {
            registry: RwLock::new(Registry::default()),
            events_accepted: Counter::default(),
            deliveries_enqueued: Counter::default(),
            attempts: Counter::default(),
            delivered: Counter::default(),
            retried: Counter::default(),
            parked: Counter::default(),
            dropped: Counter::default(),
            deferred: Counter::default(),
            suspensions: Family::default(),
            outcomes: Family::default(),
            // 5 ms to about 41 s: the attempt timeout's range.
            attempt_seconds: Histogram::new(exponential_buckets(0.005, 2.0, 14)),
            // 10 ms to about 1.5 h: isolation to a day's retries.
            first_attempt_seconds: Histogram::new(exponential_buckets(0.01, 3.0, 14)),
            pending: Gauge::default(),
            oldest_age: Seconds::default(),
            tenant_pending: Family::default(),
            tenant_oldest_age: Family::default(),
            suspended: Gauge::default(),
            open_breakers: Gauge::default(),
            in_flight: Gauge::default(),
            in_flight_peak: Gauge::default(),
            sampling: Default::default(),
            samples: Default::default(),
            emf_last: Default::default(),
        };
        // Every class shows from the start, at 0.
        for class in ["success", "retryable", "permanent", "fatal"] {
            let labels = vec![("class", class.to_owned())];
            m.outcomes.get_or_create(&labels).inc_by(0);
            if class != "success" {
                m.suspensions.get_or_create(&labels).inc_by(0);
            }
        }
        m.register_all();
        m
    }
}

impl Metrics {
    fn register_all(&self) {
        self.register(|r| {
            let counters = [
                ("hooklane_events_accepted", "Events accepted", &self.events_accepted),
                ("hooklane_deliveries_enqueued", "Deliveries enqueued by fan-out", &self.deliveries_enqueued),
                ("hooklane_attempts", "Attempts started", &self.attempts),
                ("hooklane_deliveries_delivered", "Deliveries that got a 2xx", &self.delivered),
                ("hooklane_deliveries_retried", "Deliveries rescheduled for a retry", &self.retried),
                ("hooklane_deliveries_parked", "Deliveries parked", &self.parked),
                ("hooklane_deliveries_dropped", "Deliveries dropped after their subscription was deleted", &self.dropped),
                ("hooklane_attempts_deferred", "Attempts deferred by an open circuit breaker", &self.deferred),
            ];
            for (name, help, c) in counters {
                r.register(name, help, c.clone());
            }
            r.register("hooklane_suspensions", "Suspensions by failure class", self.suspensions.clone());
            r.register("hooklane_attempt_outcomes", "Attempts ended, by class: success, retryable, permanent, fatal", self.outcomes.clone());
            r.register_with_unit("hooklane_attempt_duration", "Time from sending an attempt to its answer or timeout", Unit::Seconds, self.attempt_seconds.clone());
            r.register_with_unit("hooklane_publish_to_first_attempt", "Time from an event's acceptance to its delivery's first attempt", Unit::Seconds, self.first_attempt_seconds.clone());
            r.register("hooklane_backlog_deliveries", "Pending deliveries (queued, waiting for a retry, in flight)", self.pending.clone());
            r.register_with_unit("hooklane_backlog_oldest_age", "Age of the oldest pending delivery", Unit::Seconds, self.oldest_age.clone());
            r.register("hooklane_tenant_backlog_deliveries", "Pending deliveries of the tenants with the most, and of the rest (tenant=\"_other\")", self.tenant_pending.clone());
            r.register_with_unit("hooklane_tenant_backlog_oldest_age", "Age of the oldest pending delivery of the tenants with the most, and of the rest", Unit::Seconds, self.tenant_oldest_age.clone());
            r.register("hooklane_subscriptions_suspended", "Suspended subscriptions", self.suspended.clone());
            r.register("hooklane_breakers_open", "Circuit breakers open in this process", self.open_breakers.clone());
            r.register("hooklane_attempts_in_flight", "Attempts in flight in this process", self.in_flight.clone());
            r.register("hooklane_tenant_attempts_in_flight_peak", "The most attempts one tenant had in flight at once in this process", self.in_flight_peak.clone());
            r.register("hooklane_unreadable_records", "Stored records that did not parse (kept, logged)", crate::record::UNREADABLE.clone());
        });
    }

    /// Registers more metrics beside the engine's (an adapter's own).
    pub fn register(&self, f: impl FnOnce(&mut Registry)) {
        let mut registry = self.registry.write().unwrap_or_else(|e| e.into_inner());
        f(&mut registry);
    }

    /// Counts a suspension of this class.
    pub fn suspended_for(&self, class: FailureClass) {
        self.suspensions
            .get_or_create(&vec![("class", class.name().to_owned())])
            .inc();
    }

    /// Attempts ended of this class so far.
    pub(super) fn outcome_count(&self, class: &str) -> u64 {
        self.outcomes
            .get_or_create(&vec![("class", class.to_owned())])
            .get()
    }

    /// Suspensions counted of this class.
    pub fn suspensions_of(&self, class: FailureClass) -> u64 {
        self.suspensions
            .get_or_create(&vec![("class", class.name().to_owned())])
            .get()
    }

    /// Counts an attempt's end: its class and how long it took, and, for
    /// a delivery's first attempt, how long after its event's acceptance
    /// it started.
    pub fn attempt_ended(
        &self,
        result: &AttemptResult,
        took: Duration,
        since_accepted: Option<Duration>,
    ) {
        self.outcomes
            .get_or_create(&vec![("class", result.outcome_class().to_owned())])
            .inc();
        self.attempt_seconds.observe(took.as_secs_f64());
        if let Some(wait) = since_accepted {
            self.first_attempt_seconds.observe(wait.as_secs_f64());
        }
        if self.sampling.load(std::sync::atomic::Ordering::Relaxed) {
            let mut s = self.samples.lock().unwrap_or_else(|e| e.into_inner());
            let keep = |values: &mut Vec<f64>, d: Duration| {
                if values.len() < super::emf::MAX_VALUES {
                    values.push(d.as_secs_f64() * 1000.0);
                }
            };
            keep(&mut s.attempt_ms, took);
            if let Some(wait) = since_accepted {
                keep(&mut s.first_attempt_ms, wait);
            }
        }
    }

    /// Sets the gauges read at scrape time.
    pub fn set_gauges(&self, backlog: &Backlog, suspended: Option<u64>, open_breakers: usize) {
        self.pending.set(backlog.pending.unwrap_or(0) as i64);
        self.oldest_age
            .set(backlog.oldest_age_seconds.unwrap_or(0.0));
        // Cleared first: a tenant that left the top keeps no stale series.
        self.tenant_pending.clear();
        self.tenant_oldest_age.clear();
        for row in &backlog.tenants {
            let labels = vec![("tenant", row.tenant.clone())];
            self.tenant_pending
                .get_or_create(&labels)
                .set(row.pending as i64);
            self.tenant_oldest_age
                .get_or_create(&labels)
                .set(row.oldest_age_seconds.unwrap_or(0.0));
        }
        self.suspended.set(suspended.unwrap_or(0) as i64);
        self.open_breakers.set(open_breakers as i64);
        self.in_flight.set(super::in_flight::open_total() as i64);
        self.in_flight_peak.set(super::in_flight::peak() as i64);
    }

    /// The metrics in the Prometheus text format (version 0.0.4).
    pub fn render(&self) -> String {
        let registry = self.registry.read().unwrap_or_else(|e| e.into_inner());
        let mut out = String::new();
        // Writing to a String cannot fail.
        let _ = prometheus_client::encoding::prometheus_text::encode(&mut out, &registry);
        out
    }
}

/// The `Content-Type` of [`Metrics::render`].
pub const CONTENT_TYPE: &str = prometheus_client::encoding::prometheus_text::CONTENT_TYPE;
