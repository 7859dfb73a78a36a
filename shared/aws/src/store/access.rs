//! `Access` on DynamoDB: a tenant key is two items written in one
//! transaction (tried again when throttling cancels it), one under the hash of its text (`K#{hash}`, `key`: what a
//! request reads, one strongly consistent `GetItem`) and one in its
//! tenant's partition (`T#{tenant}`, `K#{id}`: what the list reads, with
//! the hash to revoke by). The text is never stored. The portal key is
//! one item (`C#portal`, `key`), put once on condition it is not there.
//! A registered event type is one item in its tenant's partition
//! (`T#{tenant}`, `Y#{name}`), read back with one query.

use async_trait::async_trait;
use aws_sdk_dynamodb::types::{AttributeValue, Delete, Put, TransactWriteItem};
use hooklane_core::access::ApiKey;
use hooklane_core::domain::{EventType, EventTypeInfo, KeyId, TenantId};
use hooklane_core::ports::{Access, StoreError, StoreResult};

use super::batches::Txn;
use super::items::api_key::{api_key_item, api_key_of};
use super::items::keys::{key_pk, key_sk, tenant_pk, PORTAL_PK};
use hooklane_core::record::{from_ms, ms};

use super::items::attrs::get_n;
use super::{backend, corrupt, get_s, is_condition_failed, Item};
use crate::string_attr;

super::table::table_port!(
    /// Tenant keys and the portal key on DynamoDB.
    AwsAccess
);

impl AwsAccess {
    fn put(&self, item: Item) -> StoreResult<TransactWriteItem> {
        let put = Put::builder()
            .table_name(&self.settings.table)
            .set_item(Some(item))
            .condition_expression("attribute_not_exists(pk)")
            .build()
            .map_err(backend)?;
        Ok(TransactWriteItem::builder().put(put).build())
    }

    fn delete(&self, pk: String, sk: String) -> StoreResult<TransactWriteItem> {
        let delete = Delete::builder()
            .table_name(&self.settings.table)
            .key("pk", string_attr(pk))
            .key("sk", string_attr(sk))
            .condition_expression("attribute_exists(pk)")
            .build()
            .map_err(backend)?;
        Ok(TransactWriteItem::builder().delete(delete).build())
    }
}

#[async_trait]
impl Access for AwsAccess {
    async fn create_key(&self, key: &ApiKey, hash: &str) -> StoreResult<()> {
        let by_hash = api_key_item(key_pk(hash), "key".into(), key, hash);
        let listed = api_key_item(tenant_pk(&key.tenant), key_sk(&key.id), key, hash);
        match self
            .transact(vec![self.put(by_hash)?, self.put(listed)?])
            .await?
        {
            Txn::Done => Ok(()),
            Txn::ConditionFailed(_) => Err(StoreError::backend(
                "a tenant key with this id or text exists already",
            )),
        }
    }

    async fn list_keys(&self, tenant: &TenantId) -> StoreResult<Vec<ApiKey>> {
        let query = self
            .ddb
            .query()
            .table_name(&self.settings.table)
            .key_condition_expression("pk = :pk AND begins_with(sk, :k)")
            .consistent_read(true)
            .expression_attribute_values(":pk", string_attr(tenant_pk(tenant)))
            .expression_attribute_values(":k", string_attr("K#"));
        super::query_items(query, usize::MAX, |item| api_key_of(&item).map(Some)).await
    }

    async fn revoke_key(&self, tenant: &TenantId, id: &KeyId) -> StoreResult<bool> {
        let listed = self.get_consistent(tenant_pk(tenant), key_sk(id)).await?;
        let Some(hash) = listed.as_ref().and_then(|i| get_s(i, "hash")) else {
            return Ok(false);
        };
        let both = vec![
            self.delete(tenant_pk(tenant), key_sk(id))?,
            self.delete(key_pk(hash), "key".into())?,
        ];
        match self.transact(both).await? {
            Txn::Done => Ok(true),
            // Revoked meanwhile by another request.
            Txn::ConditionFailed(_) => Ok(false),
        }
    }

