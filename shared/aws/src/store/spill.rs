//! Spill (DESIGN §3): a FIFO queue scans only its first 120,000 messages
//! for deliverable groups, so a dead subscription with a deep backlog
//! could stall others. Once a subscription's lane fails (an attempt goes
//! into retry), fan-out stops sending its deliveries to the queue and
//! keeps them, in order, under `L#{subscription}`. When the lane delivers
//! again, the delivery function moves them back to the queue in order,
//! then clears the flag only when nothing is left (`spilled = 0`), so no
//! delivery overtakes an older one. Items spilled by a fan-out that read
//! the flag late are still refilled: the counter covers them.

use hooklane_core::domain::{Subscription, SubscriptionId};
use hooklane_core::ports::StoreResult;
use time::OffsetDateTime;

use super::subscriptions::{sub_sk, tenant_pk};
use super::{backend, get_s, is_condition_failed, padded, time_seq, took_effect, AwsStore, Item};
use crate::messages::DeliveryMessage;
use crate::{n, s};

/// How many spilled deliveries one refill round moves.
const REFILL_PAGE: i32 = 100;
/// Refill rounds before leaving the rest to the next success.
const REFILL_ROUNDS: usize = 50;

fn spill_pk(sub: &str) -> String {
    format!("L#{sub}")
}

impl AwsStore {
    /// Keeps one delivery in the spill store and counts it, if the lane is
    /// still spilling; `false` (nothing kept) when it no longer is. The
    /// count goes up first, on condition that the flag is still set: a
    /// refill clears the flag only at a count of zero, so it cannot clear
    /// it between this count and the item it counts, and a fan-out that
    /// read the flag before a refill cleared it sends to the queue instead
    /// of leaving an item nobody refills.
    pub(crate) async fn spill(&self, msg: &DeliveryMessage) -> StoreResult<bool> {
        if !self
            .add_spilled_while_spilling(&msg.tenant, &msg.subscription_id)
            .await?
        {
            return Ok(false);
        }
        // Spilled without the event: the archive holds it, and a refilled
        // delivery reads it from there.
        let body = serde_json::to_string(&DeliveryMessage {
            event: None,
            ..msg.clone()
        })
        .map_err(backend)?;
        self.ddb
            .put_item()
            .table_name(&self.settings.table)
            .item("pk", s(spill_pk(&msg.subscription_id)))
            .item("sk", s(padded(time_seq(OffsetDateTime::now_utc()))))
            .item("message", s(body))
            .send()
            .await
            .map_err(backend)?;
        Ok(true)
    }

    /// Counts one more spilled delivery if the lane is spilling.
    async fn add_spilled_while_spilling(&self, tenant: &str, sub: &str) -> StoreResult<bool> {
        let tenant =
            hooklane_core::domain::TenantId::parse(tenant).map_err(|_| super::corrupt("tenant"))?;
        let sub = SubscriptionId::parse(sub).map_err(|_| super::corrupt("subscription id"))?;
        took_effect(
            self.ddb
                .update_item()
                .table_name(&self.settings.table)
                .key("pk", s(tenant_pk(&tenant)))
                .key("sk", s(sub_sk(&sub)))
                .update_expression("ADD spilled :d")
                .condition_expression("attribute_exists(pk) AND spilling = :t")
                .expression_attribute_values(":d", n(1))
                .expression_attribute_values(
                    ":t",
                    aws_sdk_dynamodb::types::AttributeValue::Bool(true),
                )
                .send()
                .await,
        )
    }

    async fn add_spilled(&self, tenant: &str, sub: &str, delta: i64) -> StoreResult<()> {
        let tenant =
            hooklane_core::domain::TenantId::parse(tenant).map_err(|_| super::corrupt("tenant"))?;
        let sub = SubscriptionId::parse(sub).map_err(|_| super::corrupt("subscription id"))?;
        took_effect(
            self.ddb
                .update_item()
                .table_name(&self.settings.table)
                .key("pk", s(tenant_pk(&tenant)))
                .key("sk", s(sub_sk(&sub)))
                .update_expression("ADD spilled :d")
                .condition_expression("attribute_exists(pk)")
                .expression_attribute_values(":d", n(delta))
                .send()
                .await,
        )
        .map(|_| ())
    }

