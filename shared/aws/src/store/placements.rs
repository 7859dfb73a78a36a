//! Placements as the process last saw them: the reads that fetch a
//! subscription item anyway (the engine's consistent read before every
//! attempt, fan-out's matching) note its lanes, fences and slow flags here,
//! so the lane writes right after them (placing a delivery, asking whether
//! a lane is in the slow pool) need no read of their own.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use hooklane_core::domain::SubscriptionId;

use super::lane_change::Placement;
use super::Item;

/// How long a noted placement stands in for a read of its own (a fan-out
/// queues right after the query that noted it).
const FRESH: Duration = Duration::from_secs(5);
const KEEP: usize = 100_000;

/// Placements noted by the reads that fetch subscription items anyway.
#[derive(Debug, Default)]
pub(crate) struct Placements {
    noted: Mutex<HashMap<SubscriptionId, (Instant, Placement)>>,
    /// Lanes this process moved to the slow pool itself, and when: the
    /// delivery function asks right after the move whether to hand the
    /// message over, and that answer needs no read (the hand-over's
    /// conditional write still checks the flag).
    moved: Mutex<HashMap<(SubscriptionId, u16), Instant>>,
}

impl Placements {
    /// Notes a subscription's placement as just read.
    pub(crate) fn note(&self, sub: &SubscriptionId, item: &Item) {
        if let Ok(mut map) = self.noted.lock() {
            if map.len() >= KEEP && !map.contains_key(sub) {
                map.clear();
            }
            map.insert(sub.clone(), (Instant::now(), Placement::of(item)));
        }
    }

    /// Notes that a lane moved to the slow pool (or back), in the placement
    /// just read, and as this process's own move.
    pub(crate) fn note_slow(&self, sub: &SubscriptionId, lane: u16, slow: bool) {
        if let Ok(mut moved) = self.moved.lock() {
            if moved.len() >= KEEP {
                moved.retain(|_, at| at.elapsed() < FRESH);
            }
            if slow {
                moved.insert((sub.clone(), lane), Instant::now());
            } else {
                moved.remove(&(sub.clone(), lane));
            }
        }
        if let Ok(mut map) = self.noted.lock() {
            if let Some((_, p)) = map.get_mut(sub) {
                p.slow.retain(|l| *l != lane);
                if slow {
                    p.slow.push(lane);
                }
            }
        }
    }

    /// Whether this process moved the lane to the slow pool within
    /// [`FRESH`].
    pub(crate) fn moved_lately(&self, sub: &SubscriptionId, lane: u16) -> bool {
        self.moved.lock().is_ok_and(|moved| {
            moved
                .get(&(sub.clone(), lane))
                .is_some_and(|at| at.elapsed() < FRESH)
        })
    }

    /// The noted placement, when read within [`FRESH`].
    pub(crate) fn fresh(&self, sub: &SubscriptionId) -> Option<Placement> {
        let map = self.noted.lock().ok()?;
        map.get(sub)
            .filter(|(at, _)| at.elapsed() < FRESH)
            .map(|(_, p)| p.clone())
    }

    pub(crate) fn forget(&self, sub: &SubscriptionId) {
        if let Ok(mut map) = self.noted.lock() {
            map.remove(sub);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lane_this_process_moved_is_slow_until_it_comes_back() {
        let p = Placements::default();
        let (sub, other) = (SubscriptionId::generate(), SubscriptionId::generate());
        assert!(!p.moved_lately(&sub, 0));
        p.note_slow(&sub, 0, true);
        assert!(p.moved_lately(&sub, 0));
        assert!(!p.moved_lately(&sub, 1), "only the lane moved");
        assert!(!p.moved_lately(&other, 0), "only the subscription moved");
        p.note_slow(&sub, 0, false);
        assert!(!p.moved_lately(&sub, 0), "back in the main pool");
    }
}
