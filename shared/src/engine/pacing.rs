//! Pacing an attempt (G5, and the recovery ramp of G8): the start the
//! rate limit gives it, reserved before the attempt's writes, and kept:
//! when the store was slow after the reservation (taking the tenant slot),
//! the request would go out late and crowd the starts reserved after it,
//! so a late attempt takes a new start and waits for it before its start
//! is written (the wait eats no lease), reading its subscription again
//! after the wait (and checking that this read did not make it late in
//! turn, up to [`RE_PACE`] new starts; after the last it goes, late by
//! that one read at most); with no new start to be had it is put off. An attempt
//! is late once it is more than half an interval (at least [`LATE_AFTER`])
//! behind its start. The check runs twice: after the tenant slot is taken,
//! and again after the start is written, since that write can be the slow
//! one; the second wait must end within the lease the start was written
//! with, and when no start fits there the attempt is put off as when its
//! slot is lost after the write (its number taken, as after a crash).

use std::time::Duration;

use time::OffsetDateTime;
use tracing::warn;

use super::{Engine, Step};
use crate::domain::{Delivery, Event, RateLimit, Subscription};
use crate::ports::{StoreResult, TenantSlot};
use crate::rate::{interval_us, Slot};
use crate::telemetry::Chain;

/// The least slip that makes an attempt late for its start.
const LATE_AFTER: Duration = Duration::from_millis(20);

/// How many times a late attempt asks for a new start while none is free
/// within the horizon, before it is put off.
const RESERVE_AGAIN: usize = 3;

/// How many new starts one check takes at most when the read after each
/// wait made the attempt late again.
const RE_PACE: usize = 2;

/// The rate limit in force at `now`: a quarter of it while the recovery
/// ramp lasts; `None` without a limit.
fn rate_limit_at(sub: &Subscription, now: OffsetDateTime) -> Option<RateLimit> {
    let limit = sub.rate_limit?;
    Some(match sub.health.ramp_until.filter(|t| *t > now) {
        Some(_) => limit.quarter(),
        None => limit,
    })
}

impl Engine {
    /// The recovery ramp and the rate limit (G5): `Ok(start)` when the
    /// attempt may start (the start it reserved, now or after a wait within
    /// the rate limit's horizon; `now` without a limit), `Err(until)` when
    /// it is put off. While a ramp lasts, lanes
    /// past a quarter of the subscription's wait for its end and the rate
    /// limit is a quarter.
    pub(super) async fn pace(
        &self,
        d: &Delivery,
        sub: &Subscription,
        now: OffsetDateTime,
    ) -> StoreResult<Result<OffsetDateTime, OffsetDateTime>> {
        let ramp = sub.health.ramp_until.filter(|t| *t > now);
        if let Some(until) = ramp {
            if d.lane >= sub.lanes.quarter().get() {
                return Ok(Err(until));
            }
        }
        let Some(limit) = rate_limit_at(sub, now) else {
            return Ok(Ok(now));
        };
        match self.ports.rates.reserve(&sub.id, limit, now).await? {
            Slot::At(at) => {
                let wait = (at - self.ports.clock.now()).try_into().unwrap_or_default();
                tokio::time::sleep(wait).await;
                Ok(Ok(at))
            }
            Slot::NotBefore(t) => Ok(Err(t)),
        }
    }

    /// [`Engine::keep_pace`] for an attempt holding its tenant slot: the
    /// start it keeps and, after a wait, its subscription and event read
    /// again (tombstone rule); or how its turn ended (the slot given back):
    /// the subscription went or was suspended during the wait, or no start
    /// was to be had by `by` (put off briefly). The read after a wait can
    /// make it late again: checked again, up to [`RE_PACE`] new starts;
    /// after the last it goes, late by that one read at most.
    pub(super) async fn keep_pace_in_slot(
        &self,
        d: &Delivery,
        (sub, event): (&Subscription, &Event),
        paced: OffsetDateTime,
        by: Option<OffsetDateTime>,
        slot: TenantSlot,
    ) -> StoreResult<Result<Kept, Step>> {
        let mut fresh: Option<(Subscription, Event)> = None;
        let mut paced = paced;
        for _ in 0..RE_PACE {
            let sub = fresh.as_ref().map_or(sub, |(s, _)| s);
            let at = match self.keep_pace(sub, paced, by).await {
                Pace::OnTime(start) => return Ok(Ok(Kept { start, fresh, slot })),
                Pace::Waited(at) => at,
                Pace::NoStart => {
                    self.release_slot(d, slot).await;
                    return self.put_off_briefly(d).await.map(Err);
                }
            };
            match self.ready(d, Some(event.clone())).await {
                Ok(Ok(ready)) => (fresh, paced) = (Some(ready), at),
                Ok(Err(step)) => {
                    self.release_slot(d, slot).await;
                    return Ok(Err(step));
                }
                Err(e) => {
                    self.release_slot(d, slot).await;
                    return Err(e);
                }
            }
        }
        Ok(Ok(Kept {
            start: paced,
            fresh,
            slot,
        }))
    }

