//! `AttemptLog` over SQLite: an append-only table read newest first.

use async_trait::async_trait;
use rusqlite::{params, Connection};

use super::{corrupt, from_ms, ms, readable, tenant_at, SqliteStore};
use crate::domain::{Attempt, AttemptId, EventId, EventType, SubscriptionId, TenantId};
use crate::ports::{AttemptLog, StoreResult};

/// Appends one attempt (inside the caller's write).
pub(super) fn insert(conn: &Connection, a: &Attempt) -> rusqlite::Result<()> {
    conn.prepare_cached(
        "INSERT INTO attempts (id, tenant, subscription_id, event_id, attempt, started_at, \
         duration_ms, status_code, outcome, error, response_excerpt, event_type, response_headers) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
    )?
    .execute(params![
        a.id.as_str(),
        a.tenant.as_str(),
        a.subscription_id.as_str(),
        a.event_id.as_str(),
        a.attempt,
        ms(a.started_at),
        a.duration_ms as i64,
        a.status_code,
        a.outcome,
        a.error,
        a.response_excerpt,
        a.event_type.as_ref().map(|t| t.as_str()),
        a.response_headers
    ])
    .map(|_| ())
}

#[async_trait]
impl AttemptLog for SqliteStore {
    async fn record(&self, a: &Attempt) -> StoreResult<()> {
        let a = a.clone();
        self.write_relaxed(move |conn| insert(conn, &a)).await
    }

    async fn list(
        &self,
        tenant: &TenantId,
        subscription: &SubscriptionId,
        before: Option<i64>,
        limit: usize,
    ) -> StoreResult<Vec<(i64, Attempt)>> {
        let (tenant, sub) = (tenant.clone(), subscription.clone());
        self.read(move |conn| {
            conn.prepare_cached(
                "SELECT seq, id, tenant, subscription_id, event_id, attempt, started_at, duration_ms, \
                 status_code, outcome, error, response_excerpt, event_type, response_headers FROM attempts \
                 WHERE tenant = ?1 AND subscription_id = ?2 AND seq < ?3 ORDER BY seq DESC LIMIT ?4",
            )?
            .query_map(
                params![tenant.as_str(), sub.as_str(), before.unwrap_or(i64::MAX), limit as i64],
                |r| Ok((r.get::<_, i64>(0)?, attempt_row(r))),
            )
            .and_then(|rows| readable("attempt", rows))
        })
        .await
    }
}

fn attempt_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<(i64, Attempt)> {
    Ok((
        r.get(0)?,
        Attempt {
            id: AttemptId::parse(&r.get::<_, String>(1)?).map_err(|_| corrupt("attempt id"))?,
            tenant: tenant_at(r, 2)?,
            subscription_id: SubscriptionId::parse(&r.get::<_, String>(3)?)
                .map_err(|_| corrupt("subscription id"))?,
            event_id: EventId::parse(&r.get::<_, String>(4)?).map_err(|_| corrupt("event id"))?,
            event_type: r
                .get::<_, Option<String>>(12)?
                .map(|t| EventType::parse(&t).map_err(|_| corrupt("event type")))
                .transpose()?,
            attempt: r.get(5)?,
            started_at: from_ms(r.get(6)?),
            duration_ms: r.get::<_, i64>(7)? as u64,
            status_code: r.get(8)?,
            outcome: r.get(9)?,
            error: r.get(10)?,
            response_excerpt: r.get(11)?,
            response_headers: r.get(13)?,
        },
    ))
}
