//! A backfill job's item (`B#{subscription}`, `B`): its window and how
//! far it got.

use hooklane_core::domain::{ArchivePosition, BackfillJob, SubscriptionId, TenantId};
use hooklane_core::ports::StoreResult;
use hooklane_core::record::from_ms;

use super::attrs::{corrupt, get_s, required_n};
use crate::store::Item;

/// The backfill job an item holds.
pub(crate) fn job_of(item: &Item) -> StoreResult<BackfillJob> {
    let text = |k: &str| get_s(item, k).ok_or_else(|| corrupt("backfill job"));
    Ok(BackfillJob {
        tenant: TenantId::parse(text("tenant")?).map_err(|_| corrupt("tenant"))?,
        subscription_id: SubscriptionId::parse(text("subscription_id")?)
            .map_err(|_| corrupt("subscription id"))?,
        after: ArchivePosition {
            at: from_ms(required_n(item, "after_at")?),
            id: text("after_id")?.to_owned(),
        },
        until: from_ms(required_n(item, "until")?),
        started_at: from_ms(required_n(item, "started")?),
    })
}