    /// Marks a subscription's lane as failing: new deliveries spill.
    pub(crate) async fn start_spilling(&self, sub: &Subscription) -> StoreResult<()> {
        took_effect(
            self.ddb
                .update_item()
                .table_name(&self.settings.table)
                .key("pk", s(tenant_pk(&sub.tenant)))
                .key("sk", s(sub_sk(&sub.id)))
                .update_expression("SET spilling = :t")
                .condition_expression(
                    "attribute_exists(pk) AND (attribute_not_exists(spilling) OR spilling = :f)",
                )
                .expression_attribute_values(
                    ":t",
                    aws_sdk_dynamodb::types::AttributeValue::Bool(true),
                )
                .expression_attribute_values(
                    ":f",
                    aws_sdk_dynamodb::types::AttributeValue::Bool(false),
                )
                .send()
                .await,
        )
        .map(|_| ())
    }

    async fn spilled_page(&self, sub: &SubscriptionId) -> StoreResult<Vec<Item>> {
        let resp = self
            .ddb
            .query()
            .table_name(&self.settings.table)
            .key_condition_expression("pk = :pk")
            .expression_attribute_values(":pk", s(spill_pk(sub.as_str())))
            .consistent_read(true)
            .limit(REFILL_PAGE)
            .send()
            .await
            .map_err(backend)?;
        Ok(resp.items.unwrap_or_default())
    }

    async fn delete_spilled(&self, sub: &SubscriptionId, items: &[Item]) -> StoreResult<()> {
        for item in items {
            let Some(sk) = get_s(item, "sk") else {
                continue;
            };
            self.ddb
                .delete_item()
                .table_name(&self.settings.table)
                .key("pk", s(spill_pk(sub.as_str())))
                .key("sk", s(sk))
                .send()
                .await
                .map_err(backend)?;
        }
        Ok(())
    }

    /// Refills the subscription's lane if it is still spilling (a refill
    /// interrupted by a crash after its delivery's outcome was written).
    pub(crate) async fn resume_refill(
        &self,
        tenant: &hooklane_core::domain::TenantId,
        sub: &SubscriptionId,
    ) -> StoreResult<()> {
        match hooklane_core::ports::SubscriptionStore::get(self, tenant, sub).await? {
            Some(s) if s.spilling => self.refill(&s).await,
            _ => Ok(()),
        }
    }

    /// Moves spilled deliveries back to the queue in order, then clears the
    /// lane's flag once none are left.
    pub(crate) async fn refill(&self, sub: &Subscription) -> StoreResult<()> {
        for _ in 0..REFILL_ROUNDS {
            let items = self.spilled_page(&sub.id).await?;
            if !items.is_empty() {
                let msgs: Vec<DeliveryMessage> = items
                    .iter()
                    .filter_map(|i| get_s(i, "message"))
                    .filter_map(|m| serde_json::from_str(m).ok())
                    .collect();
                self.send_deliveries(&msgs, "").await?;
                self.delete_spilled(&sub.id, &items).await?;
                self.add_spilled(sub.tenant.as_str(), sub.id.as_str(), -(items.len() as i64))
                    .await?;
                continue;
            }
            let cleared = self
                .ddb
                .update_item()
                .table_name(&self.settings.table)
                .key("pk", s(tenant_pk(&sub.tenant)))
                .key("sk", s(sub_sk(&sub.id)))
                .update_expression("SET spilling = :f")
                .condition_expression(
                    "attribute_exists(pk) AND (attribute_not_exists(spilled) OR spilled <= :zero)",
                )
                .expression_attribute_values(
                    ":f",
                    aws_sdk_dynamodb::types::AttributeValue::Bool(false),
                )
                .expression_attribute_values(":zero", n(0))
                .send()
                .await;
            match cleared {
                Ok(_) => return Ok(()),
                Err(e) if is_condition_failed(&e) => continue,
                Err(e) => return Err(backend(e)),
            }
        }
        Ok(())
    }

    /// Deletes a deleted subscription's spilled deliveries; returns how many.
    pub(crate) async fn drop_spilled(&self, sub: &SubscriptionId) -> StoreResult<u64> {
        let mut dropped = 0;
        for _ in 0..REFILL_ROUNDS * 100 {
            let items = self.spilled_page(sub).await?;
            if items.is_empty() {
                break;
            }
            self.delete_spilled(sub, &items).await?;
            dropped += items.len() as u64;
        }
        Ok(dropped)
    }
}
