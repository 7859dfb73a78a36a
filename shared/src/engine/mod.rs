//! The engine: publish (archive and schedule fan-out), fan-out (one
//! delivery per matching subscription), one delivery attempt
//! ([`deliver`]: prepare, send, classify, record) and endpoint health
//! ([`lifecycle`]: suspension, probe, re-enable, backfill), the operator
//! events ([`operator`]), and what the API reads of them ([`stats`],
//! [`catalog`]). It works only through the ports; the embedded runner and
//! the AWS handlers decide *when* each step runs.

mod access;
pub mod catalog;
mod cut_off;
pub(crate) mod deliver;
mod emf;
pub mod in_flight;
mod lifecycle;
mod metrics;
mod operator;
mod outcome;
mod pacing;
mod registry;
mod requeue;
pub mod stats;
mod status;
mod tenant_slot;
mod wiring;
pub use lifecycle::EnableError;
pub use metrics::{Metrics, CONTENT_TYPE as METRICS_CONTENT_TYPE};
pub use operator::OPERATOR_TENANT;
pub use registry::{Scanned, ROTATION_OVERLAP};
pub use requeue::BackfillPass;
pub use wiring::{EveryStorePort, Outside, Ports, Store, StorePorts};

use std::sync::Arc;

use time::OffsetDateTime;
use tracing::{info, warn, Instrument};

use crate::config::Config;
use crate::domain::{Event, EventType, Subscription, SubscriptionId, SubscriptionStatus, TenantId};
use crate::health::Breakers;
use crate::ports::{Accepted, End, FanOutBy, NewDelivery, StoreError, StoreResult};
use crate::telemetry::Chain;

/// How far apart two machines' clocks may be: a subscription created this
/// long after an event was accepted may still have been created before it.
pub const CLOCK_ALLOWANCE: std::time::Duration = std::time::Duration::from_secs(1);

/// How many subscriptions fan-out reads and enqueues per page.
const FAN_OUT_PAGE: usize = 500;

/// How many deliveries one publish fans out itself, at most, where the
/// caller fans out ([`FanOutBy::Caller`]): a request's work stays well
/// within an API function's time (about 200 `SendMessageBatch` calls).
/// A batch past it is scheduled from there on, and its tenant moves to the
/// scheduled path.
const INLINE_DELIVERIES: usize = 2_000;

/// `event`'s deliveries to the subscriptions of `page` (which match its
/// type): those whose content filter refuses it do not get it, nor those
/// created more than [`CLOCK_ALLOWANCE`] after the event was accepted (a
/// fan-out run again for a duplicate publish).
fn deliveries_of(event: &Event, page: &[Subscription]) -> Vec<NewDelivery> {
    // The page matched the event's type; the content filters decide the
    // rest, each on the one document of the event, read on first need. The
    // page's deliveries share one copy of the event, made for the first.
    let mut doc = None;
    let mut shared: Option<Arc<Event>> = None;
    let mut out = Vec::with_capacity(page.len());
    out.extend(
        page.iter()
            .filter(|s| s.created_at <= event.created_at + CLOCK_ALLOWANCE)
            .filter(|s| s.passes_filter(event, &mut doc))
            .map(|s| NewDelivery::of(shared.get_or_insert_with(|| Arc::new(event.clone())), s)),
    );
    out
}

/// What one call to [`Engine::deliver`] came to.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// The delivery's turn ended so (and the lane recorded it).
    Ended(End),
    /// Someone else holds or finished it; nothing was sent.
    Skipped,
    /// The circuit breaker is open: put off until then, not attempted.
    Deferred(OffsetDateTime),
    /// Its lane runs in another pool (AWS: the slow pool): hand it over,
    /// not attempted.
    Elsewhere,
}

/// The delivery engine.
pub struct Engine {
    /// The ports.
    pub ports: Ports,
    /// The configuration.
    pub config: Config,
    /// Counters.
    pub metrics: Metrics,
    /// Circuit breakers, per subscription (shared by the engines of one
    /// process: the AWS stand-in's two delivery pools).
    pub breakers: Arc<Breakers>,
    /// The portal key, once resolved ([`Engine::portal_key`]).
    portal_key: std::sync::OnceLock<Vec<u8>>,
}

impl Engine {
    /// An engine over these ports.
    pub fn new(ports: Ports, config: Config) -> Arc<Self> {
        Arc::new(Self {
            ports,
            breakers: Arc::new(Breakers::new(config.breaker)),
            config,
            metrics: Metrics::default(),
            portal_key: Default::default(),
        })
    }

    /// An engine over these ports that shares `other`'s circuit breakers
    /// (one process running two delivery pools).
    pub fn sharing_breakers(ports: Ports, config: Config, other: &Engine) -> Arc<Self> {
        Arc::new(Self {
            ports,
            breakers: other.breakers.clone(),
            config,
            metrics: Metrics::default(),
            portal_key: Default::default(),
        })
    }

