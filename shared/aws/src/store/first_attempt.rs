//! A first attempt's outcome, written once.
//!
//! A delivery's record is written when its first attempt starts (the
//! attempt number, the lease: G7, G5). That attempt's log entry goes under
//! a key the record names: the subscription's attempt log, at the
//! attempt's start (`last_attempt_at`), with a part hashed from the event.
//! When the attempt delivered, the entry is the outcome and the record is
//! not written again: one write unit less per delivery on the happy path.
//! Any other outcome is written to the record as well, as for later
//! attempts.
//!
//! So a record at its first attempt with no outcome written (pending, one
//! attempt, no `updated_at`: [`first_log_key`]) is settled by that entry:
//! delivered when it is marked so; in flight, or its outcome lost, when there
//! is none. Every reader that shows or acts on a record's state settles it
//! ([`settled`]): the delivery function before an attempt (a message back
//! after its delivery is never sent again, G1), `GET /events/{id}`
//! (`views`), [`AwsRecords::delivery_record`], and a hold or drop that finds
//! the record past the attempts it was read with (`records`). Writes
//! conditioned on the stored state (an attempt's start, an outcome, a
//! hold, a replay's reset) need no settling: a record in doubt is pending
//! at attempt 1, and only the reader that claimed its key, or the outcome
//! that took it, goes past that. Replays and backfills take only parked
//! and held records, and leave pending ones (delivered or not) as they are.
//!
//! The key's start is the one the attempt's start wrote to the record, as
//! this process noted it then ([`FirstStarts`]); an outcome whose start
//! this process did not note is written to the record, as for later
//! attempts. The entry is written on condition that its key is free. A delivery
//! function that finds the first attempt's lease passed with no entry
//! claims the key (a `claim` item, which the log does not list) before it
//! starts the second attempt, so that of a late outcome and the next
//! attempt only one stands. A late outcome that finds its key taken is
//! logged under a key of its own and written to the record, on condition
//! that the record is still pending at its attempt; so is one whose key
//! another delivery's entry took (a collision of the hashed part within
//! one millisecond).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Instant;

use aws_sdk_dynamodb::types::AttributeValue;
use hooklane_core::domain::{
    Attempt, Delivery, DeliveryRecord, DeliveryState, EventId, SubscriptionId, TenantId,
};
use hooklane_core::ports::StoreResult;
use hooklane_core::record::ms;
use time::OffsetDateTime;

use super::attempts::AwsAttemptLog;
use super::items::keys::{log_pk, record_pk, record_sk};
use super::items::record::record_of;
use super::records::AwsRecords;
use super::{get_n, get_s, padded, took_effect, Item, RETENTION_SECS};
use crate::messages::dedup_id;
use crate::{number_attr, string_attr};

/// How many begun first attempts [`FirstStarts`] holds at most. Past the
/// bound, those noted over [`FIRST_STARTS_KEPT`] ago go; if none has, an
/// outcome is written to the record (one write more), and the log says so
/// (once a minute at most).
const FIRST_STARTS: usize = 10_000;
/// How long a noted start is kept at most: longer than any attempt runs
/// (an invocation's limit is 15 minutes). An entry is left by a first
/// attempt that wrote no outcome here (a slot lost before the request, a
/// failed write); one forgotten before its outcome only costs that
/// outcome's write to the record.
const FIRST_STARTS_KEPT: std::time::Duration = std::time::Duration::from_secs(15 * 60);

/// The start each first attempt this process began wrote to its record
/// (which names the attempt's log key), until its outcome is written.
#[derive(Debug, Default)]
pub(crate) struct FirstStarts(Mutex<Noted>);

#[derive(Debug, Default)]
struct Noted {
    /// Each begun first attempt's start (ms), and when it was noted.
    starts: HashMap<(SubscriptionId, EventId), (i64, Instant)>,
    /// When the log last said the table was full.
    warned: Option<Instant>,
}

impl FirstStarts {
    /// Notes that `d`'s first attempt began at `start`.
    pub(crate) fn note(&self, d: &Delivery, start: OffsetDateTime) {
        let mut noted = self.0.lock().expect("first starts lock");
        let key = (d.subscription_id.clone(), d.event_id.clone());
        if noted.starts.len() >= FIRST_STARTS && !noted.starts.contains_key(&key) {
            noted
                .starts
                .retain(|_, (_, at)| at.elapsed() < FIRST_STARTS_KEPT);
        }
        if noted.starts.len() < FIRST_STARTS || noted.starts.contains_key(&key) {
            noted.starts.insert(key, (ms(start), Instant::now()));
        } else if noted.warned.is_none_or(|w| w.elapsed().as_secs() >= 60) {
            noted.warned = Some(Instant::now());
            tracing::warn!(
                held = noted.starts.len(),
                "too many first attempts begun and not finished: their outcomes are written to their records"
            );
        }
    }

    /// The start of `d`'s first attempt, if this process began it and
    /// noted it; forgotten.
    pub(crate) fn take(&self, d: &Delivery) -> Option<i64> {
        self.0
            .lock()
            .expect("first starts lock")
            .starts
            .remove(&(d.subscription_id.clone(), d.event_id.clone()))
            .map(|(start, _)| start)
    }
}

