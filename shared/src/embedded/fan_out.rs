//! The embedded fan-out worker: drains fan-out jobs in acceptance order,
//! so each lane's deliveries are enqueued in the order their events were
//! accepted (G5). The publish path hands each accepted event over at hand
//! ([`AtHand`]): in steady state the worker reads only the jobs' ids, and
//! each event's body is read once, by the lane that delivers it. After a
//! restart, or past the bound of what is kept, the worker reads the events
//! back with their jobs.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::Notify;
use tracing::{error, info, Instrument};

use super::ERROR_PAUSE;
use crate::domain::{Event, EventId, TenantId};
use crate::engine::Engine;
use crate::ports::StoreResult;
use crate::sqlite::SqliteStore;
use crate::telemetry::Chain;

/// How many fan-out jobs the worker takes at a time.
const FAN_OUT_BATCH: usize = 64;
/// Event bytes kept at hand at most; past it, the worker reads them back.
const AT_HAND_BYTES: usize = 1 << 20;
/// An event kept this long was fanned out without it (or the worker is
/// that far behind, and reads it back): it goes.
const STALE: Duration = Duration::from_secs(5);
/// Events read back before they were kept, remembered at most (past it,
/// the list starts over: an event kept after all is then stale in time).
const LATE_KEPT: usize = 4096;

type Key = (TenantId, EventId);

/// Events kept, with when each was kept, and their body bytes in all;
/// the order they were kept in (an event taken since is passed over when
/// its turn comes, so each keep looks at a few entries, never the whole
/// map); and the events the worker read back before the publish path
/// kept them.
#[derive(Default)]
struct Kept {
    events: HashMap<Key, (Event, Instant)>,
    bytes: usize,
    order: VecDeque<(Key, Instant)>,
    late: HashSet<Key>,
}

/// Events just accepted and not yet fanned out.
///
/// The publish path keeps an event after its fan-out job is committed, so
/// the worker can read a job before its event is kept (SQLite commits
/// accepts in groups, and the worker may see a whole group before each
/// publisher has had its turn). It then reads the event back and notes it
/// as late, and the publish path does not keep a late event: nothing is
/// kept that no job will take.
#[derive(Default)]
pub(super) struct AtHand {
    kept: Mutex<Kept>,
}

impl AtHand {
    /// Keeps an accepted event for the worker, within the bound, unless it
    /// was already read back. The oldest kept go first: those taken since
    /// (their places), and those gone stale.
    pub(super) fn keep(&self, e: &Event) {
        let Ok(mut kept) = self.kept.lock() else {
            return;
        };
        let Kept {
            events: map,
            bytes,
            order,
            late,
        } = &mut *kept;
        let key = (e.tenant.clone(), e.id.clone());
        if late.remove(&key) {
            return;
        }
        let now = Instant::now();
        while let Some((old, at)) = order.pop_front() {
            if map.get(&old).is_some_and(|(_, kept_at)| *kept_at == at) {
                if now.duration_since(at) < STALE {
                    order.push_front((old, at));
                    break;
                }
                if let Some((stale, _)) = map.remove(&old) {
                    *bytes -= stale.payload.len();
                }
            }
        }
        if *bytes + e.payload.len() <= AT_HAND_BYTES {
            *bytes += e.payload.len();
            order.push_back((key.clone(), now));
            map.insert(key, (e.clone(), now));
        }
    }

    /// Takes one job's event out, if it is at hand.
    fn take(&self, tenant: &TenantId, id: &EventId) -> Option<Event> {
        let mut kept = self.kept.lock().ok()?;
        let (event, _) = kept.events.remove(&(tenant.clone(), id.clone()))?;
        kept.bytes -= event.payload.len();
        Some(event)
    }

    /// Notes events the worker read back because they were not at hand,
    /// so that they are not kept if the publish path comes to them later;
    /// one the publish path kept meanwhile (between the worker's look and
    /// its read) is let go now, as no job will take it.
    fn read_back(&self, keys: impl Iterator<Item = Key>) {
        let Ok(mut kept) = self.kept.lock() else {
            return;
        };
        for key in keys {
            if let Some((event, _)) = kept.events.remove(&key) {
                kept.bytes -= event.payload.len();
                continue;
            }
            if kept.late.len() >= LATE_KEPT {
                kept.late.clear();
            }
            kept.late.insert(key);
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
                    error!(error = %Chain(&e), "fan-out failed; will retry");
                    tokio::time::sleep(ERROR_PAUSE).await;
                }
            }
            Err(e) => {
                error!(error = %Chain(&e), "reading fan-out jobs failed");
                tokio::time::sleep(ERROR_PAUSE).await;
            }
        }
    }
}

