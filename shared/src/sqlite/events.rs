//! `EventArchive` over SQLite, plus the fan-out intake the embedded runner
//! drains: accepting an event writes the archive row and its fan-out job in
//! one transaction.

use async_trait::async_trait;
use rusqlite::{params, OptionalExtension, Row};
use time::{Duration, OffsetDateTime};

use super::{corrupt, from_ms, ms, tenant_at, SqliteStore};
use crate::domain::{
    ArchivePosition, ArchivedEvent, Event, EventId, EventType, OrderingKey, RecentEvents,
    SubscriptionId, TenantId,
};
use crate::ports::{Accepted, EventArchive, StoreError, StoreResult};

/// How long an event id stays reserved for idempotent publish (G12).
const IDEMPOTENCY_WINDOW: Duration = Duration::hours(24);

/// Reads an event from eight columns starting at `i`.
fn event_at(r: &Row<'_>, i: usize) -> rusqlite::Result<Event> {
    Ok(Event {
        tenant: tenant_at(r, i)?,
        id: EventId::parse(&r.get::<_, String>(i + 1)?).map_err(|_| corrupt("event id"))?,
        event_type: EventType::parse(&r.get::<_, String>(i + 2)?).map_err(|_| corrupt("type"))?,
        created_at: from_ms(r.get(i + 3)?),
        payload: bytes::Bytes::from(r.get::<_, Vec<u8>>(i + 4)?),
        ordering_key: ordering_key(r, i + 5)?,
        traceparent: r.get(i + 6)?,
        only_for: subscription_at(r, i + 7)?,
    })
}

/// A test event's subscription column.
fn subscription_at(r: &Row<'_>, i: usize) -> rusqlite::Result<Option<SubscriptionId>> {
    r.get::<_, Option<String>>(i)?
        .map(|s| SubscriptionId::parse(&s).map_err(|_| corrupt("subscription id")))
        .transpose()
}

/// An ordering key column.
pub(super) fn ordering_key(r: &Row<'_>, i: usize) -> rusqlite::Result<Option<OrderingKey>> {
    r.get::<_, Option<String>>(i)?
        .map(|k| OrderingKey::parse(&k).map_err(|_| corrupt("ordering key")))
        .transpose()
}

fn from_row(r: &Row<'_>) -> rusqlite::Result<Event> {
    event_at(r, 0)
}

const SELECT: &str =
    "SELECT tenant, id, type, created_at, payload, ordering_key, traceparent, only_for FROM events";

/// The outcome of accepting inside the writer.
enum Outcome {
    New,
    Duplicate(Event),
    TooOld,
}

