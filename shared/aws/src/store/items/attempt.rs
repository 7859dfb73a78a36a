//! An attempt's log entry (`A#{tenant}#{subscription}`, zero-padded
//! sequence; TTL 14 days): the item written for an attempt, and the
//! attempt and sequence read back from it.

use hooklane_core::domain::{Attempt, AttemptId, EventId, EventType, SubscriptionId, TenantId};
use hooklane_core::ports::StoreResult;
use hooklane_core::record::{from_ms, ms};

use super::attrs::{corrupt, get_n, get_s, required_n};
use super::keys::log_pk;
use crate::store::{Item, RETENTION_SECS};
use crate::{number_attr, string_attr};

/// The item of an attempt's log entry under sort key `sk`.
pub(crate) fn attempt_item(a: &Attempt, sk: String) -> Item {
    let mut item: Item = [
        ("pk", string_attr(log_pk(&a.tenant, &a.subscription_id))),
        ("sk", string_attr(sk)),
        ("id", string_attr(a.id.as_str())),
        ("tenant", string_attr(a.tenant.as_str())),
        ("subscription_id", string_attr(a.subscription_id.as_str())),
        ("event_id", string_attr(a.event_id.as_str())),
        ("attempt", number_attr(a.attempt)),
        ("started_at", number_attr(ms(a.started_at))),
        ("duration_ms", number_attr(a.duration_ms)),
        ("outcome", string_attr(a.outcome.clone())),
        (
            "expires_at",
            number_attr(a.started_at.unix_timestamp() + RETENTION_SECS),
        ),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect();
    let optional = [
        ("status_code", a.status_code.map(number_attr)),
        ("error", a.error.clone().map(string_attr)),
        (
            "response_excerpt",
            a.response_excerpt.clone().map(string_attr),
        ),
        (
            "event_type",
            a.event_type.as_ref().map(|t| string_attr(t.as_str())),
        ),
        (
            "response_headers",
            a.response_headers.clone().map(string_attr),
        ),
    ];
    for (k, v) in optional {
        if let Some(v) = v {
            item.insert(k.to_owned(), v);
        }
    }
    item
}

/// An attempt log entry's sequence and attempt.
pub(crate) fn attempt_of(item: &Item) -> StoreResult<(i64, Attempt)> {
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
            response_headers: get_s(item, "response_headers").map(str::to_owned),
        },
    ))
}
