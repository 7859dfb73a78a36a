//! The type index: fan-out of a wide tenant reads only the subscriptions
//! whose filters take the event, not the whole tenant.
//!
//! Each filter of each subscription has a small item, `F#{tenant}#{filter}`
//! / `S#{id}`. An event's fan-out queries the filters that would take it
//! (its type, each `prefix.*` above it, and `*`: `EventType::
//! matching_filters`), strongly consistent, then reads the subscriptions
//! those name by key (`BatchGetItem`, strongly consistent) and checks each
//! as the tenant-wide read does. So its cost follows the subscriptions
//! that match, not the tenant: about 1 read unit per filter key asked and
//! 1 per subscription found, where the tenant-wide query costs 1 per 4 KB
//! of every subscription (about 59 at 1,000).
//!
//! The index may name more than it should, never less:
//! - a registration writes its entries before the subscription; a PATCH
//!   writes the new filters' entries before the update (again, before
//!   and after the update, when [`REWRITE_AFTER`] passed since), then
//!   removes the entries of the
//!   filters it took off, those written over [`KEEP`] ago: a younger one
//!   may be another PATCH's, whose update has not landed yet (each entry
//!   holds when it was written, `written_at`). So an entry a PATCH made
//!   stale stays only when the filter was added within [`KEEP`] before,
//!   or before entries held `written_at` (the check reads the
//!   subscription itself);
//! - a DELETE removes the entries of the filters it ends with, after the
//!   tombstone; an entry met that names a tombstone is removed then.
//!
//! A tenant is read through the index once its index is known complete: a
//! marker item (`F#{tenant}` / `complete`), written after the fan-out's
//! tenant-wide read found the tenant wide (`WIDE` live subscriptions or
//! more) and wrote the entries of every subscription it read. Until then,
//! and for narrow tenants (where the tenant-wide query is cheaper), the
//! fan-out reads the tenant. Subscriptions registered before this index
//! existed are so indexed on the tenant's first wide fan-out. A deployed
//! process waits `Settings::type_index_settle` after its start before it
//! indexes a tenant, so that a registration by the version before (which
//! writes no entries) has ended by then.

use std::collections::BTreeMap;

use hooklane_core::domain::{
    EventFilter, EventType, Subscription, SubscriptionId, SubscriptionStatus, TenantId,
};
use hooklane_core::ports::{StoreError, StoreResult};

use super::batches::{delete, put};
use super::items::keys::{entry_item, entry_pk, key_item, marker_key, sub_sk, tenant_pk};
use super::items::subscription::from_item;
use super::subs::AwsSubscriptions;
use super::{backend, get_s, key_of, readable_keyed, took_effect, Item};
use crate::{number_attr, string_attr};
use hooklane_core::record::ms;
use hooklane_core::telemetry::Chain;
/// Live subscriptions from which a tenant's fan-out reads through the
/// index: below, the tenant-wide query (about 1 read unit per 5 or 6
/// subscriptions) costs less than one query per filter key.
pub(crate) const WIDE: usize = 50;
/// Subscriptions a tenant-wide query reads for one read unit, about: one
/// of 4 KB over items of 600 to 800 bytes. Read by key, each costs one.
const PER_QUERY_UNIT: usize = 5;
/// How long a fan-out spends writing a tenant's index before it gives up
/// (and reads the tenant whole): about 12,000 entries on DynamoDB.
const INDEX_WITHIN: std::time::Duration = std::time::Duration::from_secs(5);
/// `BatchWriteItem` calls at once while a tenant is indexed.
const INDEX_CALLS: usize = 4;
/// How long after its entries were written a PATCH writes them again,
/// before its update and after it: a PATCH's entries are never older than
/// this when its update is sent, and are written again after an update
/// call that took longer.
pub(crate) const REWRITE_AFTER: std::time::Duration = std::time::Duration::from_secs(30);
/// How old an entry of a filter a PATCH took off must be for the PATCH to
/// remove it: well over [`REWRITE_AFTER`] and an update call, and any
/// clock difference between processes.
const KEEP: std::time::Duration = std::time::Duration::from_secs(600);

impl AwsSubscriptions {
    /// Subscription items the fan-out has read since this adapter was
    /// made (the measure of what the index saves).
    pub fn fan_out_subscriptions_read(&self) -> u64 {
        self.type_indexes.read_so_far()
    }

    /// The tenant's live subscriptions as last counted, when its fan-out
    /// reads through its index.
    pub(crate) fn reads_by_type(&self, tenant: &TenantId) -> Option<usize> {
        self.type_indexes.wide(tenant)
    }