#[async_trait]
impl EventArchive for SqliteStore {
    async fn accept(&self, event: Event) -> StoreResult<Accepted> {
        let e = event.clone();
        let outcome = self
            .write(move |conn| {
                let existing = conn
                    .prepare_cached(&format!("{SELECT} WHERE tenant = ?1 AND id = ?2"))?
                    .query_row(params![e.tenant.as_str(), e.id.as_str()], from_row)
                    .optional()?;
                if let Some(old) = existing {
                    return Ok(if e.created_at - old.created_at < IDEMPOTENCY_WINDOW {
                        Outcome::Duplicate(old)
                    } else {
                        Outcome::TooOld
                    });
                }
                conn.prepare_cached(
                    "INSERT INTO events (tenant, id, type, created_at, payload, ordering_key, \
                     traceparent, only_for) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                )?
                .execute(params![
                    e.tenant.as_str(),
                    e.id.as_str(),
                    e.event_type.as_str(),
                    ms(e.created_at),
                    e.payload.as_ref(),
                    e.ordering_key.as_ref().map(OrderingKey::as_str),
                    e.traceparent,
                    e.only_for.as_ref().map(SubscriptionId::as_str)
                ])?;
                conn.prepare_cached("INSERT INTO fanout_jobs (tenant, event_id) VALUES (?1, ?2)")?
                    .execute(params![e.tenant.as_str(), e.id.as_str()])?;
                Ok(Outcome::New)
            })
            .await?;
        match outcome {
            Outcome::New => Ok(Accepted::New(event)),
            Outcome::Duplicate(old) => Ok(Accepted::Duplicate(old)),
            Outcome::TooOld => Err(StoreError::Conflict(
                "this event id was used more than 24 hours ago".into(),
            )),
        }
    }

    async fn get(&self, tenant: &TenantId, id: &EventId) -> StoreResult<Option<Event>> {
        let (tenant, id) = (tenant.clone(), id.clone());
        self.read(move |conn| {
            conn.prepare_cached(&format!("{SELECT} WHERE tenant = ?1 AND id = ?2"))?
                .query_row(params![tenant.as_str(), id.as_str()], from_row)
                .optional()
        })
        .await
    }

    async fn window(
        &self,
        tenant: &TenantId,
        after: &ArchivePosition,
        until: OffsetDateTime,
        limit: usize,
    ) -> StoreResult<Vec<ArchivedEvent>> {
        let (tenant, after) = (tenant.clone(), after.clone());
        let until = ms(until);
        self.read(move |conn| {
            conn.prepare_cached(
                "SELECT id, type, created_at, ordering_key, only_for FROM events WHERE tenant = ?1 AND created_at <= ?2 \
                 AND (created_at > ?3 OR (created_at = ?3 AND id > ?4)) ORDER BY created_at, id LIMIT ?5",
            )?
            .query_map(
                params![tenant.as_str(), until, ms(after.at), after.id, limit as i64],
                archived_row,
            )
            .and_then(|rows| super::readable("event", rows))
        })
        .await
    }

    async fn recent(
        &self,
        tenant: &TenantId,
        query: &RecentEvents,
    ) -> StoreResult<Vec<ArchivedEvent>> {
        let (tenant, q) = (tenant.clone(), query.clone());
        self.read(move |conn| {
            let before = q.before.as_ref();
            conn.prepare_cached(
                "SELECT id, type, created_at, ordering_key, only_for FROM events WHERE tenant = ?1 \
                 AND created_at BETWEEN ?2 AND ?3 AND (?4 IS NULL OR type = ?4) \
                 AND (?5 IS NULL OR created_at < ?5 OR (created_at = ?5 AND id < ?6)) \
                 ORDER BY created_at DESC, id DESC LIMIT ?7",
            )?
            .query_map(
                params![
                    tenant.as_str(),
                    ms(q.since),
                    ms(q.until),
                    q.event_type.as_ref().map(|t| t.as_str()),
                    before.map(|b| ms(b.at)),
                    before.map(|b| b.id.as_str()),
                    q.limit as i64
                ],
                archived_row,
            )
            .and_then(|rows| super::readable("event", rows))
        })
        .await
    }
}

/// An archived event's row (id, type, time, ordering key, test target),
/// keyed by its
/// id for [`super::readable`].
fn archived_row(r: &Row<'_>) -> rusqlite::Result<(String, rusqlite::Result<ArchivedEvent>)> {
    let key: String = r.get(0)?;
    let event = || -> rusqlite::Result<_> {
        Ok(ArchivedEvent {
            id: EventId::parse(&key).map_err(|_| corrupt("event id"))?,
            event_type: EventType::parse(&r.get::<_, String>(1)?).map_err(|_| corrupt("type"))?,
            created_at: from_ms(r.get(2)?),
            ordering_key: ordering_key(r, 3)?,
            only_for: subscription_at(r, 4)?,
        })
    };
    Ok((key.clone(), event()))
}

impl SqliteStore {
    /// The oldest fan-out jobs, in acceptance order, with their events. A
    /// job whose event does not parse cannot be fanned out: it is reported
    /// and its job closed, and the event row is kept.
    pub async fn pending_fan_outs(&self, limit: usize) -> StoreResult<Vec<(i64, Event)>> {
        let rows = self
            .read(move |conn| {
                conn.prepare_cached(
                    "SELECT j.seq, e.tenant, e.id, e.type, e.created_at, e.payload, e.ordering_key, \
                     e.traceparent, e.only_for FROM fanout_jobs j \
                     JOIN events e ON e.tenant = j.tenant AND e.id = j.event_id ORDER BY j.seq LIMIT ?1",
                )?
                .query_map(params![limit as i64], |r| {
                    Ok((r.get::<_, i64>(0)?, event_at(r, 1)))
                })?
                .collect::<rusqlite::Result<Vec<_>>>()
            })
            .await?;
        let mut jobs = Vec::with_capacity(rows.len());
        let mut unreadable = Vec::new();
        for (seq, event) in rows {
            match event {
                Ok(e) => jobs.push((seq, e)),
                Err(why) => {
                    crate::record::unreadable(
                        "event",
                        &format!("fan-out job {seq}"),
                        &why.to_string(),
                    );
                    unreadable.push(seq);
                }
            }
        }
        if !unreadable.is_empty() {
            self.complete_fan_outs(unreadable).await?;
        }
        Ok(jobs)
    }