/// The oldest jobs with their events, in order: from what is at hand, the
/// others read back with their jobs (where unreadable ones are reported
/// and closed).
async fn next_jobs(store: &SqliteStore, at_hand: &AtHand) -> StoreResult<Vec<(i64, Event)>> {
    let ids = store.fan_out_job_ids(FAN_OUT_BATCH).await?;
    let found: Vec<(i64, Option<Event>)> = ids
        .into_iter()
        .map(|(seq, tenant, id)| (seq, at_hand.take(&tenant, &id)))
        .collect();
    if found.iter().all(|(_, e)| e.is_some()) {
        return Ok(found
            .into_iter()
            .filter_map(|(seq, e)| Some((seq, e?)))
            .collect());
    }
    let mut read_back: HashMap<i64, Event> = store
        .pending_fan_outs(FAN_OUT_BATCH)
        .await?
        .into_iter()
        .collect();
    at_hand.read_back(
        found
            .iter()
            .filter(|(_, e)| e.is_none())
            .filter_map(|(seq, _)| read_back.get(seq))
            .map(|e| (e.tenant.clone(), e.id.clone())),
    );
    Ok(found
        .into_iter()
        .filter_map(|(seq, e)| Some((seq, e.or_else(|| read_back.remove(&seq))?)))
        .collect())
}

async fn fan_out(engine: &Engine, store: &SqliteStore, jobs: Vec<(i64, Event)>) -> StoreResult<()> {
    let (seqs, events): (Vec<i64>, Vec<Event>) = jobs.into_iter().unzip();
    let n = engine
        .fan_out_many(&events)
        .instrument(crate::trace::fan_out(&events))
        .await?;
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
            ordering_key: None,
            traceparent: None,
            only_for: None,
        }
    }

    #[test]
    fn an_event_kept_is_taken_once() {
        let at_hand = AtHand::default();
        let e = event(1, 10);
        at_hand.keep(&e);
        assert!(at_hand.take(&e.tenant, &e.id).is_some());
        assert!(at_hand.take(&e.tenant, &e.id).is_none(), "taken once");
    }

    #[test]
    fn what_is_kept_stays_within_its_bound_in_bytes() {
        let at_hand = AtHand::default();
        let (big, small) = (event(1, AT_HAND_BYTES - 5), event(2, 10));
        at_hand.keep(&big);
        at_hand.keep(&small);
        assert!(
            at_hand.take(&small.tenant, &small.id).is_none(),
            "past the bound: read back"
        );
        at_hand.take(&big.tenant, &big.id);
        at_hand.keep(&small);
        assert!(
            at_hand.take(&small.tenant, &small.id).is_some(),
            "room again"
        );
    }

    #[test]
    fn the_order_kept_in_forgets_what_was_taken() {
        let at_hand = AtHand::default();
        for i in 0..10_000 {
            let e = event(i, 10);
            at_hand.keep(&e);
            assert!(at_hand.take(&e.tenant, &e.id).is_some());
        }
        // Each keep passed over the one taken before it.
        assert_eq!(at_hand.kept.lock().unwrap().order.len(), 1);
    }

    #[test]
    fn an_event_kept_while_the_worker_read_it_back_is_let_go() {
        let at_hand = AtHand::default();
        let e = event(1, 10);
        let key = (e.tenant.clone(), e.id.clone());
        assert!(at_hand.take(&e.tenant, &e.id).is_none(), "not kept yet");
        at_hand.keep(&e);
        at_hand.read_back(std::iter::once(key.clone()));
        let kept = at_hand.kept.lock().unwrap();
        assert_eq!(kept.bytes, 0, "nothing left that no job takes");
        assert!(kept.events.is_empty() && !kept.late.contains(&key));
    }

    #[test]
    fn an_event_read_back_before_it_was_kept_is_not_kept() {
        let at_hand = AtHand::default();
        let e = event(1, 10);
        at_hand.read_back(std::iter::once((e.tenant.clone(), e.id.clone())));
        at_hand.keep(&e);
        assert_eq!(at_hand.kept.lock().unwrap().bytes, 0, "nothing kept");
        assert!(at_hand.take(&e.tenant, &e.id).is_none());
        at_hand.keep(&e);
        assert!(
            at_hand.take(&e.tenant, &e.id).is_some(),
            "noted once: kept when it comes again"
        );
    }
}
