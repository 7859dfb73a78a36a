//! Spill (DESIGN §3): a FIFO queue scans only its first 120,000 messages
//! for deliverable groups, so a dead subscription with a deep backlog
//! could stall others. Once a subscription's lane fails (an attempt goes
//! into retry), fan-out stops sending its deliveries to the queue and
//! keeps them, in order, under `L#{subscription}`. When the lane delivers
//! again, the delivery function moves them back to the queue in order,
//! then clears the flag only when nothing is left (`spilled = 0`), so no
//! delivery overtakes an older one. Items spilled by a fan-out that read
//! the flag late are still refilled: the counter covers them.
//!
//! The counter and the items it counts change together, in one
//! `TransactWriteItems` each time (count and keep; delete and uncount), so
//! a crash between the two cannot leave a count with no item, which would
//! keep the flag set for good. IAM authorizes a transaction by its parts
//! (`UpdateItem`, `PutItem`, `DeleteItem`), which the fan-out and delivery
//! roles already have.

use aws_sdk_dynamodb::types::{AttributeValue, Delete, Put, TransactWriteItem, Update};
use hooklane_core::domain::{SubscriptionId, TenantId};
use hooklane_core::ports::StoreResult;
use time::OffsetDateTime;

use super::batches::Txn;
use super::items::keys::{spill_pk, sub_sk, tenant_pk};
use super::items::lanes::{lane_attr, spilling_lanes, SPILLED, SPILLING};
use super::{
    backend, get_s, is_condition_failed, padded, time_seq, took_effect, AwsStore, Item, Table,
};
use crate::messages::DeliveryMessage;
use crate::{number_attr, string_attr};

/// How many spilled deliveries one refill round moves: with the counter's
/// update, one transaction of at most 100 actions.
const REFILL_PAGE: i32 = 99;
/// Refill rounds before leaving the rest to the next success.
const REFILL_ROUNDS: usize = 50;

/// A lane: its tenant, subscription and live lane number. Lane 0 keeps
/// the names from before lanes (`spilling`, `spilled`, `L#{subscription}`);
/// lane n has `spilling_n`, `spilled_n` and `L#{subscription}#n`. A
/// backfill delivery spills with lane 0.
pub(crate) type Lane<'a> = (&'a TenantId, &'a SubscriptionId, u16);

