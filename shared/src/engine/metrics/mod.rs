//! The engine's metrics as it publishes, fans out and attempts, kept with
//! `prometheus-client` and served by `GET /metrics` in the Prometheus text
//! format: counters, the attempt-duration and publish-to-first-attempt
//! histograms, this process's gauges (open breakers, attempts in flight,
//! lanes running), and the gauges read from the store when scraped
//! ([`store_gauges`]: the backlog per tenant, bounded to the top tenants
//! and the rest, and suspended subscriptions).
//!
//! The per-attempt path touches counters and histograms held directly
//! (the label sets are made once), never a labelled lookup.

mod store_gauges;

use std::sync::RwLock;
use std::time::Duration;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::{Registry, Unit};

use crate::domain::Backlog;
use crate::policy::{AttemptResult, FailureClass};
use store_gauges::{Snapshot, StoreGauges};

/// One label: `(name, value)`.
type Labels = Vec<(&'static str, String)>;

/// The outcome classes, in the order of [`Metrics::outcomes`].
const OUTCOMES: [&str; 4] = ["success", "retryable", "permanent", "fatal"];

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
    suspensions: Family<Labels, Counter>,
    outcomes: Family<Labels, Counter>,
    /// Suspensions of each failure class (`retryable`, `permanent`,
    /// `fatal`): the family's counters, held.
    by_suspension: [Counter; 3],
    /// Attempts ended of each class of [`OUTCOMES`], held.
    by_outcome: [Counter; 4],
    attempt_seconds: Histogram,
    first_attempt_seconds: Histogram,
    open_breakers: Gauge,
    in_flight: Gauge,
    in_flight_peak: Gauge,
    lanes: Gauge,
    store: StoreGauges,
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

/// The one series of `hooklane_build_info`: the version and commit built.
fn build_info() -> Family<Labels, Gauge> {
    let build: Family<Labels, Gauge> = Family::default();
    build
        .get_or_create(&vec![
            ("version", env!("CARGO_PKG_VERSION").to_owned()),
            ("commit", env!("HOOKLANE_COMMIT").to_owned()),
        ])
        .set(1);
    build
}

fn class_labels(class: &str) -> Labels {
    vec![("class", class.to_owned())]
}

fn class_index(class: FailureClass) -> usize {
    match class {
        FailureClass::Retryable => 0,
        FailureClass::Permanent => 1,
        FailureClass::Fatal => 2,
    }
}

impl Default for Metrics {
    fn default() -> Self {
        let suspensions: Family<Labels, Counter> = Family::default();
        let outcomes: Family<Labels, Counter> = Family::default();
        let by_suspension =
            [1, 2, 3].map(|i| suspensions.get_or_create_owned(&class_labels(OUTCOMES[i])));
        let by_outcome =
            [0, 1, 2, 3].map(|i| outcomes.get_or_create_owned(&class_labels(OUTCOMES[i])));
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
            suspensions,
            outcomes,
            by_suspension,
            by_outcome,
            // 5 ms to about 41 s: the attempt timeout's range.
            attempt_seconds: Histogram::new(exponential_buckets(0.005, 2.0, 14)),
            // 10 ms to about 4.4 h: isolation to a day's first retries.
            first_attempt_seconds: Histogram::new(exponential_buckets(0.01, 3.0, 14)),
            open_breakers: Gauge::default(),
            in_flight: Gauge::default(),
            in_flight_peak: Gauge::default(),
            lanes: Gauge::default(),
            store: StoreGauges::default(),
            sampling: Default::default(),
            samples: Default::default(),
            emf_last: Default::default(),
        };
        m.register_all();
        m
    }
}

