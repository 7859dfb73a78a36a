//! `LaneQueue` over SQLite: one row per (event, subscription); a lane is
//! a subscription's pending rows in `seq` order. An attempt in flight keeps
//! its row (a lease: `next_attempt_at` moves past the attempt timeout), so a
//! crash at any point leaves it due again, never lost.

use async_trait::async_trait;
use rusqlite::{params, OptionalExtension, Row};
use time::OffsetDateTime;

use super::{corrupt, from_ms, ms, readable, tenant_at, SqliteStore};
use crate::domain::{
    Delivery, DeliveryState, Event, EventId, EventType, Retake, SubscriptionId, TenantId,
};
use crate::health::HealthWrite;
use crate::ports::{End, Finish, Finished, LaneQueue, NewDelivery, StoreResult};

fn delivery_row(r: &Row<'_>) -> rusqlite::Result<Delivery> {
    Ok(Delivery {
        seq: r.get(0)?,
        tenant: tenant_at(r, 1)?,
        subscription_id: SubscriptionId::parse(&r.get::<_, String>(2)?)
            .map_err(|_| corrupt("subscription id"))?,
        event_id: EventId::parse(&r.get::<_, String>(3)?).map_err(|_| corrupt("event id"))?,
        event_type: EventType::parse(&r.get::<_, String>(4)?).map_err(|_| corrupt("type"))?,
        attempts: r.get(5)?,
        first_attempt_at: r.get::<_, Option<i64>>(6)?.map(from_ms),
        next_attempt_at: from_ms(r.get(7)?),
        lane: r.get(8)?,
    })
}

/// A lane head: the delivery and, joined to it, its archived event.
fn head_row(r: &Row<'_>) -> rusqlite::Result<(Delivery, Option<Event>)> {
    let d = delivery_row(r)?;
    let created: Option<i64> = r.get(9)?;
    let payload: Option<Vec<u8>> = r.get(10)?;
    let ordering_key = super::events::ordering_key(r, 11)?;
    let traceparent: Option<String> = r.get(12)?;
    let event = created.zip(payload).map(|(at, body)| Event {
        id: d.event_id.clone(),
        tenant: d.tenant.clone(),
        event_type: d.event_type.clone(),
        created_at: from_ms(at),
        payload: bytes::Bytes::from(body),
        ordering_key,
        traceparent,
        only_for: None,
    });
    Ok((d, event))
}

/// The write plan: enqueue is one insert per delivery, in one transaction
/// per call; `begin` is one conditional update that also checks the
/// tombstone; `finish` is one transaction holding the attempt-log row, the
/// health record (when the retry sequence ended) and the delivery's state.
#[async_trait]
impl LaneQueue for SqliteStore {
    async fn enqueue(&self, deliveries: &[NewDelivery]) -> StoreResult<()> {
        let rows = deliveries.to_vec();
        let now = ms(OffsetDateTime::now_utc());
        self.write_relaxed(move |conn| {
            let mut stmt = conn.prepare_cached(
                "INSERT OR IGNORE INTO deliveries \
                 (tenant, subscription_id, event_id, event_type, state, next_attempt_at, updated_at, \
                 enqueued_at, lane_no, key_hash) VALUES (?1, ?2, ?3, ?4, 'pending', ?5, ?5, ?5, ?6, ?7)",
            )?;
            for d in &rows {
                stmt.execute(params![
                    d.tenant.as_str(),
                    d.subscription_id.as_str(),
                    d.event_id.as_str(),
                    d.event_type.as_str(),
                    now,
                    d.lane,
                    d.key_hash()
                ])?;
            }
            Ok(())
        })
        .await
    }

    async fn begin(
        &self,
        d: &Delivery,
        now: OffsetDateTime,
        lease_until: OffsetDateTime,
    ) -> StoreResult<bool> {
        let (seq, attempts, sub) = (d.seq, d.attempts, d.subscription_id.clone());
        let (now, lease) = (ms(now), ms(lease_until));
        self.write_relaxed(move |conn| {
            // The tombstone is checked in the same write that starts the
            // attempt: a DELETE committed before it wins, so no attempt
            // starts after the DELETE was answered.
            let n = conn
                .prepare_cached(
                    "UPDATE deliveries SET attempts = attempts + 1, \
                     first_attempt_at = COALESCE(first_attempt_at, ?3), last_attempt_at = ?3, \
                     next_attempt_at = ?4, updated_at = ?3 \
                     WHERE seq = ?1 AND state = 'pending' AND attempts = ?2 AND EXISTS (\
                       SELECT 1 FROM subscriptions s WHERE s.id = ?5 AND s.deleted_at IS NULL AND s.status = 'active')",
                )?
                .execute(params![seq, attempts, now, lease, sub.as_str()])?;
            Ok(n == 1)
        })
        .await
    }

