//! Delivery views on AWS (`GET /events/{id}`): the event's delivery
//! records by the `gsi1` index, plus a queued record for each matching
//! subscription that has none yet (records appear at the first attempt).

use async_trait::async_trait;
use hooklane_core::domain::{DeliveryRecord, EventId, SubscriptionId, TenantId};
use hooklane_core::ports::{DeliveryViews, StoreResult};

use super::deliveries::{by_event_pk, record_of};
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
        // Records appear at the first attempt: a matching subscription that
        // existed when the event was accepted and has no record is pending.
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
            for sub in subs {
                if sub.created_at <= event.created_at && !views.iter().any(|(id, _)| id == &sub.id)
                {
                    views.push((sub.id, DeliveryRecord::queued()));
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
