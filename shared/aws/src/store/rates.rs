//! `RateLimits` on DynamoDB: one item per rate-limited subscription
//! (`R#{subscription}`, `rate`) holding the rule's `tat` (microseconds; see
//! `hooklane_core::rate`), shared by every delivery function instance.
//! Subscriptions without a limit never read or write it.
//!
//! A reservation is one conditional write in the steady state, with no
//! read: `tat` moves on by one interval if it is due within the horizon
//! (the attempt starts at the old `tat`). When that condition fails, a
//! second write takes `now` if `tat` is past (an idle subscription), and
//! when that fails too the limit is saturated: one strongly consistent read
//! says when to ask again. Both conditions are evaluated atomically by
//! DynamoDB, so concurrent instances never take the same start. The item
//! expires a day after its last use.

use async_trait::async_trait;
use aws_sdk_dynamodb::types::ReturnValue;
use hooklane_core::domain::{RateLimit, SubscriptionId};
use hooklane_core::ports::StoreResult;
use hooklane_core::rate::{from_micros, interval_us, micros, RateLimits, Slot, HORIZON};
use time::OffsetDateTime;

use super::items::keys::rate_pk;
use super::{backend, get_n, is_condition_failed};
use crate::{number_attr, string_attr};

/// How long an unused rate item lives, in seconds.
const IDLE_TTL_SECS: i64 = 24 * 3600;

super::table::table_port!(
    /// The rate limits of rate-limited subscriptions on DynamoDB.
    AwsRateLimits
);

impl AwsRateLimits {
    /// One conditional update of the rate item: `set` under `condition`,
    /// with `values` (DynamoDB refuses values an expression does not use);
    /// `Some(old tat)` when it took effect.
    async fn move_tat(
        &self,
        sub: &SubscriptionId,
        set: &str,
        condition: &str,
        values: &[(&str, i64)],
    ) -> StoreResult<Option<Option<i64>>> {
        let expires = OffsetDateTime::now_utc().unix_timestamp() + IDLE_TTL_SECS;
        let mut update = self
            .ddb
            .update_item()
            .table_name(&self.settings.table)
            .key("pk", string_attr(rate_pk(sub)))
            .key("sk", string_attr("rate"))
            .update_expression(format!("{set}, expires_at = :exp"))
            .condition_expression(condition)
            .expression_attribute_values(":exp", number_attr(expires))
            .return_values(ReturnValue::UpdatedOld);
        for (name, v) in values {
            update = update.expression_attribute_values(*name, number_attr(v));
        }
        let res = update.send().await;
        match res {
            Ok(out) => Ok(Some(out.attributes.and_then(|a| get_n(&a, "tat")))),
            Err(e) if is_condition_failed(&e) => Ok(None),
            Err(e) => Err(backend(e)),
        }
    }
}

#[async_trait]
impl RateLimits for AwsRateLimits {
    async fn reserve(
        &self,
        sub: &SubscriptionId,
        limit: RateLimit,
        now: OffsetDateTime,
    ) -> StoreResult<Slot> {
        let (now, step) = (micros(now), interval_us(limit));
        let horizon = HORIZON.as_micros() as i64;
        // Busy: the next start is due within the horizon; take it.
        let busy = "tat >= :now AND tat <= :until";
        let values = [(":now", now), (":step", step), (":until", now + horizon)];
        let set = "SET tat = tat + :step";
        if let Some(old) = self.move_tat(sub, set, busy, &values).await? {
            return Ok(Slot::At(from_micros(old.unwrap_or(now))));
        }
        // Idle (or new): the next start is past; take now.
        let idle = "attribute_not_exists(tat) OR tat < :now";
        let set = "SET tat = :next";
        let values = [(":now", now), (":next", now + step)];
        if self.move_tat(sub, set, idle, &values).await?.is_some() {
            return Ok(Slot::At(from_micros(now)));
        }
        // Saturated: ask again when the horizon reaches the next start.
        let item = self.get_consistent(rate_pk(sub), "rate".into()).await?;
        let tat = item.as_ref().and_then(|i| get_n(i, "tat")).unwrap_or(now);
        Ok(Slot::NotBefore(from_micros((tat - horizon).max(now))))
    }
}
