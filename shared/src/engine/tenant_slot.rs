//! The tenant slot around one attempt's request (G3): held for the whole
//! request, renewed when the writes since it was taken ate into its lease,
//! given back right after. Taking it is the port's
//! ([`crate::ports::LaneQueue::tenant_slot`]).

use std::time::Duration;

use tracing::warn;

use super::{Engine, Step};
use crate::domain::Delivery;
use crate::ports::{StoreResult, TenantSlot};
use crate::telemetry::Chain;

/// How many times a slot's lease is renewed before a request when the
/// writes since it was taken ate into it.
const RENEWALS: usize = 3;

impl Engine {
    /// Takes the delivery's tenant slot for `hold`, or ends its turn: put
    /// off until a slot frees when the tenant is at its bound, and for a
    /// second when the bound's bookkeeping could not be read (not the
    /// store's long retry).
    pub(super) async fn take_slot(
        &self,
        d: &Delivery,
        hold: Duration,
    ) -> StoreResult<Result<TenantSlot, Step>> {
        let limit = self.config.tenant_max_in_flight;
        match self.ports.lanes.tenant_slot(d, limit, hold).await {
            Ok(TenantSlot::Full(until)) => self.put_off(d, until).await.map(Err),
            Ok(slot) => Ok(Ok(slot)),
            Err(e) => {
                warn!(tenant = d.tenant.as_str(), error = %Chain(&e), "taking a tenant slot failed; trying again shortly");
                self.put_off_briefly(d).await.map(Err)
            }
        }
    }

    /// The tenant slot, held for the whole request: the request ends by
    /// the attempt timeout, and that (with the clocks' allowance) must fall
    /// within the slot's lease, since another process may take the slot
    /// from its end on. A lease the writes since it was taken (a slow
    /// store, its retries) ate into is renewed. `None` when the slot was
    /// lost or could not be renewed in time: no request may go out (G3).
    pub(super) async fn slot_for_the_request(
        &self,
        d: &Delivery,
        mut slot: TenantSlot,
        hold: Duration,
    ) -> Option<TenantSlot> {
        for _ in 0..RENEWALS {
            let TenantSlot::Held { until, .. } = &slot else {
                return Some(slot);
            };
            let ends =
                self.ports.clock.now() + self.config.attempt_timeout + super::CLOCK_ALLOWANCE;
            if ends <= *until {
                return Some(slot);
            }
            match self.ports.lanes.renew_tenant_slot(d, &slot, hold).await {
                Ok(Some(renewed)) => slot = renewed,
                Ok(None) => {
                    warn!(tenant = d.tenant.as_str(), "a tenant slot's lease ended before its request and the slot was taken; the attempt waits");
                    return None;
                }
                Err(e) => {
                    warn!(tenant = d.tenant.as_str(), error = %Chain(&e), "renewing a tenant slot failed; the attempt waits");
                    self.release_slot(d, slot).await;
                    return None;
                }
            }
        }
        warn!(
            tenant = d.tenant.as_str(),
            "a tenant slot could not be renewed in time for its request; the attempt waits"
        );
        self.release_slot(d, slot).await;
        None
    }

    /// Gives a tenant slot back; one that cannot be frees itself when its
    /// lease ends.
    pub(super) async fn release_slot(&self, d: &Delivery, slot: TenantSlot) {
        if slot == TenantSlot::Unbounded {
            return;
        }
        if let Err(e) = self.ports.lanes.release_tenant_slot(d, slot).await {
            warn!(
                tenant = d.tenant.as_str(),
                error = %Chain(&e),
                "giving a tenant slot back failed; it frees itself when its lease ends"
            );
        }
    }
}
