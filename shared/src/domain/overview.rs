//! What an operator sees of the whole service at once (`GET /status`,
//! `hooklane status` and the gauges of `GET /metrics`): how far behind
//! delivery is per tenant, which subscriptions are suspended and why, and
//! how many deliveries are parked. The stores read it
//! ([`crate::ports::DeliveryViews::overview`]); this module shapes it,
//! keeping the per-tenant part to a bounded number of rows.

use serde::Serialize;
use time::OffsetDateTime;

use super::{rfc3339, SubscriptionId, TenantId};

/// How many tenants are named one by one (the ones with the most pending
/// deliveries); the rest are summed into one row, [`OTHER_TENANTS`], so a
/// metric's series stay bounded whatever the number of tenants.
pub const TOP_TENANTS: usize = 10;

/// The tenant name of the row that sums every tenant not named: one no
/// tenant can have (tenant ids are letters, digits, `_` and `-`).
pub const OTHER_TENANTS: &str = "(others)";

/// One tenant's pending deliveries (queued, waiting for a retry, or in
/// flight) and when the oldest of them was queued.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TenantBacklog {
    /// The tenant.
    pub tenant: TenantId,
    /// Pending deliveries.
    pub pending: u64,
    /// When the oldest pending delivery was queued.
    pub oldest: Option<OffsetDateTime>,
}

/// A suspended subscription, as the status lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SuspendedSubscription {
    /// Its tenant.
    pub tenant: TenantId,
    /// The subscription.
    pub id: SubscriptionId,
    /// Its endpoint.
    pub url: String,
    /// Since when.
    pub since: Option<OffsetDateTime>,
    /// Why.
    pub reason: Option<String>,
}

/// What a store can tell of the whole service. `None` where the backend
/// cannot tell it (said in the README).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Overview {
    /// Pending deliveries, per tenant with any.
    pub backlog: Option<Vec<TenantBacklog>>,
    /// Pending deliveries in all, where only the sum is known.
    pub pending_total: Option<u64>,
    /// Of them, those on the slow pool's queue (AWS: lanes whose attempts
    /// took too long run there).
    pub slow_pool_pending: Option<u64>,
    /// Lanes in the slow pool (AWS).
    pub slow_pool_lanes: Option<u64>,
    /// Suspended subscriptions, the longest suspended first (at most
    /// [`SUSPENDED_LISTED`]).
    pub suspended: Option<Vec<SuspendedSubscription>>,
    /// Suspended subscriptions in all.
    pub suspended_total: Option<u64>,
    /// Parked deliveries (dead letters), per tenant with any, the most
    /// first (at most [`PARKED_LISTED`] tenants).
    pub parked: Option<Vec<(TenantId, u64)>>,
}

/// How many suspended subscriptions the status lists one by one.
pub const SUSPENDED_LISTED: usize = 100;

/// How many tenants' dead-letter counts the status lists (those with the
/// most).
pub const PARKED_LISTED: usize = 100;

/// One row of the bounded backlog: a tenant's, or the rest's ([`OTHER_TENANTS`]).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BacklogRow {
    /// The tenant, or [`OTHER_TENANTS`].
    pub tenant: String,
    /// Pending deliveries.
    pub pending: u64,
    /// Seconds since the oldest of them was queued.
    pub oldest_age_seconds: Option<f64>,
}

/// The backlog in all and per tenant, bounded: the [`TOP_TENANTS`] tenants
/// with the most pending deliveries by name, the rest in one row.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Backlog {
    /// Pending deliveries in all (`None`: this backend cannot tell).
    pub pending: Option<u64>,
    /// Seconds since the oldest pending delivery was queued.
    pub oldest_age_seconds: Option<f64>,
    /// Per tenant (empty where the backend knows only the sum).
    pub tenants: Vec<BacklogRow>,
    /// Of them, on the slow pool's queue (AWS only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slow_pool: Option<u64>,
    /// Lanes in the slow pool (AWS only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slow_pool_lanes: Option<u64>,
}

fn age(now: OffsetDateTime, at: Option<OffsetDateTime>) -> Option<f64> {
    at.map(|at| (now - at).as_seconds_f64().max(0.0))
}

