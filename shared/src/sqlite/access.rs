//! `Access` over SQLite: tenant keys by the hash of their text (the text
//! is never stored), the portal key in a one-row settings table, and the
//! registered event types in a table keyed by tenant and name.

use async_trait::async_trait;
use rusqlite::{params, OptionalExtension};

use super::{corrupt, from_ms, ms, tenant_at, SqliteStore};
use crate::access::ApiKey;
use crate::domain::{EventType, EventTypeInfo, KeyId, TenantId};
use crate::ports::{Access, StoreResult};

const COLUMNS: &str = "id, tenant, name, read_only, created_at";

fn key_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<ApiKey> {
    Ok(ApiKey {
        id: KeyId::parse(&r.get::<_, String>(0)?).map_err(|_| corrupt("key id"))?,
        tenant: tenant_at(r, 1)?,
        name: r.get(2)?,
        read_only: r.get(3)?,
        created_at: from_ms(r.get(4)?),
    })
}

#[async_trait]
impl Access for SqliteStore {
    async fn create_key(&self, key: &ApiKey, hash: &str) -> StoreResult<()> {
        let (key, hash) = (key.clone(), hash.to_owned());
        self.write(move |conn| {
            conn.prepare_cached(
                "INSERT INTO api_keys (id, tenant, name, read_only, created_at, hash) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            )?
            .execute(params![
                key.id.as_str(),
                key.tenant.as_str(),
                key.name,
                key.read_only,
                ms(key.created_at),
                hash
            ])
            .map(|_| ())
        })
        .await
    }

    async fn list_keys(&self, tenant: &TenantId) -> StoreResult<Vec<ApiKey>> {
        let tenant = tenant.clone();
        self.read(move |conn| {
            conn.prepare_cached(&format!(
                "SELECT {COLUMNS} FROM api_keys WHERE tenant = ?1 ORDER BY id"
            ))?
            .query_map(params![tenant.as_str()], key_row)?
            .collect()
        })
        .await
    }

    async fn revoke_key(&self, tenant: &TenantId, id: &KeyId) -> StoreResult<bool> {
        let (tenant, id) = (tenant.clone(), id.clone());
        self.write(move |conn| {
            conn.prepare_cached("DELETE FROM api_keys WHERE tenant = ?1 AND id = ?2")?
                .execute(params![tenant.as_str(), id.as_str()])
                .map(|n| n > 0)
        })
        .await
    }

    async fn key_by_hash(&self, hash: &str) -> StoreResult<Option<ApiKey>> {
        let hash = hash.to_owned();
        self.read(move |conn| {
            conn.prepare_cached(&format!("SELECT {COLUMNS} FROM api_keys WHERE hash = ?1"))?
                .query_row(params![hash], key_row)
                .optional()
        })
        .await
    }

    async fn has_key(&self, tenant: &TenantId, id: &KeyId) -> StoreResult<bool> {
        let (tenant, id) = (tenant.clone(), id.clone());
        self.read(move |conn| {
            conn.prepare_cached(
                "SELECT EXISTS (SELECT 1 FROM api_keys WHERE tenant = ?1 AND id = ?2)",
            )?
            .query_row(params![tenant.as_str(), id.as_str()], |r| r.get(0))
        })
        .await
    }

    async fn portal_key(&self, candidate: &[u8]) -> StoreResult<Vec<u8>> {
        let candidate = candidate.to_vec();
        self.write(move |conn| {
            conn.prepare_cached(
                "INSERT INTO settings (name, value) VALUES ('portal_key', ?1) \
                 ON CONFLICT (name) DO NOTHING",
            )?
            .execute(params![candidate])?;
            conn.prepare_cached("SELECT value FROM settings WHERE name = 'portal_key'")?
                .query_row([], |r| r.get(0))
        })
        .await
    }

    async fn put_event_type(&self, info: &EventTypeInfo) -> StoreResult<()> {
        let info = info.clone();
        self.write(move |conn| {
            conn.prepare_cached(
                "INSERT INTO event_types (tenant, name, description, example, updated_at) \
                 VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT (tenant, name) DO UPDATE SET \
                 description = excluded.description, example = excluded.example, \
                 updated_at = excluded.updated_at",
            )?
            .execute(params![
                info.tenant.as_str(),
                info.name.as_str(),
                info.description,
                info.example,
                ms(info.updated_at)
            ])
            .map(|_| ())
        })
        .await
    }

    async fn delete_event_type(&self, tenant: &TenantId, name: &EventType) -> StoreResult<bool> {
        let (tenant, name) = (tenant.clone(), name.clone());
        self.write(move |conn| {
            conn.prepare_cached("DELETE FROM event_types WHERE tenant = ?1 AND name = ?2")?
                .execute(params![tenant.as_str(), name.as_str()])
                .map(|n| n > 0)
        })
        .await
    }

    async fn event_types(&self, tenant: &TenantId) -> StoreResult<Vec<EventTypeInfo>> {
        let tenant = tenant.clone();
        self.read(move |conn| {
            conn.prepare_cached(
                "SELECT tenant, name, description, example, updated_at FROM event_types \
                 WHERE tenant = ?1 ORDER BY name",
            )?
            .query_map(params![tenant.as_str()], |r| {
                Ok(EventTypeInfo {
                    tenant: tenant_at(r, 0)?,
                    name: EventType::parse(&r.get::<_, String>(1)?)
                        .map_err(|_| corrupt("event type"))?,
                    description: r.get(2)?,
                    example: r.get(3)?,
                    updated_at: from_ms(r.get(4)?),
                })
            })?
            .collect()
        })
        .await
    }
}