    /// Accepts an event: archives it and schedules its fan-out, or fans it
    /// out before returning ([`FanOutBy::Caller`]). A new event wakes the
    /// fan-out worker.
    pub async fn publish(&self, event: Event) -> StoreResult<Accepted> {
        self.publish_all(vec![event])
            .await
            .pop()
            .unwrap_or_else(|| Err(StoreError::backend("no answer")))
    }

    /// Accepts one tenant's events in order, as [`Engine::publish`] each,
    /// and fans out those the caller fans out together: one enqueue for
    /// the run ([`Engine::fan_out_run`]), so a batch of single-subscriber
    /// events is queued in one `SendMessageBatch` per ten on AWS. Answers
    /// each event in order up to the first storage failure, which is the
    /// last answer (a conflict is an answer, not a failure): no event is
    /// accepted ahead of an earlier one that was not.
    ///
    /// What the caller fans out is fanned out before this returns. From an
    /// event with more than a page of subscriptions on, or for the whole
    /// run when its fan-out failed, the events are scheduled instead, in
    /// order, and the tenant moves to the scheduled path for good; the
    /// scheduled fan-out queues nothing twice. When scheduling fails too,
    /// that event answers the failure (its retry, a duplicate, fans out
    /// again).
    pub async fn publish_all(&self, events: Vec<Event>) -> Vec<StoreResult<Accepted>> {
        let mut answers: Vec<StoreResult<Accepted>> = Vec::with_capacity(events.len());
        // The answers whose fan-out is this caller's.
        let mut here: Vec<usize> = Vec::new();
        // The path the request's first event took holds for the rest: a
        // batch is fanned out on one path, in order.
        let mut decided: Option<FanOutBy> = None;
        for event in events {
            match self.ports.events.accept_routed(event, decided).await {
                Ok((accepted, by)) => {
                    decided = Some(by);
                    if let Accepted::New(e) = &accepted {
                        self.metrics.events_accepted.inc();
                        info!(
                            tenant = e.tenant.as_str(),
                            event_id = e.id.as_str(),
                            "event accepted"
                        );
                        self.ports.wakeup.fan_out(e);
                    }
                    if by == FanOutBy::Caller {
                        here.push(answers.len());
                    }
                    answers.push(Ok(accepted));
                }
                Err(e @ StoreError::Conflict(_)) => answers.push(Err(e)),
                Err(e) => {
                    answers.push(Err(e));
                    break;
                }
            }
        }
        self.fan_out_before_answering(answers, &here).await
    }

    /// Fans out the accepted events whose fan-out is the caller's (`here`,
    /// indices into `answers`) before the answers go back; what it cannot
    /// fan out whole is scheduled, and an event whose scheduling fails
    /// answers that failure (the answers after it are cut).
    async fn fan_out_before_answering(
        &self,
        mut answers: Vec<StoreResult<Accepted>>,
        here: &[usize],
    ) -> Vec<StoreResult<Accepted>> {
        let run: Vec<Event> = here
            .iter()
            .filter_map(|&i| answers[i].as_ref().ok().map(|a| a.event().clone()))
            .collect();
        if run.is_empty() {
            return answers;
        }
        let tenant = run[0].tenant.as_str();
        let span = crate::trace::fan_out(&run);
        let whole = match self
            .fan_out_run(&run, INLINE_DELIVERIES)
            .instrument(span)
            .await
        {
            Ok(whole) => whole,
            Err(e) => {
                warn!(tenant, error = %Chain(&e), "fanning out before answering failed; the tenant's events are fanned out from the queue from now on");
                0
            }
        };
        if whole < run.len() {
            info!(
                tenant,
                "scheduling the fan-out of {} event(s): the tenant's events are fanned out from the queue from now on",
                run.len() - whole
            );
        }
        for (event, &i) in run.iter().zip(here).skip(whole) {
            if let Err(e) = self.ports.events.fan_out_later(event).await {
                answers.truncate(i);
                answers.push(Err(e));
                break;
            }
        }
        answers
    }

    /// Enqueues one delivery of `event` for each matching active
    /// subscription, page by page; returns how many. Safe to run again
    /// after a crash: a pair already queued is not queued twice.
    pub async fn fan_out(&self, event: &Event) -> StoreResult<usize> {
        let (total, _) = self.fan_out_pages(event, None, usize::MAX).await?;
        Ok(total)
    }

    /// Fans out several events, in order, writing their deliveries
    /// together: one enqueue per page's worth of deliveries rather than
    /// one per event, so a burst of single-subscriber events costs one
    /// write. Each lane still receives its deliveries in event order.
    pub async fn fan_out_many(&self, events: &[Event]) -> StoreResult<usize> {
        let mut total = 0;
        let mut buffer: Vec<NewDelivery> = Vec::new();
        for event in events {
            let mut after: Option<SubscriptionId> = None;
            loop {
                let (page, next) = self.fan_out_page(event, after.as_ref()).await?;
                buffer.extend(page);
                if buffer.len() >= FAN_OUT_PAGE {
                    total += self.enqueue_and_wake(std::mem::take(&mut buffer)).await?;
                }
                match next {
                    Some(cursor) => after = Some(cursor),
                    None => break,
                }
            }
        }
        total += self.enqueue_and_wake(buffer).await?;
        Ok(total)
    }

