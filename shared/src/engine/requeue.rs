//! Requeues, under one rule for both stores ([`Retake`]): the replay of
//! parked deliveries, the backfill after re-enabling (G8), and the
//! recovery of a time window (`POST …/recover`: a backfill of that
//! window, replacing one in progress), paced here for both runtimes. The embedded runtime runs a backfill pass every
//! second; the AWS fan-out function runs one per ingest message and hands
//! the job back with a visibility of the pass's length.
//!
//! A pass queues what the current rate allows in one pass: the configured
//! rate starts at a quarter and ramps up to full over two minutes. It looks
//! at the archive in acceptance order from where the last pass stopped,
//! takes the events the subscription receives ([`Subscription::receives`]:
//! event types and content filter as they are now) and, of those, the
//! ones the store's own atomic write finds missed (parked, held or never
//! queued), on the subscription's backfill lane.

use std::collections::HashMap;
use std::time::Duration;

use time::OffsetDateTime;
use tracing::info;

use super::Engine;
use crate::domain::{
    ArchivePosition, ArchivedEvent, BackfillJob, DeadLetter, EventId, Retake, Subscription,
    SubscriptionId, SubscriptionStatus, TenantId,
};
use crate::health::backfill_interval;
use crate::ports::{NewDelivery, StoreResult};

/// Archived events one window read brings at most.
const SCAN: usize = 200;
/// Archived events one read of a recovery's count brings at most (the AWS
/// archive reads the whole window on each read).
const COUNT_SCAN: usize = 50_000;
/// Window reads one pass makes at most (a pass that finds few events to
/// take still ends, and the next pass goes on from there).
const READS_PER_PASS: usize = 5;
/// Parked deliveries one replay page lists.
const REPLAY_PAGE: usize = 250;

/// What one backfill pass did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BackfillPass {
    /// Deliveries it queued on the backfill lane.
    pub queued: usize,
    /// When to run the next pass; `None` when the backfill is over.
    pub again_in: Option<Duration>,
}

impl BackfillPass {
    const OVER: Self = Self {
        queued: 0,
        again_in: None,
    };
}

impl Engine {
    /// Puts a tenant's parked deliveries (of one subscription, of some
    /// events, or all) back at the end of their lanes with a fresh ladder;
    /// returns the subscription of each one replayed, and wakes their
    /// lanes.
    pub async fn replay(
        &self,
        tenant: &TenantId,
        subscription: Option<&SubscriptionId>,
        event_ids: Option<&[EventId]>,
    ) -> StoreResult<Vec<SubscriptionId>> {
        let mut replayed = Vec::new();
        let mut after = None;
        loop {
            let page = self
                .ports
                .dead_letters
                .list(tenant, subscription, after, REPLAY_PAGE)
                .await?;
            after = page.last().map(|(cursor, _)| *cursor);
            let chosen = self
                .replay_deliveries(
                    page.iter()
                        .map(|(_, dl)| dl)
                        .filter(|dl| event_ids.is_none_or(|ids| ids.contains(&dl.event_id))),
                    tenant,
                )
                .await?;
            let taken = self
                .ports
                .lanes
                .requeue(&chosen, Retake::Parked, false)
                .await?;
            replayed.extend(taken_lanes(&chosen, &taken));
            if page.len() < REPLAY_PAGE {
                break;
            }
        }
        let mut lanes = replayed.clone();
        lanes.sort();
        lanes.dedup();
        self.ports.wakeup.lanes(tenant, &lanes);
        Ok(replayed.into_iter().map(|(sub, _)| sub).collect())
    }