    async fn finish(&self, d: &Delivery, finish: &Finish) -> StoreResult<Finished> {
        let (seq, tenant, sub) = (d.seq, d.tenant.clone(), d.subscription_id.clone());
        // An attempt's outcome stands only at that attempt: a later one
        // (begun after this one's lease) has its own to write.
        let this = finish.attempt.as_ref().map(|_| d.attempts + 1);
        let finish = finish.clone();
        let now = ms(OffsetDateTime::now_utc());
        self.write_relaxed(move |conn| {
            if let Some(a) = &finish.attempt {
                super::attempts::insert(conn, a)?;
            }
            let state = finish.end.state();
            let (next, reason, parked) = match &finish.end {
                End::Retry(at) => (Some(ms(*at)), None, None),
                End::Parked(reason) => (None, Some(reason.clone()), Some(now)),
                End::Delivered | End::Dropped | End::Held => (None, None, None),
            };
            let last = finish.attempt.as_ref();
            let changed = conn.prepare_cached(
                "UPDATE deliveries SET state = ?2, next_attempt_at = COALESCE(?3, next_attempt_at), \
                 last_status = COALESCE(?4, last_status), last_error = ?5, reason = ?6, parked_at = ?7, \
                 updated_at = ?8 WHERE seq = ?1 AND state = 'pending' \
                 AND (?9 IS NULL OR attempts = ?9)",
            )?
            .execute(params![
                seq,
                state.as_str(),
                next,
                last.and_then(|a| a.status_code),
                last.and_then(|a| a.error.clone()),
                reason,
                parked,
                now,
                this
            ])?;
            let took = changed == 1;
            // Over the record as stored now (the write lock makes it
            // whole); a failure counts only with the outcome it ends.
            let health = match &finish.health {
                Some(HealthWrite::Failed(_)) if !took => None,
                Some(w) => super::subscriptions::write_health(conn, &tenant, &sub, w)?,
                None => None,
            };
            Ok(Finished { took, health })
        })
        .await
    }

    async fn requeue(
        &self,
        deliveries: &[NewDelivery],
        rule: Retake,
        backfill: bool,
    ) -> StoreResult<Vec<bool>> {
        let rows = deliveries.to_vec();
        let lane = if backfill { "backfill" } else { "live" };
        let now = ms(OffsetDateTime::now_utc());
        // Durable: a replay's answer promises it.
        self.write(move |conn| {
            rows.iter()
                .map(|d| requeue_one(conn, d, rule, lane, now))
                .collect()
        })
        .await
    }

    async fn defer(&self, d: &Delivery, until: OffsetDateTime) -> StoreResult<()> {
        let (seq, until) = (d.seq, ms(until));
        self.write_relaxed(move |conn| {
            conn.prepare_cached(
                "UPDATE deliveries SET next_attempt_at = ?2 WHERE seq = ?1 AND state = 'pending'",
            )?
            .execute(params![seq, until])
            .map(|_| ())
        })
        .await
    }
}

/// Requeues one delivery inside the caller's write if `rule` takes it by
/// its current state: a fresh row at the end of the lane (new `seq`, fresh
/// ladder). A deleted subscription's deliveries are never requeued.
fn requeue_one(
    conn: &rusqlite::Connection,
    d: &NewDelivery,
    rule: Retake,
    lane: &str,
    now: i64,
) -> rusqlite::Result<bool> {
    let (sub, event) = (d.subscription_id.as_str(), d.event_id.as_str());
    let live: bool = conn
        .prepare_cached(
            "SELECT EXISTS (SELECT 1 FROM subscriptions WHERE id = ?1 AND deleted_at IS NULL)",
        )?
        .query_row(params![sub], |r| r.get(0))?;
    let state: Option<String> = conn
        .prepare_cached(
            "SELECT state FROM deliveries WHERE subscription_id = ?1 AND event_id = ?2",
        )?
        .query_row(params![sub, event], |r| r.get(0))
        .optional()?;
    let state = state
        .map(|s| DeliveryState::parse(&s).ok_or_else(|| corrupt("delivery state")))
        .transpose()?;
    if !live || !rule.takes(state) {
        return Ok(false);
    }
    conn.prepare_cached("DELETE FROM deliveries WHERE subscription_id = ?1 AND event_id = ?2")?
        .execute(params![sub, event])?;
    // The backfill is one lane (its own, paced): its rows are all lane 0.
    let lane_no = if lane == "backfill" { 0 } else { d.lane };
    conn.prepare_cached(
        "INSERT INTO deliveries (tenant, subscription_id, event_id, event_type, state, next_attempt_at, \
         updated_at, enqueued_at, lane, lane_no, key_hash) \
         VALUES (?1, ?2, ?3, ?4, 'pending', ?5, ?5, ?5, ?6, ?7, ?8)",
    )?
    .execute(params![
        d.tenant.as_str(),
        sub,
        event,
        d.event_type.as_str(),
        now,
        lane,
        lane_no,
        d.key_hash()
    ])?;
    Ok(true)
}

/// A lane of a subscription: one of its live lanes (0 to lanes - 1:
/// deliveries from fan-out and replay), or its backfill lane after
/// re-enabling (paced, one lane).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Lane {
    /// Live lane number n.
    Live(u16),
    /// The backfill lane.
    Backfill,
}

