//! `Suspensions` on DynamoDB: the guarded status changes of a
//! subscription's item (only an active subscription is suspended, only a
//! suspended one activated, never a tombstone), each one conditional
//! write, and the status reason beside them.

use async_trait::async_trait;
use hooklane_core::domain::{Health, SubscriptionId, TenantId};
use hooklane_core::ports::{StoreResult, Suspensions};
use hooklane_core::record::ms;

use super::keys::{sub_sk, tenant_pk};
use super::{backend, is_condition_failed, took_effect, AwsStore};
use crate::{number_attr, string_attr};

type UpdateBuilder = aws_sdk_dynamodb::operation::update_item::builders::UpdateItemFluentBuilder;

impl AwsStore {
    /// A guarded status change (`ConditionExpression` on the current
    /// status); `true` only when it took effect.
    async fn transition(
        &self,
        tenant: &TenantId,
        id: &SubscriptionId,
        update: &str,
        (from, to): (&str, &str),
        values: impl FnOnce(UpdateBuilder) -> UpdateBuilder,
    ) -> StoreResult<bool> {
        let req = self
            .ddb
            .update_item()
            .table_name(&self.settings.table)
            .key("pk", string_attr(tenant_pk(tenant)))
            .key("sk", string_attr(sub_sk(id)))
            .update_expression(update)
            .condition_expression("#status = :from AND attribute_not_exists(deleted_at)")
            .expression_attribute_names("#status", "status")
            .expression_attribute_values(":from", string_attr(from))
            .expression_attribute_values(":to", string_attr(to));
        match values(req).send().await {
            Ok(_) => Ok(true),
            Err(e) if is_condition_failed(&e) => Ok(false),
            Err(e) => Err(backend(e)),
        }
    }
}

#[async_trait]
impl Suspensions for AwsStore {
    async fn suspend(
        &self,
        tenant: &TenantId,
        id: &SubscriptionId,
        at: time::OffsetDateTime,
        reason: &str,
    ) -> StoreResult<bool> {
        // The guarded transition: only an active subscription moves.
        let update =
            "SET #status = :to, suspended_at = :at, status_reason = :reason, updated_at = :at";
        self.transition(tenant, id, update, ("active", "suspended"), |req| {
            req.expression_attribute_values(":at", number_attr(ms(at)))
                .expression_attribute_values(":reason", string_attr(reason))
        })
        .await
    }

    async fn activate(
        &self,
        tenant: &TenantId,
        id: &SubscriptionId,
        at: time::OffsetDateTime,
    ) -> StoreResult<bool> {
        let health = serde_dynamo::to_attribute_value(Health::default()).map_err(backend)?;
        let update = "SET #status = :to, health = :health, updated_at = :at REMOVE suspended_at, status_reason";
        self.transition(tenant, id, update, ("suspended", "active"), |req| {
            req.expression_attribute_values(":at", number_attr(ms(at)))
                .expression_attribute_values(":health", health)
        })
        .await
    }

    async fn set_status_reason(
        &self,
        tenant: &TenantId,
        id: &SubscriptionId,
        reason: &str,
    ) -> StoreResult<()> {
        took_effect(
            self.ddb
                .update_item()
                .table_name(&self.settings.table)
                .key("pk", string_attr(tenant_pk(tenant)))
                .key("sk", string_attr(sub_sk(id)))
                .update_expression("SET status_reason = :r")
                .condition_expression("attribute_exists(pk)")
                .expression_attribute_values(":r", string_attr(reason))
                .send()
                .await,
        )
        .map(|_| ())
    }
}
