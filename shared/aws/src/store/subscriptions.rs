//! `SubscriptionStore` and `Suspensions` on DynamoDB: items keyed by
//! tenant, tombstoned by `deleted_at`; the read before every attempt is a
//! consistent `GetItem` on the base table. Each read also notes the item's
//! lane flag (`spilling`) for the lane adapter ([`super::lane_flags`]).

use async_trait::async_trait;
use aws_sdk_dynamodb::types::AttributeValue;
use hooklane_core::domain::{EventType, Subscription, SubscriptionId, TenantId};
use hooklane_core::ports::{StoreResult, SubscriptionStore};
use hooklane_core::record::{ms, SubscriptionRecord};

use super::batches::Txn;
use super::items::keys::{sub_sk, tenant_pk};
use super::items::subscription::{editable_fields, from_item, to_item, EDITABLE};
use super::subs::AwsSubscriptions;
use super::{backend, get_s, is_condition_failed, key_of, readable_keyed, Item};
use crate::{number_attr, string_attr};

use super::table::UpdateBuilder;

impl AwsSubscriptions {
    /// Every live subscription of a tenant.
    pub(crate) async fn live_subscriptions(
        &self,
        tenant: &TenantId,
    ) -> StoreResult<Vec<Subscription>> {
        self.scan_tenant(tenant, None, usize::MAX, |_| true).await
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
        let query = self
            .ddb
            .query()
            .table_name(&self.settings.table)
            .key_condition_expression("pk = :pk AND sk BETWEEN :lo AND :hi")
            // Fan-out queues deliveries on what this read says (lanes,
            // their switch): it must not be older than a write already
            // acted on.
            .consistent_read(true)
            .expression_attribute_values(":pk", string_attr(tenant_pk(tenant)))
            .expression_attribute_values(":lo", string_attr(lo))
            .expression_attribute_values(":hi", string_attr("S$"));
        super::query_items(query, limit, |item| {
            let key = key_of(&item);
            if let Some(id) = get_s(&item, "id").and_then(|i| SubscriptionId::parse(i).ok()) {
                self.placements.note(&id, &item);
            }
            let Some((sub, spilling)) =
                readable_keyed("subscription", &key, from_item(item))?.flatten()
            else {
                return Ok(None);
            };
            self.lane_flags.note_all(&sub.id, spilling);
            Ok((after.is_none_or(|a| &sub.id != a) && keep(&sub)).then_some(sub))
        })
        .await
    }
}

impl AwsSubscriptions {
    /// A subscription's placement: as just noted, or read (strongly
    /// consistent); `None` when it is gone.
    pub(crate) async fn placement(
        &self,
        tenant: &TenantId,
        sub: &SubscriptionId,
    ) -> StoreResult<Option<super::items::placement::Placement>> {
        if let Some(p) = self.placements.fresh(sub) {
            return Ok(Some(p));
        }
        self.placement_now(tenant, sub).await
    }

    pub(crate) async fn placement_now(
        &self,
        tenant: &TenantId,
        sub: &SubscriptionId,
    ) -> StoreResult<Option<super::items::placement::Placement>> {
        let item = self.get_consistent(tenant_pk(tenant), sub_sk(sub)).await?;
        Ok(item.filter(|i| !i.contains_key("deleted_at")).map(|i| {
            self.placements.note(sub, &i);
            super::items::placement::Placement::of(&i)
        }))
    }

