//! A subscription's item: the mapping between the core's `Subscription`
//! and its DynamoDB item (keys from [`super::keys`], spilling lanes from
//! [`super::lanes`]), and the update expression of its editable fields.
//! The subscription store and the type index read items through it.

use aws_sdk_dynamodb::types::AttributeValue;
use hooklane_core::domain::{Subscription, SubscriptionId, SuspendedSubscription, TenantId};
use hooklane_core::ports::StoreResult;
use hooklane_core::record::{from_ms, SubscriptionRecord};

use super::attrs::{corrupt, get_n, get_s};
use super::keys::{sub_sk, tenant_pk};
use super::lanes::spilling_lanes;
use crate::store::{backend, Item};
use crate::{number_attr, string_attr};

pub(crate) fn to_item(sub: &Subscription) -> StoreResult<Item> {
    let mut item: Item = serde_dynamo::to_item(SubscriptionRecord::from(sub)).map_err(backend)?;
    item.insert("pk".into(), string_attr(tenant_pk(&sub.tenant)));
    item.insert("sk".into(), string_attr(sub_sk(&sub.id)));
    Ok(item)
}

/// A suspended subscription as the status lists it, from its item (read
/// through the index of suspended subscriptions).
pub(crate) fn suspended_of(item: &Item) -> StoreResult<SuspendedSubscription> {
    let text = |k: &str| get_s(item, k).ok_or_else(|| corrupt(k));
    Ok(SuspendedSubscription {
        tenant: TenantId::parse(text("tenant")?).map_err(|_| corrupt("tenant"))?,
        id: SubscriptionId::parse(text("id")?).map_err(|_| corrupt("id"))?,
        url: text("url")?.to_owned(),
        since: get_n(item, "suspended_at").map(from_ms),
        reason: get_s(item, "status_reason").map(str::to_owned),
    })
}

/// Parses a subscription item with its spilling lanes; `None` for a
/// tombstone.
pub(crate) fn from_item(item: Item) -> StoreResult<Option<(Subscription, Vec<u16>)>> {
    if item.contains_key("deleted_at") {
        return Ok(None);
    }
    let spilling = spilling_lanes(&item);
    let rec: SubscriptionRecord =
        serde_dynamo::from_item(item).map_err(|_| corrupt("subscription"))?;
    Subscription::try_from(rec)
        .map(|sub| Some((sub, spilling)))
        .map_err(|_| corrupt("subscription"))
}

/// The attributes an update may change, each through a placeholder:
/// several are DynamoDB reserved words (`url`, among others).
pub(crate) const EDITABLE: &[(&str, &str)] = &[
    ("#url", "url"),
    ("#filters", "filters"),
    ("#metadata", "metadata"),
    ("#secret", "secret"),
    ("#updated", "updated_at"),
    ("#description", "description"),
    ("#prev", "prev_secret"),
    ("#prev_exp", "prev_secret_expires_at"),
    ("#lanes", "lanes"),
    ("#rate", "rate_limit"),
    ("#options", "options"),
];

/// Sets the optional fields `rec` has and removes those it has not.
fn optional_fields(
    rec: &SubscriptionRecord,
    set: &mut Vec<&'static str>,
    remove: &mut Vec<&'static str>,
    values: &mut Vec<(&'static str, AttributeValue)>,
) {
    // (assignment, name, value placeholder, value)
    let optional = [
        (
            "#description = :description",
            "#description",
            ":description",
            rec.description.clone().map(string_attr),
        ),
        (
            "#rate = :rate",
            "#rate",
            ":rate",
            rec.rate_limit.map(number_attr),
        ),
        (
            "#options = :options",
            "#options",
            ":options",
            rec.options.clone().map(string_attr),
        ),
    ];
    for (assign, name, placeholder, value) in optional {
        match value {
            Some(v) => {
                set.push(assign);
                values.push((placeholder, v));
            }
            None => remove.push(name),
        }
    }
}

/// The update expression of a subscription's editable fields and secrets,
/// and its values: absent optional fields are removed. Health, status and
/// lane state are other writes' and stay as they are.
pub(crate) fn editable_fields(
    rec: &SubscriptionRecord,
) -> StoreResult<(String, Vec<(&'static str, AttributeValue)>)> {
    let mut set = vec![
        "#url = :url",
        "#filters = :filters",
        "#metadata = :metadata",
        "#secret = :secret",
        "#updated = :updated",
        "#lanes = :lanes",
    ];
    let mut remove = Vec::new();
    let mut values = vec![
        (":url", string_attr(rec.url.clone())),
        (
            ":filters",
            serde_dynamo::to_attribute_value(&rec.filters).map_err(backend)?,
        ),
        (
            ":metadata",
            serde_dynamo::to_attribute_value(&rec.metadata).map_err(backend)?,
        ),
        (":secret", string_attr(rec.secret.clone())),
        (":updated", number_attr(rec.updated_at)),
        (":lanes", number_attr(rec.lanes)),
    ];
    optional_fields(rec, &mut set, &mut remove, &mut values);
    match (&rec.prev_secret, rec.prev_secret_expires_at) {
        (Some(p), Some(exp)) => {
            set.push("#prev = :prev, #prev_exp = :prev_exp");
            values.push((":prev", string_attr(p.clone())));
            values.push((":prev_exp", number_attr(exp)));
        }
        _ => remove.push("#prev, #prev_exp"),
    }
    let mut expression = format!("SET {}", set.join(", "));
    if !remove.is_empty() {
        expression.push_str(&format!(" REMOVE {}", remove.join(", ")));
    }
    Ok((expression, values))
}