    /// Fans out a run of one tenant's events, in order, with their
    /// deliveries written in one enqueue (on AWS, one `SendMessageBatch`
    /// per ten deliveries rather than one per event), as far as each
    /// event's subscriptions fit one page: returns how many of `events`, from
    /// the first, were fanned out whole. An event with more than a page,
    /// or one that comes once `max_deliveries` are buffered, ends the run;
    /// it and the rest are left to [`Engine::fan_out_pages`]. Events of one type share their page of
    /// subscriptions (read once per run). Safe to run again, as every
    /// fan-out is.
    pub async fn fan_out_run(&self, events: &[Event], max_deliveries: usize) -> StoreResult<usize> {
        let mut pages: Vec<((TenantId, EventType), Vec<Subscription>)> = Vec::new();
        let mut buffer: Vec<NewDelivery> = Vec::new();
        let mut whole = 0;
        for event in events {
            if buffer.len() >= max_deliveries {
                break;
            }
            if let Some(to) = &event.only_for {
                buffer.extend(self.test_delivery(event, to).await?);
                whole += 1;
                continue;
            }
            let of = (event.tenant.clone(), event.event_type.clone());
            let i = match pages.iter().position(|(k, _)| *k == of) {
                Some(i) => i,
                None => {
                    let page = self
                        .ports
                        .subscriptions
                        .matching(&event.tenant, &event.event_type, None, FAN_OUT_PAGE)
                        .await?;
                    if page.len() == FAN_OUT_PAGE {
                        break;
                    }
                    pages.push((of, page));
                    pages.len() - 1
                }
            };
            buffer.extend(deliveries_of(event, &pages[i].1));
            whole += 1;
        }
        self.enqueue_and_wake(buffer).await?;
        Ok(whole)
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
            let (page, next) = self.fan_out_page(event, after.as_ref()).await?;
            total += self.enqueue_and_wake(page).await?;
            after = next;
            if after.is_none() {
                break;
            }
        }
        Ok((total, after))
    }

    /// One page of `event`'s deliveries, from the matching active
    /// subscriptions after `after`, and the cursor of the next page (none
    /// after the last). A fan-out can run again (the AWS backend fans out a
    /// duplicate publish again, in case the first never got queued):
    /// subscriptions created more than [`CLOCK_ALLOWANCE`] after the event
    /// was accepted do not get it.
    async fn fan_out_page(
        &self,
        event: &Event,
        after: Option<&SubscriptionId>,
    ) -> StoreResult<(Vec<NewDelivery>, Option<SubscriptionId>)> {
        if let Some(to) = &event.only_for {
            let one = self.test_delivery(event, to).await?;
            return Ok((one.into_iter().collect(), None));
        }
        let page = self
            .ports
            .subscriptions
            .matching(&event.tenant, &event.event_type, after, FAN_OUT_PAGE)
            .await?;
        let next = (page.len() == FAN_OUT_PAGE)
            .then(|| page.last().map(|s| s.id.clone()))
            .flatten();
        Ok((deliveries_of(event, &page), next))
    }

    /// A test event's one delivery: to its subscription alone, whatever
    /// its event types and filter, while it exists and is active.
    async fn test_delivery(
        &self,
        event: &Event,
        to: &SubscriptionId,
    ) -> StoreResult<Option<NewDelivery>> {
        let sub = self.ports.subscriptions.get(&event.tenant, to).await?;
        Ok(sub
            .filter(|s| s.status == SubscriptionStatus::Active)
            .map(|s| NewDelivery::of(&Arc::new(event.clone()), &s)))
    }

    /// Enqueues a batch of deliveries, wakes their lanes, counts them.
    async fn enqueue_and_wake(&self, batch: Vec<NewDelivery>) -> StoreResult<usize> {
        if batch.is_empty() {
            return Ok(0);
        }
        self.ports.lanes.enqueue(&batch).await?;
        // Lanes are woken per tenant; a batch can span tenants.
        let mut i = 0;
        while i < batch.len() {
            let tenant = &batch[i].tenant;
            let j = i + batch[i..]
                .iter()
                .take_while(|d| &d.tenant == tenant)
                .count();
            let lanes: Vec<(SubscriptionId, Option<u16>)> = batch[i..j]
                .iter()
                .map(|d| (d.subscription_id.clone(), Some(d.lane)))
                .collect();
            self.ports.wakeup.lanes(tenant, &lanes);
            i = j;
        }
        self.metrics.deliveries_enqueued.inc_by(batch.len() as u64);
        Ok(batch.len())
    }
}
