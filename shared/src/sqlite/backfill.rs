//! The embedded backfill: after a subscription is re-enabled, its tenant's
//! archived events since its failure streak began are queued again, one
//! step at a time, on the subscription's backfill lane. Each step skips
//! events the subscription already has (delivered, or pending on a lane)
//! and events its filters do not match; the job's cursor lives in the
//! database, so a restart resumes where it stopped.

use rusqlite::{params, Connection, OptionalExtension};

use super::{corrupt, from_ms, ms, SqliteStore};
use crate::domain::Subscription;
use crate::domain::{EventFilter, EventType, SubscriptionId, TenantId};
use crate::ports::{Backfills, StoreResult};
use async_trait::async_trait;
use time::OffsetDateTime;

/// Events scanned per step at most (skipped ones included).
const SCAN: i64 = 200;

/// A backfill in progress.
#[derive(Debug, Clone)]
pub struct BackfillJob {
    /// The re-enabled subscription.
    pub subscription_id: SubscriptionId,
    /// Its tenant.
    pub tenant: TenantId,
    /// When the backfill started (the pace ramps up from then).
    pub started_at: time::OffsetDateTime,
}

/// What one step did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackfillStep {
    /// Queued one delivery on the backfill lane.
    Queued,
    /// Scanned events without queueing one; call again.
    Skipped,
    /// Nothing left: the job is gone.
    Done,
}

struct Cursor {
    tenant: String,
    until: i64,
    at: i64,
    id: String,
}

fn filters_of(conn: &Connection, sub: &str) -> rusqlite::Result<Option<Vec<EventFilter>>> {
    let raw: Option<String> = conn
        .query_row(
            "SELECT filters FROM subscriptions WHERE id = ?1 AND deleted_at IS NULL AND status = 'active'",
            params![sub],
            |r| r.get(0),
        )
        .optional()?;
    let Some(raw) = raw else { return Ok(None) };
    let list: Vec<String> = serde_json::from_str(&raw).map_err(|_| corrupt("filters"))?;
    list.iter()
        .map(|f| EventFilter::parse(f).map_err(|_| corrupt("filter")))
        .collect::<rusqlite::Result<_>>()
        .map(Some)
}

/// Whether the subscription already has this event delivered or queued.
fn has_it(conn: &Connection, sub: &str, event: &str) -> rusqlite::Result<bool> {
    conn.query_row(
        "SELECT EXISTS (SELECT 1 FROM deliveries WHERE subscription_id = ?1 AND event_id = ?2 \
         AND state IN ('delivered', 'pending'))",
        params![sub, event],
        |r| r.get(0),
    )
}

/// Queues the backfill delivery: a fresh row at the end of the backfill lane.
fn queue(conn: &Connection, c: &Cursor, sub: &str, event: &str, ty: &str) -> rusqlite::Result<()> {
    let now = ms(time::OffsetDateTime::now_utc());
    conn.execute(
        "DELETE FROM deliveries WHERE subscription_id = ?1 AND event_id = ?2",
        params![sub, event],
    )?;
    conn.execute(
        "INSERT INTO deliveries (tenant, subscription_id, event_id, event_type, state, next_attempt_at, updated_at, lane) \
         VALUES (?1, ?2, ?3, ?4, 'pending', ?5, ?5, 'backfill')",
        params![c.tenant, sub, event, ty, now],
    )
    .map(|_| ())
}

