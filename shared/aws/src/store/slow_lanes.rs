//! Which lanes are in the slow pool, for the overview (`GET /status`,
//! `hooklane status`, `hooklane_slow_pool_lanes`). The subscription items'
//! `slow` flags say it ([`super::slow_pool`]), but no index reads them, so
//! each move of a lane writes a small marker item beside its flag
//! (`SLOW` / `{tenant}#{subscription}#{lane}`): one put when the lane
//! moves to the slow pool, one delete when it comes back, nothing per
//! delivery. The marker is written after the flag and removed after it,
//! not in the flag's write (which stays one conditional `UpdateItem`), so
//! a crash between the two can leave a marker whose flag is gone (the
//! overview checks every marker against its subscription and removes such
//! a one) or, rarely, a flag without its marker (that lane is left out of
//! the count until it moves again); a lane back is unmarked only by a
//! marker older than its flag's removal.

use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;
use hooklane_core::domain::{SubscriptionId, TenantId};
use hooklane_core::ports::StoreResult;
use hooklane_core::record::ms;
use time::OffsetDateTime;

use super::items::keys::{slow_lane_sk, sub_sk, tenant_pk, SLOW_LANES_PK};
use super::items::lanes::{lane_attr, SLOW};
use super::{get_s, is_condition_failed, Item, Table};
use crate::{number_attr, string_attr};

/// A marker read back: its sort key, when it was written, and the lane.
struct Marker {
    sk: String,
    since: String,
    tenant: TenantId,
    sub: SubscriptionId,
    lane: u16,
}

fn marker_of(item: &Item) -> Option<Marker> {
    let sk = get_s(item, "sk")?.to_owned();
    let mut parts = sk.rsplitn(3, '#');
    let lane = parts.next()?.parse().ok()?;
    let sub = SubscriptionId::parse(parts.next()?).ok()?;
    let tenant = TenantId::parse(parts.next()?).ok()?;
    let since = match item.get("since")? {
        AttributeValue::N(n) => n.clone(),
        _ => return None,
    };
    Some(Marker {
        sk,
        since,
        tenant,
        sub,
        lane,
    })
}

impl Table {
    /// Notes a lane that moved to the slow pool (best effort: logged when
    /// it fails).
    pub(crate) async fn note_slow_lane(&self, tenant: &TenantId, sub: &SubscriptionId, lane: u16) {
        let res = self
            .ddb
            .put_item()
            .table_name(&self.settings.table)
            .item("pk", string_attr(SLOW_LANES_PK))
            .item("sk", string_attr(slow_lane_sk(tenant, sub, lane)))
            .item("since", number_attr(ms(OffsetDateTime::now_utc())))
            .send()
            .await;
        if let Err(e) = res {
            tracing::warn!(subscription_id = sub.as_str(), lane, error = %aws_smithy_types::error::display::DisplayErrorContext(e), "noting a lane in the slow pool failed; the overview leaves it out");
        }
    }

    /// Notes a lane back in the main pool, its flag removed at `at` (unix
    /// milliseconds, read before that write): a marker put since, by a move
    /// of the lane after it, stays. Best effort: a marker left behind is
    /// removed by the next overview.
    pub(crate) async fn note_lane_back(
        &self,
        (tenant, sub, lane): (&TenantId, &SubscriptionId, u16),
        at: i64,
    ) {
        let sk = slow_lane_sk(tenant, sub, lane);
        // A marker put since (the lane moved again) stays.
        if let Err(e) = self.delete_marker(&sk, "since < :t", number_attr(at)).await {
            tracing::warn!(subscription_id = sub.as_str(), lane, error = %e, "removing a lane's slow-pool marker failed; the next overview removes it");
        }
    }

    /// The lanes in the slow pool now: the markers whose subscription
    /// (live) still has the lane's flag, read strongly consistent (the
    /// flag is set before its marker is put). A marker whose flag is gone
    /// is removed, unless the lane moved again since it was read. While
    /// lanes are in the slow pool, these reads (a `BatchGetItem`, and a
    /// `DeleteItem` for a stale marker) are counted among the AWS calls
    /// (`calls`), unlike the overview's other reads.
    pub(crate) async fn slow_lanes(&self) -> StoreResult<u64> {
        let query = self
            .ddb
            .query()
            .table_name(&self.settings.table)
            .key_condition_expression("pk = :pk")
            .expression_attribute_values(":pk", string_attr(SLOW_LANES_PK));
        let markers = super::query_items(query, usize::MAX, |item| Ok(marker_of(&item))).await?;
        if markers.is_empty() {
            return Ok(0);
        }
        let mut keys: Vec<(String, String)> = markers
            .iter()
            .map(|m| (tenant_pk(&m.tenant), sub_sk(&m.sub)))
            .collect();
        keys.sort();
        keys.dedup();
        let subs: HashMap<(String, String), Item> = self
            .get_many(keys, true)
            .await?
            .into_iter()
            .filter_map(|item| {
                let key = (
                    get_s(&item, "pk")?.to_owned(),
                    get_s(&item, "sk")?.to_owned(),
                );
                Some((key, item))
            })
            .collect();
        let mut slow = 0;
        for m in markers {
            let flagged = subs
                .get(&(tenant_pk(&m.tenant), sub_sk(&m.sub)))
                .filter(|item| !item.contains_key("deleted_at"))
                .and_then(|item| item.get(&lane_attr(SLOW, m.lane)))
                .is_some_and(|v| matches!(v, AttributeValue::Bool(true)));
            match flagged {
                true => slow += 1,
                false => self.remove_stale_marker(&m).await,
            }
        }
        Ok(slow)
    }

    async fn remove_stale_marker(&self, m: &Marker) {
        let since = AttributeValue::N(m.since.clone());
        if let Err(e) = self.delete_marker(&m.sk, "since = :t", since).await {
            tracing::warn!(error = %e, "removing a stale slow-pool marker failed");
        }
    }

    /// Deletes the marker `sk` on `condition` over its `since` (`:t` is
    /// `t`); a condition that does not hold is no failure.
    async fn delete_marker(
        &self,
        sk: &str,
        condition: &str,
        t: AttributeValue,
    ) -> Result<(), String> {
        let res = self
            .ddb
            .delete_item()
            .table_name(&self.settings.table)
            .key("pk", string_attr(SLOW_LANES_PK))
            .key("sk", string_attr(sk))
            .condition_expression(condition)
            .expression_attribute_values(":t", t)
            .send()
            .await;
        match res {
            Ok(_) => Ok(()),
            Err(e) if is_condition_failed(&e) => Ok(()),
            Err(e) => Err(aws_smithy_types::error::display::DisplayErrorContext(e).to_string()),
        }
    }
}
