//! `Suspensions` on DynamoDB: the guarded status changes of a
//! subscription's item (only an active subscription is suspended, only a
//! suspended one activated, never a tombstone), each one conditional
//! write, and the status reason beside them. A suspended subscription's
//! item is in the index of suspended subscriptions (`gsi2`, partition
//! `SUSPENDED`) while it is suspended.

use async_trait::async_trait;
use hooklane_core::domain::{SubscriptionId, SubscriptionStatus, TenantId};
use hooklane_core::health::StatusChange;
use hooklane_core::ports::{StoreResult, Suspensions};
use hooklane_core::record::ms;

use super::items::keys::{suspended_sk, SUSPENDED_PK};
use super::{backend, is_condition_failed, took_effect};
use crate::{number_attr, string_attr};

super::table::table_port!(
    /// Suspension and re-enabling on DynamoDB.
    AwsSuspensions
);

impl AwsSuspensions {
    /// The conditional write of a status change: the new status and
    /// `updated_at`, `suspended_at` and the reason set or removed, the
    /// health record when the change gives one.
    async fn write_change(
        &self,
        tenant: &TenantId,
        id: &SubscriptionId,
        change: &StatusChange,
    ) -> StoreResult<bool> {
        let mut set = vec!["#status = :to", "updated_at = :at"];
        let mut remove = Vec::new();
        let mut req = self
            .update_sub(tenant, id)
            .condition_expression("#status = :from AND attribute_not_exists(deleted_at)")
            .expression_attribute_names("#status", "status")
            .expression_attribute_values(":from", string_attr(change.from.as_str()))
            .expression_attribute_values(":to", string_attr(change.to.as_str()))
            .expression_attribute_values(":at", number_attr(ms(change.at)));
        match change.suspended_at {
            Some(t) => {
                set.push("suspended_at = :sat");
                req = req.expression_attribute_values(":sat", number_attr(ms(t)));
            }
            None => remove.push("suspended_at"),
        }
        // In the index of suspended subscriptions while suspended.
        match (change.to, change.suspended_at) {
            (SubscriptionStatus::Suspended, Some(t)) => {
                set.extend(["gsi2pk = :spk", "gsi2sk = :ssk"]);
                req = req
                    .expression_attribute_values(":spk", string_attr(SUSPENDED_PK))
                    .expression_attribute_values(
                        ":ssk",
                        string_attr(suspended_sk(ms(t), tenant, id)),
                    );
            }
            _ => remove.extend(["gsi2pk", "gsi2sk"]),
        }
        match &change.reason {
            Some(r) => {
                set.push("status_reason = :reason");
                req = req.expression_attribute_values(":reason", string_attr(r));
            }
            None => remove.push("status_reason"),
        }
        if let Some(h) = &change.health {
            set.push("health = :health");
            let health = serde_dynamo::to_attribute_value(h).map_err(backend)?;
            req = req.expression_attribute_values(":health", health);
        }
        let mut update = format!("SET {}", set.join(", "));
        if !remove.is_empty() {
            update.push_str(&format!(" REMOVE {}", remove.join(", ")));
        }
        match req.update_expression(update).send().await {
            Ok(_) => Ok(true),
            Err(e) if is_condition_failed(&e) => Ok(false),
            Err(e) => Err(backend(e)),
        }
    }
}

#[async_trait]
impl Suspensions for AwsSuspensions {
    async fn change_status(
        &self,
        tenant: &TenantId,
        id: &SubscriptionId,
        change: &StatusChange,
    ) -> StoreResult<bool> {
        self.write_change(tenant, id, change).await
    }

    async fn set_status_reason(
        &self,
        tenant: &TenantId,
        id: &SubscriptionId,
        reason: &str,
    ) -> StoreResult<()> {
        took_effect(
            self.update_sub(tenant, id)
                .update_expression("SET status_reason = :r")
                .condition_expression("attribute_exists(pk)")
                .expression_attribute_values(":r", string_attr(reason))
                .send()
                .await,
        )
        .map(|_| ())
    }
}