impl Lane {
    /// The stored `lane` and `lane_no` columns.
    fn columns(self) -> (&'static str, u16) {
        match self {
            Self::Live(n) => ("live", n),
            Self::Backfill => ("backfill", 0),
        }
    }

    fn parse(raw: &str, n: u16) -> rusqlite::Result<Self> {
        match raw {
            "live" => Ok(Self::Live(n)),
            "backfill" => Ok(Self::Backfill),
            _ => Err(corrupt("lane")),
        }
    }
}

/// A lane's head as read: the delivery with its event, and whether it
/// waits for an older pending delivery of its ordering key on another
/// lane (after a change of lanes, G5).
pub type Head = (Delivery, Option<Event>, bool);

impl SqliteStore {
    /// The head of a lane: its oldest pending delivery.
    #[cfg(test)]
    pub(crate) async fn lane_head(
        &self,
        sub: &SubscriptionId,
        lane: Lane,
    ) -> StoreResult<Option<Delivery>> {
        Ok(self
            .lane_head_with_event(sub, lane)
            .await?
            .map(|(d, _, _)| d))
    }

    /// The head of a lane with its archived event, read together: the lane
    /// hands the event to the engine, which then reads only the
    /// subscription. (Every read transaction after a commit starts from an
    /// emptied page cache, so one read instead of two is measurably
    /// cheaper.) The event is `None` when it is no longer archived.
    ///
    /// A head row that does not parse is parked with the reason (and
    /// reported), and the next row is read: one bad record never stops its
    /// lane. Each round parks a pending row, so this ends.
    pub async fn lane_head_with_event(
        &self,
        sub: &SubscriptionId,
        lane: Lane,
    ) -> StoreResult<Option<Head>> {
        loop {
            match self.read_lane_head(sub, lane).await? {
                None => return Ok(None),
                Some((_, Ok(head))) => return Ok(Some(head)),
                Some((seq, Err(why))) => self.park_unreadable(seq, &why.to_string()).await?,
            }
        }
    }

    /// Parks a queued delivery whose row does not parse, with the reason.
    async fn park_unreadable(&self, seq: i64, why: &str) -> StoreResult<()> {
        crate::record::unreadable("delivery", &seq.to_string(), why);
        let reason = format!("the stored delivery does not parse: {why}");
        let now = ms(OffsetDateTime::now_utc());
        self.write_relaxed(move |conn| {
            conn.prepare_cached(
                "UPDATE deliveries SET state = 'parked', reason = ?2, parked_at = ?3, updated_at = ?3 \
                 WHERE seq = ?1 AND state = 'pending'",
            )?
            .execute(params![seq, reason, now])
            .map(|_| ())
        })
        .await
    }

    /// The head row of a lane: its key, and the delivery and event read
    /// from it, or why they do not parse.
    #[allow(clippy::type_complexity)]
    async fn read_lane_head(
        &self,
        sub: &SubscriptionId,
        lane: Lane,
    ) -> StoreResult<Option<(i64, rusqlite::Result<Head>)>> {
        let sub = sub.clone();
        let (lane, lane_no) = lane.columns();
        self.read(move |conn| {
            conn.prepare_cached(
                "SELECT d.seq, d.tenant, d.subscription_id, d.event_id, d.event_type, d.attempts, \
                 d.first_attempt_at, d.next_attempt_at, d.lane_no, e.created_at, e.payload, e.ordering_key, \
                 e.traceparent, \
                 d.key_hash IS NOT NULL AND EXISTS (SELECT 1 FROM deliveries o \
                   WHERE o.subscription_id = d.subscription_id AND o.key_hash = d.key_hash \
                   AND o.state = 'pending' AND o.seq < d.seq AND o.lane = d.lane) \
                 FROM deliveries d LEFT JOIN events e ON e.tenant = d.tenant AND e.id = d.event_id \
                 WHERE d.subscription_id = ?1 AND d.lane = ?2 AND d.lane_no = ?3 AND d.state = 'pending' \
                 ORDER BY d.seq LIMIT 1",
            )?
            .query_row(params![sub.as_str(), lane, lane_no], |r| {
                let head = head_row(r).and_then(|(d, e)| Ok((d, e, r.get::<_, bool>(13)?)));
                Ok((r.get::<_, i64>(0)?, head))
            })
            .optional()
        })
        .await
    }

    /// Every lane with pending deliveries (read at start to resume work).
    pub async fn pending_lanes(&self) -> StoreResult<Vec<(TenantId, SubscriptionId, Lane)>> {
        self.read(|conn| {
            conn.prepare_cached(
                "SELECT DISTINCT tenant, subscription_id, lane, lane_no FROM deliveries WHERE state = 'pending'",
            )?
            .query_map([], |r| {
                let lane = || -> rusqlite::Result<_> {
                    Ok((
                        tenant_at(r, 0)?,
                        SubscriptionId::parse(&r.get::<_, String>(1)?)
                            .map_err(|_| corrupt("subscription id"))?,
                        Lane::parse(&r.get::<_, String>(2)?, r.get(3)?)?,
                    ))
                };
                Ok((r.get::<_, String>(1)?, lane()))
            })
            .and_then(|rows| readable("lane", rows))
        })
        .await
    }
}
