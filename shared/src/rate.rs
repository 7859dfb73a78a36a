//! Rate limits per subscription (G5): at most `rate_limit` attempts start
//! in any one-second window, retries included, across all of a
//! subscription's lanes and, on AWS, all function instances.
//!
//! The rule is a generic cell rate: a subscription has a theoretical
//! arrival time (`tat`), the earliest start the next attempt may take.
//! Each start takes `tat` (or now, when `tat` is past) and moves it on by
//! one interval (1 s / limit), so starts are at least an interval apart and
//! no one-second window holds more than `limit` of them: there is no burst,
//! at the start or after an idle spell. A start is reserved only if it is
//! within [`HORIZON`] of now (the attempt waits for it); otherwise the
//! caller puts the delivery off until the horizon reaches it, without
//! reserving, so a lane never holds a slot it will not use.
//!
//! The embedded runtime keeps `tat` in memory ([`InMemoryRates`]); the AWS
//! adapter keeps it in one DynamoDB item per rate-limited subscription,
//! moved on by conditional writes (`shared/aws`). Subscriptions without a
//! limit never touch either.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use async_trait::async_trait;
use time::OffsetDateTime;

use crate::domain::{RateLimit, SubscriptionId};
use crate::ports::StoreResult;

/// How far ahead a start may be reserved.
pub const HORIZON: Duration = Duration::from_secs(1);

/// What a reservation came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Slot {
    /// Start at this time (now, or within the horizon).
    At(OffsetDateTime),
    /// Nothing free within the horizon: ask again at this time.
    NotBefore(OffsetDateTime),
}

/// Reserves attempt starts under a subscription's rate limit.
#[async_trait]
pub trait RateLimits: Send + Sync {
    /// Reserves one start for `sub` under `limit`, as of `now`.
    async fn reserve(
        &self,
        sub: &SubscriptionId,
        limit: RateLimit,
        now: OffsetDateTime,
    ) -> StoreResult<Slot>;
}

/// The interval between starts under `limit`, in microseconds, rounded
/// up (so `limit` intervals never fit in under a second).
pub fn interval_us(limit: RateLimit) -> i64 {
    let n = i64::from(limit.per_second());
    (1_000_000 + n - 1) / n
}

/// Microseconds since the epoch.
pub fn micros(t: OffsetDateTime) -> i64 {
    (t.unix_timestamp_nanos() / 1_000) as i64
}

/// A time from microseconds since the epoch.
pub fn from_micros(us: i64) -> OffsetDateTime {
    OffsetDateTime::from_unix_timestamp_nanos(i128::from(us) * 1_000)
        .unwrap_or(OffsetDateTime::UNIX_EPOCH)
}

/// The rule itself: given the stored `tat` (none yet: idle), the slot
/// for a start at `now` and the `tat` to store when it is taken.
pub fn reserve(tat: Option<i64>, now: i64, limit: RateLimit) -> (Slot, Option<i64>) {
    let start = tat.map_or(now, |t| t.max(now));
    let horizon = HORIZON.as_micros() as i64;
    if start - now > horizon {
        return (Slot::NotBefore(from_micros(start - horizon)), None);
    }
    (
        Slot::At(from_micros(start)),
        Some(start + interval_us(limit)),
    )
}

/// Rate limits kept in this process (the embedded runtime: one process
/// holds every lane).
#[derive(Default)]
pub struct InMemoryRates {
    tat: Mutex<HashMap<SubscriptionId, i64>>,
}

#[async_trait]
impl RateLimits for InMemoryRates {
    async fn reserve(
        &self,
        sub: &SubscriptionId,
        limit: RateLimit,
        now: OffsetDateTime,
    ) -> StoreResult<Slot> {
        let now = micros(now);
        let mut map = self
            .tat
            .lock()
            .map_err(|_| crate::ports::StoreError::backend("rate limits poisoned"))?;
        let (slot, next) = reserve(map.get(sub).copied(), now, limit);
        if let Some(next) = next {
            // Entries of idle subscriptions go once they are stale.
            if map.len() > 10_000 {
                map.retain(|_, t| *t > now);
            }
            map.insert(sub.clone(), next);
        }
        Ok(slot)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limit(n: i64) -> RateLimit {
        RateLimit::parse(n).unwrap()
    }

    #[test]
    fn starts_are_an_interval_apart_from_the_first_and_no_burst_follows_idleness() {
        let (mut tat, now) = (None, 1_000_000);
        let mut starts = Vec::new();
        for _ in 0..5 {
            let (slot, next) = reserve(tat, now, limit(4));
            let Slot::At(at) = slot else {
                panic!("within the horizon")
            };
            starts.push(micros(at));
            tat = next;
        }
        assert_eq!(
            starts,
            [1_000_000, 1_250_000, 1_500_000, 1_750_000, 2_000_000]
        );
        let (slot, next) = reserve(tat, now, limit(4));
        assert_eq!(
            slot,
            Slot::NotBefore(from_micros(1_250_000)),
            "past the horizon"
        );
        assert_eq!(next, None, "nothing reserved");
        let (slot, _) = reserve(Some(2_250_000), 9_000_000, limit(4));
        assert_eq!(slot, Slot::At(from_micros(9_000_000)), "idle: now, once");
    }

    #[test]
    fn no_one_second_window_holds_more_than_the_limit() {
        for n in [1, 3, 10, 40, 1000] {
            let mut tat = None;
            let mut starts = Vec::new();
            let mut now = 0;
            while starts.len() < 3 * n as usize {
                match reserve(tat, now, limit(n)) {
                    (Slot::At(at), next) => {
                        starts.push(micros(at));
                        tat = next;
                    }
                    (Slot::NotBefore(t), _) => now = micros(t),
                }
            }
            for (i, s) in starts.iter().enumerate() {
                let in_window = starts[i..]
                    .iter()
                    .take_while(|t| **t < s + 1_000_000)
                    .count();
                assert!(in_window <= n as usize, "{n}/s: {in_window} in a window");
            }
        }
    }
}