    /// The conditional update of a subscription's editable fields: on
    /// condition it is live and its `lanes` are still `was`'s, writing
    /// `sent_lanes` first if the item never switched lanes.
    fn update_request(
        &self,
        sub: &Subscription,
        expression: String,
        values: Vec<(&'static str, AttributeValue)>,
        was: &super::items::placement::Placement,
    ) -> UpdateBuilder {
        let expression = expression.replacen(
            "SET ",
            "SET sent_lanes = if_not_exists(sent_lanes, :was), ",
            1,
        );
        let mut req = self
            .update_sub(&sub.tenant, &sub.id)
            .update_expression(expression)
            .condition_expression(
                "attribute_exists(pk) AND attribute_not_exists(deleted_at) AND #lanes = :old_lanes",
            )
            .expression_attribute_values(":old_lanes", number_attr(was.lanes.get()))
            .expression_attribute_values(":was", number_attr(was.sent.get()))
            .return_values(aws_sdk_dynamodb::types::ReturnValue::AllOld);
        for (placeholder, name) in EDITABLE {
            req = req.expression_attribute_names(*placeholder, *name);
        }
        for (placeholder, value) in values {
            req = req.expression_attribute_values(placeholder, value);
        }
        req
    }

    /// The type index after an update landed: its entries written again
    /// when the update took long (so no other PATCH's removal took them as
    /// old meanwhile), and the entries of filters it took off (`old` is
    /// the item before) removed.
    async fn reindex_after_update(
        &self,
        sub: &Subscription,
        indexed: std::time::Instant,
        old: &Item,
    ) -> StoreResult<()> {
        if indexed.elapsed() > super::type_index::REWRITE_AFTER {
            self.index_filters(&sub.tenant, &sub.id, &sub.filters)
                .await?;
        }
        if let Some(AttributeValue::L(filters)) = old.get("filters") {
            let filters: Vec<String> = filters
                .iter()
                .filter_map(|f| f.as_s().ok().cloned())
                .collect();
            self.unindex_removed(&sub.tenant, &sub.id, &filters, &sub.filters)
                .await;
        }
        Ok(())
    }
}

#[async_trait]
impl SubscriptionStore for AwsSubscriptions {
    async fn insert(&self, sub: &Subscription) -> StoreResult<()> {
        // Idempotent (see `write_token`): a retried put of this insert
        // whose answer was lost succeeds rather than failing the create.
        // With the tenant's lane counter in one transaction
        // ([`super::tenant_share`]), tried again when another transaction
        // on the counter cancels it. A retry of one whose answer was lost
        // counts its lanes twice: the counter errs high, never low.
        let token = super::write_token();
        // Its type index entries first: the index may name more than the
        // tenant has, never less (`type_index`).
        self.index_filters(&sub.tenant, &sub.id, &sub.filters)
            .await?;
        let mut item = to_item(sub)?;
        item.insert("insert_token".into(), string_attr(&token));
        let put = aws_sdk_dynamodb::types::Put::builder()
            .table_name(&self.settings.table)
            .set_item(Some(item))
            .condition_expression("attribute_not_exists(pk) OR insert_token = :token")
            .expression_attribute_values(":token", string_attr(&token))
            .build()
            .map_err(backend)?;
        let put = aws_sdk_dynamodb::types::TransactWriteItem::builder()
            .put(put)
            .build();
        let count = self.count_lanes_in(&sub.tenant, i64::from(sub.lanes.get()))?;
        match self.transact(vec![put, count]).await? {
            Txn::Done => Ok(()),
            Txn::ConditionFailed(_) => Err(hooklane_core::ports::StoreError::Conflict(
                "a subscription with this id exists".into(),
            )),
        }
    }

