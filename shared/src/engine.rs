//! The engine: publish (archive and schedule fan-out), fan-out (one
//! delivery per matching subscription) and one delivery attempt (prepare,
//! send, classify, record). It works only through the ports; the embedded
//! runner and the AWS handlers decide *when* each step runs.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use time::OffsetDateTime;
use tracing::{info, warn};

use crate::config::Config;
use crate::domain::{Attempt, AttemptId, Delivery, Event, Health, Subscription, SubscriptionId};
use crate::policy::{decide, Decision};
use crate::ports::{
    Accepted, AttemptLog, Clock, DeliveryQueue, EventArchive, Finish, NewDelivery, Outbound,
    SendReport, Sender, StoreResult, SubscriptionStore, Wakeup,
};
use crate::signing::webhook_headers;

/// How many subscriptions fan-out reads and enqueues per page.
const FAN_OUT_PAGE: usize = 500;

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
        ];
        rows.iter()
            .map(|(name, v)| {
                format!(
                    "# TYPE {name} counter\n{name} {}\n",
                    v.load(Ordering::Relaxed)
                )
            })
            .collect()
    }
}

/// The ports the engine works through.
#[derive(Clone)]
pub struct Ports {
    /// Subscriptions.
    pub subscriptions: Arc<dyn SubscriptionStore>,
    /// Event archive and fan-out intake.
    pub events: Arc<dyn EventArchive>,
    /// Delivery lanes.
    pub queue: Arc<dyn DeliveryQueue>,
    /// Attempt log.
    pub attempts: Arc<dyn AttemptLog>,
    /// Time.
    pub clock: Arc<dyn Clock>,
    /// HTTP sender.
    pub sender: Arc<dyn Sender>,
    /// Worker wake-ups.
    pub wakeup: Arc<dyn Wakeup>,
}

/// What one call to [`Engine::deliver`] did.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// The subscription is gone: the delivery was dropped (G4).
    Dropped,
    /// Someone else holds or finished it; nothing was sent.
    Skipped,
    /// 2xx.
    Delivered,
    /// Due again at this time.
    Retrying(OffsetDateTime),
    /// Parked with this reason.
    Parked(String),
}

/// The delivery engine.
pub struct Engine {
    /// The ports.
    pub ports: Ports,
    /// The configuration.
    pub config: Config,
    /// Counters.
    pub metrics: Metrics,
}

impl Engine {
    /// An engine over these ports.
    pub fn new(ports: Ports, config: Config) -> Arc<Self> {
        Arc::new(Self {
            ports,
            config,
            metrics: Metrics::default(),
        })
    }

    /// Accepts an event: archives it and schedules its fan-out. A new event
    /// wakes the fan-out worker.
    pub async fn publish(&self, event: Event) -> StoreResult<Accepted> {
        let accepted = self.ports.events.accept(event).await?;
        if let Accepted::New(e) = &accepted {
            self.metrics.events_accepted.fetch_add(1, Ordering::Relaxed);
            info!(
                tenant = e.tenant.as_str(),
                event_id = e.id.as_str(),
                "event accepted"
            );
            self.ports.wakeup.fan_out();
        }
        Ok(accepted)
    }

    /// Enqueues one delivery of `event` for each matching active
    /// subscription, page by page; returns how many. Safe to run again
    /// after a crash: a pair already queued is not queued twice.
    pub async fn fan_out(&self, event: &Event) -> StoreResult<usize> {
        let (total, _) = self.fan_out_pages(event, None, usize::MAX).await?;
        Ok(total)
    }

    /// Fans out at most `max_pages` pages of subscriptions after `after`;
    /// returns how many deliveries were enqueued and, when subscriptions
    /// remain, the cursor to resume from (a very large fan-out continues
    /// across invocations).
    pub async fn fan_out_pages(
        &self,
        event: &Event,
        mut after: Option<SubscriptionId>,
        max_pages: usize,
    ) -> StoreResult<(usize, Option<SubscriptionId>)> {
        let mut total = 0;
        for _ in 0..max_pages {
            let page = self
                .ports
                .subscriptions
                .matching(
                    &event.tenant,
                    &event.event_type,
                    after.as_ref(),
                    FAN_OUT_PAGE,
                )
                .await?;
            let Some(last) = page.last() else {
                after = None;
                break;
            };
            after = Some(last.id.clone());
            let batch: Vec<NewDelivery> = page
                .iter()
                .map(|s| NewDelivery {
                    tenant: event.tenant.clone(),
                    subscription_id: s.id.clone(),
                    event_id: event.id.clone(),
                    event_type: event.event_type.clone(),
                    spill: s.spilling,
                })
                .collect();
            self.ports.queue.enqueue(&batch).await?;
            let lanes: Vec<SubscriptionId> = page.into_iter().map(|s| s.id).collect();
            self.ports.wakeup.lanes(&event.tenant, &lanes);
            total += lanes.len();
            self.metrics
                .deliveries_enqueued
                .fetch_add(lanes.len() as u64, Ordering::Relaxed);
            if lanes.len() < FAN_OUT_PAGE {
                after = None;
                break;
            }
        }
        Ok((total, after))
    }

