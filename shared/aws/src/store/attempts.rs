//! `AttemptLog` on DynamoDB: one item per attempt under the subscription,
//! sorted by a time-ordered sequence, read newest first; TTL 14 days. A
//! first attempt's entry has a key its delivery record names, and is its
//! outcome when it was delivered ([`super::first_attempt`]).

use async_trait::async_trait;
use hooklane_core::domain::{Attempt, AttemptId, EventId, EventType, SubscriptionId, TenantId};
use hooklane_core::ports::{AttemptLog, StoreError, StoreResult};
use hooklane_core::record::{from_ms, ms};

use super::keys::log_pk;
use super::{
    backend, corrupt, get_n, get_s, padded, readable, required_n, time_seq, took_effect, Item,
    RETENTION_SECS,
};
use crate::{number_attr, string_attr};

/// Sequences an entry draws before its write gives up (each taken key
/// draws the next).
const KEY_TRIES: usize = 5;

/// Pages a list reads at most to find its entries.
const LIST_PAGES: usize = 20;

fn from_item(item: &Item) -> StoreResult<(i64, Attempt)> {
    let text = |k: &str| get_s(item, k).ok_or_else(|| corrupt("attempt"));
    let seq = text("sk")?
        .parse::<i64>()
        .map_err(|_| corrupt("attempt order"))?;
    Ok((
        seq,
        Attempt {
            id: AttemptId::parse(text("id")?).map_err(|_| corrupt("attempt id"))?,
            tenant: TenantId::parse(text("tenant")?).map_err(|_| corrupt("tenant"))?,
            subscription_id: SubscriptionId::parse(text("subscription_id")?)
                .map_err(|_| corrupt("subscription id"))?,
            event_id: EventId::parse(text("event_id")?).map_err(|_| corrupt("event id"))?,
            event_type: get_s(item, "event_type")
                .map(|t| EventType::parse(t).map_err(|_| corrupt("event type")))
                .transpose()?,
            attempt: required_n(item, "attempt")? as u32,
            started_at: from_ms(required_n(item, "started_at")?),
            duration_ms: required_n(item, "duration_ms")? as u64,
            status_code: get_n(item, "status_code").map(|c| c as u16),
            outcome: text("outcome")?.to_owned(),
            error: get_s(item, "error").map(str::to_owned),
            response_excerpt: get_s(item, "response_excerpt").map(str::to_owned),
        },
    ))
}

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
        let mut req = self
            .ddb
            .put_item()
            .table_name(&self.settings.table)
            .item("pk", string_attr(log_pk(&a.tenant, &a.subscription_id)))
            .item("sk", string_attr(sk))
            .item("id", string_attr(a.id.as_str()))
            .item("tenant", string_attr(a.tenant.as_str()))
            .item("subscription_id", string_attr(a.subscription_id.as_str()))
            .item("event_id", string_attr(a.event_id.as_str()))
            .item("attempt", number_attr(a.attempt))
            .item("started_at", number_attr(ms(a.started_at)))
            .item("duration_ms", number_attr(a.duration_ms))
            .item("outcome", string_attr(a.outcome.clone()))
            .item(
                "expires_at",
                number_attr(a.started_at.unix_timestamp() + RETENTION_SECS),
            );
        if let Some(c) = a.status_code {
            req = req.item("status_code", number_attr(c));
        }
        if let Some(e) = &a.error {
            req = req.item("error", string_attr(e.clone()));
        }
        if let Some(x) = &a.response_excerpt {
            req = req.item("response_excerpt", string_attr(x.clone()));
        }
        if let Some(t) = &a.event_type {
            req = req.item("event_type", string_attr(t.as_str()));
        }
        req
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
        let now = time::OffsetDateTime::now_utc().unix_timestamp();
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
                if get_n(&item, "expires_at").is_some_and(|exp| exp < now)
                    || item.contains_key("claim")
                {
                    continue;
                }
                out.extend(readable("attempt", &item, from_item(&item))?);
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
