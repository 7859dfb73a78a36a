//! The per-tenant bound on AWS (G3): a tenant's attempts in flight, across
//! every delivery function instance and both pools, stay within
//! `HOOKLANE_TENANT_MAX_IN_FLIGHT`.
//!
//! Only tenants that could reach the bound pay for it. Each attempt is one
//! lane's head, and a lane has at most one attempt in flight, so a tenant
//! whose subscriptions have `limit` lanes or fewer in all can never have
//! more than `limit` attempts in flight, and takes no slot. The tenant's
//! lane count is a counter item kept by register, `PATCH` and `DELETE`
//! (`T#{tenant}`, `Q#lanes`), read eventually consistent and kept for
//! [`FRESH`] per process: half a read unit per tenant per ten seconds per
//! function instance. The counter errs high, never low: a lane increase is
//! counted before it is written (with the insert, in one transaction), a
//! decrease never (old lanes deliver until their fences pass), a deletion
//! after its tombstone, best effort and at most once (a request token). A
//! tenant never counted whole (registered before the counter existed) is
//! counted from its subscriptions at its first delivery. A high counter
//! costs bookkeeping, not the bound. A tenant whose lanes pass the bound is
//! bounded within [`FRESH`].
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
use std::sync::Mutex;
use std::time::{Duration, Instant};

use aws_sdk_dynamodb::types::AttributeValue;
use hooklane_core::domain::{Delivery, TenantId};
use hooklane_core::ports::{StoreResult, TenantSlot};
use hooklane_core::record::ms;
use time::OffsetDateTime;

use super::subscriptions::tenant_pk;
use super::{backend, get_n, is_condition_failed, AwsStore, Item};
use crate::{number_attr, string_attr};

/// How long a tenant's lane count is taken as read.
pub(crate) const FRESH: Duration = Duration::from_secs(10);

/// The most leases one slot item holds.
pub(crate) const SHARD_CAP: usize = 16;

/// The most expired leases one write clears.
const CLEAR_AT_ONCE: usize = 16;

/// The sort key of a tenant's lane counter.
const LANES_SK: &str = "Q#lanes";

fn slot_sk(shard: u16) -> String {
    format!("Q#slots#{shard}")
}

/// The caps of a bound's shards: as few shards of at most [`SHARD_CAP`]
/// as hold `limit`, with the slots spread evenly.
pub(crate) fn shard_caps(limit: usize) -> Vec<usize> {
    let limit = limit.max(1);
    let n = limit.div_ceil(SHARD_CAP);
    (0..n)
        .map(|i| limit / n + usize::from(i < limit % n))
        .collect()
}

/// Tenants' lane counts as last read (shared by clones).
#[derive(Debug, Default)]
pub(crate) struct TenantLanes {
    noted: Mutex<HashMap<TenantId, (Instant, i64)>>,
    /// A lock per tenant being counted whole, so that a process's
    /// concurrent deliveries of a tenant never counted read its
    /// subscriptions once, not once each.
    seeding: Mutex<HashMap<TenantId, std::sync::Arc<tokio::sync::Mutex<()>>>>,
}

/// How many tenants' counts are kept before the map starts over.
const KEEP: usize = 10_000;

impl TenantLanes {
    fn fresh(&self, tenant: &TenantId) -> Option<i64> {
        let map = self.noted.lock().ok()?;
        map.get(tenant)
            .filter(|(at, _)| at.elapsed() < FRESH)
            .map(|(_, n)| *n)
    }

    fn note(&self, tenant: &TenantId, lanes: i64) {
        if let Ok(mut map) = self.noted.lock() {
            if map.len() >= KEEP && !map.contains_key(tenant) {
                map.clear();
            }
            map.insert(tenant.clone(), (Instant::now(), lanes));
        }
    }

    /// The lock that counting `tenant` whole takes.
    fn seeding(&self, tenant: &TenantId) -> std::sync::Arc<tokio::sync::Mutex<()>> {
        let mut map = self.seeding.lock().expect("seeding lock");
        if map.len() >= KEEP && !map.contains_key(tenant) {
            map.retain(|_, lock| std::sync::Arc::strong_count(lock) > 1);
        }
        map.entry(tenant.clone()).or_default().clone()
    }

    /// Forgets a tenant's count (this process changed it).
    fn forget(&self, tenant: &TenantId) {
        if let Ok(mut map) = self.noted.lock() {
            map.remove(tenant);
        }
    }
}

type UpdateBuilder = aws_sdk_dynamodb::operation::update_item::builders::UpdateItemFluentBuilder;

impl AwsStore {
    /// An `UpdateItem` of one of a tenant's items (its expression to come).
    fn tenant_item(&self, tenant: &TenantId, sk: String) -> UpdateBuilder {
        self.ddb
            .update_item()
            .table_name(&self.settings.table)
            .key("pk", string_attr(tenant_pk(tenant)))
            .key("sk", string_attr(sk))
    }

    /// Adds `delta` to a tenant's lane counter.
    pub(crate) async fn count_lanes(&self, tenant: &TenantId, delta: i64) -> StoreResult<()> {
        if delta == 0 {
            return Ok(());
        }
        self.tenant_item(tenant, LANES_SK.to_owned())
            .update_expression("ADD lanes :d")
            .expression_attribute_values(":d", number_attr(delta))
            .send()
            .await
            .map_err(backend)?;
        self.tenant_lanes.forget(tenant);
        Ok(())
    }

