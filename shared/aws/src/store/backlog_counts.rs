//! Per-tenant backlog counts on AWS (`HOOKLANE_TENANT_BACKLOG`, off
//! unless set): SQS keeps no count per message group, so when they are
//! on, the store keeps its own beside the queues, read by the overview
//! (`GET /status`, `hooklane status`, the per-tenant gauges of
//! `/metrics`).
//!
//! Deliveries are counted by tenant and by the minute they were queued
//! (the delivery message's `queued_at`: the event's acceptance for a
//! fan-out or a backfill, so every copy of a delivery's message, a
//! duplicate publish's included, carries the same; a replay's time for a
//! replay; kept across retries, the slow pool and the spill): item
//! `N#{shard}`, `{tenant}#{minute}` with the count in `deliveries`.
//! - queued: one `UpdateItem` adding to the count per tenant and minute of
//!   the call, once its messages are all sent, each (event, subscription)
//!   once. A fan-out counts only when it follows the accept that archived
//!   the event ([`super::backlog_tally`]), so a duplicate publish counts
//!   nothing twice; a replay counts what its conditional reset took. A
//!   backfill's deliveries are stamped and not counted (one may still be
//!   queued, and counted, under its fan-out's message: whichever copy
//!   ends takes it off);
//! - ended for good (delivered, parked, held, dropped), once its outcome
//!   took: taken off together at the end of the delivery function's batch,
//!   one `UpdateItem` per tenant and minute, and, when that leaves the
//!   minute at exactly zero, one conditional `DeleteItem` (a count queued
//!   in the same minute meanwhile keeps the item; below zero the item stays,
//!   as ends taken off before their count, which may still come); a
//!   take-off whose write fails is tried again at the next batch's end;
//! - dropped with a deleted subscription's spill: taken off as the spilled
//!   items are deleted (a failed write tried three times).
//!
//! The overview queries the 16 partitions, sums each tenant's minutes and
//! takes its oldest minute with deliveries as the oldest's age (to the
//! minute). Retried attempts write nothing here.
//!
//! Best effort, and short rather than over where it cannot be exact: a
//! count's write that fails (throttled, say) is logged and never fails the
//! delivery or the publish, and a count that fails to be read leaves the
//! per-tenant split out of the overview rather than failing it. A
//! delivery queued uncounted (by a duplicate publish finishing a fan-out
//! that stopped midway, or a backfill) still takes one off when it ends,
//! and a take-off whose write took effect but whose answer was lost is
//! tried again: a minute's count below zero is read as none. Over is left
//! to what ends without the delivery function's outcome or mid-way: a
//! crash between an outcome and the end of its batch, or a delivery
//! function retired with failed take-offs kept for its next batch (those
//! ends stay counted), a fan-out function that dies (or fails to save its
//! cursor) after queueing pages (the pages it queued since its last saved
//! cursor are counted again), a spill's take-off that failed three times,
//! a message SQS itself moves to the dead-letter queue after its receives
//! run out, and a delivery parked because its record cannot be read. A
//! count older than the retention (14 days) is not read and TTL deletes
//! it.
//!
//! Each tenant's current minute is one item, written once per publish
//! request and once per delivery batch that ends its deliveries: a tenant
//! past about a thousand of those a second is throttled on it, and the
//! SDK's retries then add to that publish's or batch's time before the
//! write is given up (logged; the counts then short, or the take-off
//! tried again). Cost: BENCHMARKS.md figure 5; it is a choice
//! (`TenantBacklog` in the template). Only deliveries queued while it is
//! on carry their time and are counted: one queued before it was turned
//! on is not taken off either; one queued before it was turned off and
//! ended while off stays counted (until its minute is past the
//! retention) if it is turned on again.

use std::collections::HashMap;

use aws_sdk_dynamodb::types::ReturnValue;
use aws_smithy_types::error::display::DisplayErrorContext;
use hooklane_core::domain::{Delivery, TenantBacklog, TenantId};
use hooklane_core::ports::StoreResult;
use time::OffsetDateTime;

use super::items::keys::{backlog_count_key, backlog_count_of, count_pk, COUNT_SHARDS};
use super::{backend, get_n, get_s, query_items, Table, RETENTION_SECS};
use crate::messages::DeliveryMessage;
use crate::{number_attr, string_attr};

/// Tries of a dropped spill's take-off.
const DROP_TRIES: usize = 3;

