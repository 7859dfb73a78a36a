//! A change of a subscription's `lanes` on AWS keeps per-key order (G5).
//!
//! Messages already queued stay in the groups of the old lanes, so a key's
//! new deliveries, on a new lane, could overtake its older ones. The first
//! time a live delivery is queued under the new lanes, the adapter puts a
//! fence message at the end of each old lane (through the spill, like any
//! delivery, so it stays behind the lane's spilled deliveries), and only
//! then switches. A new delivery whose key's old lane has not passed its
//! fence yet carries that fence ([`crate::messages::After`]); the delivery
//! function holds it back (visibility, growing to 10 min) until the delivery
//! function has taken that fence off the item's pending set. A key whose
//! old lane has drained waits for nothing; nor does any delivery once all
//! fences are through.
//!
//! State on the subscription item, beside `lanes` (what the user asked):
//! - `sent_lanes`: the lanes live deliveries are queued on (absent: never
//!   changed, `lanes`);
//! - `lane_gen`: the number of switches so far;
//! - `fence_from`: the lanes before the last switch;
//! - `fences`: the old lanes whose fence of the last switch is still
//!   queued (a number set; absent when none).
//!
//! One switch at a time: while fences of the last switch are pending, a
//! further change of `lanes` waits (deliveries stay on `sent_lanes`) until
//! they are through, so a delivery waits for at most one fence. Every
//! queued live delivery follows a strongly consistent read of its
//! subscription (fan-out's query, replay's read, or the adapter's own),
//! so none is sent on lanes older than a fence already sent. Cost: one
//! message per old lane and one write per switch; a consistent `GetItem`
//! per attempt of a delivery that carries a fence, only while the switch
//! drains.

use aws_sdk_dynamodb::types::AttributeValue;
use hooklane_core::domain::{SubscriptionId, TenantId};
use hooklane_core::ports::StoreResult;

use super::items::placement::Placement;
use super::{backend, is_condition_failed, AwsStore};
use crate::messages::{After, DeliveryMessage};

use crate::number_attr;

/// Tries of a switch that a concurrent one got in the way of.
const SWITCH_TRIES: usize = 4;

impl AwsStore {
    /// Where a subscription's live deliveries go now, switching it to its
    /// new lanes first when they changed and no earlier switch is still
    /// draining; `None` when it is gone (its messages are left as they are:
    /// the delivery function drops them). Taken once per subscription per
    /// batch, before any of its messages is placed, so none placed on the
    /// old lanes follows the switch's fences.
    pub(crate) async fn settled_placement(
        &self,
        tenant: &TenantId,
        sub: &SubscriptionId,
    ) -> StoreResult<Option<Placement>> {
        let Some(mut p) = self.subs.placement(tenant, sub).await? else {
            return Ok(None);
        };
        for _ in 0..SWITCH_TRIES {
            if p.sent == p.lanes || !p.fences.is_empty() {
                break;
            }
            match self.switch(tenant, sub, &p).await? {
                Some(now) => p = now,
                None => match self.subs.placement_now(tenant, sub).await? {
                    Some(now) => p = now,
                    None => return Ok(None),
                },
            }
        }
        Ok(Some(p))
    }

    /// Fences every lane of `p.sent` and records the switch to `p.lanes`;
    /// `None` when the item changed meanwhile (read it again). Fences sent
    /// by a switch that then lost the race are taken off nothing: they
    /// pass as no-ops.
    async fn switch(
        &self,
        tenant: &TenantId,
        sub: &SubscriptionId,
        p: &Placement,
    ) -> StoreResult<Option<Placement>> {
        let generation = p.generation + 1;
        let fences = fences_of(tenant, sub, p, generation);
        // A nonce of this try's own: a retried switch's fences are not
        // dropped as duplicates of a try whose write failed.
        let nonce = format!("switch-{}", super::write_token());
        self.dispatch(fences, &nonce).await?;
        let all: Vec<String> = (0..p.sent.get()).map(|l| l.to_string()).collect();
        let guard = if p.generation == 0 {
            "attribute_not_exists(lane_gen)"
        } else {
            "lane_gen = :was"
        };
        let mut req = self
            .update_sub(tenant, sub)
            .update_expression(
                "SET lane_gen = :gen, sent_lanes = :to, fence_from = :from, fences = :all",
            )
            .condition_expression(format!(
                "attribute_exists(pk) AND attribute_not_exists(deleted_at) AND {guard}"
            ))
            .expression_attribute_values(":gen", number_attr(generation))
            .expression_attribute_values(":to", number_attr(p.lanes.get()))
            .expression_attribute_values(":from", number_attr(p.sent.get()))
            .expression_attribute_values(":all", AttributeValue::Ns(all));
        if p.generation > 0 {
            req = req.expression_attribute_values(":was", number_attr(p.generation));
        }
        match req.send().await {
            Ok(_) => {
                self.subs.placements.forget(sub);
                tracing::info!(
                    subscription_id = sub.as_str(),
                    from = p.sent.get(),
                    to = p.lanes.get(),
                    "lanes switched; fences queued on the old lanes"
                );
                Ok(Some(Placement {
                    lanes: p.lanes,
                    sent: p.lanes,
                    generation,
                    from: p.sent,
                    fences: (0..p.sent.get()).collect(),
                    slow: p.slow.clone(),
                }))
            }
            Err(e) if is_condition_failed(&e) => {
                self.subs.placements.forget(sub);
                Ok(None)
            }
            Err(e) => Err(backend(e)),
        }
    }

    /// A fence reached the head of its old lane: everything queued on that
    /// lane before the switch is through. A stale fence (a later switch,
    /// a lost race, a gone subscription) changes nothing.
    pub(crate) async fn pass_fence(
        &self,
        tenant: &TenantId,
        sub: &SubscriptionId,
        after: &After,
    ) -> StoreResult<()> {
        let res = self
            .update_sub(tenant, sub)
            .update_expression("DELETE fences :lane")
            .condition_expression("attribute_exists(pk) AND lane_gen = :gen")
            .expression_attribute_values(":lane", AttributeValue::Ns(vec![after.lane.to_string()]))
            .expression_attribute_values(":gen", number_attr(after.generation))
            .send()
            .await;
        self.subs.placements.forget(sub);
        match res {
            Ok(_) => Ok(()),
            Err(e) if is_condition_failed(&e) => Ok(()),
            Err(e) => Err(backend(e)),
        }
    }

    /// Whether a delivery that waits for `after` must wait still (read
    /// strongly consistent; a gone subscription holds nothing back).
    pub(crate) async fn fenced(
        &self,
        tenant: &TenantId,
        sub: &SubscriptionId,
        after: &After,
    ) -> StoreResult<bool> {
        Ok(self
            .subs
            .placement_now(tenant, sub)
            .await?
            .is_some_and(|p| p.holds(after)))
    }
}

/// The fences of a switch to `generation`: one on each lane the
/// subscription sent on until now.
fn fences_of(
    tenant: &TenantId,
    sub: &SubscriptionId,
    p: &Placement,
    generation: u32,
) -> Vec<DeliveryMessage> {
    (0..p.sent.get())
        .map(|lane| {
            DeliveryMessage::fence(
                tenant.as_str(),
                sub.as_str(),
                generation,
                (p.sent.get() > 1).then_some(lane),
            )
        })
        .collect()
}