    /// Whether an attempt paced for `paced` is still on time for its start
    /// under the rate limit; when it is late, it takes a new start and
    /// waits for it (a few tries while none is free within the horizon),
    /// or has none, also when the new start falls after `by`.
    pub(super) async fn keep_pace(
        &self,
        sub: &Subscription,
        paced: OffsetDateTime,
        by: Option<OffsetDateTime>,
    ) -> Pace {
        let now = self.ports.clock.now().max(paced);
        let Some(limit) = rate_limit_at(sub, now) else {
            return Pace::OnTime(paced);
        };
        let slack = Duration::from_micros((interval_us(limit) / 2) as u64).max(LATE_AFTER);
        if now - paced <= slack {
            return Pace::OnTime(paced);
        }
        let too_late = |t: OffsetDateTime| by.is_some_and(|by| t > by);
        for _ in 0..RESERVE_AGAIN {
            let now = self.ports.clock.now();
            match self.ports.rates.reserve(&sub.id, limit, now).await {
                Ok(Slot::At(at) | Slot::NotBefore(at)) if too_late(at) => return Pace::NoStart,
                Ok(Slot::At(at)) => {
                    let wait = (at - self.ports.clock.now()).try_into().unwrap_or_default();
                    tokio::time::sleep(wait).await;
                    return Pace::Waited(at);
                }
                Ok(Slot::NotBefore(t)) => {
                    let wait = (t - self.ports.clock.now()).try_into().unwrap_or_default();
                    tokio::time::sleep(wait).await;
                }
                Err(e) => {
                    warn!(subscription_id = sub.id.as_str(), error = %Chain(&e), "reserving a new start failed; the attempt is put off");
                    return Pace::NoStart;
                }
            }
        }
        Pace::NoStart
    }
}

/// An attempt on time for its start (see [`Engine::keep_pace_in_slot`]).
pub(super) struct Kept {
    /// The start it keeps under the rate limit (the one it was paced for,
    /// or the new one it waited for): what a later check measures its
    /// lateness against.
    pub start: OffsetDateTime,
    /// Its subscription and event read again after a wait; `None` when
    /// those at hand hold (no wait).
    pub fresh: Option<(Subscription, Event)>,
    /// Its tenant slot, still to be checked right before the request.
    pub slot: TenantSlot,
}

/// What [`Engine::keep_pace`] found.
pub(super) enum Pace {
    /// On time for the start it was paced for (this one).
    OnTime(OffsetDateTime),
    /// It was late, took this new start and waited for it: it goes after
    /// the subscription is read again.
    Waited(OffsetDateTime),
    /// It was late and found no new start: no attempt now.
    NoStart,
}

#[cfg(test)]
mod tests {
    //! The late-start rule on the core, over the embedded store with a
    //! hand-written rate-limit port that answers as scripted and counts.

    use std::sync::{Arc, Mutex};

    use async_trait::async_trait;

    use super::*;
    use crate::config::Config;
    use crate::contract;
    use crate::domain::{RateLimit, SubscriptionId, TenantId};
    use crate::engine::{Engine, Outside, Ports};
    use crate::ports::{NoNotifier, StoreResult, Wakeup};
    use crate::rate::RateLimits;
    use crate::sqlite::SqliteStore;

    /// Answers each reservation with the next scripted slot, counting.
    struct Scripted(Mutex<Vec<Slot>>, Mutex<usize>);

