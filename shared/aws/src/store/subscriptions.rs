//! `SubscriptionStore` on DynamoDB: items keyed by tenant, tombstoned by
//! `deleted_at`; the read before every attempt is a consistent `GetItem`
//! on the base table.

use async_trait::async_trait;
use aws_sdk_dynamodb::types::AttributeValue;
use hooklane_core::domain::{EventType, Health, Subscription, SubscriptionId, TenantId};
use hooklane_core::ports::{StoreResult, SubscriptionStore};
use hooklane_core::record::{ms, SubscriptionRecord};

use super::{
    backend, corrupt, is_condition_failed, key_of, readable_keyed, took_effect, AwsStore, Item,
};
use crate::{n, s};

/// The partition key of a tenant.
pub(crate) fn tenant_pk(tenant: &TenantId) -> String {
    format!("T#{}", tenant.as_str())
}

/// The sort key of a subscription.
pub(crate) fn sub_sk(id: &SubscriptionId) -> String {
    format!("S#{}", id.as_str())
}

fn to_item(sub: &Subscription) -> StoreResult<Item> {
    let mut item: Item = serde_dynamo::to_item(SubscriptionRecord::from(sub)).map_err(backend)?;
    item.insert("pk".into(), s(tenant_pk(&sub.tenant)));
    item.insert("sk".into(), s(sub_sk(&sub.id)));
    Ok(item)
}

/// Parses a subscription item; `None` for a tombstone.
pub(crate) fn from_item(item: Item) -> StoreResult<Option<Subscription>> {
    if item.contains_key("deleted_at") {
        return Ok(None);
    }
    let rec: SubscriptionRecord =
        serde_dynamo::from_item(item).map_err(|_| corrupt("subscription"))?;
    Subscription::try_from(rec)
        .map(Some)
        .map_err(|_| corrupt("subscription"))
}

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
            .key("pk", s(tenant_pk(tenant)))
            .key("sk", s(sub_sk(id)))
            .update_expression(update)
            .condition_expression("#status = :from AND attribute_not_exists(deleted_at)")
            .expression_attribute_names("#status", "status")
            .expression_attribute_values(":from", s(from))
            .expression_attribute_values(":to", s(to));
        match values(req).send().await {
            Ok(_) => Ok(true),
            Err(e) if is_condition_failed(&e) => Ok(false),
            Err(e) => Err(backend(e)),
        }
    }

    /// A tenant's live subscriptions with ids after `after`, in id order,
    /// until `keep` has taken `limit` of them.
    async fn scan_tenant(
        &self,
        tenant: &TenantId,
        after: Option<&SubscriptionId>,
        limit: usize,
        keep: impl Fn(&Subscription) -> bool,
    ) -> StoreResult<Vec<Subscription>> {
        let lo = match after {
            Some(a) => sub_sk(a),
            None => "S#".to_owned(),
        };
        let mut out = Vec::new();
        let mut start: Option<Item> = None;
        loop {
            let resp = self
                .ddb
                .query()
                .table_name(&self.settings.table)
                .key_condition_expression("pk = :pk AND sk BETWEEN :lo AND :hi")
                .expression_attribute_values(":pk", s(tenant_pk(tenant)))
                .expression_attribute_values(":lo", s(lo.clone()))
                .expression_attribute_values(":hi", s("S$"))
                .set_exclusive_start_key(start.take())
                .send()
                .await
                .map_err(backend)?;
            for item in resp.items.unwrap_or_default() {
                let key = key_of(&item);
                let Some(sub) = readable_keyed("subscription", &key, from_item(item))?.flatten()
                else {
                    continue;
                };
                if after.is_some_and(|a| &sub.id == a) || !keep(&sub) {
                    continue;
                }
                out.push(sub);
                if out.len() >= limit {
                    return Ok(out);
                }
            }
            match resp.last_evaluated_key {
                Some(k) if !k.is_empty() => start = Some(k),
                _ => return Ok(out),
            }
        }
    }
}

#[async_trait]
impl SubscriptionStore for AwsStore {
    async fn insert(&self, sub: &Subscription) -> StoreResult<()> {
        // Idempotent (see `write_token`): a retried put of this insert
        // whose answer was lost succeeds rather than failing the create.
        let token = super::write_token();
        let mut item = to_item(sub)?;
        item.insert("insert_token".into(), s(&token));
        self.ddb
            .put_item()
            .table_name(&self.settings.table)
            .set_item(Some(item))
            .condition_expression("attribute_not_exists(pk) OR insert_token = :token")
            .expression_attribute_values(":token", s(token))
            .send()
            .await
            .map_err(backend)?;
        Ok(())
    }

    async fn get(
        &self,
        tenant: &TenantId,
        id: &SubscriptionId,
    ) -> StoreResult<Option<Subscription>> {
        let item = self.get_consistent(tenant_pk(tenant), sub_sk(id)).await?;
        match item {
            Some(item) => from_item(item),
            None => Ok(None),
        }
    }

    async fn list(
        &self,
        tenant: &TenantId,
        after: Option<&SubscriptionId>,
        limit: usize,
    ) -> StoreResult<Vec<Subscription>> {
        self.scan_tenant(tenant, after, limit, |_| true).await
    }

