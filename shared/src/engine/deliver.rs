//! One delivery attempt: prepare (the consistent subscription read of the
//! tombstone rule, the suspension hold, the circuit breaker), send (sign
//! and POST) and classify (the ladder); recording what follows is
//! [`super::outcome`]'s.

use std::borrow::Cow;
use std::time::Duration;

use time::OffsetDateTime;
use tracing::{info, warn, Instrument};

use super::{Engine, Step};
use crate::domain::{Delivery, Event, Subscription, SubscriptionStatus};
use crate::health::{Admit, Sequence};
use crate::policy::decide;
use crate::ports::{End, Finish, Outbound, SendReport, StoreResult, TenantSlot};
use crate::signing::webhook_headers;

/// How much longer than the attempt timeout a delivery's lease and its
/// tenant slot's lease last: room for the writes between taking the slot
/// and the request.
const LEASE_MARGIN: Duration = Duration::from_secs(5);

/// What preparing a delivery found.
enum Prepared {
    /// Attempt it.
    Ready(Box<(Subscription, Event)>),
    /// Its subscription (or event) is gone.
    Gone,
    /// Its subscription is suspended.
    Suspended,
}

impl Engine {
    /// The longest an attempt's lease lasts: the attempt's timeout and a
    /// margin for the writes around it. A queue message refused an
    /// attempt's start waits this long before its record is read again
    /// ([`crate::lane_rules::message_after`]).
    pub fn lease(&self) -> Duration {
        self.config.attempt_timeout + LEASE_MARGIN
    }

    /// Runs one attempt of a due delivery: reads the subscription right
    /// before it (tombstone rule), records the start, signs, sends,
    /// classifies and records the outcome. `event` is the event when
    /// already at hand (read with the lane head, or carried in the queue
    /// message): then only the subscription is read.
    pub async fn deliver(&self, d: &Delivery, event: Option<Event>) -> StoreResult<Step> {
        let (sub, event) = match self.ready(d, event).await? {
            Ok(ready) => ready,
            Err(step) => return Ok(step),
        };
        if !self.ports.lanes.here(d, &sub).await? {
            return Ok(Step::Elsewhere);
        }
        let now = self.ports.clock.now();
        if let Admit::Defer(until) = self.breakers.admit(&d.subscription_id, now) {
            return self.put_off(d, until).await;
        }
        let (sub, event, now) = match self.pace(d, &sub, now).await? {
            // It waited for its start under the rate limit: the tombstone
            // rule reads the subscription again right before the attempt.
            Ok(start) if start > now => match self.ready(d, Some(event)).await? {
                Ok((sub, event)) => (sub, event, start),
                Err(step) => return Ok(step),
            },
            Ok(start) => (sub, event, start),
            Err(until) => return self.put_off(d, until).await,
        };
        self.attempt_in_slot(d, &sub, &event, now).await
    }

    /// The attempt of [`Engine::deliver`] from its tenant slot on: takes
    /// the slot (put off when the tenant is at its bound), writes the
    /// attempt's start, and sends while the slot is held.
    async fn attempt_in_slot(
        &self,
        d: &Delivery,
        sub: &Subscription,
        event: &Event,
        paced: OffsetDateTime,
    ) -> StoreResult<Step> {
        let hold = self.lease();
        let slot = match self.take_slot(d, hold).await? {
            Ok(slot) => slot,
            Err(step) => return Ok(step),
        };
        // Late for its start under the rate limit (a slow store): a new
        // start, before the attempt's start is written (see pacing).
        let kept = match self
            .keep_pace_in_slot(d, (sub, event), paced, None, slot)
            .await?
        {
            Ok(kept) => kept,
            Err(step) => return Ok(step),
        };
        let (sub, event) = kept.fresh.as_ref().map_or((sub, event), |(s, e)| (s, e));
        self.begin_in_slot(d, sub, event, kept.start, kept.slot)
            .await
    }

