//! The store port of what a tenant's operator manages beside its
//! subscriptions: scoped access (G14), tenant keys kept by hash only and
//! the portal key sessions are signed with when the configuration names
//! none, and the event-type catalog's registered types.

use async_trait::async_trait;

use super::StoreResult;
use crate::access::ApiKey;
use crate::domain::{EventType, EventTypeInfo, KeyId, TenantId};

/// Tenant keys and the portal key.
#[async_trait]
pub trait Access: Send + Sync {
    /// Stores a new key under the hash of its text (never the text).
    async fn create_key(&self, key: &ApiKey, hash: &str) -> StoreResult<()>;
    /// A tenant's keys, oldest first.
    async fn list_keys(&self, tenant: &TenantId) -> StoreResult<Vec<ApiKey>>;
    /// Revokes a key; `false` when the tenant has no such key.
    async fn revoke_key(&self, tenant: &TenantId, id: &KeyId) -> StoreResult<bool>;
    /// The key stored under `hash`, read strongly consistent (a revoked
    /// key is refused from the next request).
    async fn key_by_hash(&self, hash: &str) -> StoreResult<Option<ApiKey>>;
    /// Whether the tenant still has this key, read strongly consistent.
    async fn has_key(&self, tenant: &TenantId, id: &KeyId) -> StoreResult<bool>;
    /// The portal key: the one stored, or `candidate` stored now when there
    /// is none (every process of a deployment ends up with the same).
    async fn portal_key(&self, candidate: &[u8]) -> StoreResult<Vec<u8>>;
    /// Registers an event type (replacing what was registered of it).
    async fn put_event_type(&self, info: &EventTypeInfo) -> StoreResult<()>;
    /// Removes a registration; `false` when there was none.
    async fn delete_event_type(&self, tenant: &TenantId, name: &EventType) -> StoreResult<bool>;
    /// A tenant's registered event types, by name.
    async fn event_types(&self, tenant: &TenantId) -> StoreResult<Vec<EventTypeInfo>>;
}
