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

/// The events an enqueue counts ([`Tally::claim`]).
#[derive(Debug, Default)]
pub(crate) struct Claimed {
    events: HashSet<Key>,
    /// Of them, those whose notes it took.
    taken: Vec<Key>,
}

impl Claimed {
    /// Whether a delivery of this event is counted.
    pub(crate) fn contains(&self, tenant: &str, event: &str) -> bool {
        self.events.contains(&(tenant.to_owned(), event.to_owned()))
    }
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

    /// The events of an enqueue whose deliveries it counts: those the
    /// fan-out running in this task holds, and those noted, whose notes it
    /// takes (so no other fan-out of them counts meanwhile; given back by
    /// [`Self::unclaim`] when the enqueue fails).
    pub(crate) fn claim<'a>(
        &self,
        events: impl Iterator<Item = (&'a TenantId, &'a EventId)>,
    ) -> Claimed {
        let mut claimed = Claimed::default();
        for (tenant, event) in events {
            let k = key(tenant, event);
            if claimed.events.contains(&k) {
                continue;
            }
            if HELD.try_with(|held| held.contains(&k)).unwrap_or(false) {
                claimed.events.insert(k);
            } else if self.take(tenant, event) {
                claimed.taken.push(k.clone());
                claimed.events.insert(k);
            }
        }
        claimed
    }

    /// Gives back the notes an enqueue that failed took.
    pub(crate) fn unclaim(&self, claimed: Claimed) {
        if let Ok(mut notes) = self.notes.lock() {
            for k in claimed.taken {
                notes.insert(k, Instant::now());
            }
        }
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

    fn claims(tally: &Tally, (t, e): &(TenantId, EventId)) -> Claimed {
        tally.claim([(t, e), (t, e)].into_iter())
    }

    #[test]
    fn a_note_counts_one_fan_out() {
        let ids = ids();
        let tally = Tally::default();
        let counted = |c: &Claimed| c.contains("t1", "evt_1");
        assert!(!counted(&claims(&tally, &ids)), "not noted, not counted");
        tally.note(&ids.0, &ids.1);
        let first = claims(&tally, &ids);
        assert!(counted(&first));
        assert!(
            !counted(&claims(&tally, &ids)),
            "a duplicate's fan-out, meanwhile or later, counts nothing"
        );
        tally.unclaim(first);
        assert!(
            counted(&claims(&tally, &ids)),
            "a failed enqueue gives its claim back"
        );
    }

    #[tokio::test]
    async fn a_hold_counts_in_its_own_task_only() {
        let ids = ids();
        let tally = std::sync::Arc::new(Tally::default());
        let inside = Tally::holding([(&ids.0, &ids.1)].into_iter(), async {
            let elsewhere = {
                let (tally, ids) = (tally.clone(), ids.clone());
                tokio::spawn(async move { claims(&tally, &ids).contains("t1", "evt_1") })
            };
            let here = claims(&tally, &ids).contains("t1", "evt_1");
            (here, elsewhere.await.unwrap())
        })
        .await;
        assert_eq!(
            inside,
            (true, false),
            "held in the task, not in another (a duplicate's)"
        );
        assert!(
            !claims(&tally, &ids).contains("t1", "evt_1"),
            "not after the hold"
        );
    }
}