    /// Writes the entries of a subscription's filters.
    pub(crate) async fn index_filters(
        &self,
        tenant: &TenantId,
        id: &SubscriptionId,
        filters: &[EventFilter],
    ) -> StoreResult<()> {
        let now = ms(time::OffsetDateTime::now_utc());
        let writes = filters
            .iter()
            .map(|f| put(entry_item(tenant, f.as_str(), id, now)))
            .collect::<StoreResult<Vec<_>>>()?;
        self.write_all(writes).await
    }

    /// Removes the entries of the filters a PATCH took off a subscription
    /// (`was` less `now`), those written over [`KEEP`] ago; best effort
    /// (an entry left costs a read, never a delivery).
    pub(crate) async fn unindex_removed(
        &self,
        tenant: &TenantId,
        id: &SubscriptionId,
        was: &[String],
        now: &[EventFilter],
    ) {
        let cutoff = ms(time::OffsetDateTime::now_utc()) - KEEP.as_millis() as i64;
        for filter in was.iter().filter(|f| !now.iter().any(|n| n.as_str() == *f)) {
            let res = self
                .ddb
                .delete_item()
                .table_name(&self.settings.table)
                .set_key(Some(key_item(entry_pk(tenant, filter), sub_sk(id))))
                .condition_expression("written_at < :cutoff")
                .expression_attribute_values(":cutoff", number_attr(cutoff))
                .send()
                .await;
            if let Err(e) = took_effect(res) {
                tracing::warn!(error = %Chain(&e), "removing a type index entry of a filter a PATCH took off failed");
            }
        }
    }

    /// Removes the entries of these filters of a subscription; best
    /// effort (an entry left names a tombstone, and is removed when met).
    pub(crate) async fn unindex_filters(
        &self,
        tenant: &TenantId,
        id: &SubscriptionId,
        filters: impl Iterator<Item = String>,
    ) {
        let deletes = filters
            .map(|f| delete(key_item(entry_pk(tenant, &f), sub_sk(id))))
            .collect::<StoreResult<Vec<_>>>();
        let res = match deletes {
            Ok(d) => self.write_all(d).await,
            Err(e) => Err(e),
        };
        if let Err(e) = res {
            tracing::warn!(error = %Chain(&e), "removing a deleted subscription's type index entries failed");
        }
    }

    /// Whether this process may write a tenant's index from a tenant-wide
    /// read that starts now: it has run `type_index_settle`, and its last
    /// try for the tenant did not fail within [`RETRY_AFTER`].
    pub(crate) fn may_index(&self, tenant: &TenantId) -> bool {
        self.type_indexes.started.elapsed() >= self.settings.type_index_settle
            && self.type_indexes.may_try(tenant)
    }

    /// After a tenant-wide read that saw every live subscription of the
    /// tenant (`seen`: ids and filters): if the tenant is wide, notes its
    /// index complete when the marker says so, or, when `may_write` (asked
    /// of [`AwsSubscriptions::may_index`] before the read), writes every one's
    /// entries and then the marker, within [`INDEX_WITHIN`]. Best effort:
    /// the tenant-wide read goes on until it is done.
    pub(crate) async fn index_if_wide(
        &self,
        tenant: &TenantId,
        seen: &[(SubscriptionId, Vec<EventFilter>)],
        may_write: bool,
    ) {
        if seen.len() < WIDE {
            return;
        }
        if let Some(size) = self.type_indexes.wide(tenant) {
            // Complete already: the read (a fallback) counted it afresh.
            if size != seen.len() {
                self.type_indexes.mark_complete(tenant, seen.len());
            }
            return;
        }
        let (pk, sk) = marker_key(tenant);
        let res = async {
            if self.get_consistent(pk.clone(), sk.clone()).await?.is_some() {
                return Ok(true);
            }
            if !may_write {
                return Ok(false);
            }
            let now = ms(time::OffsetDateTime::now_utc());
            let writes = seen
                .iter()
                .flat_map(|(id, filters)| {
                    filters
                        .iter()
                        .map(move |f| put(entry_item(tenant, f.as_str(), id, now)))
                })
                .collect::<StoreResult<Vec<_>>>()?;
            tokio::time::timeout(INDEX_WITHIN, self.write_many(writes, INDEX_CALLS))
                .await
                .map_err(|_| {
                    StoreError::backend(format!(
                        "writing {} subscriptions' type index entries took over {INDEX_WITHIN:?}",
                        seen.len()
                    ))
                })??;
            self.ddb
                .put_item()
                .table_name(&self.settings.table)
                .set_item(Some(key_item(pk, sk)))
                .send()
                .await
                .map_err(backend)?;
            StoreResult::Ok(true)
        }
        .await;
        match res {
            Ok(true) => self.type_indexes.mark_complete(tenant, seen.len()),
            Ok(false) => {}
            Err(e) => {
                self.type_indexes.failed(tenant);
                tracing::warn!(error = %Chain(&e), "indexing a wide tenant's filters failed; its fan-out reads it whole, and tries again in 10 minutes");
            }
        }
    }