/// A log entry's key (`pk`, `sk`).
pub(crate) type LogKey = (String, String);

/// The sort key of a first attempt's log entry: its start in
/// milliseconds, then a part hashed from its event (as `time_seq`'s keys
/// are ordered, so the log lists it in time).
fn first_sk(event: &EventId, started_ms: i64) -> String {
    let hash = dedup_id(&[event.as_str(), "first attempt"]);
    let part = u64::from_str_radix(&hash[..8], 16).unwrap_or(0) % 1000;
    padded(started_ms * 1000 + part as i64)
}

/// Where the log entry that settles a record is: for a pending record at
/// its first attempt with no outcome written, `None` for any other.
pub(crate) fn first_log_key(record: &Item) -> Option<LogKey> {
    let in_doubt = get_s(record, "state") == Some("pending")
        && get_n(record, "attempts") == Some(1)
        && !record.contains_key("updated_at");
    if !in_doubt {
        return None;
    }
    let tenant = TenantId::parse(get_s(record, "tenant")?).ok()?;
    let sub = SubscriptionId::parse(get_s(record, "subscription_id")?).ok()?;
    let event = EventId::parse(get_s(record, "event_id")?).ok()?;
    let started = get_n(record, "last_attempt_at")?;
    Some((log_pk(&tenant, &sub), first_sk(&event, started)))
}

/// A record as its first attempt's log entry settles it: `entry` is the
/// item at its [`first_log_key`], if any. Delivered when the entry is that
/// attempt's and says so; as the record says otherwise.
pub(crate) fn settled(record: &Item, entry: Option<&Item>) -> StoreResult<DeliveryRecord> {
    let mut r = record_of(record)?;
    let delivered = first_log_key(record).is_some()
        && entry.is_some_and(|e| {
            !e.contains_key("claim")
                && get_s(e, "event_id") == get_s(record, "event_id")
                && get_n(e, "attempt") == Some(1)
                && e.get("delivered").is_some_and(|v| v.as_bool() == Ok(&true))
        });
    if delivered {
        r.state = DeliveryState::Delivered;
        r.next_attempt_at = None;
        r.last_status_code = entry
            .and_then(|e| get_n(e, "status_code"))
            .map(|c| c as u16);
    }
    Ok(r)
}

impl AwsRecords {
    /// Logs a first attempt under the key its record names (its start as
    /// the record holds it, `started_ms`), marked as the
    /// delivery's outcome when it `delivered`; `false` when the key was
    /// taken (a claim, or another delivery's entry). Its id makes the
    /// write idempotent (an SDK retry finds its own entry).
    pub(super) async fn log_first(
        &self,
        a: &Attempt,
        started_ms: i64,
        delivered: bool,
    ) -> StoreResult<bool> {
        let mut req = AwsAttemptLog(self.0.clone()).put_entry(a, first_sk(&a.event_id, started_ms));
        if delivered {
            req = req.item("delivered", AttributeValue::Bool(true));
        }
        let res = req
            .condition_expression("attribute_not_exists(pk) OR id = :id")
            .expression_attribute_values(":id", string_attr(a.id.as_str()))
            .send()
            .await;
        took_effect(res)
    }

    /// Reads a delivery record (strongly consistent), settled.
    pub async fn delivery_record(
        &self,
        sub: &SubscriptionId,
        event: &EventId,
    ) -> StoreResult<Option<DeliveryRecord>> {
        self.read_settled(sub, event, None).await
    }

    /// The record of a delivery about to be attempted from `from` on,
    /// settled (strongly consistent). When its first attempt's lease ends
    /// by `from` with no outcome written, the attempt's log key is claimed
    /// first, so that a late outcome cannot also stand.
    pub async fn record_to_attempt(
        &self,
        sub: &SubscriptionId,
        event: &EventId,
        from: OffsetDateTime,
    ) -> StoreResult<Option<DeliveryRecord>> {
        self.read_settled(sub, event, Some(from)).await
    }

    /// A delivery record, settled; claiming its first attempt's log key
    /// when `claim_from` is given and that attempt's lease ends by then.
    async fn read_settled(
        &self,
        sub: &SubscriptionId,
        event: &EventId,
        claim_from: Option<OffsetDateTime>,
    ) -> StoreResult<Option<DeliveryRecord>> {
        let Some(item) = self
            .get_consistent(record_pk(sub), record_sk(event))
            .await?
        else {
            return Ok(None);
        };
        let Some((pk, sk)) = first_log_key(&item) else {
            return record_of(&item).map(Some);
        };
        let mut entry = self.get_consistent(pk.clone(), sk.clone()).await?;
        let lease_ended = claim_from
            .is_some_and(|from| get_n(&item, "next_attempt_at").is_none_or(|end| end <= ms(from)));
        if entry.is_none() && lease_ended && !self.claim(&item, &pk, &sk).await? {
            // The outcome, or another claim, took the key first.
            entry = self.get_consistent(pk, sk).await?;
        }
        settled(&item, entry.as_ref()).map(Some)
    }

