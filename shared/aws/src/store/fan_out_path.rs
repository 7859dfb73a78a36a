//! Where a tenant's events are fanned out on AWS. The API function fans an
//! event out itself before it answers `POST /events` (one page of
//! subscriptions), rather than through the ingest queue: that saves the
//! ingest queue's send, receive and delete and a fan-out invocation per
//! event. A tenant moves to the ingest queue, for good, when an event of
//! its matches a page of subscriptions (500) or more, a batch of its has
//! more deliveries than one request fans out (2,000), or a fan-out fails
//! before the answer.
//!
//! One path per tenant keeps its order (G5): on the API path an event's
//! deliveries are queued before its 202, so events published one after
//! another are queued in that order; on the queue path the ingest queue
//! (group = tenant) orders them. The move is one item (`T#{tenant}`,
//! `Q#fan-out`), written before the tenant's first ingest send, and read
//! strongly consistent once per publish request of a tenant this process
//! has not seen move (one read unit; a batch's events all take the path its
//! first took): a request that begins after another was answered sees the
//! move that one made. A process remembers the tenants that moved.
//!
//! `HOOKLANE_FAN_OUT_IN_API=false` (the template's `FanOutInApi`) sends
//! every event through the ingest queue without marking tenants. Turning
//! it on while a tenant's events wait in the ingest queue can let that
//! tenant's next event be queued ahead of them: switch it on when the
//! ingest queue is empty (`infra/README.md`, upgrading a stack).

use std::collections::HashSet;
use std::sync::Mutex;

use hooklane_core::domain::TenantId;
use hooklane_core::ports::StoreResult;
use hooklane_core::record::ms;
use time::OffsetDateTime;

use super::items::keys::{tenant_pk, PATH_SK};
use super::{backend, Table};
use crate::{number_attr, string_attr};

/// How many moved tenants a process remembers before it starts over (and
/// reads their items again).
const KEEP: usize = 100_000;

/// The tenants this process saw move to the ingest queue (shared by
/// clones).
#[derive(Debug, Default)]
pub(crate) struct MovedTenants(Mutex<HashSet<TenantId>>);

impl MovedTenants {
    fn has(&self, tenant: &TenantId) -> bool {
        self.0.lock().is_ok_and(|set| set.contains(tenant))
    }

    fn note(&self, tenant: &TenantId) {
        if let Ok(mut set) = self.0.lock() {
            if set.len() >= KEEP {
                set.clear();
            }
            set.insert(tenant.clone());
        }
    }
}

impl MovedTenants {
    /// Whether the caller of a publish of `tenant` fans it out: the API
    /// path is on and the tenant has not moved to the ingest queue.
    pub(crate) async fn fans_out_in_api(
        &self,
        table: &Table,
        tenant: &TenantId,
    ) -> StoreResult<bool> {
        if !table.settings.fan_out_in_api || self.has(tenant) {
            return Ok(false);
        }
        let item = table
            .get_consistent(tenant_pk(tenant), PATH_SK.to_owned())
            .await?;
        let moved = item.is_some_and(|i| i.contains_key("queued_at"));
        if moved {
            self.note(tenant);
        }
        Ok(!moved)
    }

    /// Moves a tenant to the ingest queue for good (with the API path on;
    /// idempotent: the first move's time stays).
    pub(crate) async fn move_to_queue(&self, table: &Table, tenant: &TenantId) -> StoreResult<()> {
        if !table.settings.fan_out_in_api || self.has(tenant) {
            return Ok(());
        }
        table
            .ddb
            .update_item()
            .table_name(&table.settings.table)
            .key("pk", string_attr(tenant_pk(tenant)))
            .key("sk", string_attr(PATH_SK))
            .update_expression("SET queued_at = if_not_exists(queued_at, :now)")
            .expression_attribute_values(":now", number_attr(ms(OffsetDateTime::now_utc())))
            .send()
            .await
            .map_err(backend)?;
        tracing::info!(
            tenant = tenant.as_str(),
            "the tenant's events are fanned out from the ingest queue from now on"
        );
        self.note(tenant);
        Ok(())
    }
}