    /// Writes the attempt's start with its slot held (checked before and
    /// after the write), then sends it; `start` is the one it keeps under
    /// the rate limit.
    async fn begin_in_slot(
        &self,
        d: &Delivery,
        sub: &Subscription,
        event: &Event,
        start: OffsetDateTime,
        slot: TenantSlot,
    ) -> StoreResult<Step> {
        let hold = self.lease();
        // Checked before the start is written too, so that a slot lost to a
        // slow store costs no attempt number.
        let Some(slot) = self.slot_for_the_request(d, slot, hold).await else {
            return self.put_off_briefly(d).await;
        };
        // The attempt starts now: taking the slot may have taken a while.
        let now = self.ports.clock.now().max(start);
        let lease = now + hold;
        let begun = self.ports.lanes.begin(d, now, lease).await;
        if !matches!(begun, Ok(true)) {
            self.release_slot(d, slot).await;
            return begun.map(|_| Step::Skipped);
        }
        // The write may have been the slow part: late again, the attempt
        // waits for a new start that leaves its request inside the lease.
        let by = now + LEASE_MARGIN - super::CLOCK_ALLOWANCE;
        let kept = match self
            .keep_pace_in_slot(d, (sub, event), start, Some(by), slot)
            .await?
        {
            Ok(kept) => kept,
            Err(step) => return Ok(step),
        };
        let (sub, event) = kept.fresh.as_ref().map_or((sub, event), |(s, e)| (s, e));
        let Some(slot) = self.slot_for_the_request(d, kept.slot, hold).await else {
            // G3 forbids the request. Its number is taken (its start is
            // written), as after a crash: it comes round again after the
            // lease, with the next number.
            return self.put_off_briefly(d).await;
        };
        // Its time is the start written, or the new start it waited for.
        let at = if kept.fresh.is_some() {
            kept.start
        } else {
            now
        };
        self.attempt_now(d, sub, event, at, slot).await
    }

    /// Sends the attempt (its start written, its slot held), gives the slot
    /// back, and records the outcome on the ladder.
    async fn attempt_now(
        &self,
        d: &Delivery,
        sub: &Subscription,
        event: &Event,
        now: OffsetDateTime,
        slot: TenantSlot,
    ) -> StoreResult<Step> {
        self.metrics.attempts.inc();
        let attempt_no = d.attempts + 1;
        let span = crate::trace::attempt(d, event, attempt_no);
        let report = {
            let _open = super::in_flight::open(&d.tenant);
            self.send_within_cut_off(sub, event, attempt_no, now)
                .instrument(span.clone())
                .await
        };
        crate::trace::attempt_ended(&span, &report.result);
        self.release_slot(d, slot).await;
        // A delivery's first attempt: how long after its event's acceptance
        // it started (a replay's or a backfill's counts from the event too).
        let since_accepted = (d.attempts == 0)
            .then(|| Duration::try_from(now - event.created_at).unwrap_or_default());
        self.metrics
            .attempt_ended(&report.result, report.elapsed, since_accepted);
        self.breakers.record(
            &d.subscription_id,
            report.result.is_success(),
            self.ports.clock.now(),
        );
        let decision = decide(
            &self.config.retry_schedule,
            self.config.retry_jitter,
            attempt_no,
            &report.result,
            rand::random::<f64>(),
        );
        let seq = Sequence {
            first_attempt_at: d.first_attempt_at.unwrap_or(now),
            event_at: event.created_at,
        };
        self.record(d, sub, attempt_no, now, &report, decision, seq)
            .await
    }

    /// Puts a delivery off for a second: the tenant bound's bookkeeping
    /// could not be read, its slot was lost before the request, or the rate
    /// limit had no start for it.
    pub(super) async fn put_off_briefly(&self, d: &Delivery) -> StoreResult<Step> {
        let soon = self.ports.clock.now() + Duration::from_secs(1);
        self.put_off(d, soon).await
    }

    /// Puts a delivery off until `until` without an attempt.
    pub(super) async fn put_off(&self, d: &Delivery, until: OffsetDateTime) -> StoreResult<Step> {
        self.ports.lanes.defer(d, until).await?;
        self.metrics.deferred.inc();
        Ok(Step::Deferred(until))
    }