    /// The `ADD` of a subscription's lanes to its tenant's counter, as a
    /// part of the transaction that inserts it.
    pub(crate) fn count_lanes_in(
        &self,
        tenant: &TenantId,
        lanes: i64,
    ) -> StoreResult<aws_sdk_dynamodb::types::TransactWriteItem> {
        self.lanes_add(tenant, lanes, None)
    }

    /// A transaction's `ADD` of `delta` to a tenant's lane counter, on
    /// `condition` when given.
    fn lanes_add(
        &self,
        tenant: &TenantId,
        delta: i64,
        condition: Option<&str>,
    ) -> StoreResult<aws_sdk_dynamodb::types::TransactWriteItem> {
        self.tenant_lanes.forget(tenant);
        let update = aws_sdk_dynamodb::types::Update::builder()
            .table_name(&self.settings.table)
            .key("pk", string_attr(tenant_pk(tenant)))
            .key("sk", string_attr(LANES_SK))
            .update_expression("ADD lanes :d")
            .set_condition_expression(condition.map(str::to_owned))
            .expression_attribute_values(":d", number_attr(delta))
            .build()
            .map_err(backend)?;
        Ok(aws_sdk_dynamodb::types::TransactWriteItem::builder()
            .update(update)
            .build())
    }

    /// A tenant's lane count (an upper bound) as the bound reads it: read
    /// at most [`FRESH`] ago, counted whole first if it never was.
    pub async fn tenant_lane_count(&self, tenant: &TenantId) -> StoreResult<i64> {
        if let Some(n) = self.tenant_lanes.fresh(tenant) {
            return Ok(n);
        }
        let item = self
            .ddb
            .get_item()
            .table_name(&self.settings.table)
            .key("pk", string_attr(tenant_pk(tenant)))
            .key("sk", string_attr(LANES_SK))
            .send()
            .await
            .map_err(backend)?
            .item;
        let n = match item.as_ref().filter(|i| i.contains_key("seeded")) {
            Some(i) => get_n(i, "lanes").unwrap_or(0),
            // Never counted whole: a tenant registered before there was a
            // counter (its changes since may have made one), or a new one.
            None => {
                let lock = self.tenant_lanes.seeding(tenant);
                let _one_at_a_time = lock.lock().await;
                if let Some(n) = self.tenant_lanes.fresh(tenant) {
                    // Counted meanwhile.
                    return Ok(n);
                }
                // Noted before the lock is let go.
                let n = self.seed_lane_count(tenant, item.as_ref()).await?;
                self.tenant_lanes.note(tenant, n);
                return Ok(n);
            }
        };
        self.tenant_lanes.note(tenant, n);
        Ok(n)
    }

    /// Counts a tenant's lanes from its subscriptions and sets the counter
    /// to that, once (`seeded`), on condition it is still what was read:
    /// a registration racing with the count cancels the write, and the
    /// next read counts again. A decrement is applied only once seeded
    /// ([`AwsStore::uncount_lanes`]).
    async fn seed_lane_count(&self, tenant: &TenantId, read: Option<&Item>) -> StoreResult<i64> {
        let seen = read.and_then(|i| get_n(i, "lanes"));
        let lanes: i64 = self
            .live_subscriptions(tenant)
            .await?
            .iter()
            .map(|s| i64::from(s.lanes.get()))
            .sum();
        let mut req = self
            .tenant_item(tenant, LANES_SK.to_owned())
            .update_expression("SET lanes = :n, seeded = :t")
            .expression_attribute_values(":n", number_attr(lanes))
            .expression_attribute_values(":t", AttributeValue::Bool(true));
        req = match seen {
            Some(seen) => req
                .condition_expression("attribute_not_exists(seeded) AND lanes = :seen")
                .expression_attribute_values(":seen", number_attr(seen)),
            None => req.condition_expression(
                "attribute_not_exists(seeded) AND attribute_not_exists(lanes)",
            ),
        };
        // Not written (raced): the higher of the two is an upper bound for
        // now, and the next read after [`FRESH`] counts again.
        if super::took_effect(req.send().await)? {
            return Ok(lanes);
        }
        Ok(lanes.max(seen.unwrap_or(0)))
    }

    /// Takes a deleted subscription's lanes off its tenant's counter, once
    /// seeded (before, the count leaves the deleted one out), in a
    /// transaction whose request token makes a retry of it a no-op. Best
    /// effort: a counter left high costs bookkeeping, not the bound.
    pub(crate) async fn uncount_lanes(&self, tenant: &TenantId, lanes: i64, token: &str) {
        let res = match self.lanes_add(tenant, -lanes, Some("attribute_exists(seeded)")) {
            Ok(item) => self
                .ddb
                .transact_write_items()
                .transact_items(item)
                .client_request_token(token)
                .send()
                .await
                .map(|_| ())
                .map_err(|e| e.to_string()),
            Err(e) => Err(e.to_string()),
        };
        self.tenant_lanes.forget(tenant);
        if let Err(e) = res {
            if !e.contains("ConditionalCheckFailed") {
                tracing::warn!(tenant = tenant.as_str(), error = %e, "uncounting a deleted subscription's lanes failed; the counter stays high");
            }
        }
    }

    /// [`hooklane_core::ports::LaneQueue::tenant_slot`] on DynamoDB.
    pub(crate) async fn take_tenant_slot(
        &self,
        d: &Delivery,
        limit: usize,
        hold: Duration,
    ) -> StoreResult<TenantSlot> {
        if self.tenant_lane_count(&d.tenant).await? <= limit as i64 {
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
