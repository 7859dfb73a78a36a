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

/// Flags kept at most; beyond that the map starts over (a miss only costs
/// a read).
const KEEP: usize = 100_000;

/// Each lane's spill flag as last read.
#[derive(Debug, Default)]
pub(crate) struct LaneFlags {
    spilling: Mutex<HashMap<SubscriptionId, bool>>,
}

impl LaneFlags {
    /// Notes a flag read with its subscription's item.
    pub(crate) fn note(&self, sub: &SubscriptionId, spilling: bool) {
        if let Ok(mut map) = self.spilling.lock() {
            if map.len() >= KEEP && !map.contains_key(sub) {
                map.clear();
            }
            map.insert(sub.clone(), spilling);
        }
    }

    /// The flag as last noted, if it was.
    pub(crate) fn get(&self, sub: &SubscriptionId) -> Option<bool> {
        self.spilling.lock().ok()?.get(sub).copied()
    }
}
