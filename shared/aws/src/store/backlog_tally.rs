//! What a process holds for the tenant backlog counts
//! ([`super::backlog_counts`]) between a delivery's queueing or end and the
//! count's write: the events whose fan-out this process counts, and the
//! ends it has yet to take off.
//!
//! An event's deliveries are counted by the fan-out that follows the
//! accept that archived it, and by no other:
//! - the API function notes a newly archived event here ([`Tally::note`]);
//!   its own fan-out of it counts and clears the note, and a fan-out it
//!   hands to the ingest queue instead takes the note along in the message
//!   (`FanOutMessage::count`);
//! - the fan-out function holds a message's event while it fans it out,
//!   when the message says to count ([`Tally::holding`]: for the task
//!   running that fan-out only, so a duplicate's fan-out in the same
//!   process meanwhile counts nothing).
//!
//! A duplicate publish, which fans the event out again (to finish a fan-out
//! that stopped midway), counts nothing: the deliveries the first fan-out
//! did not queue are then queued uncounted, without the time that would
//! take them off when they end, so the count is short of them (never
//! over) and returns to zero as the counted ones end.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use hooklane_core::domain::{EventId, TenantId};

/// How long an accepted event's note waits for its fan-out.
const NOTE_FOR: Duration = Duration::from_secs(60);
/// Notes kept at most (older ones go first).
const NOTES: usize = 10_000;

type Key = (String, String);

tokio::task_local! {
    /// The events the fan-out function counts in the fan-out it runs in
    /// this task ([`Tally::holding`]).
    static HELD: HashSet<Key>;
}

/// The tenant backlog counts' state in one process (shared by clones).
#[derive(Debug, Default)]
pub(crate) struct Tally {
    /// Newly archived events, and when.
    notes: Mutex<HashMap<Key, Instant>>,
    /// Ends not yet taken off: by tenant and minute, how many and the
    /// earliest queued time among them.
    pub(super) ended: Mutex<HashMap<(String, i64), (i64, i64)>>,
}

fn key(tenant: &TenantId, event: &EventId) -> Key {
    (tenant.as_str().to_owned(), event.as_str().to_owned())
}

impl Tally {
    /// Notes a newly archived event: its next fan-out in this process
    /// counts its deliveries.
    pub(crate) fn note(&self, tenant: &TenantId, event: &EventId) {
        let Ok(mut notes) = self.notes.lock() else {
            return;
        };
        if notes.len() >= NOTES {
            notes.retain(|_, at| at.elapsed() < NOTE_FOR);
            if notes.len() >= NOTES {
                notes.clear();
            }
        }
        notes.insert(key(tenant, event), Instant::now());
    }

    /// Runs `fan_out` (the fan-out function's, in this task) with the
    /// deliveries of `events` counted, every page of them.
    pub(crate) async fn holding<T>(
        events: impl Iterator<Item = (&TenantId, &EventId)>,
        fan_out: impl std::future::Future<Output = T>,
    ) -> T {
        let held = events.map(|(t, e)| key(t, e)).collect();
        HELD.scope(held, fan_out).await
    }

    /// Whether a fan-out of this event counts its deliveries now: held by
    /// the fan-out running in this task, or noted.
    pub(crate) fn counts(&self, tenant: &TenantId, event: &EventId) -> bool {
        let k = key(tenant, event);
        HELD.try_with(|held| held.contains(&k)).unwrap_or(false)
            || self
                .notes
                .lock()
                .is_ok_and(|notes| notes.get(&k).is_some_and(|at| at.elapsed() < NOTE_FOR))
    }

    /// Takes a note: `true` when there was one to take, so the caller
    /// counts (a fan-out just done, or handed to the queue).
    pub(crate) fn take(&self, tenant: &TenantId, event: &EventId) -> bool {
        self.notes
            .lock()
            .ok()
            .and_then(|mut notes| notes.remove(&key(tenant, event)))
            .is_some_and(|at| at.elapsed() < NOTE_FOR)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids() -> (TenantId, EventId) {
        (
            TenantId::parse("t1").unwrap(),
            EventId::parse("evt_1").unwrap(),
        )
    }

    #[test]
    fn a_note_counts_one_fan_out() {
        let (t, e) = ids();
        let tally = Tally::default();
        assert!(!tally.counts(&t, &e), "an event not noted is not counted");
        tally.note(&t, &e);
        assert!(tally.counts(&t, &e));
        assert!(tally.take(&t, &e));
        assert!(
            !tally.counts(&t, &e),
            "a duplicate's fan-out counts nothing"
        );
        assert!(!tally.take(&t, &e));
    }

    #[tokio::test]
    async fn a_hold_counts_in_its_own_task_only() {
        let (t, e) = ids();
        let tally = std::sync::Arc::new(Tally::default());
        let inside = Tally::holding([(&t, &e)].into_iter(), async {
            let elsewhere = {
                let (tally, t, e) = (tally.clone(), t.clone(), e.clone());
                tokio::spawn(async move { tally.counts(&t, &e) })
            };
            (
                tally.counts(&t, &e),
                elsewhere.await.unwrap(),
                tally.take(&t, &e),
            )
        })
        .await;
        assert_eq!(
            inside,
            (true, false, false),
            "held in the task, not in another (a duplicate's), and no note to take"
        );
        assert!(!tally.counts(&t, &e), "not after the hold");
    }
}
