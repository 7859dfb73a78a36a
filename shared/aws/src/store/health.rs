//! The health record's writes on DynamoDB (G8), when a delivery's retry
//! sequence ends: a success's record as it is; a failure's over the record
//! as stored, so that sequences ending at once on several lanes (or in
//! several delivery functions) each count.

use aws_sdk_dynamodb::types::AttributeValue;
use hooklane_core::domain::{Health, SubscriptionId, TenantId};
use hooklane_core::health::HealthWrite;
use hooklane_core::ports::{StoreError, StoreResult};

use super::items::keys::{sub_sk, tenant_pk};
use super::subs::AwsSubscriptions;
use super::{backend, took_effect};
use crate::string_attr;

/// How often a failed sequence's health write is tried over a record that
/// other lanes keep changing, before it gives up (the caller logs it, and
/// that one failure goes uncounted).
const HEALTH_TRIES: usize = 8;

impl AwsSubscriptions {
    /// Writes a subscription's health record when a delivery's retry
    /// sequence ended: a success's record as it is; a failure's over the
    /// record as stored, read strongly consistent and written on condition
    /// that it is still what was read (tried again when another lane wrote
    /// in between). The record written, `None` when the subscription is
    /// gone.
    pub(crate) async fn write_health(
        &self,
        tenant: &TenantId,
        id: &SubscriptionId,
        write: &HealthWrite,
    ) -> StoreResult<Option<Health>> {
        if let HealthWrite::Set(health) = write {
            let took = self.put_health(tenant, id, health, None).await?;
            return Ok(took.then(|| health.clone()));
        }
        for _ in 0..HEALTH_TRIES {
            let Some(item) = self
                .ddb
                .get_item()
                .table_name(&self.settings.table)
                .key("pk", string_attr(tenant_pk(tenant)))
                .key("sk", string_attr(sub_sk(id)))
                .consistent_read(true)
                .projection_expression("pk, health")
                .send()
                .await
                .map_err(backend)?
                .item
            else {
                return Ok(None);
            };
            let stored = item.get("health");
            let prev: Health = match stored {
                Some(v) => serde_dynamo::from_attribute_value(v.clone()).map_err(backend)?,
                None => Health::default(),
            };
            let health = write.over(&prev);
            let expected = Some(stored.cloned());
            if self.put_health(tenant, id, &health, expected).await? {
                return Ok(Some(health));
            }
        }
        Err(StoreError::backend(format!(
            "the health record of {} changed under {HEALTH_TRIES} writes in a row",
            id.as_str()
        )))
    }

    /// `SET health`, on the subscription's existence, and when `expected`
    /// is given, on the stored record being that (or absent, for `None`).
    async fn put_health(
        &self,
        tenant: &TenantId,
        id: &SubscriptionId,
        health: &Health,
        expected: Option<Option<AttributeValue>>,
    ) -> StoreResult<bool> {
        let value: AttributeValue = serde_dynamo::to_attribute_value(health).map_err(backend)?;
        let update = self
            .update_sub(tenant, id)
            .update_expression("SET health = :h")
            .expression_attribute_values(":h", value);
        let update = match expected {
            None => update.condition_expression("attribute_exists(pk)"),
            Some(None) => {
                update.condition_expression("attribute_exists(pk) AND attribute_not_exists(health)")
            }
            Some(Some(prev)) => update
                .condition_expression("health = :prev")
                .expression_attribute_values(":prev", prev),
        };
        took_effect(update.send().await)
    }
}
