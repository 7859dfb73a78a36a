//! Backfills over SQLite: one row per backfill in progress, holding its
//! window and how far it got, so a restart resumes where it stopped. The
//! engine runs the passes ([`crate::engine::Engine::backfill_pass`]); the
//! embedded runtime lists the rows to know which to run.

use async_trait::async_trait;
use rusqlite::{params, OptionalExtension, Row};

use super::{corrupt, from_ms, ms, readable, tenant_at, SqliteStore};
use crate::domain::{ArchivePosition, BackfillJob, Subscription, SubscriptionId, TenantId};
use crate::ports::{Backfills, StoreResult};

const COLUMNS: &str = "subscription_id, tenant, cursor_at, cursor_id, until_at, started_at";

fn job_row(r: &Row<'_>) -> rusqlite::Result<BackfillJob> {
    Ok(BackfillJob {
        subscription_id: SubscriptionId::parse(&r.get::<_, String>(0)?)
            .map_err(|_| corrupt("subscription id"))?,
        tenant: tenant_at(r, 1)?,
        after: ArchivePosition {
            at: from_ms(r.get(2)?),
            id: r.get(3)?,
        },
        until: from_ms(r.get(4)?),
        started_at: from_ms(r.get(5)?),
    })
}

impl SqliteStore {
    /// Every backfill in progress.
    pub async fn backfill_jobs(&self) -> StoreResult<Vec<BackfillJob>> {
        self.read(|conn| {
            conn.prepare_cached(&format!("SELECT {COLUMNS} FROM backfill_jobs"))?
                .query_map([], |r| Ok((r.get::<_, String>(0)?, job_row(r))))
                .and_then(|rows| readable("backfill job", rows))
        })
        .await
    }
}

#[async_trait]
impl Backfills for SqliteStore {
    async fn start(&self, job: &BackfillJob) -> StoreResult<()> {
        let job = job.clone();
        self.write(move |conn| {
            conn.execute(
                &format!("INSERT OR REPLACE INTO backfill_jobs ({COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6)"),
                params![
                    job.subscription_id.as_str(),
                    job.tenant.as_str(),
                    ms(job.after.at),
                    job.after.id,
                    ms(job.until),
                    ms(job.started_at)
                ],
            )
            .map(|_| ())
        })
        .await
    }

    async fn load(
        &self,
        tenant: &TenantId,
        sub: &SubscriptionId,
    ) -> StoreResult<Option<BackfillJob>> {
        let (tenant, sub) = (tenant.clone(), sub.clone());
        self.read(move |conn| {
            conn.prepare_cached(&format!(
                "SELECT {COLUMNS} FROM backfill_jobs WHERE subscription_id = ?1 AND tenant = ?2"
            ))?
            .query_row(params![sub.as_str(), tenant.as_str()], job_row)
            .optional()
        })
        .await
    }

    async fn save(&self, job: &BackfillJob) -> StoreResult<()> {
        let job = job.clone();
        self.write_relaxed(move |conn| {
            conn.prepare_cached(
                "UPDATE backfill_jobs SET cursor_at = ?2, cursor_id = ?3 \
                 WHERE subscription_id = ?1 AND started_at = ?4",
            )?
            .execute(params![
                job.subscription_id.as_str(),
                ms(job.after.at),
                job.after.id,
                ms(job.started_at)
            ])
            .map(|_| ())
        })
        .await
    }

    async fn end(&self, job: &BackfillJob) -> StoreResult<()> {
        let job = job.clone();
        self.write(move |conn| {
            conn.prepare_cached(
                "DELETE FROM backfill_jobs WHERE subscription_id = ?1 AND tenant = ?2 \
                 AND started_at = ?3",
            )?
            .execute(params![
                job.subscription_id.as_str(),
                job.tenant.as_str(),
                ms(job.started_at)
            ])
            .map(|_| ())
        })
        .await
    }

    async fn failing(&self, sub: &Subscription) -> StoreResult<u64> {
        let id = sub.id.clone();
        self.read(move |conn| {
            conn.query_row(
                "SELECT COUNT(*) FROM deliveries d WHERE d.subscription_id = ?1 AND d.state = 'pending' \
                 AND d.lane = 'live' AND EXISTS (SELECT 1 FROM deliveries h \
                   WHERE h.subscription_id = d.subscription_id AND h.lane = 'live' \
                   AND h.lane_no = d.lane_no AND h.state = 'pending' AND h.seq <= d.seq \
                   AND (h.last_status IS NOT NULL OR h.last_error IS NOT NULL))",
                params![id.as_str()],
                |r| r.get::<_, i64>(0),
            )
            .map(|n| n as u64)
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