    #[async_trait]
    impl RateLimits for Scripted {
        async fn reserve(
            &self,
            _: &SubscriptionId,
            _: RateLimit,
            _: OffsetDateTime,
        ) -> StoreResult<Slot> {
            *self.1.lock().unwrap() += 1;
            Ok(self.0.lock().unwrap().remove(0))
        }
    }

    struct Quiet;

    impl Wakeup for Quiet {
        fn fan_out(&self, _: &crate::domain::Event) {}
        fn lanes(&self, _: &TenantId, _: &[(SubscriptionId, Option<u16>)]) {}
        fn backfill(&self) {}
    }

    /// An engine whose reservations answer `slots`, and a subscription
    /// limited to 10 a second (`limited`) or not.
    fn paced_engine(slots: Vec<Slot>, limited: bool) -> (Arc<Engine>, Arc<Scripted>, Subscription) {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(&dir.path().join("t.db")).unwrap();
        let mut ports = Ports::build(
            store,
            &Config::default(),
            Outside::default(),
            Arc::new(Quiet),
            Arc::new(NoNotifier),
        )
        .unwrap();
        let rates = Arc::new(Scripted(Mutex::new(slots), Mutex::new(0)));
        ports.rates = rates.clone();
        let mut sub = contract::subscription(&TenantId::parse("acme").unwrap(), &["*"]);
        sub.rate_limit = limited.then(|| RateLimit::parse(10).unwrap());
        (Engine::new(ports, Config::default()), rates, sub)
    }

    fn calls(rates: &Scripted) -> usize {
        *rates.1.lock().unwrap()
    }

    #[tokio::test]
    async fn an_attempt_on_time_for_its_start_or_without_a_limit_reserves_nothing_more() {
        let (engine, rates, sub) = paced_engine(vec![], true);
        let now = OffsetDateTime::now_utc();
        assert!(matches!(
            engine.keep_pace(&sub, now, None).await,
            Pace::OnTime(_)
        ));
        let (engine, rates_free, free) = paced_engine(vec![], false);
        let long_ago = now - time::Duration::seconds(5);
        assert!(matches!(
            engine.keep_pace(&free, long_ago, None).await,
            Pace::OnTime(_)
        ));
        assert_eq!((calls(&rates), calls(&rates_free)), (0, 0));
    }

    #[tokio::test]
    async fn a_late_attempt_takes_a_new_start_and_waits_for_it() {
        let at = OffsetDateTime::now_utc() + time::Duration::milliseconds(50);
        let (engine, rates, sub) = paced_engine(vec![Slot::At(at)], true);
        // Half an interval is 50 ms at 10 a second: 200 ms behind is late.
        let paced = OffsetDateTime::now_utc() - time::Duration::milliseconds(200);
        match engine.keep_pace(&sub, paced, None).await {
            Pace::Waited(start) => assert!(start >= at, "goes at its new start"),
            _ => panic!("a late attempt takes a new start"),
        }
        assert!(OffsetDateTime::now_utc() >= at, "and waits for it");
        assert_eq!(calls(&rates), 1);
    }

    #[tokio::test]
    async fn a_late_attempt_with_no_start_to_be_had_is_put_off() {
        let soon = OffsetDateTime::now_utc();
        let none = vec![Slot::NotBefore(soon); RESERVE_AGAIN];
        let (engine, rates, sub) = paced_engine(none, true);
        let paced = OffsetDateTime::now_utc() - time::Duration::seconds(1);
        assert!(matches!(
            engine.keep_pace(&sub, paced, None).await,
            Pace::NoStart
        ));
        assert_eq!(calls(&rates), RESERVE_AGAIN);
    }

    #[tokio::test]
    async fn a_late_attempt_whose_new_start_falls_after_its_lease_has_none() {
        // Late after its start was written: the new start is two seconds
        // off, the lease ends in one, so it neither waits nor goes.
        let now = OffsetDateTime::now_utc();
        let at = now + time::Duration::seconds(2);
        let (engine, rates, sub) = paced_engine(vec![Slot::At(at)], true);
        let paced = now - time::Duration::milliseconds(200);
        let by = Some(now + time::Duration::seconds(1));
        assert!(matches!(
            engine.keep_pace(&sub, paced, by).await,
            Pace::NoStart
        ));
        assert!(OffsetDateTime::now_utc() < at, "without waiting for it");
        assert_eq!(calls(&rates), 1);
    }
}
