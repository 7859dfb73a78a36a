//! The per-tenant bound on AWS (G3), its leases: a tenant's attempts in
//! flight, across every delivery function instance and both pools, stay
//! within `HOOKLANE_TENANT_MAX_IN_FLIGHT`. Which tenants take leases at
//! all is [`super::tenant_lanes`]'s count.
//!
//! A tenant over the bound takes a lease before each attempt and gives it
//! back right after the request, in slot items (`T#{tenant}`,
//! `Q#slots#{n}`) of at most [`SHARD_CAP`] leases each (a map of lease id
//! to expiry), so no item grows past about 400 bytes and writers of one
//! tenant spread over several items. A lease is taken by one conditional
//! write (`size(held) < cap`); a full shard is read once to clear leases
//! past their expiry (the attempt's crash), and when none is free the
//! delivery is put off for a second or two without an attempt. Taking and
//! giving back costs two write units per attempt of a bounded tenant.
//!
//! A lease ends the engine's `hold` (attempt timeout plus a margin) after
//! the clock as read right before the write that takes it, never from a
//! time read earlier: the lane count and a full shard's read come first
//! and can be slow, and a lease already past its end when its request goes
//! out lets another instance take the same slot. The engine checks the end
//! again right before the request and renews the lease (one conditional
//! write) when too little of it is left.

use std::collections::HashMap;
use std::time::Duration;

use aws_sdk_dynamodb::types::AttributeValue;
use hooklane_core::domain::{Delivery, TenantId};
use hooklane_core::ports::{StoreResult, TenantSlot};
use hooklane_core::record::ms;
use time::OffsetDateTime;

use super::items::keys::{slot_sk, tenant_pk};
use super::{backend, is_condition_failed, AwsStore, Item};
use crate::{number_attr, string_attr};

/// The most leases one slot item holds.
pub(crate) const SHARD_CAP: usize = 16;

/// The most expired leases one write clears.
const CLEAR_AT_ONCE: usize = 16;

/// The caps of a bound's shards: as few shards of at most [`SHARD_CAP`]
/// as hold `limit`, with the slots spread evenly.
pub(crate) fn shard_caps(limit: usize) -> Vec<usize> {
    let limit = limit.max(1);
    let n = limit.div_ceil(SHARD_CAP);
    (0..n)
        .map(|i| limit / n + usize::from(i < limit % n))
        .collect()
}

impl AwsStore {
    /// [`hooklane_core::ports::LaneQueue::tenant_slot`] on DynamoDB.
    pub(crate) async fn take_tenant_slot(
        &self,
        d: &Delivery,
        limit: usize,
        hold: Duration,
    ) -> StoreResult<TenantSlot> {
        if self.subs.tenant_lane_count(&d.tenant).await? <= limit as i64 {
            return Ok(TenantSlot::Unbounded);
        }
        let caps = shard_caps(limit);
        let lease = format!("{:016x}", rand::random::<u64>());
        let first = rand::random::<u32>() as usize % caps.len();
        // The shard a random pick lands on, then the next: a full one is
        // rarely followed by another when slots are free.
        for i in 0..caps.len().min(2) {
            let shard = (first + i) % caps.len();
            let taken = self
                .take_in_shard(&d.tenant, shard as u16, caps[shard], &lease, hold)
                .await?;
            if let Some(until) = taken {
                return Ok(TenantSlot::Held {
                    shard: shard as u16,
                    lease,
                    until,
                });
            }
        }
        let wait = Duration::from_millis(1000 + rand::random::<u64>() % 1000);
        Ok(TenantSlot::Full(OffsetDateTime::now_utc() + wait))
    }

    /// Takes a lease in one shard, ending `hold` after the clock as read
    /// right before the write that takes it: one conditional write while
    /// the shard has room; when full, one read to clear expired leases and
    /// one write. The lease's end when taken.
    async fn take_in_shard(
        &self,
        tenant: &TenantId,
        shard: u16,
        cap: usize,
        lease: &str,
        hold: Duration,
    ) -> StoreResult<Option<OffsetDateTime>> {
        let until = OffsetDateTime::now_utc() + hold;
        let res = self
            .tenant_item(tenant, slot_sk(shard))
            .update_expression("SET held.#lease = :until")
            // `attribute_exists` first: the same on DynamoDB, and the local
            // AWS-compatible server fails on `size` of a missing attribute.
            // Or its own lease already there: a retry of this write whose
            // answer was lost.
            .condition_expression(
                "attribute_exists(held) AND (size(held) < :cap OR attribute_exists(held.#lease))",
            )
            .expression_attribute_names("#lease", lease)
            .expression_attribute_values(":until", number_attr(ms(until)))
            .expression_attribute_values(":cap", number_attr(cap as i64))
            .send()
            .await;
        match res {
            Ok(_) => return Ok(Some(until)),
            Err(e) if is_condition_failed(&e) => {}
            Err(e) => return Err(backend(e)),
        }
        let item = self
            .get_consistent(tenant_pk(tenant), slot_sk(shard))
            .await?;
        let Some(AttributeValue::M(held)) = item.as_ref().and_then(|i| i.get("held")) else {
            return self.first_lease(tenant, shard, lease, hold).await;
        };
        self.clear_and_take(tenant, shard, cap, lease, hold, held)
            .await
    }

