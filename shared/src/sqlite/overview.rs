//! The overview over SQLite (`GET /status`, the backlog gauges): pending
//! deliveries per tenant from the partial index of pending rows (a covered
//! scan of what is pending, not of the history), suspended subscriptions,
//! and parked counts per tenant when asked.

use rusqlite::{params, Connection};

use super::{corrupt, from_ms, tenant_at, SqliteStore};
use crate::domain::{
    Overview, SubscriptionId, SuspendedSubscription, TenantBacklog, TenantId, PARKED_LISTED,
    SUSPENDED_LISTED,
};
use crate::ports::StoreResult;

/// Parked deliveries per tenant, most first: a scan of the partial index
/// of parked rows.
pub(super) const PARKED: &str =
    "SELECT tenant, COUNT(*) AS n FROM deliveries WHERE state = 'parked' \
     GROUP BY tenant ORDER BY n DESC, tenant LIMIT ?1";

/// Pending deliveries per tenant and when the oldest was queued: a scan
/// of the partial index of pending rows.
pub(super) const BACKLOG: &str =
    "SELECT p.tenant, p.n, COALESCE(d.enqueued_at, d.updated_at) FROM \
     (SELECT tenant, COUNT(*) AS n, MIN(seq) AS first FROM deliveries \
      WHERE state = 'pending' GROUP BY tenant) p \
     JOIN deliveries d ON d.seq = p.first";

/// Pending deliveries per tenant, with when the oldest was queued.
fn backlog(conn: &Connection) -> rusqlite::Result<Vec<TenantBacklog>> {
    conn.prepare_cached(BACKLOG)?
        .query_map([], |r| {
            Ok(TenantBacklog {
                tenant: tenant_at(r, 0)?,
                pending: r.get::<_, i64>(1)? as u64,
                oldest: r.get::<_, Option<i64>>(2)?.map(from_ms),
            })
        })?
        .collect()
}

/// Suspended subscriptions, the longest suspended first, and how many.
fn suspended(conn: &Connection) -> rusqlite::Result<(Vec<SuspendedSubscription>, u64)> {
    let listed = conn
        .prepare_cached(
            "SELECT tenant, id, url, suspended_at, status_reason FROM subscriptions \
             WHERE status = 'suspended' AND deleted_at IS NULL \
             ORDER BY suspended_at, id LIMIT ?1",
        )?
        .query_map(params![SUSPENDED_LISTED as i64], |r| {
            Ok(SuspendedSubscription {
                tenant: tenant_at(r, 0)?,
                id: SubscriptionId::parse(&r.get::<_, String>(1)?)
                    .map_err(|_| corrupt("subscription id"))?,
                url: r.get(2)?,
                since: r.get::<_, Option<i64>>(3)?.map(from_ms),
                reason: r.get(4)?,
            })
        })?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    let total: i64 = conn.query_row(
        "SELECT COUNT(*) FROM subscriptions WHERE status = 'suspended' AND deleted_at IS NULL",
        [],
        |r| r.get(0),
    )?;
    Ok((listed, total as u64))
}

/// Parked deliveries per tenant, the [`PARKED_LISTED`] tenants with the
/// most.
fn parked(conn: &Connection) -> rusqlite::Result<Vec<(TenantId, u64)>> {
    conn.prepare_cached(PARKED)?
        .query_map(params![PARKED_LISTED as i64], |r| {
            Ok((tenant_at(r, 0)?, r.get::<_, i64>(1)? as u64))
        })?
        .collect()
}

impl SqliteStore {
    /// The overview ([`crate::ports::DeliveryViews::overview`]).
    pub(super) async fn overview_now(&self, with_parked: bool) -> StoreResult<Overview> {
        self.read(move |conn| {
            let (listed, total) = suspended(conn)?;
            Ok(Overview {
                backlog: Some(backlog(conn)?),
                pending_total: None,
                slow_pool_pending: None,
                slow_pool_lanes: None,
                suspended: Some(listed),
                suspended_total: Some(total),
                parked: if with_parked {
                    Some(parked(conn)?)
                } else {
                    None
                },
            })
        })
        .await
    }
}
