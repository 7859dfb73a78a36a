//! Where a subscription's live deliveries go, as its item says: the lanes
//! asked for and those deliveries are queued on, the last switch's fences
//! still pending ([`crate::store::lane_change`]) and the lanes in the slow
//! pool; and the lane and fence of one delivery.

use aws_sdk_dynamodb::types::AttributeValue;
use hooklane_core::domain::{lane_of, EventId, LaneCount, OrderingKey};

use super::attrs::get_n;
use super::lanes::slow_lanes;
use crate::messages::After;
use crate::store::Item;

/// Where a subscription's live deliveries go, as its item says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Placement {
    /// The lanes the user asked for.
    pub lanes: LaneCount,
    /// The lanes live deliveries are queued on.
    pub sent: LaneCount,
    /// Switches so far.
    pub generation: u32,
    /// The lanes before the last switch.
    pub from: LaneCount,
    /// Old lanes whose fence of the last switch is still queued.
    pub fences: Vec<u16>,
    /// Lanes in the slow pool ([`crate::store::slow_pool`]).
    pub slow: Vec<u16>,
}

fn count(item: &Item, name: &str) -> Option<LaneCount> {
    get_n(item, name).and_then(|n| LaneCount::parse(n).ok())
}

impl Placement {
    /// The placement a subscription item holds.
    pub(crate) fn of(item: &Item) -> Self {
        let lanes = count(item, "lanes").unwrap_or_default();
        let fences = match item.get("fences") {
            Some(AttributeValue::Ns(ns)) => ns.iter().filter_map(|n| n.parse().ok()).collect(),
            _ => Vec::new(),
        };
        Self {
            lanes,
            sent: count(item, "sent_lanes").unwrap_or(lanes),
            generation: get_n(item, "lane_gen").unwrap_or(0) as u32,
            from: count(item, "fence_from").unwrap_or_default(),
            fences,
            slow: slow_lanes(item),
        }
    }

    /// The lane of a delivery, and the fence it waits for, if any.
    pub(crate) fn place(&self, key: Option<&OrderingKey>, event: &EventId) -> (u16, Option<After>) {
        let lane = lane_of(key, event, self.sent);
        let old = lane_of(key, event, self.from);
        let after = self.fences.contains(&old).then_some(After {
            generation: self.generation,
            lane: old,
        });
        (lane, after)
    }

    /// Whether a delivery that waits for `after` must still wait.
    pub(crate) fn holds(&self, after: &After) -> bool {
        self.generation == after.generation && self.fences.contains(&after.lane)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(pairs: &[(&str, AttributeValue)]) -> Item {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), v.clone()))
            .collect()
    }

    #[test]
    fn a_delivery_waits_only_for_the_pending_fence_of_its_keys_old_lane() {
        let n = |v: i64| AttributeValue::N(v.to_string());
        // Never changed: the lanes asked for, nothing to wait for.
        let plain = Placement::of(&item(&[("lanes", n(8))]));
        assert_eq!((plain.sent.get(), plain.generation), (8, 0));
        let event = EventId::generate();
        assert_eq!(plain.place(None, &event).1, None);
        // Switched from 4 to 8; old lanes 1 and 3 still have their fences.
        let p = Placement::of(&item(&[
            ("lanes", n(8)),
            ("sent_lanes", n(8)),
            ("lane_gen", n(2)),
            ("fence_from", n(4)),
            ("fences", AttributeValue::Ns(vec!["1".into(), "3".into()])),
        ]));
        let mut waited = 0;
        for i in 0..64 {
            let key = OrderingKey::parse(&format!("k{i}")).unwrap();
            let (lane, after) = p.place(Some(&key), &event);
            assert_eq!(lane, lane_of(Some(&key), &event, p.sent));
            let old = lane_of(Some(&key), &event, p.from);
            match after {
                Some(a) => {
                    waited += 1;
                    assert_eq!((a.generation, a.lane), (2, old));
                    assert!(p.holds(&a));
                }
                None => assert!(old == 0 || old == 2, "{old} has no fence pending"),
            }
        }
        assert!(waited > 0);
        // A later switch lets every earlier waiter go.
        let later = Placement {
            generation: 3,
            ..p.clone()
        };
        assert!(!later.holds(&After {
            generation: 2,
            lane: 1
        }));
    }
}
