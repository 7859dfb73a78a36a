//! The delivery handler's part in a change of lanes: a fence message
//! reaching the head of its old lane, and a delivery whose key moved lanes
//! waiting behind its old lane's fence.

use aws_lambda_events::event::sqs::SqsMessage;
use hooklane_core::domain::{SubscriptionId, TenantId};
use hooklane_core::telemetry::Chain;
use tracing::error;

use super::super::delivery_message::Parsed;
use super::super::Outcome;
use super::{back_off, hand_over_as, Deliver};
use crate::messages::After;
use crate::Pool;

/// A lane's fence: followed to the slow pool when the old lane's earlier
/// messages may wait there (read fresh: a fence passed too early lets
/// newer deliveries overtake), passed otherwise.
pub(super) async fn process_fence(
    ctx: &Deliver,
    m: &SqsMessage,
    tenant: &TenantId,
    sub: &SubscriptionId,
    fence: &After,
) -> Outcome {
    // The old lane's earlier messages may wait in the slow pool:
    // the fence follows them there (read fresh: a fence passed too
    // early lets newer deliveries overtake).
    if ctx.store.pool() == Pool::Main {
        match ctx.store.is_slow_now(tenant, sub, fence.lane).await {
            Ok(true) => {
                return hand_over_as(ctx, m, (tenant, sub, fence.lane), (None, false)).await
            }
            Ok(false) => {}
            Err(e) => {
                error!(error = %Chain(&e), "reading whether a lane is slow failed");
                return Outcome::Retry;
            }
        }
    }
    match ctx.store.pass_fence(tenant, sub, fence).await {
        Ok(()) => Outcome::Done,
        Err(e) => {
            error!(error = %Chain(&e), "passing a lane fence failed");
            Outcome::Retry
        }
    }
}

/// Whether a delivery whose key moved lanes still waits behind its old
/// lane's fence: then what its message comes to (back later, longer each
/// time: 1, 4, 9 … s, up to 10 min, so that a wait behind days of retries
/// stays within the queue's receive backstop of 1,000).
pub(super) async fn wait_behind_fence(
    ctx: &Deliver,
    m: &SqsMessage,
    p: &Parsed,
) -> Option<Outcome> {
    let after = p.after.as_ref()?;
    match ctx.store.fenced(&p.tenant, &p.sub, after).await {
        Ok(true) => {
            let receives: i64 = m
                .attributes
                .get("ApproximateReceiveCount")
                .and_then(|c| c.parse().ok())
                .unwrap_or(1);
            let wait = (receives.clamp(1, 25).pow(2)).min(600);
            Some(back_off(ctx, m, time::Duration::seconds(wait)).await)
        }
        Ok(false) => None,
        Err(e) => {
            error!(error = %Chain(&e), "reading a lane fence failed");
            Some(Outcome::Retry)
        }
    }
}