    /// The oldest fan-out jobs' ids, in acceptance order, without their
    /// events' bodies. A job whose ids do not parse is reported and closed.
    pub async fn fan_out_job_ids(
        &self,
        limit: usize,
    ) -> StoreResult<Vec<(i64, TenantId, EventId)>> {
        let rows = self
            .read(move |conn| {
                conn.prepare_cached(
                    "SELECT seq, tenant, event_id FROM fanout_jobs ORDER BY seq LIMIT ?1",
                )?
                .query_map(params![limit as i64], |r| {
                    Ok((
                        r.get::<_, i64>(0)?,
                        r.get::<_, String>(1)?,
                        r.get::<_, String>(2)?,
                    ))
                })?
                .collect::<rusqlite::Result<Vec<_>>>()
            })
            .await?;
        let mut jobs = Vec::with_capacity(rows.len());
        let mut unreadable = Vec::new();
        for (seq, tenant, id) in rows {
            match (TenantId::parse(&tenant), EventId::parse(&id)) {
                (Ok(tenant), Ok(id)) => jobs.push((seq, tenant, id)),
                _ => {
                    let why = "its tenant or event id does not parse";
                    crate::record::unreadable("fan-out job", &seq.to_string(), why);
                    unreadable.push(seq);
                }
            }
        }
        if !unreadable.is_empty() {
            self.complete_fan_outs(unreadable).await?;
        }
        Ok(jobs)
    }

    /// Marks fan-out jobs done (after their deliveries are enqueued).
    pub async fn complete_fan_outs(&self, seqs: Vec<i64>) -> StoreResult<()> {
        self.write_relaxed(move |conn| {
            let mut stmt = conn.prepare_cached("DELETE FROM fanout_jobs WHERE seq = ?1")?;
            for s in seqs {
                stmt.execute(params![s])?;
            }
            Ok(())
        })
        .await
    }

    /// Deletes events, finished deliveries and attempts older than the
    /// retention window (14 days); returns how many rows went.
    pub async fn purge_expired(
        &self,
        now: OffsetDateTime,
        retention: Duration,
    ) -> StoreResult<usize> {
        let cutoff = ms(now - retention);
        self.write_relaxed(move |conn| {
            let mut n = conn.execute(
                "DELETE FROM deliveries WHERE state != 'pending' AND updated_at < ?1",
                params![cutoff],
            )?;
            n += conn.execute("DELETE FROM attempts WHERE started_at < ?1", params![cutoff])?;
            n += conn.execute(
                "DELETE FROM events WHERE created_at < ?1 AND NOT EXISTS (\
                   SELECT 1 FROM deliveries d WHERE d.tenant = events.tenant AND d.event_id = events.id AND d.state = 'pending') \
                 AND NOT EXISTS (SELECT 1 FROM fanout_jobs j WHERE j.tenant = events.tenant AND j.event_id = events.id)",
                params![cutoff],
            )?;
            Ok(n)
        })
        .await
    }
}
