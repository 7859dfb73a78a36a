//! The access check of the storage contract (G14): a tenant key is found
//! by its hash, listed without its text, gone once revoked, and its text
//! is nowhere in what the store holds; the portal key is made once and
//! kept.

use super::{tenant, Harness};
use crate::access::{new_key, ApiKey};
use crate::domain::KeyId;

/// Tenant keys are kept by hash only, and revoked at once.
pub async fn tenant_keys_are_kept_by_hash_and_revoked(h: &dyn Harness) {
    let ports = h.ports();
    let (t, other) = (tenant("keys"), tenant("keys-other"));
    let (text, hash) = new_key();
    let key = ApiKey {
        id: KeyId::generate(),
        tenant: t.clone(),
        name: "ci".into(),
        read_only: true,
        created_at: time::OffsetDateTime::from_unix_timestamp(1_800_000_000).unwrap(),
    };
    ports.access.create_key(&key, &hash).await.expect("create");
    let found = ports.access.key_by_hash(&hash).await.expect("find");
    assert_eq!(found.as_ref(), Some(&key), "found by its hash");
    assert_eq!(
        ports.access.list_keys(&t).await.expect("list"),
        vec![key.clone()]
    );
    assert!(ports
        .access
        .list_keys(&other)
        .await
        .expect("list")
        .is_empty());
    let raw = h.raw_contents().await;
    assert!(raw.contains(&hash), "the dump holds the store's items");
    assert!(!raw.contains(&text), "a key's text is never stored");
    assert!(!raw.contains(&text[4..]), "nor its secret part");
    assert!(!ports
        .access
        .revoke_key(&other, &key.id)
        .await
        .expect("revoke"));
    assert!(ports.access.revoke_key(&t, &key.id).await.expect("revoke"));
    assert_eq!(ports.access.key_by_hash(&hash).await.expect("find"), None);
    assert!(ports.access.list_keys(&t).await.expect("list").is_empty());
    assert!(!ports.access.revoke_key(&t, &key.id).await.expect("revoke"));
    let first = ports
        .access
        .portal_key(b"first-candidate")
        .await
        .expect("key");
    let second = ports
        .access
        .portal_key(b"second-candidate")
        .await
        .expect("key");
    assert_eq!(first, second, "the portal key is made once");
}
