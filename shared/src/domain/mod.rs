//! Domain types: the newtypes every request is parsed into at the edge
//! (tenant, ids, event types and filters) and the records the engine moves
//! through the ports (subscription, event, delivery, attempt).
//!
//! Parse, don't validate: each newtype has a private field and a `parse`
//! that names what is wrong, so the engine never sees a raw string.

mod archive;
mod catalog;
mod content_filter;
mod endpoint;
mod event;
mod ids;
mod json_tree;
mod operator;
mod overview;
mod records;
mod retake;

pub use archive::*;
pub use catalog::*;
pub use content_filter::*;
pub use endpoint::*;
pub use event::*;
pub use ids::*;
pub use json_tree::*;
pub use operator::*;
pub use overview::*;
pub use records::*;
pub use retake::*;

use time::OffsetDateTime;

/// Why a value given at the edge was refused; the API maps it to a 4xx
/// naming the field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Invalid(pub String);

/// A time as the API and every stored or sent document writes it: RFC 3339,
/// UTC, with milliseconds.
pub fn rfc3339(t: OffsetDateTime) -> String {
    let t = t.to_offset(time::UtcOffset::UTC);
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z",
        t.year(),
        u8::from(t.month()),
        t.day(),
        t.hour(),
        t.minute(),
        t.second(),
        t.millisecond()
    )
}

/// FNV-1a, 64-bit, over `bytes`: the hash that picks a delivery's lane,
/// the same on both backends (`../shared/API.md`).
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    bytes
        .iter()
        .fold(OFFSET, |h, b| (h ^ u64::from(*b)).wrapping_mul(PRIME))
}

/// A delivery's lane among `lanes`: `fnv1a64(ordering key, or the event
/// id when there is none) mod lanes`.
pub fn lane_of(ordering_key: Option<&OrderingKey>, event: &EventId, lanes: LaneCount) -> u16 {
    let key = ordering_key.map_or(event.as_str(), OrderingKey::as_str);
    (fnv1a64(key.as_bytes()) % u64::from(lanes.get())) as u16
}

/// An event's ordering key: 1–256 bytes of UTF-8. Events that share one
/// are delivered to a subscription in acceptance order, whatever its lanes.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct OrderingKey(String);

impl OrderingKey {
    /// Longest key, in bytes.
    pub const MAX_BYTES: usize = 256;

    /// Parses a key given at the edge.
    pub fn parse(raw: &str) -> Result<Self, Invalid> {
        if raw.is_empty() || raw.len() > Self::MAX_BYTES {
            return Err(Invalid(format!(
                "an ordering key is 1 to {} bytes of UTF-8",
                Self::MAX_BYTES
            )));
        }
        Ok(Self(raw.to_owned()))
    }

    /// The key as given.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// How many lanes a subscription has: 1 to 256 (default 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LaneCount(u16);

impl Default for LaneCount {
    fn default() -> Self {
        Self(1)
    }
}

impl LaneCount {
    /// Most lanes a subscription may have.
    pub const MAX: u16 = 256;

    /// Parses a count given at the edge.
    pub fn parse(n: i64) -> Result<Self, Invalid> {
        within(n, Self::MAX.into(), "lanes is an integer from 1 to 256").map(|n| Self(n as u16))
    }

    /// The count.
    pub fn get(self) -> u16 {
        self.0
    }
}

/// `n` when it is from 1 to `max`; otherwise `why`.
fn within(n: i64, max: i64, why: &str) -> Result<i64, Invalid> {
    if (1..=max).contains(&n) {
        Ok(n)
    } else {
        Err(Invalid(why.to_owned()))
    }
}

/// A subscription's rate limit: at most this many attempts start in any
/// one-second window, 1 to 10,000.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RateLimit(u32);

impl RateLimit {
    /// Highest limit.
    pub const MAX: u32 = 10_000;

    /// Parses a limit given at the edge.
    pub fn parse(n: i64) -> Result<Self, Invalid> {
        within(
            n,
            Self::MAX.into(),
            "rate_limit is an integer from 1 to 10000, or null",
        )
        .map(|n| Self(n as u32))
    }

    /// Attempts per second.
    pub fn per_second(self) -> u32 {
        self.0
    }

    /// A quarter of it, at least one (the recovery ramp).
    pub fn quarter(self) -> Self {
        Self((self.0 / 4).max(1))
    }
}

impl LaneCount {
    /// A quarter of the lanes, at least one (the recovery ramp).
    pub fn quarter(self) -> Self {
        Self((self.0 / 4).max(1))
    }
}

#[cfg(test)]
mod lane_tests {
    use super::*;

    #[test]
    fn fnv1a64_gives_the_published_values() {
        assert_eq!(fnv1a64(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a64(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a64(b"foobar"), 0x8594_4171_f739_67e8);
    }

    #[test]
    fn a_key_picks_its_lane_and_one_lane_takes_everything() {
        let id = EventId::parse("evt_1").unwrap();
        let key = OrderingKey::parse("foobar").unwrap();
        let lanes = |n| LaneCount::parse(n).unwrap();
        assert_eq!(
            lane_of(Some(&key), &id, lanes(8)),
            (0x8594_4171_f739_67e8_u64 % 8) as u16
        );
        assert_eq!(lane_of(None, &id, LaneCount::default()), 0);
        let other = EventId::parse("evt_2").unwrap();
        assert_eq!(
            lane_of(Some(&key), &id, lanes(256)),
            lane_of(Some(&key), &other, lanes(256)),
            "the key decides, not the event"
        );
        assert_eq!(
            lane_of(None, &id, lanes(256)),
            (fnv1a64(b"evt_1") % 256) as u16,
            "without a key, the event id"
        );
    }

    #[test]
    fn keys_and_lane_counts_out_of_bounds_are_refused() {
        assert!(OrderingKey::parse("").is_err());
        assert!(OrderingKey::parse(&"k".repeat(256)).is_ok());
        assert!(OrderingKey::parse(&"k".repeat(257)).is_err());
        assert!(
            OrderingKey::parse(&"é".repeat(129)).is_err(),
            "bytes, not characters"
        );
        for bad in [0, 257, -1, 65_537] {
            assert!(LaneCount::parse(bad).is_err(), "{bad}");
        }
        assert_eq!(LaneCount::parse(256).unwrap().get(), 256);
    }
}