    async fn update(&self, sub: &Subscription) -> StoreResult<bool> {
        let rec = SubscriptionRecord::from(sub);
        // Every name through a placeholder: several are DynamoDB reserved
        // words (URL, among others).
        let mut set = vec![
            "#url = :url",
            "#filters = :filters",
            "#metadata = :metadata",
            "#secret = :secret",
            "#updated = :updated",
        ];
        let mut remove = Vec::new();
        let mut req = self
            .ddb
            .update_item()
            .table_name(&self.settings.table)
            .key("pk", s(tenant_pk(&sub.tenant)))
            .key("sk", s(sub_sk(&sub.id)))
            .expression_attribute_names("#url", "url")
            .expression_attribute_names("#filters", "filters")
            .expression_attribute_names("#metadata", "metadata")
            .expression_attribute_names("#secret", "secret")
            .expression_attribute_names("#updated", "updated_at")
            .expression_attribute_names("#description", "description")
            .expression_attribute_names("#prev", "prev_secret")
            .expression_attribute_names("#prev_exp", "prev_secret_expires_at")
            .expression_attribute_values(":url", s(rec.url))
            .expression_attribute_values(
                ":filters",
                serde_dynamo::to_attribute_value(&rec.filters).map_err(backend)?,
            )
            .expression_attribute_values(
                ":metadata",
                serde_dynamo::to_attribute_value(&rec.metadata).map_err(backend)?,
            )
            .expression_attribute_values(":secret", s(rec.secret))
            .expression_attribute_values(":updated", n(rec.updated_at));
        match rec.description {
            Some(d) => {
                set.push("#description = :description");
                req = req.expression_attribute_values(":description", s(d));
            }
            None => remove.push("#description"),
        }
        match (rec.prev_secret, rec.prev_secret_expires_at) {
            (Some(p), Some(exp)) => {
                set.push("#prev = :prev, #prev_exp = :prev_exp");
                req = req
                    .expression_attribute_values(":prev", s(p))
                    .expression_attribute_values(":prev_exp", n(exp));
            }
            _ => remove.push("#prev, #prev_exp"),
        }
        let mut expr = format!("SET {}", set.join(", "));
        if !remove.is_empty() {
            expr.push_str(&format!(" REMOVE {}", remove.join(", ")));
        }
        match req
            .update_expression(expr)
            .condition_expression("attribute_exists(pk) AND attribute_not_exists(deleted_at)")
            .send()
            .await
        {
            Ok(_) => Ok(true),
            Err(e) if is_condition_failed(&e) => Ok(false),
            Err(e) => Err(backend(e)),
        }
    }

    async fn delete(&self, tenant: &TenantId, id: &SubscriptionId) -> StoreResult<Option<u64>> {
        let now = ms(time::OffsetDateTime::now_utc());
        // Idempotent (see `write_token`): a retried tombstone write whose
        // answer was lost is this DELETE (204), not a second one (404).
        let token = super::write_token();
        let res = self
            .ddb
            .update_item()
            .table_name(&self.settings.table)
            .key("pk", s(tenant_pk(tenant)))
            .key("sk", s(sub_sk(id)))
            .update_expression("SET deleted_at = :now, updated_at = :now, delete_token = :token")
            .condition_expression(
                "attribute_exists(pk) AND (attribute_not_exists(deleted_at) OR delete_token = :token)",
            )
            .expression_attribute_values(":now", n(now))
            .expression_attribute_values(":token", s(token))
            .send()
            .await;
        match res {
            Ok(_) => {}
            Err(e) if is_condition_failed(&e) => return Ok(None),
            Err(e) => return Err(backend(e)),
        }
        // Queued messages are dropped when the delivery function meets
        // them; spilled ones never reach the queue.
        Ok(Some(self.drop_spilled(id).await?))
    }

    async fn matching(
        &self,
        tenant: &TenantId,
        event_type: &EventType,
        after: Option<&SubscriptionId>,
        limit: usize,
    ) -> StoreResult<Vec<Subscription>> {
        self.scan_tenant(tenant, after, limit, |sub| {
            sub.status == hooklane_core::domain::SubscriptionStatus::Active
                && sub.filters.iter().any(|f| f.matches(event_type))
        })
        .await
    }

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
            req.expression_attribute_values(":at", n(ms(at)))
                .expression_attribute_values(":reason", s(reason))
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
            req.expression_attribute_values(":at", n(ms(at)))
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
                .key("pk", s(tenant_pk(tenant)))
                .key("sk", s(sub_sk(id)))
                .update_expression("SET status_reason = :r")
                .condition_expression("attribute_exists(pk)")
                .expression_attribute_values(":r", s(reason))
                .send()
                .await,
        )
        .map(|_| ())
    }

    async fn record_health(
        &self,
        tenant: &TenantId,
        id: &SubscriptionId,
        health: &Health,
    ) -> StoreResult<()> {
        let value: AttributeValue = serde_dynamo::to_attribute_value(health).map_err(backend)?;
        let res = self
            .ddb
            .update_item()
            .table_name(&self.settings.table)
            .key("pk", s(tenant_pk(tenant)))
            .key("sk", s(sub_sk(id)))
            .update_expression("SET health = :h")
            .condition_expression("attribute_exists(pk)")
            .expression_attribute_values(":h", value)
            .send()
            .await;
        took_effect(res).map(|_| ())
    }
}