fn step(conn: &Connection, sub: &str) -> rusqlite::Result<BackfillStep> {
    let cursor = conn
        .query_row(
            "SELECT tenant, until_at, cursor_at, cursor_id FROM backfill_jobs WHERE subscription_id = ?1",
            params![sub],
            |r| Ok(Cursor { tenant: r.get(0)?, until: r.get(1)?, at: r.get(2)?, id: r.get(3)? }),
        )
        .optional()?;
    let Some(mut c) = cursor else {
        return Ok(BackfillStep::Done);
    };
    let filters = filters_of(conn, sub).map_err(|why| {
        // Its filters cannot be read: the job ends, the subscription is
        // kept as it is.
        crate::record::unreadable("subscription", sub, &why.to_string());
    });
    let Ok(Some(filters)) = filters else {
        conn.execute(
            "DELETE FROM backfill_jobs WHERE subscription_id = ?1",
            params![sub],
        )?;
        return Ok(BackfillStep::Done);
    };
    let rows: Vec<(String, String, i64)> = conn
        .prepare_cached(
            "SELECT id, type, created_at FROM events WHERE tenant = ?1 AND created_at <= ?2 \
             AND (created_at > ?3 OR (created_at = ?3 AND id > ?4)) ORDER BY created_at, id LIMIT ?5",
        )?
        .query_map(params![c.tenant, c.until, c.at, c.id, SCAN], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
        .collect::<rusqlite::Result<_>>()?;
    if rows.is_empty() {
        conn.execute(
            "DELETE FROM backfill_jobs WHERE subscription_id = ?1",
            params![sub],
        )?;
        return Ok(BackfillStep::Done);
    }
    let mut result = BackfillStep::Skipped;
    for (id, ty, at) in rows {
        (c.at, c.id) = (at, id.clone());
        let matches = match EventType::parse(&ty) {
            Ok(t) => filters.iter().any(|f| f.matches(&t)),
            Err(e) => {
                crate::record::unreadable("event", &id, &e.to_string());
                false
            }
        };
        if matches && !has_it(conn, sub, &id)? {
            queue(conn, &c, sub, &id, &ty)?;
            result = BackfillStep::Queued;
            break;
        }
    }
    conn.execute(
        "UPDATE backfill_jobs SET cursor_at = ?2, cursor_id = ?3 WHERE subscription_id = ?1",
        params![sub, c.at, c.id],
    )?;
    Ok(result)
}

impl SqliteStore {
    /// Every backfill in progress.
    pub async fn backfill_jobs(&self) -> StoreResult<Vec<BackfillJob>> {
        self.read(|conn| {
            conn.prepare_cached("SELECT subscription_id, tenant, started_at FROM backfill_jobs")?
                .query_map([], |r| {
                    let job = || -> rusqlite::Result<_> {
                        Ok(BackfillJob {
                            subscription_id: SubscriptionId::parse(&r.get::<_, String>(0)?)
                                .map_err(|_| corrupt("subscription id"))?,
                            tenant: TenantId::parse(&r.get::<_, String>(1)?)
                                .map_err(|_| corrupt("tenant"))?,
                            started_at: from_ms(r.get(2)?),
                        })
                    };
                    Ok((r.get::<_, String>(0)?, job()))
                })
                .and_then(|rows| super::readable("backfill job", rows))
        })
        .await
    }

    /// Queues the next missed event of a backfill, if any.
    pub async fn backfill_step(&self, sub: &SubscriptionId) -> StoreResult<BackfillStep> {
        let sub = sub.as_str().to_owned();
        self.write_relaxed(move |conn| step(conn, &sub)).await
    }
}

#[async_trait]
impl Backfills for SqliteStore {
    async fn start(
        &self,
        sub: &Subscription,
        since: OffsetDateTime,
        until: OffsetDateTime,
    ) -> StoreResult<()> {
        let (id, tenant) = (sub.id.clone(), sub.tenant.clone());
        let (since, until) = (ms(since), ms(until));
        self.write(move |conn| {
            conn.execute(
                "INSERT OR REPLACE INTO backfill_jobs (subscription_id, tenant, until_at, cursor_at, cursor_id, started_at) \
                 VALUES (?1, ?2, ?3, ?4, '', ?3)",
                params![id.as_str(), tenant.as_str(), until, since - 1],
            )
            .map(|_| ())
        })
        .await
    }

    async fn waiting(&self, sub: &Subscription) -> StoreResult<u64> {
        let id = sub.id.clone();
        self.read(move |conn| {
            conn.query_row(
                "SELECT COUNT(*) FROM deliveries WHERE subscription_id = ?1 AND state IN ('pending', 'held')",
                params![id.as_str()],
                |r| r.get::<_, i64>(0),
            )
            .map(|n| n as u64)
        })
        .await
    }
}
