//! The lanes on SQS FIFO + DynamoDB delivery records (`LaneQueue`).
//!
//! A delivery is a message in the delivery FIFO queue (group = subscription,
//! deduplication id = hash(event, subscription)). Its record (attempt
//! count, state) is written when each attempt starts and when it ends (a
//! delivered first attempt's outcome is its attempt-log entry instead,
//! [`super::first_attempt`]), so attempt numbers come from our own record,
//! not from
//! `ApproximateReceiveCount`. While a lane fails, its new deliveries spill
//! to DynamoDB ([`super::spill`]), which is this adapter's own business.
//!
//! Write plan per outcome (`finish`), in this order:
//! - delivered: one `UpdateItem` of the subscription's health, unless the
//!   record would change only its `last_attempt_at`, by less than a minute
//!   (a healthy endpoint's successes write it once a minute, not once
//!   each);
//! - every attempt: one `PutItem` of the attempt-log entry, then one
//!   conditional `UpdateItem` of the record (state, status, error, next
//!   attempt; on condition it is still pending at this attempt), except
//!   after a first attempt that delivered: its log entry is its outcome
//!   ([`super::first_attempt`]);
//! - parked: the message to the dead-letter queue with its reason;
//! - retry on a lane not yet spilling: one `UpdateItem` setting its flag;
//!   delivered or parked on a spilling lane: the refill;
//! - parked, last, once the outcome took: the failure counted in the
//!   subscription's health over the record as stored (one consistent
//!   `GetItem` and one conditional `UpdateItem`, again when another lane
//!   wrote in between: [`super::health`]);
//! - held (suspended) or dropped (unregistered): one conditional
//!   `UpdateItem` marking the record, created if the delivery was never
//!   attempted. When the record is past the attempts the delivery was read
//!   with (a message back that looked like a first receive), the record is
//!   read (settled, `first_attempt`) and ended at its own attempts, unless
//!   an attempt of it still runs: then the message comes back later.
//! - ended for good (any but a retry), with the tenant backlog counted
//!   (`HOOKLANE_TENANT_BACKLOG`): noted, and taken off its tenant's count
//!   with the batch's other ends after the batch
//!   ([`super::backlog_counts`]), best effort.

use std::collections::HashMap;

use async_trait::async_trait;
use hooklane_core::domain::{Delivery, Health, Retake, Subscription, SubscriptionId};
use hooklane_core::health::HealthWrite;
use hooklane_core::lane_rules::{self, LanePlan};
use hooklane_core::ports::{
    AttemptLog, End, Finish, Finished, LaneQueue, NewDelivery, StoreResult, SubscriptionStore,
    TenantSlot,
};
use hooklane_core::record::ms;
use hooklane_core::telemetry::Chain;
use time::OffsetDateTime;

use super::sending::{message_of, Batch};
use super::AwsStore;

/// How stale an unchanged health record's `last_attempt_at` may get
/// before a success writes it again.
const HEALTH_REFRESH: std::time::Duration = std::time::Duration::from_secs(60);
/// Tries of the write that starts an attempt, each with the SDK's own
/// retries, before the delivery step fails (its message then comes back).
const BEGIN_TRIES: u32 = 4;

#[async_trait]
impl LaneQueue for AwsStore {
    async fn enqueue(&self, deliveries: &[NewDelivery]) -> StoreResult<()> {
        let mut msgs = Vec::with_capacity(deliveries.len());
        let mut batch = Batch::new();
        let stamp = self.settings.tenant_backlog;
        for d in deliveries {
            msgs.push(self.placed(d, &mut batch, stamp).await?);
        }
        // The events whose deliveries this call counts, claimed so that a
        // duplicate's fan-out running meanwhile counts nothing.
        let claimed = match stamp {
            true => self
                .tally
                .claim(deliveries.iter().map(|d| (&d.tenant, &d.event_id))),
            false => Default::default(),
        };
        let queued = self.queued(&msgs, |m| claimed.contains(&m.tenant, &m.event_id));
        if let Err(e) = self.dispatch(msgs, "").await {
            // Not counted: the fan-out that finishes it counts.
            self.tally.unclaim(claimed);
            return Err(e);
        }
        self.count_queued(queued).await;
        Ok(())
    }

    async fn begin(
        &self,
        d: &Delivery,
        now: OffsetDateTime,
        lease_until: OffsetDateTime,
    ) -> StoreResult<bool> {
        // The attempt number comes from this write, so it must not be
        // taken without being used: a write whose answer was lost is sent
        // again with the same token until it has an answer (idempotent, see
        // `write_token`), rather than leaving attempt n + 1 recorded and
        // never sent, and the next one numbered n + 2.
        let token = super::write_token();
        let mut tries = 0;
        loop {
            tries += 1;
            match self.records().try_begin(d, now, lease_until, &token).await {
                Err(e) if tries < BEGIN_TRIES => {
                    tracing::warn!(error = %Chain(&e), tries, "recording an attempt's start failed; trying again");
                    tokio::time::sleep(std::time::Duration::from_millis(100 << tries)).await;
                }
                Ok(true) if d.attempts == 0 => {
                    // Its log key (`first_attempt`) follows this start.
                    self.first_starts.note(d, now);
                    return Ok(true);
                }
                Ok(true) => {
                    // A first attempt that wrote no outcome here is behind.
                    self.first_starts.take(d);
                    return Ok(true);
                }
                answered => return answered,
            }
        }
    }

