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

/// Registered event types are kept per tenant, replaced by a second
/// registration, listed by name and gone once deleted; they leave the
/// tenant's subscriptions and keys as they are.
pub async fn event_types_are_registered_per_tenant(h: &dyn Harness) {
    use crate::domain::{EventType, EventTypeInfo};
    let ports = h.ports();
    let (t, other) = (tenant("catalog"), tenant("catalog-other"));
    let at = time::OffsetDateTime::from_unix_timestamp(1_800_000_000).unwrap();
    let info = |name: &str, description: Option<&str>| EventTypeInfo {
        tenant: t.clone(),
        name: EventType::parse(name).unwrap(),
        description: description.map(str::to_owned),
        example: Some(r#"{"invoice": "in_1", "amount": 4200}"#.into()),
        updated_at: at,
    };
    let access = &ports.access;
    access
        .put_event_type(&info("invoice.paid", Some("Paid")))
        .await
        .expect("put");
    access
        .put_event_type(&info("invoice.created", None))
        .await
        .expect("put");
    let again = info("invoice.paid", Some("An invoice was paid in full"));
    access.put_event_type(&again).await.expect("put again");
    let listed = access.event_types(&t).await.expect("list");
    assert_eq!(
        listed,
        vec![info("invoice.created", None), again.clone()],
        "by name, replaced"
    );
    assert!(
        access.event_types(&other).await.expect("list").is_empty(),
        "per tenant"
    );
    assert!(
        access.list_keys(&t).await.expect("keys").is_empty(),
        "not read as keys"
    );
    let paid = EventType::parse("invoice.paid").unwrap();
    assert!(!access
        .delete_event_type(&other, &paid)
        .await
        .expect("delete"));
    assert!(access.delete_event_type(&t, &paid).await.expect("delete"));
    assert!(!access
        .delete_event_type(&t, &paid)
        .await
        .expect("delete again"));
    assert_eq!(
        access.event_types(&t).await.expect("list"),
        vec![info("invoice.created", None)]
    );
}
