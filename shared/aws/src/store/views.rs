//! Delivery views on AWS (`GET /events/{id}`): the event's delivery
//! records in the `gsi1` index (those that were retried, parked, dropped
//! or held), then, read by key, those of the other matching subscriptions
//! (a delivery delivered at its first attempt never enters the index: one
//! index write less on the delivery path), and a queued record for each
//! matching subscription that has none yet (records appear at the first
//! attempt). A delivery delivered at its first attempt is shown while its
//! subscription matches the event, as `../shared/API.md` lists them: per
//! matching subscription.

use async_trait::async_trait;
use hooklane_core::domain::{DeliveryRecord, EventId, SubscriptionId, TenantId};
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
        // The other matching subscriptions that existed when the event was
        // accepted: their records are read by key (one delivered at its
        // first attempt, or in its first attempt, is not in the index);
        // one with no record yet is queued.
        if let Some(event) = hooklane_core::ports::EventArchive::get(self, tenant, event_id).await?
        {
            let subs = hooklane_core::ports::SubscriptionStore::matching(
                self,
                tenant,
                &event.event_type,
                None,
                10_000,
            )
            .await?;
            let rest: Vec<SubscriptionId> = subs
                .into_iter()
                .filter(|s| s.created_at <= event.created_at)
                .map(|s| s.id)
                .filter(|id| !views.iter().any(|(v, _)| v == id))
                .collect();
            let keys = rest
                .iter()
                .map(|id| (record_pk(id), record_sk(event_id)))
                .collect();
            for item in self.get_many_consistent(keys).await? {
                views.extend(readable("delivery", &item, view(&item))?);
            }
            for id in rest {
                if !views.iter().any(|(v, _)| *v == id) {
                    views.push((id, DeliveryRecord::queued()));
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
