//! `SubscriptionStore` over SQLite: rows with tombstones, and a filter
//! index (`subscription_filters`) so fan-out matches by value, not by scan.

use async_trait::async_trait;
use rusqlite::{params, Connection, OptionalExtension, Row};

use super::{corrupt, from_ms, ms, readable, SqliteStore};
use crate::domain::{
    EventFilter, EventType, Health, PreviousSecret, Subscription, SubscriptionId,
    SubscriptionStatus, TenantId,
};
use crate::ports::{StoreResult, SubscriptionStore, Suspensions};
use crate::signing::Secret;

const COLUMNS: &str = "id, tenant, url, filters, description, metadata, secret, prev_secret, \
     prev_secret_expires_at, status, health, suspended_at, status_reason, created_at, updated_at";

fn from_row(r: &Row<'_>) -> rusqlite::Result<Subscription> {
    let text = |i: usize| r.get::<_, String>(i);
    let filters: Vec<String> = serde_json::from_str(&text(3)?).map_err(|_| corrupt("filters"))?;
    let prev_secret = match (r.get::<_, Option<String>>(7)?, r.get::<_, Option<i64>>(8)?) {
        (Some(s), Some(exp)) => Some(PreviousSecret {
            secret: Secret::parse(&s).map_err(|_| corrupt("secret"))?,
            expires_at: from_ms(exp),
        }),
        _ => None,
    };
    Ok(Subscription {
        id: SubscriptionId::parse(&text(0)?).map_err(|_| corrupt("id"))?,
        tenant: TenantId::parse(&text(1)?).map_err(|_| corrupt("tenant"))?,
        url: url::Url::parse(&text(2)?).map_err(|_| corrupt("url"))?,
        filters: filters
            .iter()
            .map(|f| EventFilter::parse(f))
            .collect::<Result<_, _>>()
            .map_err(|_| corrupt("filter"))?,
        description: r.get(4)?,
        metadata: serde_json::from_str(&text(5)?).map_err(|_| corrupt("metadata"))?,
        secret: Secret::parse(&text(6)?).map_err(|_| corrupt("secret"))?,
        previous_secret: prev_secret,
        status: SubscriptionStatus::parse(&text(9)?).ok_or_else(|| corrupt("status"))?,
        health: serde_json::from_str(&text(10)?).map_err(|_| corrupt("health"))?,
        suspended_at: r.get::<_, Option<i64>>(11)?.map(from_ms),
        status_reason: r.get(12)?,
        created_at: from_ms(r.get(13)?),
        updated_at: from_ms(r.get(14)?),
    })
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

/// Writes a subscription's health record (inside the caller's write).
pub(super) fn write_health(
    conn: &Connection,
    tenant: &TenantId,
    id: &SubscriptionId,
    health: &Health,
) -> rusqlite::Result<()> {
    conn.prepare_cached("UPDATE subscriptions SET health = ?3 WHERE id = ?1 AND tenant = ?2")?
        .execute(params![id.as_str(), tenant.as_str(), json(health)])
        .map(|_| ())
}

fn json<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_string(v).unwrap_or_else(|_| "null".into())
}

fn filters_json(sub: &Subscription) -> String {
    json(&sub.filters.iter().map(|f| f.as_str()).collect::<Vec<_>>())
}

#[async_trait]
impl SubscriptionStore for SqliteStore {
    async fn insert(&self, sub: &Subscription) -> StoreResult<()> {
        let sub = sub.clone();
        self.write(move |conn| {
            conn.execute(
                &format!("INSERT INTO subscriptions ({COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)"),
                params![
                    sub.id.as_str(),
                    sub.tenant.as_str(),
                    sub.url.as_str(),
                    filters_json(&sub),
                    sub.description,
                    json(&sub.metadata),
                    sub.secret.expose(),
                    sub.previous_secret.as_ref().map(|p| p.secret.expose()),
                    sub.previous_secret.as_ref().map(|p| ms(p.expires_at)),
                    sub.status.as_str(),
                    json(&sub.health),
                    sub.suspended_at.map(ms),
                    sub.status_reason,
                    ms(sub.created_at),
                    ms(sub.updated_at),
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
        self.write(move |conn| {
            let n = conn.execute(
                "UPDATE subscriptions SET url = ?3, filters = ?4, description = ?5, metadata = ?6, \
                 secret = ?7, prev_secret = ?8, prev_secret_expires_at = ?9, updated_at = ?10 \
                 WHERE id = ?1 AND tenant = ?2 AND deleted_at IS NULL",
                params![
                    sub.id.as_str(),
                    sub.tenant.as_str(),
                    sub.url.as_str(),
                    filters_json(&sub),
                    sub.description,
                    json(&sub.metadata),
                    sub.secret.expose(),
                    sub.previous_secret.as_ref().map(|p| p.secret.expose()),
                    sub.previous_secret.as_ref().map(|p| ms(p.expires_at)),
                    ms(sub.updated_at),
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
    async fn suspend(
        &self,
        tenant: &TenantId,
        id: &SubscriptionId,
        at: time::OffsetDateTime,
        reason: &str,
    ) -> StoreResult<bool> {
        let (tenant, id, reason) = (tenant.clone(), id.clone(), reason.to_owned());
        self.write(move |conn| {
            // The guarded transition: only an active subscription moves.
            let n = conn.execute(
                "UPDATE subscriptions SET status = 'suspended', suspended_at = ?3, status_reason = ?4, \
                 updated_at = ?3 WHERE id = ?1 AND tenant = ?2 AND status = 'active' AND deleted_at IS NULL",
                params![id.as_str(), tenant.as_str(), ms(at), reason],
            )?;
            Ok(n == 1)
        })
        .await
    }

    async fn activate(
        &self,
        tenant: &TenantId,
        id: &SubscriptionId,
        at: time::OffsetDateTime,
    ) -> StoreResult<bool> {
        let (tenant, id) = (tenant.clone(), id.clone());
        let health = json(&Health::default());
        self.write(move |conn| {
            let n = conn.execute(
                "UPDATE subscriptions SET status = 'active', suspended_at = NULL, status_reason = NULL, \
                 health = ?4, updated_at = ?3 \
                 WHERE id = ?1 AND tenant = ?2 AND status = 'suspended' AND deleted_at IS NULL",
                params![id.as_str(), tenant.as_str(), ms(at), health],
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