    async fn get(
        &self,
        tenant: &TenantId,
        id: &SubscriptionId,
    ) -> StoreResult<Option<Subscription>> {
        let item = self.get_consistent(tenant_pk(tenant), sub_sk(id)).await?;
        if let Some(item) = &item {
            self.placements.note(id, item);
        }
        let Some((sub, spilling)) = item.map(from_item).transpose()?.flatten() else {
            return Ok(None);
        };
        self.lane_flags.note_all(&sub.id, spilling);
        Ok(Some(sub))
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
        let (expression, values) = editable_fields(&SubscriptionRecord::from(sub))?;
        // The lanes deliveries are queued on stay as they are until the
        // lane adapter switches (`lane_change`); an item that never
        // switched gets them written now, before `lanes` changes.
        let Some(was) = self.placement(&sub.tenant, &sub.id).await? else {
            return Ok(false);
        };
        // The tenant's lane counter errs high (`tenant_share`): more lanes
        // are counted before they are written; fewer are never uncounted
        // (the old lanes deliver until their fences pass, and a retried
        // decrement would count low). The write holds only if `lanes` is
        // still what the count was taken from.
        // The new filters' type index entries before the filters; the
        // ones of filters taken off go after (`type_index`).
        let indexed = std::time::Instant::now();
        self.index_filters(&sub.tenant, &sub.id, &sub.filters)
            .await?;
        let delta = i64::from(sub.lanes.get()) - i64::from(was.lanes.get());
        if delta > 0 {
            self.count_lanes(&sub.tenant, delta).await?;
        }
        if indexed.elapsed() > super::type_index::REWRITE_AFTER {
            self.index_filters(&sub.tenant, &sub.id, &sub.filters)
                .await?;
        }
        let res = self
            .update_request(sub, expression, values, &was)
            .send()
            .await;
        self.placements.forget(&sub.id);
        match res {
            Ok(out) => {
                let old = out.attributes.unwrap_or_default();
                self.reindex_after_update(sub, indexed, &old).await?;
                Ok(true)
            }
            // Gone, or its lanes changed since they were read: read again.
            Err(e) if is_condition_failed(&e) => {
                if delta > 0 {
                    self.count_lanes(&sub.tenant, -delta).await?;
                }
                match self.placement_now(&sub.tenant, &sub.id).await? {
                    Some(now) if now.lanes != was.lanes => Box::pin(self.update(sub)).await,
                    _ => Ok(false),
                }
            }
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
            .key("pk", string_attr(tenant_pk(tenant)))
            .key("sk", string_attr(sub_sk(id)))
            // Out of the index of suspended subscriptions, if it was in it.
            .update_expression(
                "SET deleted_at = :now, updated_at = :now, delete_token = :token \
                 REMOVE gsi2pk, gsi2sk",
            )
            .return_values(aws_sdk_dynamodb::types::ReturnValue::AllNew)
            .condition_expression(
                "attribute_exists(pk) AND (attribute_not_exists(deleted_at) OR delete_token = :token)",
            )
            .expression_attribute_values(":now", number_attr(now))
            .expression_attribute_values(":token", string_attr(&token))
            .send()
            .await;
        let item = match res {
            Ok(out) => out.attributes.unwrap_or_default(),
            Err(e) if is_condition_failed(&e) => return Ok(None),
            Err(e) => return Err(backend(e)),
        };
        // Queued messages are dropped when the delivery function meets
        // them; spilled ones never reach the queue. Every lane that ever
        // spilled has its counter on the item.
        let mut dropped = 0;
        for lane in super::items::lanes::lanes_that_spilled(&item) {
            dropped += super::spill::drop_spilled(&self.table, (tenant, id, lane)).await?;
        }
        if let Some(lanes) = super::get_n(&item, "lanes") {
            self.uncount_lanes(tenant, lanes, &token).await;
        }
        let filters = serde_dynamo::from_item::<_, SubscriptionRecord>(item)
            .map(|r| r.filters)
            .unwrap_or_default();
        self.unindex_filters(tenant, id, filters.into_iter()).await;
        Ok(Some(dropped))
    }

    async fn matching(
        &self,
        tenant: &TenantId,
        event_type: &EventType,
        after: Option<&SubscriptionId>,
        limit: usize,
    ) -> StoreResult<Vec<Subscription>> {
        let takes = |sub: &Subscription| {
            sub.status == hooklane_core::domain::SubscriptionStatus::Active && sub.takes(event_type)
        };
        if let Some(size) = self.reads_by_type(tenant) {
            if let Some(found) = self
                .matching_by_type(tenant, event_type, after, limit, size)
                .await?
            {
                return Ok(found);
            }
            // More than a fifth of the tenant (as last counted) may take
            // this type: read the tenant, counting it again.
        }
        // The whole tenant, noting every live subscription's filters: a
        // read that saw them all tells whether the tenant is wide enough
        // for its type index.
        let may_index = self.may_index(tenant);
        let seen = std::sync::Mutex::new(Vec::new());
        let found = self
            .scan_tenant(tenant, after, limit, |sub| {
                seen.lock()
                    .expect("seen lock")
                    .push((sub.id.clone(), sub.filters.clone()));
                takes(sub)
            })
            .await?;
        let seen = seen.into_inner().expect("seen lock");
        self.type_indexes.count_read(seen.len());
        if after.is_none() && found.len() < limit {
            self.index_if_wide(tenant, &seen, may_index).await;
        }
        Ok(found)
    }
}
