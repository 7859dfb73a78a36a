//! `SubscriptionStore` and `Suspensions` over SQLite: rows with
//! tombstones, read and written through the one record mapping
//! ([`SubscriptionRecord`]), and a filter index (`subscription_filters`) so
//! fan-out matches by value, not by scan.

use async_trait::async_trait;
use rusqlite::{params, Connection, OptionalExtension, Row};

use super::{corrupt, ms, readable, SqliteStore};
use crate::domain::{EventType, Health, Subscription, SubscriptionId, TenantId};
use crate::health::{HealthWrite, StatusChange};
use crate::ports::{StoreResult, SubscriptionStore, Suspensions};
use crate::record::SubscriptionRecord;

const COLUMNS: &str = "id, tenant, url, filters, description, metadata, secret, prev_secret, \
     prev_secret_expires_at, status, health, suspended_at, status_reason, created_at, updated_at, \
     lanes, rate_limit, options";

/// A row as the stored record, then the one conversion back into the
/// domain ([`SubscriptionRecord`], shared with the AWS adapter).
fn from_row(r: &Row<'_>) -> rusqlite::Result<Subscription> {
    let rec = SubscriptionRecord {
        id: r.get(0)?,
        tenant: r.get(1)?,
        url: r.get(2)?,
        filters: json_column(r, 3, "filters")?,
        description: r.get(4)?,
        metadata: json_column(r, 5, "metadata")?,
        secret: r.get(6)?,
        prev_secret: r.get(7)?,
        prev_secret_expires_at: r.get(8)?,
        status: r.get(9)?,
        health: json_column(r, 10, "health")?,
        suspended_at: r.get(11)?,
        status_reason: r.get(12)?,
        created_at: r.get(13)?,
        updated_at: r.get(14)?,
        lanes: r.get(15)?,
        rate_limit: r.get(16)?,
        options: r.get(17)?,
    };
    Subscription::try_from(rec).map_err(|e| corrupt(&e.0))
}

/// A column holding JSON.
fn json_column<T: serde::de::DeserializeOwned>(
    r: &Row<'_>,
    i: usize,
    what: &str,
) -> rusqlite::Result<T> {
    serde_json::from_str(&r.get::<_, String>(i)?).map_err(|_| corrupt(what))
}

/// A row's id and the subscription read from it (for list reads).
fn keyed(r: &Row<'_>) -> rusqlite::Result<(String, rusqlite::Result<Subscription>)> {
    Ok((r.get(0)?, from_row(r)))
}

fn write_filters(conn: &Connection, sub: &Subscription) -> rusqlite::Result<()> {
    conn.execute(
        "DELETE FROM subscription_filters WHERE subscription_id = ?1",
        params![sub.id.as_str()],
    )?;
    let mut stmt = conn.prepare_cached(
        "INSERT OR IGNORE INTO subscription_filters (tenant, filter, subscription_id) VALUES (?1, ?2, ?3)",
    )?;
    for f in &sub.filters {
        stmt.execute(params![sub.tenant.as_str(), f.as_str(), sub.id.as_str()])?;
    }
    Ok(())
}

/// Writes a subscription's health record over the one stored (within the
/// caller's write transaction, so nothing comes between the read and the
/// write); the record written, `None` when the subscription is gone.
pub(super) fn write_health(
    conn: &Connection,
    tenant: &TenantId,
    id: &SubscriptionId,
    write: &HealthWrite,
) -> rusqlite::Result<Option<Health>> {
    let stored: Option<String> = conn
        .prepare_cached("SELECT health FROM subscriptions WHERE id = ?1 AND tenant = ?2")?
        .query_row(params![id.as_str(), tenant.as_str()], |r| r.get(0))
        .optional()?;
    let Some(stored) = stored else {
        return Ok(None);
    };
    let stored: Health = serde_json::from_str(&stored).unwrap_or_else(|e| {
        // Counted from nothing rather than the delivery's end refused.
        crate::record::unreadable("health record", id.as_str(), &e.to_string());
        Health::default()
    });
    let health = write.over(&stored);
    conn.prepare_cached("UPDATE subscriptions SET health = ?3 WHERE id = ?1 AND tenant = ?2")?
        .execute(params![id.as_str(), tenant.as_str(), json(&health)])?;
    Ok(Some(health))
}

fn json<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_string(v).unwrap_or_else(|_| "null".into())
}

#[async_trait]
impl SubscriptionStore for SqliteStore {
    async fn insert(&self, sub: &Subscription) -> StoreResult<()> {
        let sub = sub.clone();
        let rec = SubscriptionRecord::from(&sub);
        self.write(move |conn| {
            conn.execute(
                &format!("INSERT INTO subscriptions ({COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18)"),
                params![
                    rec.id,
                    rec.tenant,
                    rec.url,
                    json(&rec.filters),
                    rec.description,
                    json(&rec.metadata),
                    rec.secret,
                    rec.prev_secret,
                    rec.prev_secret_expires_at,
                    rec.status,
                    json(&rec.health),
                    rec.suspended_at,
                    rec.status_reason,
                    rec.created_at,
                    rec.updated_at,
                    rec.lanes,
                    rec.rate_limit,
                    rec.options,
                ],
            )?;
            write_filters(conn, &sub)
        })
        .await
    }

    async fn get(
        &self,
        tenant: &TenantId,
        id: &SubscriptionId,
    ) -> StoreResult<Option<Subscription>> {
        let (tenant, id) = (tenant.clone(), id.clone());
        self.read(move |conn| {
            conn.prepare_cached(&format!(
                "SELECT {COLUMNS} FROM subscriptions WHERE id = ?1 AND tenant = ?2 AND deleted_at IS NULL"
            ))?
            .query_row(params![id.as_str(), tenant.as_str()], from_row)
            .optional()
        })
        .await
    }

