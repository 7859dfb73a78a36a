//! Reading and writing the attributes of the table's items, at the bottom
//! of the store: typed reads of a string or number attribute, sortable
//! numbers, an item's key for reports, and the rule that one unreadable
//! item of a list read is reported and left out rather than failing it.

use hooklane_core::ports::{StoreError, StoreResult};

use crate::store::Item;

/// A zero-padded number, so string sort keys sort numerically.
pub(crate) fn padded(n: i64) -> String {
    format!("{n:020}")
}

/// A sequence number that orders by time: milliseconds × 1000 plus a
/// counter's part, unique within one process up to 1000 a millisecond.
/// The keys it makes are unique where they must be by other means (the
/// attempt log's conditional put, the spill key's delivery identity).
pub(crate) fn time_seq(now: time::OffsetDateTime) -> i64 {
    hooklane_core::record::ms(now) * 1000 + counter() % 1000
}

/// How many parked-index numbers one millisecond has ([`parked_seq`]).
pub(crate) const PARKED_PER_MS: i64 = 1_000_000;

/// A parked delivery's place in its tenant's parked index (`gsi2sk`),
/// which the dead-letter list pages through by `> cursor`, so that two
/// equal numbers with a page's end between them would hide the second:
/// milliseconds × [`PARKED_PER_MS`] plus the counter's part from a random
/// start in each process. One process never draws the same number twice
/// within a millisecond; two (a fleet of functions, each started fresh)
/// draw the same one in the same millisecond about once in a million.
/// Numbers of parks before this scale (× 1000) sort before these, as
/// their times do. It fits `i64` (and the API's cursor, below 9 × 10¹⁸)
/// until the year 2255.
pub(crate) fn parked_seq(now: time::OffsetDateTime) -> i64 {
    use std::sync::OnceLock;
    static START: OnceLock<i64> = OnceLock::new();
    let start = *START.get_or_init(|| i64::from(rand::random::<u32>()));
    hooklane_core::record::ms(now) * PARKED_PER_MS + (start + counter()).rem_euclid(PARKED_PER_MS)
}

fn counter() -> i64 {
    use std::sync::atomic::{AtomicI64, Ordering};
    static COUNTER: AtomicI64 = AtomicI64::new(0);
    COUNTER.fetch_add(1, Ordering::Relaxed)
}

/// Reads a string attribute.
pub(crate) fn get_s<'a>(item: &'a Item, key: &str) -> Option<&'a str> {
    item.get(key)
        .and_then(|v| v.as_s().ok())
        .map(String::as_str)
}

/// Reads a number attribute.
pub(crate) fn get_n(item: &Item, key: &str) -> Option<i64> {
    item.get(key)
        .and_then(|v| v.as_n().ok())
        .and_then(|n| n.parse().ok())
}

/// Reads a number attribute that every item of its kind has.
pub(crate) fn required_n(item: &Item, key: &str) -> StoreResult<i64> {
    get_n(item, key).ok_or_else(|| corrupt(key))
}

/// A stored item that does not parse back.
pub(crate) fn corrupt(what: &str) -> StoreError {
    StoreError::Unreadable(format!("stored {what} does not parse"))
}

/// An item's key, for reports.
pub(crate) fn key_of(item: &Item) -> String {
    format!(
        "{}/{}",
        get_s(item, "pk").unwrap_or("(no pk)"),
        get_s(item, "sk").unwrap_or("(no sk)")
    )
}

/// Parses one item of a list read: an item that does not parse is kept,
/// reported with its key ([`hooklane_core::record::unreadable`]) and left
/// out (`None`), so one bad record never fails a list.
pub(crate) fn readable<T>(
    kind: &str,
    item: &Item,
    parsed: StoreResult<T>,
) -> StoreResult<Option<T>> {
    readable_keyed(kind, &key_of(item), parsed)
}

/// [`readable`] for an item already consumed by its parse, by its key.
pub(crate) fn readable_keyed<T>(
    kind: &str,
    key: &str,
    parsed: StoreResult<T>,
) -> StoreResult<Option<T>> {
    match parsed {
        Ok(v) => Ok(Some(v)),
        Err(StoreError::Unreadable(why)) => {
            hooklane_core::record::unreadable(kind, key, &why);
            Ok(None)
        }
        Err(e) => Err(e),
    }
}

/// The first `max` characters of `text` (an error or a response excerpt
/// as stored).
pub(crate) fn truncate(text: &str, max: usize) -> String {
    text.chars().take(max).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parked_numbers_order_by_time_and_differ_within_a_millisecond() {
        let at = time::OffsetDateTime::from_unix_timestamp(1_796_576_351).unwrap();
        let later = at + time::Duration::milliseconds(1);
        let same: Vec<i64> = (0..1000).map(|_| parked_seq(at)).collect();
        let distinct: std::collections::HashSet<_> = same.iter().collect();
        assert_eq!(distinct.len(), same.len(), "a thousand in one millisecond");
        let ms = hooklane_core::record::ms(at);
        assert!(
            same.iter().all(|s| s / PARKED_PER_MS == ms),
            "the time part"
        );
        assert!(same.iter().all(|s| *s < parked_seq(later)), "in time order");
        // After every number of the scale before, as their times are.
        assert!(parked_seq(at) > time_seq(later + time::Duration::days(3650)));
        assert_eq!(padded(parked_seq(later)).len(), 20);
    }
}