    /// Runs one attempt of a due delivery: reads the subscription right
    /// before it (tombstone rule), records the start, signs, sends,
    /// classifies and records the outcome.
    pub async fn deliver(&self, d: &Delivery) -> StoreResult<Step> {
        let Some((sub, event)) = self.prepare(d).await? else {
            self.ports
                .queue
                .finish(d, None, &Finish::Dropped, &self.dropped_attempt(d))
                .await?;
            self.metrics.dropped.fetch_add(1, Ordering::Relaxed);
            info!(
                subscription_id = d.subscription_id.as_str(),
                event_id = d.event_id.as_str(),
                "delivery dropped: subscription gone"
            );
            return Ok(Step::Dropped);
        };
        let now = self.ports.clock.now();
        let lease = now + self.config.attempt_timeout + Duration::from_secs(5);
        if !self.ports.queue.begin_attempt(d, now, lease).await? {
            return Ok(Step::Skipped);
        }
        self.metrics.attempts.fetch_add(1, Ordering::Relaxed);
        let attempt_no = d.attempts + 1;
        let report = self.send(&sub, &event, attempt_no, now).await;
        let decision = decide(
            &self.config.retry_schedule,
            self.config.retry_jitter,
            attempt_no,
            &report.result,
            rand::random::<f64>(),
        );
        self.record(d, &sub, attempt_no, now, &report, decision)
            .await
    }

    /// Reads the subscription (consistent) and the event; `None` when the
    /// delivery must be dropped.
    async fn prepare(&self, d: &Delivery) -> StoreResult<Option<(Subscription, Event)>> {
        let Some(sub) = self
            .ports
            .subscriptions
            .get(&d.tenant, &d.subscription_id)
            .await?
        else {
            return Ok(None);
        };
        let Some(event) = self.ports.events.get(&d.tenant, &d.event_id).await? else {
            warn!(
                event_id = d.event_id.as_str(),
                "event no longer archived; dropping delivery"
            );
            return Ok(None);
        };
        Ok(Some((sub, event)))
    }

    /// Signs and sends one attempt.
    async fn send(
        &self,
        sub: &Subscription,
        event: &Event,
        attempt: u32,
        now: OffsetDateTime,
    ) -> SendReport {
        let headers = webhook_headers(
            &sub.signing_secrets(now),
            event.id.as_str(),
            now.unix_timestamp(),
            attempt,
            &event.payload,
        );
        self.ports
            .sender
            .send(Outbound {
                url: sub.url.clone(),
                headers,
                body: event.payload.clone(),
            })
            .await
    }

    /// Logs the attempt, records the queue outcome and, when the retry
    /// sequence ended, the health record.
    async fn record(
        &self,
        d: &Delivery,
        sub: &Subscription,
        attempt_no: u32,
        started_at: OffsetDateTime,
        report: &SendReport,
        decision: Decision,
    ) -> StoreResult<Step> {
        let (outcome, finish, step) = match decision {
            Decision::Delivered => ("delivered", Finish::Delivered, Step::Delivered),
            Decision::RetryIn(delay) => {
                let at = self.ports.clock.now() + delay;
                ("retrying", Finish::RetryAt(at), Step::Retrying(at))
            }
            Decision::Park(reason) => (
                "parked",
                Finish::Parked(reason.clone()),
                Step::Parked(reason),
            ),
        };
        let attempt = Attempt {
            id: AttemptId::generate(),
            tenant: d.tenant.clone(),
            subscription_id: d.subscription_id.clone(),
            event_id: d.event_id.clone(),
            attempt: attempt_no,
            started_at,
            duration_ms: report.elapsed.as_millis() as u64,
            status_code: report.result.status(),
            outcome: outcome.to_owned(),
            error: (!report.result.is_success()).then(|| report.result.describe()),
            response_excerpt: report.excerpt.clone(),
        };
        self.ports.attempts.record(&attempt).await?;
        self.ports
            .queue
            .finish(d, Some(sub), &finish, &attempt)
            .await?;
        let counter = match &step {
            Step::Delivered => &self.metrics.delivered,
            Step::Retrying(_) => &self.metrics.retried,
            _ => &self.metrics.parked,
        };
        counter.fetch_add(1, Ordering::Relaxed);
        if matches!(step, Step::Delivered | Step::Parked(_)) {
            let streak_start = d.first_attempt_at.unwrap_or(started_at);
            let health = next_health(
                &sub.health,
                &attempt,
                streak_start,
                matches!(step, Step::Delivered),
            );
            self.ports
                .subscriptions
                .record_health(&d.tenant, &d.subscription_id, &health)
                .await?;
        }
        info!(
            subscription_id = d.subscription_id.as_str(),
            event_id = d.event_id.as_str(),
            attempt = attempt_no,
            outcome,
            "attempt finished"
        );
        Ok(step)
    }

    fn dropped_attempt(&self, d: &Delivery) -> Attempt {
        Attempt {
            id: AttemptId::generate(),
            tenant: d.tenant.clone(),
            subscription_id: d.subscription_id.clone(),
            event_id: d.event_id.clone(),
            attempt: d.attempts,
            started_at: self.ports.clock.now(),
            duration_ms: 0,
            status_code: None,
            outcome: "dropped".into(),
            error: Some("subscription deleted".into()),
            response_excerpt: None,
        }
    }
}

/// The health record after a retry sequence ended: a success resets it, a
/// parked delivery extends the failure streak, which began at the first
/// attempt of its first failed delivery (G8).
pub fn next_health(
    prev: &Health,
    last: &Attempt,
    first_attempt_at: OffsetDateTime,
    delivered: bool,
) -> Health {
    let mut h = Health {
        last_outcome: Some(last.outcome.clone()),
        last_status_code: last.status_code,
        last_error: last.error.clone(),
        last_attempt_at: Some(last.started_at),
        ..Health::default()
    };
    if !delivered {
        h.consecutive_failures = prev.consecutive_failures + 1;
        h.first_failure_at = prev.first_failure_at.or(Some(first_attempt_at));
    }
    h
}
