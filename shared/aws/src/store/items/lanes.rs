//! A lane's attributes on its subscription item: `{name}` for lane 0 and
//! `{name}_{n}` for the others, for the spill flag (`spilling`), the count
//! of spilled deliveries (`spilled`) and the slow pool flag (`slow`); and
//! the lanes an item names.

use aws_sdk_dynamodb::types::AttributeValue;

use super::attrs::get_n;
use crate::store::Item;

/// A lane's spill flag.
pub(crate) const SPILLING: &str = "spilling";
/// A lane's count of spilled deliveries not yet refilled.
pub(crate) const SPILLED: &str = "spilled";
/// A lane's slow pool flag.
pub(crate) const SLOW: &str = "slow";

/// The attribute `name` of a lane.
pub(crate) fn lane_attr(name: &str, lane: u16) -> String {
    match lane {
        0 => name.to_owned(),
        n => format!("{name}_{n}"),
    }
}

/// The lane number an attribute named `{prefix}` or `{prefix}_n` is of.
pub(crate) fn lane_of_attr(name: &str, prefix: &str) -> Option<u16> {
    match name.strip_prefix(prefix)? {
        "" => Some(0),
        rest => rest.strip_prefix('_')?.parse().ok(),
    }
}

/// The lanes whose flag `name` an item sets.
fn flagged(item: &Item, name: &str) -> Vec<u16> {
    let mut lanes: Vec<u16> = item
        .iter()
        .filter(|(_, v)| matches!(v, AttributeValue::Bool(true)))
        .filter_map(|(k, _)| lane_of_attr(k, name))
        .collect();
    lanes.sort_unstable();
    lanes
}

/// The lanes a subscription item says spill.
pub(crate) fn spilling_lanes(item: &Item) -> Vec<u16> {
    flagged(item, SPILLING)
}

/// The lanes a subscription item says are in the slow pool.
pub(crate) fn slow_lanes(item: &Item) -> Vec<u16> {
    flagged(item, SLOW)
}

/// The lanes a subscription item has ever counted spilled deliveries of
/// (lane 0 always).
pub(crate) fn lanes_that_spilled(item: &Item) -> Vec<u16> {
    let mut lanes: Vec<u16> = item
        .keys()
        .filter_map(|k| lane_of_attr(k, SPILLED))
        .collect();
    lanes.push(0);
    lanes.sort_unstable();
    lanes.dedup();
    lanes
}

/// The spilled deliveries a subscription item counts over all its lanes.
pub(crate) fn spilled_total(item: &Item) -> u64 {
    lanes_that_spilled(item)
        .into_iter()
        .map(|lane| get_n(item, &lane_attr(SPILLED, lane)).unwrap_or(0).max(0) as u64)
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::number_attr;

    #[test]
    fn lane_zero_has_the_bare_name_and_names_read_back_to_their_lane() {
        assert_eq!(lane_attr(SLOW, 0), "slow");
        assert_eq!(lane_attr(SLOW, 3), "slow_3");
        assert_eq!(lane_of_attr(&lane_attr(SPILLING, 0), SPILLING), Some(0));
        assert_eq!(lane_of_attr(&lane_attr(SPILLING, 12), SPILLING), Some(12));
        assert_eq!(lane_of_attr(&lane_attr(SPILLED, 12), SPILLING), None);
        assert_eq!(lane_of_attr("slowly", SLOW), None);
    }

    #[test]
    fn flags_and_counts_are_read_per_lane() {
        let item: Item = [
            ("spilling_2".to_owned(), AttributeValue::Bool(true)),
            ("spilling".to_owned(), AttributeValue::Bool(false)),
            ("slow_5".to_owned(), AttributeValue::Bool(true)),
            ("spilled".to_owned(), number_attr(3)),
            ("spilled_2".to_owned(), number_attr(4)),
            ("spilled_7".to_owned(), number_attr(-1)),
        ]
        .into();
        assert_eq!(spilling_lanes(&item), vec![2]);
        assert_eq!(slow_lanes(&item), vec![5]);
        assert_eq!(lanes_that_spilled(&item), vec![0, 2, 7]);
        assert_eq!(spilled_total(&item), 7);
    }
}
