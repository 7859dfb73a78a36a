//! A tenant key's items (`K#{hash}`, `key` and `T#{tenant}`, `K#{id}`):
//! its id, tenant, name, scope, time and the hash of its text, never the
//! text.

use aws_sdk_dynamodb::types::AttributeValue;
use hooklane_core::access::ApiKey;
use hooklane_core::domain::{KeyId, TenantId};
use hooklane_core::ports::StoreResult;
use hooklane_core::record::{from_ms, ms};

use super::attrs::{corrupt, get_n, get_s};
use crate::store::Item;
use crate::{number_attr, string_attr};

/// A tenant key's item under `pk`, `sk`, with the hash of its text.
pub(crate) fn api_key_item(pk: String, sk: String, key: &ApiKey, hash: &str) -> Item {
    Item::from([
        ("pk".to_owned(), string_attr(pk)),
        ("sk".to_owned(), string_attr(sk)),
        ("id".to_owned(), string_attr(key.id.as_str())),
        ("tenant".to_owned(), string_attr(key.tenant.as_str())),
        ("name".to_owned(), string_attr(&key.name)),
        ("read_only".to_owned(), AttributeValue::Bool(key.read_only)),
        ("created_at".to_owned(), number_attr(ms(key.created_at))),
        ("hash".to_owned(), string_attr(hash)),
    ])
}

/// The tenant key an item holds.
pub(crate) fn api_key_of(item: &Item) -> StoreResult<ApiKey> {
    let text = |k: &str| get_s(item, k).ok_or_else(|| corrupt("tenant key"));
    Ok(ApiKey {
        id: KeyId::parse(text("id")?).map_err(|_| corrupt("key id"))?,
        tenant: TenantId::parse(text("tenant")?).map_err(|_| corrupt("tenant"))?,
        name: text("name")?.to_owned(),
        read_only: match item.get("read_only") {
            Some(AttributeValue::Bool(b)) => *b,
            _ => return Err(corrupt("tenant key")),
        },
        created_at: from_ms(get_n(item, "created_at").ok_or_else(|| corrupt("tenant key"))?),
    })
}
