//! The operator's view of the whole service, read from the store when
//! asked: `GET /status` (and `hooklane status`, which asks it) and the
//! gauges `GET /metrics` sets before it renders. Both read one
//! [`Overview`], so the status and the metrics show the same numbers.

use tracing::warn;

use super::Engine;
use crate::domain::Overview;
use crate::ports::StoreResult;

impl Engine {
    /// What the store tells of the whole service now.
    pub async fn overview(&self, parked: bool) -> StoreResult<Overview> {
        self.ports.views.overview(parked).await
    }

    /// The status document: backlog per tenant (bounded), suspended
    /// subscriptions with why, dead letters per tenant, open breakers.
    pub async fn status(&self) -> StoreResult<serde_json::Value> {
        let overview = self.overview(true).await?;
        let now = self.ports.clock.now();
        Ok(overview.status_json(now, self.breakers.open_count(now)))
    }

    /// The metrics with their gauges read now. A store that cannot be read
    /// leaves the gauges as they were (logged), and the counters still
    /// render.
    pub async fn metrics_now(&self) -> String {
        match self.overview(false).await {
            Ok(o) => {
                let now = self.ports.clock.now();
                self.metrics.set_gauges(
                    o.bounded_backlog(now),
                    o.suspended_total,
                    self.breakers.open_count(now),
                );
            }
            Err(e) => warn!(error = %e, "the backlog gauges could not be read"),
        }
        self.metrics.render()
    }
}
