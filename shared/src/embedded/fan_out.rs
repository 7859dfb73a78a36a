//! The embedded fan-out worker: drains fan-out jobs in acceptance order,
//! so each lane's deliveries are enqueued in the order their events were
//! accepted (G5). The publish path hands each accepted event over at hand
//! ([`AtHand`]): in steady state the worker reads only the jobs' ids, and
//! each event's body is read once, by the lane that delivers it. After a
//! restart, or past the bound of what is kept, the worker reads the events
//! back with their jobs.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Notify;
use tracing::{error, info};

use super::ERROR_PAUSE;
use crate::domain::{Event, EventId, TenantId};
use crate::engine::Engine;
use crate::ports::StoreResult;
use crate::sqlite::SqliteStore;

/// How many fan-out jobs the worker takes at a time.
const FAN_OUT_BATCH: usize = 64;
/// Event bytes kept at hand at most; past it, the worker reads them back.
const AT_HAND_BYTES: usize = 16 << 20;

/// Events kept, by tenant and id, and their body bytes in all.
type Kept = (HashMap<(TenantId, EventId), Event>, usize);

/// Events just accepted and not yet fanned out.
#[derive(Default)]
pub(super) struct AtHand {
    events: Mutex<Kept>,
}

impl AtHand {
    /// Keeps an accepted event for the worker, within the bound.
    pub(super) fn keep(&self, e: &Event) {
        if let Ok(mut kept) = self.events.lock() {
            let (map, bytes) = &mut *kept;
            if *bytes + e.payload.len() <= AT_HAND_BYTES {
                *bytes += e.payload.len();
                map.insert((e.tenant.clone(), e.id.clone()), e.clone());
            }
        }
    }

    /// The jobs' events, in order, if every one is at hand (taken out).
    fn take_all(&self, jobs: &[(i64, TenantId, EventId)]) -> Option<Vec<Event>> {
        let mut kept = self.events.lock().ok()?;
        let (map, bytes) = &mut *kept;
        if !jobs
            .iter()
            .all(|(_, t, id)| map.contains_key(&(t.clone(), id.clone())))
        {
            return None;
        }
        let events: Vec<Event> = jobs
            .iter()
            .filter_map(|(_, t, id)| map.remove(&(t.clone(), id.clone())))
            .collect();
        *bytes -= events.iter().map(|e| e.payload.len()).sum::<usize>();
        Some(events)
    }

    /// Drops what is kept of these events (read back instead).
    fn forget(&self, events: &[Event]) {
        if let Ok(mut kept) = self.events.lock() {
            let (map, bytes) = &mut *kept;
            for e in events {
                if let Some(gone) = map.remove(&(e.tenant.clone(), e.id.clone())) {
                    *bytes -= gone.payload.len();
                }
            }
        }
    }
}

/// Fans out pending jobs as they come, forever.
pub(super) async fn worker(
    engine: Arc<Engine>,
    store: SqliteStore,
    at_hand: Arc<AtHand>,
    wake: Arc<Notify>,
) {
    loop {
        match next_jobs(&store, &at_hand).await {
            Ok(jobs) if jobs.is_empty() => {
                // The timeout is a safety net only: every accept wakes us.
                let _ = tokio::time::timeout(Duration::from_secs(5), wake.notified()).await;
            }
            Ok(jobs) => {
                if let Err(e) = fan_out(&engine, &store, jobs).await {
                    error!(error = %e, "fan-out failed; will retry");
                    tokio::time::sleep(ERROR_PAUSE).await;
                }
            }
            Err(e) => {
                error!(error = %e, "reading fan-out jobs failed");
                tokio::time::sleep(ERROR_PAUSE).await;
            }
        }
    }
}

/// The oldest jobs with their events: from what is at hand when all are,
/// else read back with the jobs.
async fn next_jobs(store: &SqliteStore, at_hand: &AtHand) -> StoreResult<Vec<(i64, Event)>> {
    let ids = store.fan_out_job_ids(FAN_OUT_BATCH).await?;
    if let Some(events) = at_hand.take_all(&ids) {
        return Ok(ids.into_iter().map(|(seq, ..)| seq).zip(events).collect());
    }
    let jobs = store.pending_fan_outs(FAN_OUT_BATCH).await?;
    let events: Vec<Event> = jobs.iter().map(|(_, e)| e.clone()).collect();
    at_hand.forget(&events);
    Ok(jobs)
}

async fn fan_out(engine: &Engine, store: &SqliteStore, jobs: Vec<(i64, Event)>) -> StoreResult<()> {
    let (seqs, events): (Vec<i64>, Vec<Event>) = jobs.into_iter().unzip();
    let n = engine.fan_out_many(&events).await?;
    info!(events = events.len(), deliveries = n, "fanned out");
    store.complete_fan_outs(seqs).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(n: u32, bytes: usize) -> Event {
        Event {
            id: EventId::parse(&format!("evt_{n}")).unwrap(),
            tenant: TenantId::parse("acme").unwrap(),
            event_type: crate::domain::EventType::parse("a.b").unwrap(),
            created_at: time::OffsetDateTime::now_utc(),
            payload: bytes::Bytes::from(vec![b'x'; bytes]),
        }
    }

    fn job(n: u32) -> (i64, TenantId, EventId) {
        let e = event(n, 0);
        (i64::from(n), e.tenant, e.id)
    }

    #[test]
    fn jobs_are_served_from_hand_only_when_every_event_is_there() {
        let at_hand = AtHand::default();
        at_hand.keep(&event(1, 10));
        assert!(
            at_hand.take_all(&[job(1), job(2)]).is_none(),
            "2 is not at hand"
        );
        at_hand.keep(&event(2, 10));
        let events = at_hand.take_all(&[job(1), job(2)]).expect("both at hand");
        let ids: Vec<&str> = events.iter().map(|e| e.id.as_str()).collect();
        assert_eq!(ids, ["evt_1", "evt_2"], "in the jobs' order");
        assert!(at_hand.take_all(&[job(1)]).is_none(), "taken once");
    }

    #[test]
    fn what_is_kept_stays_within_its_bound_in_bytes() {
        let at_hand = AtHand::default();
        at_hand.keep(&event(1, AT_HAND_BYTES - 5));
        at_hand.keep(&event(2, 10));
        assert!(
            at_hand.take_all(&[job(2)]).is_none(),
            "past the bound: read back"
        );
        at_hand.forget(&[event(1, 0)]);
        at_hand.keep(&event(2, 10));
        assert!(at_hand.take_all(&[job(2)]).is_some(), "room again");
    }
}
