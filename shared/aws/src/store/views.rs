//! Delivery views on AWS (`GET /events/{id}`): the event's delivery
//! records in the `gsi1` index (those that were retried, parked, dropped
//! or held), then, read by key (eventually consistent, as the index is),
//! those of the tenant's other live subscriptions (a delivery delivered
//! at its first attempt never enters the index: one index write less on
//! the delivery path), and a queued record for each matching active
//! subscription that has none yet (records appear at the first attempt).
//! A record whose subscription was deleted shows only if it is in the
//! index (dropped, parked, retried): a deleted subscription is not listed
//! among the event's. A record at its first attempt with no outcome
//! written is settled by that attempt's log entry ([`super::first_attempt`]),
//! read eventually consistent too: just after a first attempt delivered, the
//! view can show it in flight for a moment.

use std::collections::HashSet;

use async_trait::async_trait;
use hooklane_core::domain::{
    DeliveryRecord, EventId, Overview, Subscription, SubscriptionId, SubscriptionStatus, TenantId,
};
use hooklane_core::ports::{DeliveryViews, EventArchive, StoreResult, SubscriptionStore};

use super::events::AwsArchive;
use super::first_attempt::{first_log_key, settled};
use super::items::keys::{by_event_pk, record_pk, record_pk_sub, record_sk};
use super::records::AwsRecords;
use super::{backend, corrupt, get_s, readable, Item};
use crate::string_attr;

/// Delivery views on AWS: a port of its own, reading the delivery records,
/// the event archive and the tenant's subscriptions through their ports.
#[derive(Clone)]
pub struct AwsViews {
    pub(crate) records: AwsRecords,
    pub(crate) archive: AwsArchive,
    pub(crate) subscriptions: std::sync::Arc<dyn SubscriptionStore>,
}

#[async_trait]
impl DeliveryViews for AwsViews {
    async fn overview(&self, _parked: bool) -> StoreResult<Overview> {
        self.records.queue_overview().await
    }

    async fn of_event(
        &self,
        tenant: &TenantId,
        event_id: &EventId,
    ) -> StoreResult<Vec<(SubscriptionId, DeliveryRecord)>> {
        let indexed = self.indexed_records(tenant, event_id).await?;
        let mut shown: HashSet<SubscriptionId> = indexed
            .iter()
            .filter_map(|item| get_s(item, "subscription_id"))
            .filter_map(|id| SubscriptionId::parse(id).ok())
            .collect();
        // The rest are read by key (one delivered at its first attempt,
        // or in its first attempt, is not in the index), for every live
        // subscription of the tenant, whatever its status and filters now:
        // a record shows however the subscription changed since. One with
        // no record is queued if it matches the event now.
        let mut by_key = Vec::new();
        let mut queued = Vec::new();
        if let Some(event) = self.archive.get(tenant, event_id).await? {
            let subs = self.subscriptions.list(tenant, None, usize::MAX).await?;
            let rest: Vec<&Subscription> = subs.iter().filter(|s| !shown.contains(&s.id)).collect();
            let keys = rest
                .iter()
                .map(|s| (record_pk(&s.id), record_sk(event_id)))
                .collect();
            by_key = self.records.get_many(keys, false).await?;
            shown.extend(by_key.iter().filter_map(sub_of_key));
            let mut doc = None;
            queued = rest
                .into_iter()
                .filter(|s| {
                    s.status == SubscriptionStatus::Active
                        && s.receives(&event, &mut doc)
                        && s.created_at <= event.created_at
                        && !shown.contains(&s.id)
                })
                .map(|s| s.id.clone())
                .collect();
        }
        // Records at their first attempt with no outcome written: settled
        // by that attempt's log entry (`first_attempt`).
        let all: Vec<&Item> = indexed.iter().chain(&by_key).collect();
        let entries = self.records.first_entries(&all).await?;
        let mut views: Vec<(SubscriptionId, DeliveryRecord)> = Vec::new();
        for item in indexed.iter().chain(&by_key) {
            let entry = first_log_key(item).and_then(|k| entries.get(&k));
            views.extend(readable("delivery", item, view(item, entry))?);
        }
        views.extend(queued.into_iter().map(|id| (id, DeliveryRecord::queued())));
        views.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(views)
    }
}

impl AwsViews {
    /// An event's delivery records in the `gsi1` index (every record past
    /// its first attempt's outcome).
    async fn indexed_records(
        &self,
        tenant: &TenantId,
        event_id: &EventId,
    ) -> StoreResult<Vec<Item>> {
        let resp = self
            .records
            .ddb
            .query()
            .table_name(&self.records.settings.table)
            .index_name("gsi1")
            .key_condition_expression("gsi1pk = :pk")
            .expression_attribute_values(":pk", string_attr(by_event_pk(tenant, event_id)))
            .send()
            .await
            .map_err(backend)?;
        Ok(resp.items.unwrap_or_default())
    }
}

/// The subscription of a record, from its key: a record a backfill reset
/// before its first attempt holds little more than its state.
fn sub_of_key(item: &Item) -> Option<SubscriptionId> {
    get_s(item, "pk").and_then(record_pk_sub)
}

/// A delivery record with its subscription, settled by `entry`.
fn view(item: &Item, entry: Option<&Item>) -> StoreResult<(SubscriptionId, DeliveryRecord)> {
    let sub = sub_of_key(item).ok_or_else(|| corrupt("subscription id"))?;
    Ok((sub, settled(item, entry)?))
}