    async fn key_by_hash(&self, hash: &str) -> StoreResult<Option<ApiKey>> {
        match self.get_consistent(key_pk(hash), "key".into()).await? {
            Some(item) => api_key_of(&item).map(Some),
            None => Ok(None),
        }
    }

    async fn has_key(&self, tenant: &TenantId, id: &KeyId) -> StoreResult<bool> {
        let listed = self.get_consistent(tenant_pk(tenant), key_sk(id)).await?;
        Ok(listed.is_some())
    }

    async fn portal_key(&self, candidate: &[u8]) -> StoreResult<Vec<u8>> {
        let res = self
            .ddb
            .put_item()
            .table_name(&self.settings.table)
            .item("pk", string_attr(PORTAL_PK))
            .item("sk", string_attr("key"))
            .item("value", AttributeValue::B(candidate.to_vec().into()))
            .condition_expression("attribute_not_exists(pk)")
            .send()
            .await;
        match res {
            Ok(_) => return Ok(candidate.to_vec()),
            Err(e) if is_condition_failed(&e) => {}
            Err(e) => return Err(backend(e)),
        }
        let item = self
            .get_consistent(PORTAL_PK.into(), "key".into())
            .await?
            .ok_or_else(|| corrupt("portal key"))?;
        match item.get("value") {
            Some(AttributeValue::B(b)) => Ok(b.clone().into_inner()),
            _ => Err(corrupt("portal key")),
        }
    }

    async fn put_event_type(&self, info: &EventTypeInfo) -> StoreResult<()> {
        let mut put = self
            .ddb
            .put_item()
            .table_name(&self.settings.table)
            .item("pk", string_attr(tenant_pk(&info.tenant)))
            .item("sk", string_attr(event_type_sk(&info.name)))
            .item(
                "updated_at",
                AttributeValue::N(ms(info.updated_at).to_string()),
            );
        if let Some(d) = &info.description {
            put = put.item("description", string_attr(d.clone()));
        }
        if let Some(e) = &info.example {
            put = put.item("example", string_attr(e.clone()));
        }
        put.send().await.map_err(backend).map(|_| ())
    }

    async fn delete_event_type(&self, tenant: &TenantId, name: &EventType) -> StoreResult<bool> {
        let res = self
            .ddb
            .delete_item()
            .table_name(&self.settings.table)
            .key("pk", string_attr(tenant_pk(tenant)))
            .key("sk", string_attr(event_type_sk(name)))
            .condition_expression("attribute_exists(pk)")
            .send()
            .await;
        match res {
            Ok(_) => Ok(true),
            Err(e) if is_condition_failed(&e) => Ok(false),
            Err(e) => Err(backend(e)),
        }
    }

    async fn event_types(&self, tenant: &TenantId) -> StoreResult<Vec<EventTypeInfo>> {
        let query = self
            .ddb
            .query()
            .table_name(&self.settings.table)
            .key_condition_expression("pk = :pk AND begins_with(sk, :y)")
            .expression_attribute_values(":pk", string_attr(tenant_pk(tenant)))
            .expression_attribute_values(":y", string_attr("Y#"));
        super::query_items(query, usize::MAX, |item| {
            let name = get_s(&item, "sk")
                .and_then(|sk| sk.strip_prefix("Y#"))
                .and_then(|n| EventType::parse(n).ok())
                .ok_or_else(|| corrupt("event type"))?;
            Ok(Some(EventTypeInfo {
                tenant: tenant.clone(),
                name,
                description: get_s(&item, "description").map(str::to_owned),
                example: get_s(&item, "example").map(str::to_owned),
                updated_at: from_ms(
                    get_n(&item, "updated_at").ok_or_else(|| corrupt("updated_at"))?,
                ),
            }))
        })
        .await
    }
}

/// The sort key of a registered event type in its tenant's partition.
fn event_type_sk(name: &EventType) -> String {
    format!("Y#{}", name.as_str())
}
