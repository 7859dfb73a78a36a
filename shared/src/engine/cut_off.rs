//! The first cut-off (AWS, main pool beside a slow pool): the request of an
//! attempt to an endpoint that has not shown it answers (its last delivery
//! did not arrive: a new, parked or failing one) is cut off after
//! `HOOKLANE_FIRST_CUT_OFF` rather than `HOOKLANE_SLOW_AFTER`, as a
//! timeout, so each new receiver that hangs holds a main-pool invocation
//! one second, not five. Elsewhere (`serve`, the slow pool, the API's
//! probe) `Config::unproven_cut_off` is unset and requests run their whole
//! attempt timeout.

use time::OffsetDateTime;

use super::Engine;
use crate::domain::{Event, Subscription};
use crate::policy::AttemptResult;
use crate::ports::SendReport;

impl Engine {
    /// Signs and sends the event, cut off at the pool's first cut-off when
    /// the subscription has not shown it answers (AWS, main pool: a new or
    /// failing endpoint that does not answer at once moves to the slow
    /// pool after one second, not after `HOOKLANE_SLOW_AFTER`, so a burst
    /// of new hung receivers holds the pool's invocations that long).
    pub(super) async fn send_within_cut_off(
        &self,
        sub: &Subscription,
        event: &Event,
        attempt: u32,
        now: OffsetDateTime,
    ) -> SendReport {
        let send = self.send_signed(sub, event.id.as_str(), attempt, event.payload.clone(), now);
        let Some(cut) = self
            .config
            .unproven_cut_off
            .filter(|_| !sub.health.answers())
        else {
            return send.await;
        };
        tokio::time::timeout(cut, send).await.unwrap_or(SendReport {
            result: AttemptResult::Timeout,
            excerpt: None,
            headers: None,
            elapsed: cut,
        })
    }
}