    /// Takes a first attempt's log key for the next attempt; `false` when
    /// it was taken.
    async fn claim(&self, record: &Item, pk: &str, sk: &str) -> StoreResult<bool> {
        let expires = OffsetDateTime::now_utc().unix_timestamp() + RETENTION_SECS;
        let res = self
            .ddb
            .put_item()
            .table_name(&self.settings.table)
            .item("pk", string_attr(pk))
            .item("sk", string_attr(sk))
            .item("claim", AttributeValue::Bool(true))
            .item(
                "event_id",
                string_attr(get_s(record, "event_id").unwrap_or_default()),
            )
            .item("attempt", number_attr(1))
            .item("expires_at", number_attr(expires))
            .condition_expression("attribute_not_exists(pk)")
            .send()
            .await;
        took_effect(res)
    }

    /// The log entries that settle `records` (eventually consistent), by
    /// key.
    pub(crate) async fn first_entries(
        &self,
        records: &[&Item],
    ) -> StoreResult<HashMap<LogKey, Item>> {
        let keys: Vec<LogKey> = records.iter().filter_map(|r| first_log_key(r)).collect();
        if keys.is_empty() {
            return Ok(HashMap::new());
        }
        Ok(self
            .get_many(keys, false)
            .await?
            .into_iter()
            .filter_map(|e| {
                Some((
                    (get_s(&e, "pk")?.to_owned(), get_s(&e, "sk")?.to_owned()),
                    e,
                ))
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(pairs: &[(&str, &str, bool)]) -> Item {
        pairs
            .iter()
            .map(|(k, v, number)| {
                let v = if *number {
                    AttributeValue::N((*v).to_owned())
                } else {
                    AttributeValue::S((*v).to_owned())
                };
                ((*k).to_owned(), v)
            })
            .collect()
    }

    fn in_first_attempt(event: &EventId) -> Item {
        record(&[
            ("state", "pending", false),
            ("attempts", "1", true),
            ("tenant", "acme", false),
            ("subscription_id", "sub_1", false),
            ("event_id", event.as_str(), false),
            ("last_attempt_at", "1700000000123", true),
            ("next_attempt_at", "1700000035123", true),
        ])
    }

    #[test]
    fn a_first_attempts_delivered_entry_settles_its_record_and_nothing_else_does() {
        let event = EventId::generate();
        let rec = in_first_attempt(&event);
        let (pk, sk) = first_log_key(&rec).expect("in doubt");
        assert_eq!(pk, "A#acme#sub_1");
        assert!(sk.starts_with("00001700000000123"), "{sk}");
        let entry = |outcome: &str, event: &str| {
            record(&[
                ("pk", &pk, false),
                ("sk", &sk, false),
                ("event_id", event, false),
                ("attempt", "1", true),
                ("outcome", outcome, false),
                ("status_code", "204", true),
            ])
            .into_iter()
            .chain(
                (outcome == "delivered")
                    .then(|| ("delivered".to_owned(), AttributeValue::Bool(true))),
            )
            .collect::<Item>()
        };
        // No entry: in flight, or its outcome lost.
        assert_eq!(settled(&rec, None).unwrap().state, DeliveryState::Pending);
        let delivered = settled(&rec, Some(&entry("delivered", event.as_str()))).unwrap();
        assert_eq!(delivered.state, DeliveryState::Delivered);
        assert_eq!(delivered.last_status_code, Some(204));
        assert_eq!(delivered.next_attempt_at, None);
        // Another outcome (its record write follows), another event's entry
        // (a collision), or a claim: pending.
        for other in [
            entry("retrying", event.as_str()),
            entry("delivered", EventId::generate().as_str()),
            {
                let mut c = entry("delivered", event.as_str());
                c.insert("claim".into(), AttributeValue::Bool(true));
                c
            },
        ] {
            assert_eq!(
                settled(&rec, Some(&other)).unwrap().state,
                DeliveryState::Pending
            );
        }
        // An outcome written to the record: the record says.
        let mut written = rec.clone();
        written.insert("updated_at".into(), AttributeValue::N("1".into()));
        assert_eq!(first_log_key(&written), None);
        assert_eq!(
            settled(&written, Some(&entry("delivered", event.as_str())))
                .unwrap()
                .state,
            DeliveryState::Pending
        );
        // A later attempt, or a record reset before its first: no entry
        // settles it.
        for attempts in ["0", "2"] {
            let mut later = rec.clone();
            later.insert("attempts".into(), AttributeValue::N(attempts.into()));
            assert_eq!(first_log_key(&later), None);
        }
    }

    #[test]
    fn first_attempt_keys_differ_per_event_and_order_by_start() {
        let (a, b) = (EventId::generate(), EventId::generate());
        assert_eq!(first_sk(&a, 5), first_sk(&a, 5));
        assert!(first_sk(&a, 5) < first_sk(&b, 6));
        assert!(first_sk(&b, 5) < first_sk(&a, 6));
        assert_eq!(first_sk(&a, 5).len(), 20);
    }
}
