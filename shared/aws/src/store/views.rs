//! Delivery views on AWS (`GET /events/{id}`): the event's delivery
//! records in the `gsi1` index (those that were retried, parked, dropped
//! or held), then, read by key (eventually consistent, as the index is),
//! those of the tenant's other live subscriptions (a delivery delivered
//! at its first attempt never enters the index: one index write less on
//! the delivery path), and a queued record for each matching active
//! subscription that has none yet (records appear at the first attempt).
//! A record whose subscription was deleted shows only if it is in the
//! index (dropped, parked, retried): a deleted subscription is not listed
//! among the event's.

use std::collections::HashSet;

use async_trait::async_trait;
use hooklane_core::domain::{
    DeliveryRecord, EventId, Subscription, SubscriptionId, SubscriptionStatus, TenantId,
};
use hooklane_core::ports::{DeliveryViews, StoreResult};

use super::deliveries::{by_event_pk, record_of, record_pk, record_sk};
use super::{backend, corrupt, get_s, readable, AwsStore, Item};
use crate::string_attr;

#[async_trait]
impl DeliveryViews for AwsStore {
    async fn of_event(
        &self,
        tenant: &TenantId,
        event_id: &EventId,
    ) -> StoreResult<Vec<(SubscriptionId, DeliveryRecord)>> {
        let resp = self
            .ddb
            .query()
            .table_name(&self.settings.table)
            .index_name("gsi1")
            .key_condition_expression("gsi1pk = :pk")
            .expression_attribute_values(":pk", string_attr(by_event_pk(tenant, event_id)))
            .send()
            .await
            .map_err(backend)?;
        let mut views: Vec<(SubscriptionId, DeliveryRecord)> = Vec::new();
        for item in resp.items.unwrap_or_default() {
            views.extend(readable("delivery", &item, view(&item))?);
        }
        // The rest are read by key (one delivered at its first attempt,
        // or in its first attempt, is not in the index), for every live
        // subscription of the tenant, whatever its status and filters now:
        // a record shows however the subscription changed since. One with
        // no record is queued if it matches the event now.
        if let Some(event) = hooklane_core::ports::EventArchive::get(self, tenant, event_id).await?
        {
            let subs = self.live_subscriptions(tenant).await?;
            let mut shown: HashSet<SubscriptionId> =
                views.iter().map(|(id, _)| id.clone()).collect();
            let rest: Vec<&Subscription> = subs.iter().filter(|s| !shown.contains(&s.id)).collect();
            let keys = rest
                .iter()
                .map(|s| (record_pk(&s.id), record_sk(event_id)))
                .collect();
            for item in self.get_many(keys, false).await? {
                // The subscription from the key: a record a backfill reset
                // before its first attempt holds little more than its state.
                let Some(sub) = get_s(&item, "pk")
                    .and_then(|pk| pk.strip_prefix("D#"))
                    .and_then(|id| SubscriptionId::parse(id).ok())
                else {
                    continue;
                };
                if let Some(record) = readable("delivery", &item, record_of(&item))? {
                    shown.insert(sub.clone());
                    views.push((sub, record));
                }
            }
            for s in rest {
                let queued = s.status == SubscriptionStatus::Active
                    && s.takes(&event.event_type)
                    && s.created_at <= event.created_at;
                if queued && !shown.contains(&s.id) {
                    views.push((s.id.clone(), DeliveryRecord::queued()));
                }
            }
        }
        views.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(views)
    }
}

/// A delivery record with its subscription.
fn view(item: &Item) -> StoreResult<(SubscriptionId, DeliveryRecord)> {
    let sub = get_s(item, "subscription_id").ok_or_else(|| corrupt("subscription id"))?;
    let sub = SubscriptionId::parse(sub).map_err(|_| corrupt("subscription id"))?;
    Ok((sub, record_of(item)?))
}
