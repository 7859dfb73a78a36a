//! The per-tenant bound on AWS (G3), which tenants it reaches: a tenant's
//! attempts in flight, across every delivery function instance and both
//! pools, stay within `HOOKLANE_TENANT_MAX_IN_FLIGHT`, and the leases that
//! hold them there ([`super::tenant_share`]) are taken only by tenants
//! this count says could pass it.
//!
//! Only tenants that could reach the bound pay for it. Each attempt is one
//! lane's head, and a lane has at most one attempt in flight, so a tenant
//! whose subscriptions have `limit` lanes or fewer in all can never have
//! more than `limit` attempts in flight, and takes no slot. The tenant's
//! lane count is a counter item kept by register, `PATCH` and `DELETE`
//! (`T#{tenant}`, `Q#lanes`), read eventually consistent and kept for
//! [`FRESH`](super::subs::FRESH) per process: half a read unit per tenant per ten seconds per
//! function instance. The counter errs high, never low: a lane increase is
//! counted before it is written (with the insert, in one transaction), a
//! decrease never (old lanes deliver until their fences pass), a deletion
//! after its tombstone, best effort and at most once (a request token). A
//! tenant never counted whole (registered before the counter existed) is
//! counted from its subscriptions at its first delivery. A high counter
//! costs bookkeeping, not the bound. A tenant whose lanes pass the bound is
//! bounded within [`FRESH`](super::subs::FRESH).
//!

use aws_sdk_dynamodb::types::AttributeValue;
use hooklane_core::domain::TenantId;
use hooklane_core::ports::StoreResult;
use hooklane_core::telemetry::Chain;

use super::items::keys::{tenant_pk, LANES_SK};
use super::subs::AwsSubscriptions;
use super::{backend, get_n, Item};
use crate::{number_attr, string_attr};

impl AwsSubscriptions {
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
    /// at most [`FRESH`](super::subs::FRESH) ago, counted whole first if it never was.
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
    /// ([`AwsSubscriptions::uncount_lanes`]).
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
        // now, and the next read after [`FRESH`](super::subs::FRESH) counts again.
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
                // Not seeded yet: nothing to take off.
                .or_else(|e| match super::cancelled_by_condition(&e) {
                    true => Ok(()),
                    false => Err(backend(e)),
                }),
            Err(e) => Err(e),
        };
        self.tenant_lanes.forget(tenant);
        if let Err(e) = res {
            tracing::warn!(tenant = tenant.as_str(), error = %Chain(&e), "uncounting a deleted subscription's lanes failed; the counter stays high");
        }
    }
}
