//! Scoped access on the engine (G14): who a tenant key or a portal
//! session speaks for, tenant keys made, listed and revoked, and portal
//! sessions minted. The API's auth middleware and its api-keys and
//! portal-sessions routes call these; the rules are in
//! [`crate::access`].

use time::OffsetDateTime;

use super::Engine;
use crate::access::{
    self, key_hash, new_key, new_portal_key, sign_session, verify_session, ApiKey, Principal,
    Refused, Session, Unrecognized,
};
use crate::domain::{KeyId, TenantId};
use crate::ports::StoreResult;

impl Engine {
    /// The principal a tenant key or portal session speaks for, or why
    /// it speaks for nobody (unknown, revoked, expired, tampered).
    pub async fn principal_of(&self, bearer: &str) -> StoreResult<Result<Principal, Unrecognized>> {
        if bearer.starts_with(access::KEY_PREFIX) {
            let key = self.ports.access.key_by_hash(&key_hash(bearer)).await?;
            return Ok(key
                .map(|k| Principal::Tenant {
                    tenant: k.tenant,
                    read_only: k.read_only,
                    session: false,
                    key: Some(k.id),
                })
                .ok_or(Unrecognized::UnknownKey));
        }
        if bearer.starts_with(access::SESSION_PREFIX) {
            let key = self.portal_key().await?;
            let now = self.ports.clock.now();
            let session = match verify_session(&key, bearer, now) {
                Ok(session) => session,
                Err(why) => return Ok(Err(Unrecognized::Session(why))),
            };
            let Ok(tenant) = TenantId::parse(&session.tenant) else {
                return Ok(Err(Unrecognized::Session(Refused::Invalid)));
            };
            // A session a key minted ends with that key.
            let minted_by = session.minted_by.as_deref().map(KeyId::parse);
            let key = match minted_by {
                None => None,
                Some(Ok(id)) if self.ports.access.has_key(&tenant, &id).await? => Some(id),
                Some(_) => return Ok(Err(Unrecognized::SessionKeyRevoked)),
            };
            return Ok(Ok(Principal::Tenant {
                tenant,
                read_only: session.read_only,
                session: true,
                key,
            }));
        }
        Ok(Err(Unrecognized::WrongToken))
    }

    /// Makes a tenant key: what is stored, and its text (shown once).
    pub async fn create_key(
        &self,
        tenant: &TenantId,
        name: String,
        read_only: bool,
    ) -> StoreResult<(ApiKey, String)> {
        let (text, hash) = new_key();
        let key = ApiKey {
            id: KeyId::generate(),
            tenant: tenant.clone(),
            name,
            read_only,
            created_at: self.ports.clock.now(),
        };
        self.ports.access.create_key(&key, &hash).await?;
        Ok((key, text))
    }

    /// A tenant's keys (never their text).
    pub async fn keys(&self, tenant: &TenantId) -> StoreResult<Vec<ApiKey>> {
        self.ports.access.list_keys(tenant).await
    }

    /// Revokes a tenant's key; `false` when it has no such key.
    pub async fn revoke_key(&self, tenant: &TenantId, id: &KeyId) -> StoreResult<bool> {
        self.ports.access.revoke_key(tenant, id).await
    }

    /// A portal session token for `tenant` lasting `secs`, and its end;
    /// minted by a tenant key, it ends with that key.
    pub async fn mint_session(
        &self,
        tenant: &TenantId,
        (read_only, secs): (bool, i64),
        minted_by: Option<&KeyId>,
    ) -> StoreResult<(String, OffsetDateTime)> {
        let expires_at = self.ports.clock.now() + time::Duration::seconds(secs);
        let session = Session {
            tenant: tenant.as_str().to_owned(),
            read_only,
            expires: expires_at.unix_timestamp(),
            minted_by: minted_by.map(|k| k.as_str().to_owned()),
        };
        Ok((
            sign_session(&self.portal_key().await?, &session),
            expires_at,
        ))
    }

    /// The key sessions are signed with: the configured one, or the one
    /// kept in the store (made there by the first process that asked).
    async fn portal_key(&self) -> StoreResult<Vec<u8>> {
        if let Some(key) = self.config.portal_key.as_ref().or(self.portal_key.get()) {
            return Ok(key.clone());
        }
        let key = self.ports.access.portal_key(&new_portal_key()).await?;
        Ok(self.portal_key.get_or_init(|| key).clone())
    }
}