    async fn requeue(
        &self,
        deliveries: &[NewDelivery],
        rule: Retake,
        backfill: bool,
    ) -> StoreResult<Vec<bool>> {
        let mut taken = Vec::with_capacity(deliveries.len());
        let mut live = Vec::new();
        let mut backfills = Vec::new();
        let mut batch = Batch::new();
        // Whether each subscription is there, as read now.
        let mut there: HashMap<SubscriptionId, bool> = HashMap::new();
        // A replay is counted (its reset takes it once); a backfill's
        // missed deliveries are stamped, not counted: one may be queued, and
        // counted, still, and whichever copy ends takes it off.
        let stamped = self.settings.tenant_backlog;
        let counted = stamped && rule != Retake::Missed;
        for d in deliveries {
            let here = match there.get(&d.subscription_id) {
                Some(here) => *here,
                None => {
                    let here = self
                        .subs
                        .get(&d.tenant, &d.subscription_id)
                        .await?
                        .is_some();
                    there.insert(d.subscription_id.clone(), here);
                    here
                }
            };
            let reset = here
                && self
                    .dead_letters()
                    .reset_to_pending(&d.subscription_id, &d.event_id, rule)
                    .await?;
            if reset && backfill {
                // The backfill is one lane of its own.
                let mut msg = message_of(d, stamped);
                msg.lane = Some("backfill".to_owned());
                msg.lane_no = None;
                backfills.push(msg);
            } else if reset {
                // The lane its key (or id) picks among the lanes now.
                live.push(self.placed(d, &mut batch, stamped).await?);
            }
            taken.push(reset);
        }
        let nonce = format!("requeue-{}", ms(OffsetDateTime::now_utc()));
        let queued = self.queued(backfills.iter().chain(&live), |_| counted);
        self.send_deliveries(&backfills, &nonce).await?;
        self.dispatch(live, &nonce).await?;
        self.count_queued(queued).await;
        if rule == Retake::Parked {
            // The dead-letter queue's copies are stale now.
            let replayed = deliveries.iter().zip(&taken).filter(|(_, t)| **t);
            self.discard_dead_letter_copies(replayed.map(|(d, _)| d))
                .await?;
        }
        Ok(taken)
    }

    async fn here(&self, d: &Delivery, sub: &Subscription) -> StoreResult<bool> {
        self.attempts_here(d, sub).await
    }

    async fn tenant_slot(
        &self,
        d: &Delivery,
        limit: usize,
        hold: std::time::Duration,
    ) -> StoreResult<TenantSlot> {
        self.take_tenant_slot(d, limit, hold).await
    }

    async fn renew_tenant_slot(
        &self,
        d: &Delivery,
        slot: &TenantSlot,
        hold: std::time::Duration,
    ) -> StoreResult<Option<TenantSlot>> {
        self.extend_tenant_slot(d, slot, hold).await
    }

    async fn release_tenant_slot(&self, d: &Delivery, slot: TenantSlot) -> StoreResult<()> {
        self.give_back_tenant_slot(d, slot).await
    }

    /// A success on a subscription whose record says nothing else rewrites
    /// its `last_attempt_at` at most once a minute (one write unit saved
    /// per delivery on a healthy endpoint).
    fn health_refresh(&self) -> std::time::Duration {
        HEALTH_REFRESH
    }

    async fn defer(&self, _: &Delivery, _: OffsetDateTime) -> StoreResult<()> {
        // The delivery function backs the message off by visibility.
        Ok(())
    }

