//! Spill is the AWS lane adapter's own business: the domain never sees it.
//! A subscription item carries its lane's `spilling` flag; the reads that
//! fetch the item anyway (the engine's consistent read before every
//! attempt, fan-out's matching) note the flag here, and the lane writes
//! that need it (enqueue: spill or send; finish: start spilling or refill)
//! take it from here without a read of their own. A flag not noted (the
//! process restarted, or many subscriptions came and went) is read from
//! the item.

use std::collections::HashMap;
use std::sync::Mutex;

use hooklane_core::domain::SubscriptionId;

const KEEP: usize = 100_000;

/// The lanes of each noted subscription that spill (usually none).
#[derive(Debug, Default)]
pub(crate) struct LaneFlags {
    spilling: Mutex<HashMap<SubscriptionId, Vec<u16>>>,
}

impl LaneFlags {
    /// Notes every lane flag of a subscription, as its item holds them.
    pub(crate) fn note_all(&self, sub: &SubscriptionId, spilling: Vec<u16>) {
        if let Ok(mut map) = self.spilling.lock() {
            if map.len() >= KEEP && !map.contains_key(sub) {
                map.clear();
            }
            map.insert(sub.clone(), spilling);
        }
    }

    /// Notes one lane's flag (when the subscription is noted already).
    pub(crate) fn note(&self, sub: &SubscriptionId, lane: u16, spilling: bool) {
        if let Ok(mut map) = self.spilling.lock() {
            if let Some(lanes) = map.get_mut(sub) {
                lanes.retain(|l| *l != lane);
                if spilling {
                    lanes.push(lane);
                }
            } else if spilling {
                map.insert(sub.clone(), vec![lane]);
            }
        }
    }

    /// A lane's flag, when its subscription was noted.
    pub(crate) fn get(&self, sub: &SubscriptionId, lane: u16) -> Option<bool> {
        let map = self.spilling.lock().ok()?;
        map.get(sub).map(|lanes| lanes.contains(&lane))
    }
}