/// The minute (since the epoch) of a time in unix milliseconds.
fn minute_of(ms: i64) -> i64 {
    ms.div_euclid(60_000)
}

/// Deliveries per tenant and minute: how many, and when the first was
/// queued.
type ByMinute = HashMap<(String, i64), (i64, i64)>;

/// Adds `n` deliveries first queued at `first` to a tenant's minute.
fn add_to(counts: &mut ByMinute, key: (String, i64), (n, first): (i64, i64)) {
    let c = counts.entry(key).or_insert((0, first));
    *c = (c.0 + n, c.1.min(first));
}

fn tally_into(counts: &mut ByMinute, tenant: &str, at: i64, n: i64) {
    add_to(counts, (tenant.to_owned(), minute_of(at)), (n, at));
}

/// Deliveries about to be queued, per tenant and minute (empty when the
/// counts are off).
#[derive(Default)]
pub(crate) struct Queued(ByMinute);

impl Table {
    /// What [`Self::count_queued`] is to count of `msgs`: those of the
    /// events `counted` takes, each (event, subscription) once (an event
    /// batch may name one event twice), taken before they are sent
    /// (sending consumes them).
    pub(crate) fn queued<'a>(
        &self,
        msgs: impl IntoIterator<Item = &'a DeliveryMessage>,
        counted: impl Fn(&DeliveryMessage) -> bool,
    ) -> Queued {
        let mut queued = Queued::default();
        if !self.settings.tenant_backlog {
            return queued;
        }
        let mut seen = std::collections::HashSet::new();
        for m in msgs {
            let pair = (m.event_id.as_str(), m.subscription_id.as_str());
            if let (Some(at), true) = (m.queued_at, counted(m)) {
                if seen.insert(pair) {
                    tally_into(&mut queued.0, &m.tenant, at, 1);
                }
            }
        }
        queued
    }

    /// Counts deliveries once they are queued: one write per tenant and
    /// minute.
    pub(crate) async fn count_queued(&self, queued: Queued) {
        // A count that failed leaves the tenant short, never over.
        let _ = self.write_counts(queued.0).await;
    }

    /// Notes a delivery that ended for good (its `seq` on AWS: when it was
    /// queued, 0 for one not counted), to be taken off its tenant's count
    /// at [`Self::flush_ended`].
    pub(crate) fn count_done(&self, d: &Delivery) {
        if !self.settings.tenant_backlog || d.seq <= 0 {
            return;
        }
        if let Ok(mut ended) = self.tally.ended.lock() {
            tally_into(&mut ended, d.tenant.as_str(), d.seq, -1);
        }
    }

    /// Takes the ends noted since the last call off their counts: one write
    /// per tenant and minute (the delivery function calls it after each
    /// batch).
    pub async fn flush_ended(&self) {
        let ended = match self.tally.ended.lock() {
            Ok(mut ended) if !ended.is_empty() => std::mem::take(&mut *ended),
            _ => return,
        };
        self.take_off(ended).await;
    }

    /// Takes `counts` off, keeping those whose write failed for the next
    /// flush (a count left high would read as pending).
    async fn take_off(&self, counts: ByMinute) {
        let failed = self.write_counts(counts).await;
        if failed.is_empty() {
            return;
        }
        if let Ok(mut ended) = self.tally.ended.lock() {
            for (key, count) in failed {
                add_to(&mut ended, key, count);
            }
        }
    }

    /// Takes dropped messages (a deleted subscription's spill) off their
    /// counts.
    pub(crate) async fn count_dropped(&self, msgs: &[DeliveryMessage]) {
        if !self.settings.tenant_backlog {
            return;
        }
        let mut dropped = ByMinute::new();
        for m in msgs {
            if let Some(at) = m.queued_at {
                tally_into(&mut dropped, &m.tenant, at, -1);
            }
        }
        // The API function has no later batch to try again after: here.
        for tries in 1..=DROP_TRIES {
            dropped = self.write_counts(dropped).await;
            if dropped.is_empty() || tries == DROP_TRIES {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        }
    }

    /// Writes counts; returns those whose write failed.
    async fn write_counts(&self, counts: ByMinute) -> ByMinute {
        let mut failed = ByMinute::new();
        for ((tenant, minute), (n, first)) in counts {
            let Ok(id) = TenantId::parse(&tenant) else {
                continue;
            };
            if n != 0 && !self.add_count(&id, minute, (n, first)).await {
                failed.insert((tenant, minute), (n, first));
            }
        }
        failed
    }

    /// Adds `n` to a tenant's count of a minute (`first`: when the first of
    /// them was queued, kept from the minute's first count), removing the
    /// item when it reaches zero; failures are logged (the module's doc).
    async fn add_count(&self, tenant: &TenantId, minute: i64, (n, first): (i64, i64)) -> bool {
        let Err(e) = self.try_add_count(tenant, minute, (n, first)).await else {
            return true;
        };
        match n > 0 {
            true => {
                tracing::warn!(tenant = tenant.as_str(), n, error = %e, "a tenant backlog count failed; the status's count is short by it")
            }
            false => {
                tracing::warn!(tenant = tenant.as_str(), n, error = %e, "taking ends off a tenant backlog count failed; the next flush tries again")
            }
        }
        false
    }

    async fn try_add_count(
        &self,
        tenant: &TenantId,
        minute: i64,
        (n, first): (i64, i64),
    ) -> StoreResult<()> {
        let (pk, sk) = backlog_count_key(tenant, minute);
        let out = self
            .ddb
            .update_item()
            .table_name(&self.settings.table)
            .key("pk", string_attr(&pk))
            .key("sk", string_attr(&sk))
            .update_expression(
                "ADD #d :n SET expires_at = if_not_exists(expires_at, :exp), \
                 queued_at = if_not_exists(queued_at, :first)",
            )
            .expression_attribute_names("#d", "deliveries")
            .expression_attribute_values(":n", number_attr(n))
            .expression_attribute_values(":first", number_attr(first))
            .expression_attribute_values(":exp", number_attr(minute * 60 + RETENTION_SECS))
            .return_values(ReturnValue::UpdatedNew)
            .send()
            .await
            .map_err(backend)?;
        let left = out.attributes.as_ref().and_then(|a| get_n(a, "deliveries"));
        if left != Some(0) {
            // Below zero it stays (ends taken off before their count, which
            // is to come), read as none.
            return Ok(());
        }
        // Gone unless a delivery of this minute was counted meanwhile.
        let res = self
            .ddb
            .delete_item()
            .table_name(&self.settings.table)
            .key("pk", string_attr(pk))
            .key("sk", string_attr(sk))
            .condition_expression("#d = :zero")
            .expression_attribute_names("#d", "deliveries")
            .expression_attribute_values(":zero", number_attr(0))
            .send()
            .await;
        match res {
            Err(e) if !super::is_condition_failed(&e) => {
                tracing::warn!(error = %DisplayErrorContext(e), "removing an empty backlog count failed");
            }
            _ => {}
        }
        Ok(())
    }

    /// Every tenant's pending deliveries and when the oldest was queued
    /// (when its minute's first was: to within the minute), read from the
    /// counts.
    pub(crate) async fn tenant_backlog(&self) -> StoreResult<Vec<TenantBacklog>> {
        let oldest_kept =
            minute_of(OffsetDateTime::now_utc().unix_timestamp() * 1000) - RETENTION_SECS / 60;
        // Per tenant: pending, and its oldest minute with the time kept.
        let mut tenants: HashMap<TenantId, (u64, (i64, i64))> = HashMap::new();
        for shard in 0..COUNT_SHARDS {
            let query = self
                .ddb
                .query()
                .table_name(&self.settings.table)
                .key_condition_expression("pk = :p")
                .expression_attribute_values(":p", string_attr(count_pk(shard)));
            let counts = query_items(query, usize::MAX, |item| {
                let count = backlog_count_of(get_s(&item, "sk").unwrap_or_default());
                let at = get_n(&item, "queued_at");
                Ok(count.zip(get_n(&item, "deliveries")).map(|c| (c, at)))
            })
            .await?;
            for (((tenant, minute), n), at) in counts {
                if n <= 0 || minute < oldest_kept {
                    continue;
                }
                let at = at.unwrap_or(minute * 60_000);
                let row = tenants.entry(tenant).or_insert((0, (minute, at)));
                row.0 += n as u64;
                row.1 = row.1.min((minute, at));
            }
        }
        Ok(tenants
            .into_iter()
            .map(|(tenant, (pending, (_, at)))| TenantBacklog {
                tenant,
                pending,
                oldest: Some(hooklane_core::record::from_ms(at)),
            })
            .collect())
    }
}