/// The subscription item's attributes of a lane: its flag and its count.
fn lane_attrs(lane: u16) -> (String, String) {
    (lane_attr(SPILLING, lane), lane_attr(SPILLED, lane))
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
        let tenant = TenantId::parse(&msg.tenant).map_err(|_| super::corrupt("tenant"))?;
        let sub = SubscriptionId::parse(&msg.subscription_id)
            .map_err(|_| super::corrupt("subscription id"))?;
        let lane = msg.lane_no.unwrap_or(0);
        let (flag, counter) = lane_attrs(lane);
        // Spilled without the event: the archive holds it, and a refilled
        // delivery reads it from there.
        let body = serde_json::to_string(&DeliveryMessage {
            event: None,
            ..msg.clone()
        })
        .map_err(backend)?;
        let count = Update::builder()
            .table_name(&self.settings.table)
            .key("pk", string_attr(tenant_pk(&tenant)))
            .key("sk", string_attr(sub_sk(&sub)))
            .update_expression("ADD #count :d")
            .condition_expression("attribute_exists(pk) AND #flag = :t")
            .expression_attribute_names("#count", counter)
            .expression_attribute_names("#flag", flag)
            .expression_attribute_values(":d", number_attr(1))
            .expression_attribute_values(":t", AttributeValue::Bool(true))
            .build()
            .map_err(backend)?;
        // Ordered by time; the delivery's identity makes the key unique,
        // so two spills in one millisecond cannot overwrite each other.
        let sk = format!(
            "{}#{}#{}",
            padded(time_seq(OffsetDateTime::now_utc())),
            msg.event_id,
            msg.lane.as_deref().unwrap_or("live")
        );
        let keep = Put::builder()
            .table_name(&self.settings.table)
            .item("pk", string_attr(spill_pk(&sub, lane)))
            .item("sk", string_attr(sk))
            .item("message", string_attr(body))
            .condition_expression("attribute_not_exists(sk)")
            .build()
            .map_err(backend)?;
        let actions = vec![
            TransactWriteItem::builder().update(count).build(),
            TransactWriteItem::builder().put(keep).build(),
        ];
        match self.table.transact(actions).await? {
            Txn::Done => Ok(true),
            // The lane no longer spills: the caller sends to the queue.
            Txn::ConditionFailed(0) => Ok(false),
            // The same delivery, kept and counted at this very instant by a
            // concurrent copy of this fan-out: nothing more to keep.
            Txn::ConditionFailed(_) => Ok(true),
        }
    }

    /// Deletes refilled items and uncounts them in one transaction. When
    /// the subscription's item is gone (nothing to count on), the items
    /// are deleted alone.
    async fn delete_refilled(&self, lane: Lane<'_>, items: &[Item]) -> StoreResult<()> {
        let (tenant, sub, n) = lane;
        let uncount = Update::builder()
            .table_name(&self.settings.table)
            .key("pk", string_attr(tenant_pk(tenant)))
            .key("sk", string_attr(sub_sk(sub)))
            .update_expression("ADD #count :d")
            .condition_expression("attribute_exists(pk)")
            .expression_attribute_names("#count", lane_attrs(n).1)
            .expression_attribute_values(":d", number_attr(-(items.len() as i64)))
            .build()
            .map_err(backend)?;
        let mut actions = vec![TransactWriteItem::builder().update(uncount).build()];
        for sk in items.iter().filter_map(|i| get_s(i, "sk")) {
            let delete = Delete::builder()
                .table_name(&self.settings.table)
                .key("pk", string_attr(spill_pk(sub, n)))
                .key("sk", string_attr(sk))
                .build()
                .map_err(backend)?;
            actions.push(TransactWriteItem::builder().delete(delete).build());
        }
        match self.table.transact(actions).await? {
            Txn::Done => Ok(()),
            // Refilled: on the queue now, still counted there.
            Txn::ConditionFailed(_) => delete_spilled(&self.table, lane, items).await.map(|_| ()),
        }
    }

    /// Marks a subscription's lane as failing: new deliveries spill.
    pub(crate) async fn start_spilling(&self, (tenant, sub, lane): Lane<'_>) -> StoreResult<()> {
        took_effect(
            self.ddb
                .update_item()
                .table_name(&self.settings.table)
                .key("pk", string_attr(tenant_pk(tenant)))
                .key("sk", string_attr(sub_sk(sub)))
                .update_expression("SET #flag = :t")
                .condition_expression(
                    "attribute_exists(pk) AND (attribute_not_exists(#flag) OR #flag = :f)",
                )
                .expression_attribute_names("#flag", lane_attrs(lane).0)
                .expression_attribute_values(":t", AttributeValue::Bool(true))
                .expression_attribute_values(":f", AttributeValue::Bool(false))
                .send()
                .await,
        )?;
        self.subs.lane_flags.note(sub, lane, true);
        Ok(())
    }

    /// Whether a lane spills: as its subscription's last read noted, or
    /// read from the item when it was not noted.
    pub(crate) async fn spilling(&self, lane: Lane<'_>) -> StoreResult<bool> {
        match self.subs.lane_flags.get(lane.1, lane.2) {
            Some(flag) => Ok(flag),
            None => self.spilling_now(lane).await,
        }
    }

    /// The lane's flag read from its item (strongly consistent), and noted.
    async fn spilling_now(&self, (tenant, sub, lane): Lane<'_>) -> StoreResult<bool> {
        let item = self.get_consistent(tenant_pk(tenant), sub_sk(sub)).await?;
        let lanes = item.as_ref().map(spilling_lanes).unwrap_or_default();
        let flag = lanes.contains(&lane);
        self.subs.lane_flags.note_all(sub, lanes);
        Ok(flag)
    }

    /// Refills the subscription's lane if it is still spilling (a refill
    /// interrupted by a crash after its delivery's outcome was written).
    pub(crate) async fn resume_refill(&self, lane: Lane<'_>) -> StoreResult<()> {
        if self.spilling_now(lane).await? {
            self.refill(lane).await?;
        }
        Ok(())
    }

    /// Moves spilled deliveries back to the queue in order, then clears the
    /// lane's flag once none are left.
    pub(crate) async fn refill(&self, lane: Lane<'_>) -> StoreResult<()> {
        let (tenant, sub, n) = lane;
        let (flag, counter) = lane_attrs(n);
        for _ in 0..REFILL_ROUNDS {
            let items = spilled_page(&self.table, lane).await?;
            if !items.is_empty() {
                let msgs = self.refillable(sub, &items).await?;
                self.send_deliveries(&msgs, "").await?;
                self.delete_refilled(lane, &items).await?;
                continue;
            }
            let cleared = self
                .ddb
                .update_item()
                .table_name(&self.settings.table)
                .key("pk", string_attr(tenant_pk(tenant)))
                .key("sk", string_attr(sub_sk(sub)))
                .update_expression("SET #flag = :f")
                .condition_expression(
                    "attribute_exists(pk) AND (attribute_not_exists(#count) OR #count <= :zero)",
                )
                .expression_attribute_names("#flag", flag.clone())
                .expression_attribute_names("#count", counter.clone())
                .expression_attribute_values(":f", AttributeValue::Bool(false))
                .expression_attribute_values(":zero", number_attr(0))
                .send()
                .await;
            match cleared {
                Ok(_) => {
                    self.subs.lane_flags.note(sub, n, false);
                    return Ok(());
                }
                Err(e) if is_condition_failed(&e) => continue,
                Err(e) => return Err(backend(e)),
            }
        }
        Ok(())
    }

    /// The deliveries of a page of spilled items, in order. An item that
    /// does not parse is parked with the reason (its body goes to the
    /// dead-letter queue as it is), so that refilling moves it rather than
    /// losing it.
    async fn refillable(
        &self,
        sub: &SubscriptionId,
        items: &[Item],
    ) -> StoreResult<Vec<DeliveryMessage>> {
        let mut msgs = Vec::with_capacity(items.len());
        for item in items {
            let body = get_s(item, "message");
            match body.map(serde_json::from_str::<DeliveryMessage>) {
                Some(Ok(m)) => msgs.push(m),
                Some(Err(e)) => {
                    let why = format!("the spilled delivery does not parse: {e}");
                    let body = body.filter(|b| !b.is_empty()).unwrap_or("(empty)");
                    self.dead_letters()
                        .park_unreadable(&super::key_of(item), body, sub.as_str(), &why)
                        .await?;
                }
                None => {
                    let why = "the spilled delivery has no message";
                    self.dead_letters()
                        .park_unreadable(&super::key_of(item), why, sub.as_str(), why)
                        .await?;
                }
            }
        }
        Ok(msgs)
    }
}