impl Metrics {
    /// The plain counters: (Prometheus name, help, EMF name, counter). One
    /// table for `/metrics` and the EMF lines.
    pub(super) fn counters(&self) -> [(&'static str, &'static str, &'static str, &Counter); 8] {
        [
            (
                "hooklane_events_accepted",
                "Events accepted",
                "EventsAccepted",
                &self.events_accepted,
            ),
            (
                "hooklane_deliveries_enqueued",
                "Deliveries enqueued by fan-out",
                "DeliveriesEnqueued",
                &self.deliveries_enqueued,
            ),
            (
                "hooklane_attempts",
                "Attempts started",
                "Attempts",
                &self.attempts,
            ),
            (
                "hooklane_deliveries_delivered",
                "Deliveries that got a 2xx",
                "Delivered",
                &self.delivered,
            ),
            (
                "hooklane_deliveries_retried",
                "Deliveries rescheduled for a retry",
                "Retried",
                &self.retried,
            ),
            (
                "hooklane_deliveries_parked",
                "Deliveries parked",
                "Parked",
                &self.parked,
            ),
            (
                "hooklane_deliveries_dropped",
                "Deliveries dropped after their subscription was deleted",
                "Dropped",
                &self.dropped,
            ),
            (
                "hooklane_attempts_deferred",
                "Attempts deferred by an open circuit breaker",
                "Deferred",
                &self.deferred,
            ),
        ]
    }

    fn register_all(&self) {
        self.register(|r| {
            for (name, help, _, c) in self.counters() {
                r.register(name, help, c.clone());
            }
            r.register(
                "hooklane_suspensions",
                "Suspensions by failure class",
                self.suspensions.clone(),
            );
            r.register(
                "hooklane_attempt_outcomes",
                "Attempts ended, by class: success, retryable, permanent, fatal",
                self.outcomes.clone(),
            );
            r.register_with_unit(
                "hooklane_attempt_duration",
                "Time from sending an attempt to its answer or timeout",
                Unit::Seconds,
                self.attempt_seconds.clone(),
            );
            r.register_with_unit(
                "hooklane_publish_to_first_attempt",
                "Time from an event's acceptance to its delivery's first attempt",
                Unit::Seconds,
                self.first_attempt_seconds.clone(),
            );
            r.register_collector(Box::new(self.store.clone()));
            r.register(
                "hooklane_breakers_open",
                "Circuit breakers open in this process",
                self.open_breakers.clone(),
            );
            r.register(
                "hooklane_attempts_in_flight",
                "Attempts in flight in this process",
                self.in_flight.clone(),
            );
            r.register(
                "hooklane_lanes_running",
                "Lanes with work running in this process (serve on the embedded backend)",
                self.lanes.clone(),
            );
            r.register(
                "hooklane_tenant_attempts_in_flight_peak",
                "The most attempts one tenant had in flight at once in this process",
                self.in_flight_peak.clone(),
            );
            r.register(
                "hooklane_build_info",
                "The build serving: its version and commit (always 1)",
                build_info(),
            );
            r.register(
                "hooklane_unreadable_records",
                "Stored records that did not parse (kept, logged)",
                crate::record::UNREADABLE.clone(),
            );
        });
    }

    /// Registers more metrics beside the engine's (an adapter's own).
    pub fn register(&self, f: impl FnOnce(&mut Registry)) {
        let mut registry = self.registry.write().unwrap_or_else(|e| e.into_inner());
        f(&mut registry);
    }

    /// Sets how many lanes run now (the embedded runtime's lane tasks).
    pub fn lanes_running(&self, n: usize) {
        self.lanes.set(n as i64);
    }

    /// Counts a suspension of this class.
    pub fn suspended_for(&self, class: FailureClass) {
        self.by_suspension[class_index(class)].inc();
    }

    /// Suspensions counted of this class.
    pub fn suspensions_of(&self, class: FailureClass) -> u64 {
        self.by_suspension[class_index(class)].get()
    }

    /// Attempts ended of each class of [`OUTCOMES`] but success, so far.
    pub(super) fn failures_by_class(&self) -> [u64; 3] {
        [1, 2, 3].map(|i| self.by_outcome[i].get())
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
        let class = result.failure_class().map_or(0, |c| class_index(c) + 1);
        self.by_outcome[class].inc();
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

    /// Sets the gauges read at scrape time: the store's (a value the
    /// backend cannot tell is left out) and this process's.
    pub fn set_gauges(&self, backlog: Backlog, suspended: Option<u64>, open_breakers: usize) {
        self.store.set(Snapshot { backlog, suspended });
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