impl Overview {
    /// The backlog bounded to [`TOP_TENANTS`] rows and one for the rest.
    pub fn bounded_backlog(&self, now: OffsetDateTime) -> Backlog {
        let Some(rows) = &self.backlog else {
            return Backlog {
                pending: self.pending_total,
                oldest_age_seconds: None,
                tenants: Vec::new(),
                slow_pool: self.slow_pool_pending,
                slow_pool_lanes: self.slow_pool_lanes,
            };
        };
        let mut rows: Vec<&TenantBacklog> = rows.iter().filter(|r| r.pending > 0).collect();
        rows.sort_by(|a, b| {
            b.pending
                .cmp(&a.pending)
                .then_with(|| a.tenant.as_str().cmp(b.tenant.as_str()))
        });
        let oldest = rows.iter().filter_map(|r| r.oldest).min();
        let row = |tenant: String, pending, oldest| BacklogRow {
            tenant,
            pending,
            oldest_age_seconds: age(now, oldest),
        };
        let split = rows.len().min(TOP_TENANTS);
        let mut tenants: Vec<BacklogRow> = rows[..split]
            .iter()
            .map(|r| row(r.tenant.as_str().to_owned(), r.pending, r.oldest))
            .collect();
        let rest = &rows[split..];
        if !rest.is_empty() {
            tenants.push(row(
                OTHER_TENANTS.to_owned(),
                rest.iter().map(|r| r.pending).sum(),
                rest.iter().filter_map(|r| r.oldest).min(),
            ));
        }
        Backlog {
            pending: Some(rows.iter().map(|r| r.pending).sum()),
            // None pending: nothing is old.
            oldest_age_seconds: age(now, oldest).or(rows.is_empty().then_some(0.0)),
            tenants,
            slow_pool: self.slow_pool_pending,
            slow_pool_lanes: self.slow_pool_lanes,
        }
    }

    /// The status document (`GET /status`, `hooklane status --json`).
    pub fn status_json(&self, now: OffsetDateTime, open_breakers: usize) -> serde_json::Value {
        let suspended = self.suspended.as_ref().map(|subs| {
            subs.iter()
                .map(|s| {
                    serde_json::json!({
                        "tenant": s.tenant.as_str(),
                        "subscription_id": s.id.as_str(),
                        "url": s.url,
                        "since": s.since.map(rfc3339),
                        "reason": s.reason,
                    })
                })
                .collect::<Vec<_>>()
        });
        let parked = self.parked.as_ref().map(|rows| {
            rows.iter()
                .map(|(t, n)| serde_json::json!({"tenant": t.as_str(), "parked": n}))
                .collect::<Vec<_>>()
        });
        serde_json::json!({
            "at": rfc3339(now),
            "backlog": self.bounded_backlog(now),
            "suspended_total": self.suspended_total,
            "suspended": suspended,
            "dead_letters": parked,
            "open_breakers": open_breakers,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tenant(n: usize) -> TenantId {
        TenantId::parse(&format!("t{n:04}")).unwrap()
    }

    #[test]
    fn a_thousand_tenants_make_eleven_rows_and_the_sums_stay_whole() {
        let now = OffsetDateTime::now_utc();
        let backlog = (0..1000)
            .map(|n| TenantBacklog {
                tenant: tenant(n),
                pending: n as u64 + 1,
                oldest: Some(now - time::Duration::seconds(n as i64)),
            })
            .collect();
        let o = Overview {
            backlog: Some(backlog),
            ..Overview::default()
        };
        let b = o.bounded_backlog(now);
        assert_eq!(b.tenants.len(), TOP_TENANTS + 1);
        assert_eq!(b.tenants[0].tenant, "t0999");
        assert_eq!(b.tenants[0].pending, 1000);
        assert_eq!(b.tenants[TOP_TENANTS].tenant, OTHER_TENANTS);
        assert_eq!(b.pending, Some((1..=1000).sum()));
        assert_eq!(
            b.tenants.iter().map(|r| r.pending).sum::<u64>(),
            b.pending.unwrap()
        );
        // The oldest of all is t0999's; the rest's oldest is t0989's.
        assert_eq!(b.oldest_age_seconds, Some(999.0));
        assert_eq!(b.tenants[TOP_TENANTS].oldest_age_seconds, Some(989.0));
    }

    #[test]
    fn a_backend_that_knows_only_the_sum_names_no_tenant() {
        let o = Overview {
            pending_total: Some(7),
            ..Overview::default()
        };
        let b = o.bounded_backlog(OffsetDateTime::now_utc());
        assert_eq!((b.pending, b.tenants.len()), (Some(7), 0));
    }
}