async fn spilled_page(table: &Table, (_, sub, lane): Lane<'_>) -> StoreResult<Vec<Item>> {
    let resp = table
        .ddb
        .query()
        .table_name(&table.settings.table)
        .key_condition_expression("pk = :pk")
        .expression_attribute_values(":pk", string_attr(spill_pk(sub, lane)))
        .consistent_read(true)
        .limit(REFILL_PAGE)
        .send()
        .await
        .map_err(backend)?;
    Ok(resp.items.unwrap_or_default())
}

/// Deletes spilled items; returns the messages of those this call deleted
/// (a concurrent drop deletes each once), when the tenant backlog counts
/// take them off (else none, and the old items are not asked for).
async fn delete_spilled(
    table: &Table,
    (_, sub, lane): Lane<'_>,
    items: &[Item],
) -> StoreResult<Vec<DeliveryMessage>> {
    let mut deleted = Vec::new();
    let counted = table.settings.tenant_backlog;
    for item in items {
        let Some(sk) = get_s(item, "sk") else {
            continue;
        };
        let old = table
            .ddb
            .delete_item()
            .table_name(&table.settings.table)
            .key("pk", string_attr(spill_pk(sub, lane)))
            .key("sk", string_attr(sk))
            .set_return_values(counted.then_some(aws_sdk_dynamodb::types::ReturnValue::AllOld))
            .send()
            .await
            .map_err(backend)?
            .attributes;
        let msg = old.as_ref().and_then(|o| get_s(o, "message"));
        deleted.extend(msg.and_then(|m| serde_json::from_str(m).ok()));
    }
    Ok(deleted)
}

/// Deletes a deleted subscription's spilled deliveries of one lane;
/// returns how many.
pub(crate) async fn drop_spilled(table: &Table, lane: Lane<'_>) -> StoreResult<u64> {
    let mut dropped = 0;
    for _ in 0..REFILL_ROUNDS * 100 {
        let items = spilled_page(table, lane).await?;
        if items.is_empty() {
            break;
        }
        let deleted = delete_spilled(table, lane, &items).await?;
        table.count_dropped(&deleted).await;
        dropped += items.len() as u64;
    }
    Ok(dropped)
}