    /// The deliveries that replay `parked`: each on the lane its event's
    /// ordering key (or id) picks among its subscription's lanes now. A
    /// subscription that is gone takes none.
    async fn replay_deliveries<'a>(
        &self,
        parked: impl Iterator<Item = &'a DeadLetter>,
        tenant: &TenantId,
    ) -> StoreResult<Vec<NewDelivery>> {
        let mut subs: HashMap<SubscriptionId, Option<Subscription>> = HashMap::new();
        let mut out = Vec::new();
        for dl in parked {
            if !subs.contains_key(&dl.subscription_id) {
                let sub = self
                    .ports
                    .subscriptions
                    .get(tenant, &dl.subscription_id)
                    .await?;
                subs.insert(dl.subscription_id.clone(), sub);
            }
            let Some(Some(sub)) = subs.get(&dl.subscription_id) else {
                continue;
            };
            let key = self
                .ports
                .events
                .get(tenant, &dl.event_id)
                .await?
                .and_then(|e| e.ordering_key);
            out.push(NewDelivery::to(
                sub,
                &dl.event_id,
                &dl.event_type,
                key.as_ref(),
            ));
        }
        Ok(out)
    }

    /// Starts the backfill of a re-enabled subscription: the archived
    /// events accepted from `since` to `until`.
    pub(super) async fn start_backfill(
        &self,
        sub: &Subscription,
        since: OffsetDateTime,
        until: OffsetDateTime,
    ) -> StoreResult<()> {
        let job = BackfillJob {
            tenant: sub.tenant.clone(),
            subscription_id: sub.id.clone(),
            after: crate::domain::ArchivePosition::before(since),
            until,
            started_at: until,
        };
        self.ports.backfills.start(&job).await?;
        self.ports.wakeup.backfill();
        Ok(())
    }

    /// Recovers what `sub` missed of the window `since..=until`: a backfill
    /// of it, paced from now. A backfill in progress (after `enable`, or an
    /// earlier recovery) is merged in: the job covers both windows, from
    /// the earlier start. Answers how many events of the window the
    /// subscription receives, read through once after the job started
    /// (the backfill skips those it got or that are pending). A window
    /// that opens before the subscription was created starts at its
    /// creation: what was accepted before it existed was never its to miss.
    pub async fn recover(
        &self,
        sub: &Subscription,
        since: OffsetDateTime,
        until: OffsetDateTime,
    ) -> StoreResult<u64> {
        let since = since.max(sub.created_at);
        let backfills = &self.ports.backfills;
        let mut job = BackfillJob {
            tenant: sub.tenant.clone(),
            subscription_id: sub.id.clone(),
            after: ArchivePosition::before(since),
            until,
            started_at: self.ports.clock.now(),
        };
        if let Some(current) = backfills.load(&sub.tenant, &sub.id).await? {
            job.after = job.after.min(current.after);
            job.until = job.until.max(current.until);
        }
        backfills.start(&job).await?;
        self.ports.wakeup.backfill();
        let mut receives = 0;
        let mut after = ArchivePosition::before(since);
        loop {
            let events = self
                .ports
                .events
                .window(&sub.tenant, &after, until, COUNT_SCAN)
                .await?;
            let Some(last) = events.last() else { break };
            after = last.position();
            for e in &events {
                if self.receives_archived(sub, e).await? {
                    receives += 1;
                }
            }
        }
        info!(
            subscription_id = sub.id.as_str(),
            receives, "recovery started"
        );
        Ok(receives)
    }

    /// Runs one pass of a subscription's backfill, `pass` long at the
    /// current rate. The backfill ends when the window is done, or when the
    /// subscription is gone or suspended again.
    pub async fn backfill_pass(
        &self,
        tenant: &TenantId,
        sub_id: &SubscriptionId,
        pass: Duration,
    ) -> StoreResult<BackfillPass> {
        let backfills = &self.ports.backfills;
        let Some(mut job) = backfills.load(tenant, sub_id).await? else {
            return Ok(BackfillPass::OVER);
        };
        let sub = match self.ports.subscriptions.get(tenant, sub_id).await? {
            Some(sub) if sub.status == SubscriptionStatus::Active => sub,
            _ => {
                backfills.end(&job).await?;
                return Ok(BackfillPass::OVER);
            }
        };
        let elapsed = (self.ports.clock.now() - job.started_at)
            .try_into()
            .unwrap_or(Duration::ZERO);
        let per_pass = pass.as_secs_f64()
            / backfill_interval(self.config.backfill_rate, elapsed).as_secs_f64();
        let budget = (per_pass.ceil() as usize).max(1);
        let (queued, done) = self.backfill_window(&sub, &mut job, budget).await?;
        if done {
            backfills.end(&job).await?;
            info!(subscription_id = sub_id.as_str(), "backfill finished");
        } else {
            backfills.save(&job).await?;
        }
        Ok(BackfillPass {
            queued,
            again_in: (!done).then_some(pass),
        })
    }

    /// Queues up to `budget` missed events of the job's window on the
    /// backfill lane, moving the job on past what it looked at; says how
    /// many it queued and whether the window is done.
    async fn backfill_window(
        &self,
        sub: &Subscription,
        job: &mut BackfillJob,
        budget: usize,
    ) -> StoreResult<(usize, bool)> {
        let mut queued = 0;
        for _ in 0..READS_PER_PASS {
            let events = self
                .ports
                .events
                .window(&sub.tenant, &job.after, job.until, SCAN)
                .await?;
            if events.is_empty() {
                return Ok((queued, true));
            }
            let mut batch = Vec::new();
            for e in events {
                if queued + batch.len() == budget {
                    break;
                }
                job.after = e.position();
                if self.receives_archived(sub, &e).await? {
                    batch.push(NewDelivery {
                        accepted_at: Some(e.created_at),
                        ..NewDelivery::to(sub, &e.id, &e.event_type, e.ordering_key.as_ref())
                    });
                }
            }
            let taken = self
                .ports
                .lanes
                .requeue(&batch, Retake::Missed, true)
                .await?;
            queued += taken.iter().filter(|t| **t).count();
            if queued >= budget {
                break;
            }
        }
        Ok((queued, false))
    }
}

impl Engine {
    /// Whether `sub` receives the archived event `e` as things are now
    /// ([`Subscription::receives`]): the event is read whole only when the
    /// subscription has a content filter and takes its type.
    async fn receives_archived(&self, sub: &Subscription, e: &ArchivedEvent) -> StoreResult<bool> {
        if let Some(known) = sub.receives_by_type(&e.event_type, e.only_for.as_ref()) {
            return Ok(known);
        }
        Ok(match self.ports.events.get(&sub.tenant, &e.id).await? {
            Some(event) => sub.receives(&event, &mut None),
            None => false,
        })
    }
}

/// The lanes of the deliveries a requeue took.
fn taken_lanes(chosen: &[NewDelivery], taken: &[bool]) -> Vec<(SubscriptionId, Option<u16>)> {
    chosen
        .iter()
        .zip(taken)
        .filter(|(_, t)| **t)
        .map(|(d, _)| (d.subscription_id.clone(), Some(d.lane)))
        .collect()
}
