//! Placements as the process last saw them: the reads that fetch a
//! subscription item anyway (the engine's consistent read before every
//! attempt, fan-out's matching) note its lanes, fences and slow flags here,
//! so the lane writes right after them (placing a delivery, asking whether
//! a lane is in the slow pool) need no read of their own.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use hooklane_core::domain::SubscriptionId;

use super::items::placement::Placement;
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
    moved: Mutex<HashMap<SubscriptionId, Vec<(u16, Instant)>>>,
}

impl Placements {
    /// Notes a subscription's placement as just read (a lane the read
    /// shows back in the main pool is no longer noted as moved).
    pub(crate) fn note(&self, sub: &SubscriptionId, item: &Item) {
        let placement = Placement::of(item);
        if let Ok(mut moved) = self.moved.lock() {
            if let Some(lanes) = moved.get_mut(sub) {
                lanes.retain(|(lane, _)| placement.slow.contains(lane));
            }
        }
        if let Ok(mut map) = self.noted.lock() {
            if map.len() >= KEEP && !map.contains_key(sub) {
                map.clear();
            }
            map.insert(sub.clone(), (Instant::now(), placement));
        }
    }

    /// Notes that a lane moved to the slow pool (or back), in the placement
    /// just read, and as this process's own move.
    pub(crate) fn note_slow(&self, sub: &SubscriptionId, lane: u16, slow: bool) {
        if let Ok(mut moved) = self.moved.lock() {
            if moved.len() >= KEEP && !moved.contains_key(sub) {
                moved.retain(|_, lanes| lanes.iter().any(|(_, at)| at.elapsed() < FRESH));
                if moved.len() >= KEEP {
                    moved.clear();
                }
            }
            let lanes = moved.entry(sub.clone()).or_default();
            lanes.retain(|(l, _)| *l != lane);
            if slow {
                lanes.push((lane, Instant::now()));
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
            moved.get(sub).is_some_and(|lanes| {
                lanes
                    .iter()
                    .any(|(l, at)| *l == lane && at.elapsed() < FRESH)
            })
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
        // A read that shows the lane back in the main pool forgets the move.
        p.note_slow(&sub, 0, true);
        p.note(&sub, &Item::new());
        assert!(!p.moved_lately(&sub, 0), "read back in the main pool");
    }
}