    /// The subscription (read consistently) and the event of a delivery
    /// about to be attempted, or how its turn ended without an attempt: the
    /// subscription is gone (dropped) or suspended (held).
    pub(super) async fn ready(
        &self,
        d: &Delivery,
        event: Option<Event>,
    ) -> StoreResult<Result<(Subscription, Event), Step>> {
        match self.prepare(d, event).await? {
            Prepared::Ready(ready) => Ok(Ok(*ready)),
            Prepared::Gone => self.drop_delivery(d).await.map(Err),
            Prepared::Suspended => {
                let held = Finish::without_attempt(End::Held);
                self.ports.lanes.finish(d, &held).await?;
                Ok(Err(Step::Ended(End::Held)))
            }
        }
    }

    async fn drop_delivery(&self, d: &Delivery) -> StoreResult<Step> {
        let dropped = Finish::without_attempt(End::Dropped);
        self.ports.lanes.finish(d, &dropped).await?;
        self.metrics.dropped.inc();
        info!(
            subscription_id = d.subscription_id.as_str(),
            event_id = d.event_id.as_str(),
            "delivery dropped: subscription gone"
        );
        Ok(Step::Ended(End::Dropped))
    }

    /// Reads the subscription (consistent) and, unless it is at hand, the
    /// event.
    async fn prepare(&self, d: &Delivery, known: Option<Event>) -> StoreResult<Prepared> {
        let Some(sub) = self
            .ports
            .subscriptions
            .get(&d.tenant, &d.subscription_id)
            .await?
        else {
            return Ok(Prepared::Gone);
        };
        if sub.status == SubscriptionStatus::Suspended {
            return Ok(Prepared::Suspended);
        }
        let event = match known.filter(|e| e.id == d.event_id) {
            Some(e) => Some(e),
            None => self.ports.events.get(&d.tenant, &d.event_id).await?,
        };
        let Some(event) = event else {
            warn!(
                event_id = d.event_id.as_str(),
                "event no longer archived; dropping delivery"
            );
            return Ok(Prepared::Gone);
        };
        Ok(Prepared::Ready(Box::new((sub, event))))
    }

    /// Signs and sends one request to a subscription.
    pub(super) async fn send_signed(
        &self,
        sub: &Subscription,
        id: &str,
        attempt: u32,
        body: bytes::Bytes,
        now: OffsetDateTime,
    ) -> SendReport {
        let mut headers = request_headers(sub, &sub.signing_secrets(now), id, now, attempt, &body);
        // The attempt span's own, when traces are on (in place of one the
        // subscription's headers set).
        if let Some(t) = crate::trace::traceparent() {
            headers.retain(|(k, _)| !k.eq_ignore_ascii_case("traceparent"));
            headers.push((Cow::Borrowed("traceparent"), t));
        }
        let mut report = self
            .ports
            .sender
            .send(Outbound {
                url: sub.url.clone(),
                headers,
                body,
            })
            .await;
        // A receiver that echoes its request does not put the endpoint's
        // credentials in the attempt log.
        if let Some(auth) = &sub.options.auth {
            for text in [&mut report.excerpt, &mut report.headers]
                .into_iter()
                .flatten()
            {
                *text = auth.redact(text);
            }
        }
        report
    }
}

/// The headers of an attempt beside the sender's own (content type, user
/// agent): the endpoint's options first, then the Standard Webhooks
/// headers, signed with `secrets` (none: an empty signature). What an
/// attempt sends, and what the attempt detail shows of it.
pub fn request_headers(
    sub: &Subscription,
    secrets: &[&crate::signing::Secret],
    id: &str,
    at: OffsetDateTime,
    attempt: u32,
    body: &[u8],
) -> Vec<(Cow<'static, str>, String)> {
    let signed = webhook_headers(secrets, id, at.unix_timestamp(), attempt, body);
    sub.options
        .request_headers()
        .map(|(k, v)| (Cow::Owned(k), v))
        .chain(signed.into_iter().map(|(k, v)| (Cow::Borrowed(k), v)))
        .collect()
}