    /// Clears a full shard's leases past their expiry (still as read in
    /// `held`) and takes one, as long as what is left has room.
    async fn clear_and_take(
        &self,
        tenant: &TenantId,
        shard: u16,
        cap: usize,
        lease: &str,
        hold: Duration,
        held: &Item,
    ) -> StoreResult<Option<OffsetDateTime>> {
        let now = OffsetDateTime::now_utc();
        let expired = expired_leases(held, ms(now));
        if held.len() - expired.len() >= cap || expired.is_empty() {
            return Ok(None);
        }
        // Clear the expired leases (still as read) and take one, as long as
        // what is left has room.
        let until = now + hold;
        let mut req = self
            .tenant_item(tenant, slot_sk(shard))
            .expression_attribute_names("#lease", lease)
            .expression_attribute_values(":until", number_attr(ms(until)))
            .expression_attribute_values(":cap", number_attr((cap + expired.len()) as i64));
        let mut remove = Vec::new();
        let mut still = vec!["(size(held) < :cap OR attribute_exists(held.#lease))".to_owned()];
        for (i, (id, exp)) in expired.iter().enumerate() {
            remove.push(format!("held.#x{i}"));
            still.push(format!("held.#x{i} = :x{i}"));
            req = req
                .expression_attribute_names(format!("#x{i}"), *id)
                .expression_attribute_values(format!(":x{i}"), (*exp).clone());
        }
        let res = req
            .update_expression(format!(
                "REMOVE {} SET held.#lease = :until",
                remove.join(", ")
            ))
            .condition_expression(still.join(" AND "))
            .send()
            .await;
        Ok(super::took_effect(res)?.then_some(until))
    }

    /// The first lease of a shard that has none yet.
    async fn first_lease(
        &self,
        tenant: &TenantId,
        shard: u16,
        lease: &str,
        hold: Duration,
    ) -> StoreResult<Option<OffsetDateTime>> {
        let until = OffsetDateTime::now_utc() + hold;
        let held = HashMap::from([(lease.to_owned(), number_attr(ms(until)))]);
        let res = self
            .ddb
            .put_item()
            .table_name(&self.settings.table)
            .item("pk", string_attr(tenant_pk(tenant)))
            .item("sk", string_attr(slot_sk(shard)))
            .item("held", AttributeValue::M(held))
            // Or holding only this lease: a retry whose answer was lost.
            .condition_expression(
                "attribute_not_exists(held) OR (size(held) = :one AND attribute_exists(held.#lease))",
            )
            .expression_attribute_names("#lease", lease)
            .expression_attribute_values(":one", number_attr(1))
            .send()
            .await;
        Ok(super::took_effect(res)?.then_some(until))
    }

    /// [`hooklane_core::ports::LaneQueue::renew_tenant_slot`] on DynamoDB:
    /// one write, on condition the lease is still in its item. A lease past
    /// its end but not yet cleared is still held: whoever read it expired
    /// clears it only while it has the end they read.
    pub(crate) async fn extend_tenant_slot(
        &self,
        d: &Delivery,
        slot: &TenantSlot,
        hold: Duration,
    ) -> StoreResult<Option<TenantSlot>> {
        let TenantSlot::Held { shard, lease, .. } = slot else {
            return Ok(Some(slot.clone()));
        };
        let until = OffsetDateTime::now_utc() + hold;
        let res = self
            .tenant_item(&d.tenant, slot_sk(*shard))
            .update_expression("SET held.#lease = :until")
            .condition_expression("attribute_exists(held.#lease)")
            .expression_attribute_names("#lease", lease)
            .expression_attribute_values(":until", number_attr(ms(until)))
            .send()
            .await;
        Ok(super::took_effect(res)?.then(|| TenantSlot::Held {
            shard: *shard,
            lease: lease.clone(),
            until,
        }))
    }

    /// [`hooklane_core::ports::LaneQueue::release_tenant_slot`] on
    /// DynamoDB.
    pub(crate) async fn give_back_tenant_slot(
        &self,
        d: &Delivery,
        slot: TenantSlot,
    ) -> StoreResult<()> {
        let TenantSlot::Held { shard, lease, .. } = slot else {
            return Ok(());
        };
        self.tenant_item(&d.tenant, slot_sk(shard))
            .update_expression("REMOVE held.#lease")
            .expression_attribute_names("#lease", lease)
            .send()
            .await
            .map_err(backend)?;
        Ok(())
    }
}

/// The leases of a slot item past their expiry at `now_ms`, at most
/// [`CLEAR_AT_ONCE`], with their expiry as read.
fn expired_leases(held: &Item, now_ms: i64) -> Vec<(&str, &AttributeValue)> {
    held.iter()
        .filter(|(_, v)| match v {
            AttributeValue::N(n) => n.parse::<i64>().is_ok_and(|t| t < now_ms),
            _ => true,
        })
        .take(CLEAR_AT_ONCE)
        .map(|(k, v)| (k.as_str(), v))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_hold_the_bound_exactly_with_at_most_sixteen_each() {
        assert_eq!(shard_caps(8), vec![8]);
        assert_eq!(shard_caps(16), vec![16]);
        assert_eq!(shard_caps(17), vec![9, 8]);
        let caps = shard_caps(4096);
        assert_eq!(caps.len(), 256);
        assert_eq!(caps.iter().sum::<usize>(), 4096);
        for limit in 1..200 {
            let caps = shard_caps(limit);
            assert_eq!(caps.iter().sum::<usize>(), limit, "limit {limit}");
            assert!(caps.iter().all(|c| (1..=SHARD_CAP).contains(c)));
        }
    }

    #[test]
    fn only_leases_past_their_expiry_are_cleared() {
        let held: Item = HashMap::from([
            ("a".to_owned(), number_attr(100)),
            ("b".to_owned(), number_attr(300)),
            ("c".to_owned(), string_attr("garbage")),
        ]);
        let mut ids: Vec<&str> = expired_leases(&held, 200)
            .into_iter()
            .map(|(k, _)| k)
            .collect();
        ids.sort_unstable();
        assert_eq!(ids, vec!["a", "c"]);
    }
}
