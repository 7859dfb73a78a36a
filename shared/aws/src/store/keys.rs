//! The keys of the table's items that several store modules share, at the
//! bottom of the store: every module that reads or writes a tenant's or a
//! subscription's item takes its key from here.

use hooklane_core::domain::{EventId, KeyId, SubscriptionId, TenantId};

/// The partition key of a tenant.
pub(crate) fn tenant_pk(tenant: &TenantId) -> String {
    format!("T#{}", tenant.as_str())
}

/// The sort key of a subscription.
pub(crate) fn sub_sk(id: &SubscriptionId) -> String {
    format!("S#{}", id.as_str())
}

/// The partition key of a subscription's delivery records.
pub(crate) fn record_pk(sub: &SubscriptionId) -> String {
    format!("D#{}", sub.as_str())
}

/// The sort key of an event's delivery record.
pub(crate) fn record_sk(event: &EventId) -> String {
    format!("E#{}", event.as_str())
}

/// The partition key of an event's delivery records, by tenant.
pub(crate) fn by_event_pk(tenant: &TenantId, event: &EventId) -> String {
    format!("V#{}#{}", tenant.as_str(), event.as_str())
}

/// The partition key of a tenant's parked deliveries.
pub(crate) fn parked_pk(tenant: &TenantId) -> String {
    format!("P#{}", tenant.as_str())
}

/// The partition of a tenant key, found by the hash of its text.
pub(crate) fn key_pk(hash: &str) -> String {
    format!("K#{hash}")
}

/// A tenant key's entry in its tenant's partition (for the list).
pub(crate) fn key_sk(id: &KeyId) -> String {
    format!("K#{}", id.as_str())
}
