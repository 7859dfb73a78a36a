//! `AttemptLog` on DynamoDB: one item per attempt under the subscription,
//! sorted by a time-ordered sequence, read newest first; TTL 14 days. A
//! first attempt's entry has a key its delivery record names, and is its
//! outcome when it was delivered ([`super::first_attempt`]).

use async_trait::async_trait;
use hooklane_core::domain::{Attempt, SubscriptionId, TenantId};
use hooklane_core::ports::{AttemptLog, StoreError, StoreResult};

use super::items::attempt::{attempt_item, attempt_of};
use super::items::event::expired;
use super::items::keys::log_pk;
use super::{backend, padded, readable, time_seq, took_effect};
use crate::string_attr;

/// Sequences an entry draws before its write gives up (each taken key
/// draws the next).
const KEY_TRIES: usize = 5;

/// Pages a list reads at most to find its entries.
const LIST_PAGES: usize = 20;

super::table::table_port!(
    /// The attempt log on DynamoDB.
    AwsAttemptLog
);

impl AwsAttemptLog {
    /// The write of an attempt's log entry under sort key `sk`.
    pub(super) fn put_entry(
        &self,
        a: &Attempt,
        sk: String,
    ) -> aws_sdk_dynamodb::operation::put_item::builders::PutItemFluentBuilder {
        self.ddb
            .put_item()
            .table_name(&self.settings.table)
            .set_item(Some(attempt_item(a, sk)))
    }
}

#[async_trait]
impl AttemptLog for AwsAttemptLog {
    async fn record(&self, a: &Attempt) -> StoreResult<()> {
        // On condition that the key is free (or holds this very entry): a
        // first attempt's entry at a key of the same millisecond
        // (`first_attempt`) is never overwritten; a taken key draws the
        // next sequence.
        for _ in 0..KEY_TRIES {
            let res = self
                .put_entry(a, padded(time_seq(a.started_at)))
                .condition_expression("attribute_not_exists(pk) OR id = :id")
                .expression_attribute_values(":id", string_attr(a.id.as_str()))
                .send()
                .await;
            if took_effect(res)? {
                return Ok(());
            }
        }
        Err(StoreError::backend(format!(
            "no free attempt-log key in {KEY_TRIES} tries"
        )))
    }

    async fn list(
        &self,
        tenant: &TenantId,
        subscription: &SubscriptionId,
        before: Option<i64>,
        limit: usize,
    ) -> StoreResult<Vec<(i64, Attempt)>> {
        let now = time::OffsetDateTime::now_utc();
        let mut out = Vec::new();
        let mut start = None;
        // Page on until `limit` entries are found: expired items and claims
        // are skipped, and a short page would end the API's pagination. At
        // most `LIST_PAGES` pages are read: the expired ones are the oldest
        // (TTL deletion can lag by days), so what is left past them is
        // expired too.
        for _ in 0..LIST_PAGES {
            let resp = self
                .ddb
                .query()
                .table_name(&self.settings.table)
                .key_condition_expression("pk = :pk AND sk < :before")
                .expression_attribute_values(":pk", string_attr(log_pk(tenant, subscription)))
                .expression_attribute_values(
                    ":before",
                    string_attr(padded(before.unwrap_or(i64::MAX))),
                )
                .scan_index_forward(false)
                .limit(limit.clamp(1, 1000) as i32)
                .set_exclusive_start_key(start)
                .send()
                .await
                .map_err(backend)?;
            for item in resp.items.unwrap_or_default() {
                // A claim (`first_attempt`) is no attempt.
                if expired(&item, now) || item.contains_key("claim") {
                    continue;
                }
                out.extend(readable("attempt", &item, attempt_of(&item))?);
            }
            start = resp.last_evaluated_key;
            if out.len() >= limit || start.is_none() {
                break;
            }
        }
        // Past `limit`: the next page starts after the last entry returned.
        out.truncate(limit);
        Ok(out)
    }
}
