//! The keys of the table's items, at the bottom of the store: every module
//! that reads or writes an item takes its key from here, so the table's
//! whole key layout is in this one file (the list in [`crate::store`]'s
//! documentation follows it).

use hooklane_core::domain::{EventId, KeyId, SubscriptionId, TenantId};

use crate::store::Item;
use crate::{number_attr, string_attr};

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

/// The subscription whose delivery records a partition key is of.
pub(crate) fn record_pk_sub(pk: &str) -> Option<SubscriptionId> {
    pk.strip_prefix("D#")
        .and_then(|id| SubscriptionId::parse(id).ok())
}

/// The sort key of an event's delivery record.
pub(crate) fn record_sk(event: &EventId) -> String {
    format!("E#{}", event.as_str())
}

/// The partition key of an event's delivery records, by tenant.
pub(crate) fn by_event_pk(tenant: &TenantId, event: &EventId) -> String {
    format!("V#{}#{}", tenant.as_str(), event.as_str())
}

/// The `gsi2` partition of every suspended subscription (a suspended
/// subscription's item carries it; activating or deleting it removes it):
/// the status lists suspended subscriptions with one query, longest
/// suspended first. Suspensions are rare, so one partition holds them.
pub(crate) const SUSPENDED_PK: &str = "SUSPENDED";

/// A suspended subscription's `gsi2` sort key: since when, then whose.
pub(crate) fn suspended_sk(at_ms: i64, tenant: &TenantId, id: &SubscriptionId) -> String {
    format!("{at_ms:015}#{}#{}", tenant.as_str(), id.as_str())
}

/// The partition of the markers of lanes in the slow pool (written when a
/// lane moves there, removed when it comes back: rare, so one partition
/// holds them; see the store's `slow_lanes`).
pub(crate) const SLOW_LANES_PK: &str = "SLOW";

/// A slow lane's marker: whose lane.
pub(crate) fn slow_lane_sk(tenant: &TenantId, sub: &SubscriptionId, lane: u16) -> String {
    format!("{}#{}#{lane}", tenant.as_str(), sub.as_str())
}

/// The partition key of a tenant's parked deliveries.
pub(crate) fn parked_pk(tenant: &TenantId) -> String {
    format!("P#{}", tenant.as_str())
}

/// The partition of a tenant key, found by the hash of its text.
pub(crate) fn key_pk(hash: &str) -> String {
    format!("K#{hash}")
}

/// The partition key of the portal's signing key.
pub(crate) const PORTAL_PK: &str = "C#portal";

/// A tenant key's entry in its tenant's partition (for the list).
pub(crate) fn key_sk(id: &KeyId) -> String {
    format!("K#{}", id.as_str())
}

/// The sort key of an archived event, in its tenant's partition.
pub(crate) fn event_sk(id: &EventId) -> String {
    format!("E#{}", id.as_str())
}

/// The partition key of a subscription's attempt log.
pub(crate) fn log_pk(tenant: &TenantId, sub: &SubscriptionId) -> String {
    format!("A#{}#{}", tenant.as_str(), sub.as_str())
}

/// The partition key of a subscription's backfill job.
pub(crate) fn job_pk(sub: &SubscriptionId) -> String {
    format!("B#{}", sub.as_str())
}

/// The sort key of a backfill job.
pub(crate) const JOB_SK: &str = "B";

/// The partition key of a subscription's rate-limit item.
pub(crate) fn rate_pk(sub: &SubscriptionId) -> String {
    format!("R#{}", sub.as_str())
}

/// The partition key of a lane's spilled deliveries: lane 0 keeps the
/// name from before lanes.
pub(crate) fn spill_pk(sub: &SubscriptionId, lane: u16) -> String {
    match lane {
        0 => format!("L#{}", sub.as_str()),
        n => format!("L#{}#{n}", sub.as_str()),
    }
}

/// The sort key of a tenant's fan-out path item.
pub(crate) const PATH_SK: &str = "Q#fan-out";

/// The sort key of a tenant's lane counter.
pub(crate) const LANES_SK: &str = "Q#lanes";

/// The sort key of one of a tenant's attempt slot items.
pub(crate) fn slot_sk(shard: u16) -> String {
    format!("Q#slots#{shard}")
}

/// How many partitions the tenant backlog counts are in (by the tenant's
/// name), so that the tenants' counts spread over several (one tenant's
/// stay in one).
pub(crate) const COUNT_SHARDS: u32 = 16;

/// The key of a tenant's count of the deliveries queued in one minute
/// (minutes since the epoch): `N#{shard}`, `{tenant}#{minute}`.
pub(crate) fn backlog_count_key(tenant: &TenantId, minute: i64) -> (String, String) {
    // FNV-1a: the same shard in every build (a reader sums all shards
    // anyway).
    let hash = tenant.as_str().bytes().fold(0x811c_9dc5_u32, |h, b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    });
    (
        count_pk(hash % COUNT_SHARDS),
        format!("{}#{minute:010}", tenant.as_str()),
    )
}

/// The partition key of one shard of the tenant backlog counts.
pub(crate) fn count_pk(shard: u32) -> String {
    format!("N#{shard}")
}

/// Whether a partition key is one of the tenant backlog counts'.
pub(crate) fn is_count_pk(pk: &str) -> bool {
    pk.strip_prefix("N#")
        .is_some_and(|shard| shard.parse::<u32>().is_ok_and(|s| s < COUNT_SHARDS))
}

/// The tenant and minute of a backlog count's sort key.
pub(crate) fn backlog_count_of(sk: &str) -> Option<(TenantId, i64)> {
    let (tenant, minute) = sk.rsplit_once('#')?;
    Some((TenantId::parse(tenant).ok()?, minute.parse().ok()?))
}

/// The partition key of a filter's type index entries.
pub(crate) fn entry_pk(tenant: &TenantId, filter: &str) -> String {
    format!("F#{}#{}", tenant.as_str(), filter)
}

/// The key of the marker that says a tenant's type index is complete.
pub(crate) fn marker_key(tenant: &TenantId) -> (String, String) {
    (format!("F#{}", tenant.as_str()), "complete".to_owned())
}

/// An item of its key alone (a marker, or a key to delete by).
pub(crate) fn key_item(pk: String, sk: String) -> Item {
    Item::from([
        ("pk".to_owned(), string_attr(pk)),
        ("sk".to_owned(), string_attr(sk)),
    ])
}

/// A type index entry: subscription `id` takes the tenant's events through
/// `filter`, as of `now` (ms).
pub(crate) fn entry_item(tenant: &TenantId, filter: &str, id: &SubscriptionId, now: i64) -> Item {
    let mut item = key_item(entry_pk(tenant, filter), sub_sk(id));
    item.insert("written_at".to_owned(), number_attr(now));
    item
}