    /// The live, active subscriptions with ids after `after` that take
    /// events of `event_type`, in id order, at most `limit`, through the
    /// index; `None` when it names more than `size / PER_QUERY_UNIT` of
    /// them (a tenant of `size`), where reading them one by one would cost
    /// more than reading the tenant.
    pub(crate) async fn matching_by_type(
        &self,
        tenant: &TenantId,
        event_type: &EventType,
        after: Option<&SubscriptionId>,
        limit: usize,
        size: usize,
    ) -> StoreResult<Option<Vec<Subscription>>> {
        let ids = self.indexed_ids(tenant, event_type, after).await?;
        if ids.len() > size / PER_QUERY_UNIT {
            return Ok(None);
        }
        let mut out = Vec::new();
        let ids: Vec<String> = ids.into_iter().collect();
        for chunk in ids.chunks(100) {
            let mut items = self.get_consistent_many(tenant, chunk).await?;
            self.type_indexes.count_read(items.len());
            for sk in chunk {
                let Some(item) = items.remove(sk) else {
                    // Its registration has not written it yet, or failed.
                    continue;
                };
                if item.contains_key("deleted_at") {
                    self.drop_stale_entry(tenant, event_type, sk).await;
                    continue;
                }
                if let Some(id) = get_s(&item, "id").and_then(|i| SubscriptionId::parse(i).ok()) {
                    self.placements.note(&id, &item);
                }
                let key = key_of(&item);
                let Some((sub, spilling)) =
                    readable_keyed("subscription", &key, from_item(item))?.flatten()
                else {
                    continue;
                };
                self.lane_flags.note_all(&sub.id, spilling);
                if sub.status == SubscriptionStatus::Active && sub.takes(event_type) {
                    out.push(sub);
                    if out.len() >= limit {
                        return Ok(Some(out));
                    }
                }
            }
        }
        Ok(Some(out))
    }

    /// The sort keys of the subscriptions the index names under the
    /// filters that take `event_type`, after `after`, in order.
    async fn indexed_ids(
        &self,
        tenant: &TenantId,
        event_type: &EventType,
        after: Option<&SubscriptionId>,
    ) -> StoreResult<std::collections::BTreeSet<String>> {
        let lo = after.map(sub_sk).unwrap_or_else(|| "S#".to_owned());
        let mut ids = std::collections::BTreeSet::new();
        for filter in event_type.matching_filters() {
            let query = self
                .ddb
                .query()
                .table_name(&self.settings.table)
                .key_condition_expression("pk = :pk AND sk > :lo")
                .consistent_read(true)
                .expression_attribute_values(":pk", string_attr(entry_pk(tenant, &filter)))
                .expression_attribute_values(":lo", string_attr(&lo));
            let found = super::query_items(query, usize::MAX, |item| {
                Ok(get_s(&item, "sk").map(str::to_owned))
            })
            .await?;
            ids.extend(found);
        }
        Ok(ids)
    }

    /// Removes the entries that name a tombstone under the filters that
    /// take `event_type` (best effort).
    async fn drop_stale_entry(&self, tenant: &TenantId, event_type: &EventType, sk: &str) {
        let Some(id) = sk
            .strip_prefix("S#")
            .and_then(|i| SubscriptionId::parse(i).ok())
        else {
            return;
        };
        self.unindex_filters(tenant, &id, event_type.matching_filters().into_iter())
            .await;
    }

    /// Subscription items of a tenant by sort key, strongly consistent,
    /// keyed by sort key; absent ones are missing.
    async fn get_consistent_many(
        &self,
        tenant: &TenantId,
        sks: &[String],
    ) -> StoreResult<BTreeMap<String, Item>> {
        let keys = sks
            .iter()
            .map(|sk| (tenant_pk(tenant), sk.clone()))
            .collect();
        Ok(self
            .get_many(keys, true)
            .await?
            .into_iter()
            .filter_map(|item| Some((get_s(&item, "sk")?.to_owned(), item)))
            .collect())
    }
}