    async fn list(
        &self,
        tenant: &TenantId,
        after: Option<&SubscriptionId>,
        limit: usize,
    ) -> StoreResult<Vec<Subscription>> {
        let tenant = tenant.clone();
        let after = after.map(|a| a.as_str().to_owned()).unwrap_or_default();
        self.read(move |conn| {
            conn.prepare_cached(&format!(
                "SELECT {COLUMNS} FROM subscriptions WHERE tenant = ?1 AND id > ?2 AND deleted_at IS NULL ORDER BY id LIMIT ?3"
            ))?
            .query_map(params![tenant.as_str(), after, limit as i64], keyed)
            .and_then(|rows| readable("subscription", rows))
        })
        .await
    }

    async fn update(&self, sub: &Subscription) -> StoreResult<bool> {
        let sub = sub.clone();
        let rec = SubscriptionRecord::from(&sub);
        self.write(move |conn| {
            let n = conn.execute(
                "UPDATE subscriptions SET url = ?3, filters = ?4, description = ?5, metadata = ?6, \
                 secret = ?7, prev_secret = ?8, prev_secret_expires_at = ?9, updated_at = ?10, \
                 lanes = ?11, rate_limit = ?12, options = ?13 \
                 WHERE id = ?1 AND tenant = ?2 AND deleted_at IS NULL",
                params![
                    rec.id,
                    rec.tenant,
                    rec.url,
                    json(&rec.filters),
                    rec.description,
                    json(&rec.metadata),
                    rec.secret,
                    rec.prev_secret,
                    rec.prev_secret_expires_at,
                    rec.updated_at,
                    rec.lanes,
                    rec.rate_limit,
                    rec.options,
                ],
            )?;
            if n == 1 {
                write_filters(conn, &sub)?;
            }
            Ok(n == 1)
        })
        .await
    }

    async fn delete(&self, tenant: &TenantId, id: &SubscriptionId) -> StoreResult<Option<u64>> {
        let (tenant, id) = (tenant.clone(), id.clone());
        let now = ms(time::OffsetDateTime::now_utc());
        self.write(move |conn| {
            let n = conn.execute(
                "UPDATE subscriptions SET deleted_at = ?3, updated_at = ?3 \
                 WHERE id = ?1 AND tenant = ?2 AND deleted_at IS NULL",
                params![id.as_str(), tenant.as_str(), now],
            )?;
            if n == 0 {
                return Ok(None);
            }
            conn.execute(
                "DELETE FROM subscription_filters WHERE subscription_id = ?1",
                params![id.as_str()],
            )?;
            let dropped = conn.execute(
                "UPDATE deliveries SET state = 'dropped', updated_at = ?2 \
                 WHERE subscription_id = ?1 AND state = 'pending'",
                params![id.as_str(), now],
            )?;
            Ok(Some(dropped as u64))
        })
        .await
    }

    async fn matching(
        &self,
        tenant: &TenantId,
        event_type: &EventType,
        after: Option<&SubscriptionId>,
        limit: usize,
    ) -> StoreResult<Vec<Subscription>> {
        let tenant = tenant.clone();
        let filters = event_type.matching_filters();
        let after = after.map(|a| a.as_str().to_owned()).unwrap_or_default();
        self.read(move |conn| {
            let marks = vec!["?"; filters.len()].join(", ");
            let sql = format!(
                "SELECT {COLUMNS} FROM subscriptions WHERE id IN (\
                   SELECT DISTINCT subscription_id FROM subscription_filters \
                   WHERE tenant = ? AND filter IN ({marks}) AND subscription_id > ?) \
                 AND deleted_at IS NULL AND status = 'active' ORDER BY id LIMIT ?"
            );
            let mut args: Vec<rusqlite::types::Value> = vec![tenant.as_str().to_owned().into()];
            args.extend(filters.into_iter().map(Into::into));
            args.push(after.into());
            args.push((limit as i64).into());
            conn.prepare_cached(&sql)?
                .query_map(rusqlite::params_from_iter(args), keyed)
                .and_then(|rows| readable("subscription", rows))
        })
        .await
    }
}

#[async_trait]
impl Suspensions for SqliteStore {
    async fn change_status(
        &self,
        tenant: &TenantId,
        id: &SubscriptionId,
        change: &StatusChange,
    ) -> StoreResult<bool> {
        let (tenant, id) = (tenant.clone(), id.clone());
        let health = change.health.as_ref().map(json);
        let change = change.clone();
        self.write(move |conn| {
            let n = conn.execute(
                "UPDATE subscriptions SET status = ?4, suspended_at = ?5, status_reason = ?6, \
                 health = COALESCE(?7, health), updated_at = ?8 \
                 WHERE id = ?1 AND tenant = ?2 AND status = ?3 AND deleted_at IS NULL",
                params![
                    id.as_str(),
                    tenant.as_str(),
                    change.from.as_str(),
                    change.to.as_str(),
                    change.suspended_at.map(ms),
                    change.reason,
                    health,
                    ms(change.at),
                ],
            )?;
            Ok(n == 1)
        })
        .await
    }

    async fn set_status_reason(
        &self,
        tenant: &TenantId,
        id: &SubscriptionId,
        reason: &str,
    ) -> StoreResult<()> {
        let (tenant, id, reason) = (tenant.clone(), id.clone(), reason.to_owned());
        self.write(move |conn| {
            conn.execute(
                "UPDATE subscriptions SET status_reason = ?3 WHERE id = ?1 AND tenant = ?2",
                params![id.as_str(), tenant.as_str(), reason],
            )
            .map(|_| ())
        })
        .await
    }
}