    async fn finish(&self, d: &Delivery, finish: &Finish) -> StoreResult<Finished> {
        if matches!(finish.end, End::Held | End::Dropped) {
            return self.end_unattempted(d, &finish.end).await;
        }
        // The first attempt's start, noted at its begin, is forgotten
        // whatever happens next.
        let first_start = match &finish.attempt {
            Some(_) if d.attempts == 0 => self.first_starts.take(d),
            _ => None,
        };
        // A success's health first: a delivered first attempt's outcome is
        // its log entry, and a success once written is not attempted again.
        // A failure's is counted once the outcome took (below), so that a
        // redelivered message counts its delivery once.
        let mut health = None;
        if let Some(w @ HealthWrite::Set(_)) = &finish.health {
            health = self
                .subs
                .write_health(&d.tenant, &d.subscription_id, w)
                .await?;
        }
        let first_logged = match (&finish.attempt, first_start) {
            (Some(a), Some(start)) => {
                self.records()
                    .log_first(a, start, matches!(finish.end, End::Delivered))
                    .await?
            }
            _ => false,
        };
        if let Some(a) = finish.attempt.as_ref().filter(|_| !first_logged) {
            self.attempt_log().record(a).await?;
        }
        // The log entry is a delivered first attempt's outcome
        // (`first_attempt`); any other is written to the record.
        let took = (first_logged && matches!(finish.end, End::Delivered))
            || self.records().write_outcome(d, finish).await?;
        if !took {
            // Not pending at this attempt: finished before (a redelivered
            // message), or a later attempt took over.
            return Ok(Finished { took, health });
        }
        if !matches!(finish.end, End::Retry(_)) {
            self.count_done(d);
        }
        let moved = self.after_outcome_took(d, finish).await;
        // Whatever the lane's moves did: a message that comes back finds
        // the outcome taken and counts nothing.
        if let Some(w @ HealthWrite::Failed(_)) = &finish.health {
            health = self.count_failure(d, w).await;
        }
        moved.map(|()| Finished { took, health })
    }
}

impl AwsStore {
    /// A delivery held or dropped without an attempt: its record ended
    /// (`records`), and taken off its tenant's backlog count when this
    /// call ended it.
    async fn end_unattempted(&self, d: &Delivery, end: &End) -> StoreResult<Finished> {
        if self
            .records()
            .end_unattempted_settled(d, end.state())
            .await?
        {
            self.count_done(d);
        }
        Ok(Finished {
            took: true,
            health: None,
        })
    }

    /// What follows an outcome this call recorded: the dead-letter copy of
    /// a parked delivery, then the lane's plan (spill, refill, slow pool).
    async fn after_outcome_took(&self, d: &Delivery, finish: &Finish) -> StoreResult<()> {
        let lane = (&d.tenant, &d.subscription_id, d.lane);
        let (end, pool) = (&finish.end, self.rules_pool());
        // The dead-letter copy goes first (whether it goes does not depend
        // on the lane's flag): a failed read of the flag must not keep it
        // from the dead-letter queue once the record says parked.
        let parks = lane_rules::after_outcome(end, finish.timed_out, pool, false).park;
        if let (true, End::Parked(reason), Some(last)) = (parks, end, &finish.attempt) {
            self.dead_letters().park_to_dlq(d, reason, last).await?;
        }
        let spilling = self.spilling(lane).await?;
        let plan = lane_rules::after_outcome(end, finish.timed_out, pool, spilling);
        let plan = LanePlan {
            park: false,
            ..plan
        };
        self.carry_out(lane, plan, matches!(end, End::Retry(_)))
            .await
    }

    /// A failed sequence counted in its subscription's health record, once
    /// its outcome took; a write that fails leaves this one failure
    /// uncounted (logged) rather than the outcome unfinished.
    async fn count_failure(&self, d: &Delivery, w: &HealthWrite) -> Option<Health> {
        match self
            .subs
            .write_health(&d.tenant, &d.subscription_id, w)
            .await
        {
            Ok(health) => health,
            Err(e) => {
                tracing::warn!(subscription_id = d.subscription_id.as_str(), error = %Chain(&e), "counting a failed delivery in the health record failed");
                None
            }
        }
    }

    /// Deletes the dead-letter queue's copies of deliveries just replayed.
    async fn discard_dead_letter_copies(
        &self,
        replayed: impl Iterator<Item = &NewDelivery>,
    ) -> StoreResult<()> {
        for d in replayed {
            let (sub, event) = (&d.subscription_id, &d.event_id);
            super::dead_letter_queue::discard_replayed(
                self,
                &d.tenant,
                std::slice::from_ref(sub),
                Some(std::slice::from_ref(event)),
            )
            .await?;
        }
        Ok(())
    }

    /// Carries out the lane's plan after a delivery's recorded outcome and
    /// its dead-letter copy ([`lane_rules::after_outcome`]): the move to
    /// the slow pool (best effort: the next timeout tries again; with the
    /// spill flag, and the mark of a retry's message about to be handed
    /// over, in the same write), the refill, the spill.
    async fn carry_out(
        &self,
        lane: super::spill::Lane<'_>,
        plan: LanePlan,
        retries: bool,
    ) -> StoreResult<()> {
        if plan.to_slow_pool {
            let why = super::slow_pool::Moved::TimedOut;
            match self.mark_slow(lane, plan.start_spill, retries, why).await {
                Ok(true) if plan.start_spill => return Ok(()),
                Ok(_) => {}
                Err(e) => {
                    tracing::warn!(error = %Chain(&e), "moving a lane to the slow pool failed")
                }
            }
        }
        if plan.refill {
            self.refill(lane).await?;
        }
        if plan.start_spill {
            self.start_spilling(lane).await?;
        }
        Ok(())
    }
}
