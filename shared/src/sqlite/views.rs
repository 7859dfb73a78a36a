//! Dead letters and delivery views over SQLite: parked rows listed in
//! queue order (`seq`) and replayed to the end of their lanes; each delivery's
//! record for `GET /events/{id}`.

use async_trait::async_trait;
use rusqlite::{params, Row};

use super::{corrupt, from_ms, readable, SqliteStore};
use crate::domain::{
    DeadLetter, DeliveryRecord, DeliveryState, EventId, EventType, Overview, SubscriptionId,
    TenantId,
};
use crate::ports::{DeadLetters, DeliveryViews, StoreResult};

/// A tenant's parked deliveries after a key, in queue order (`seq`), of one
/// subscription or all: read from the partial index of parked rows.
pub(super) const DEAD_LETTERS: &str =
    "SELECT seq, subscription_id, event_id, event_type, attempts, last_status, reason, \
     first_attempt_at, parked_at FROM deliveries \
     WHERE tenant = ?1 AND state = 'parked' AND seq > ?2 \
     AND (?3 IS NULL OR subscription_id = ?3) ORDER BY seq LIMIT ?4";

fn dead_letter_row(r: &Row<'_>) -> rusqlite::Result<(i64, DeadLetter)> {
    Ok((
        r.get(0)?,
        DeadLetter {
            subscription_id: SubscriptionId::parse(&r.get::<_, String>(1)?)
                .map_err(|_| corrupt("subscription id"))?,
            event_id: EventId::parse(&r.get::<_, String>(2)?).map_err(|_| corrupt("event id"))?,
            event_type: EventType::parse(&r.get::<_, String>(3)?).map_err(|_| corrupt("type"))?,
            attempts: r.get(4)?,
            last_status_code: r.get(5)?,
            reason: r.get(6)?,
            first_attempt_at: r.get::<_, Option<i64>>(7)?.map(from_ms),
            parked_at: from_ms(r.get(8)?),
        },
    ))
}

/// A delivery's record (`state, attempts, last_status, next_attempt_at,
/// first_attempt_at, lane_no` from column 1).
fn record_row(r: &Row<'_>) -> rusqlite::Result<DeliveryRecord> {
    Ok(DeliveryRecord {
        state: DeliveryState::parse(&r.get::<_, String>(1)?)
            .ok_or_else(|| corrupt("delivery state"))?,
        attempts: r.get(2)?,
        last_status_code: r.get(3)?,
        next_attempt_at: Some(from_ms(r.get(4)?)),
        first_attempt_at: r.get::<_, Option<i64>>(5)?.map(from_ms),
        lane: Some(r.get(6)?),
    })
}

#[async_trait]
impl DeadLetters for SqliteStore {
    async fn list(
        &self,
        tenant: &TenantId,
        subscription: Option<&SubscriptionId>,
        after: Option<i64>,
        limit: usize,
    ) -> StoreResult<Vec<(i64, DeadLetter)>> {
        let tenant = tenant.clone();
        let sub = subscription.map(|s| s.as_str().to_owned());
        self.read(move |conn| {
            conn.prepare_cached(DEAD_LETTERS)?
                .query_map(
                    params![tenant.as_str(), after.unwrap_or(0), sub, limit as i64],
                    |r| Ok((r.get::<_, i64>(0)?, dead_letter_row(r))),
                )
                .and_then(|rows| readable("parked delivery", rows))
        })
        .await
    }
}

#[async_trait]
impl DeliveryViews for SqliteStore {
    async fn of_event(
        &self,
        tenant: &TenantId,
        event_id: &EventId,
    ) -> StoreResult<Vec<(SubscriptionId, DeliveryRecord)>> {
        let (tenant, event_id) = (tenant.clone(), event_id.clone());
        self.read(move |conn| {
            conn.prepare_cached(
                "SELECT subscription_id, state, attempts, last_status, next_attempt_at, first_attempt_at, lane_no \
                 FROM deliveries WHERE tenant = ?1 AND event_id = ?2 ORDER BY subscription_id",
            )?
            .query_map(params![tenant.as_str(), event_id.as_str()], |r| {
                let key: String = r.get(0)?;
                let record = || -> rusqlite::Result<_> {
                    let sub = SubscriptionId::parse(&key).map_err(|_| corrupt("subscription id"))?;
                    Ok((sub, record_row(r)?))
                };
                Ok((key.clone(), record()))
            })
            .and_then(|rows| readable("delivery", rows))
        })
        .await
    }

    async fn overview(&self, parked: bool) -> StoreResult<Overview> {
        self.overview_now(parked).await
    }
}
