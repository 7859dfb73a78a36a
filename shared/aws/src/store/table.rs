//! The table and queue clients every AWS store port works through: the
//! DynamoDB and SQS clients (built once, counting calls when asked), the
//! resource names, the pool this process runs, and the item reads and
//! update builders the ports share. The ports sit on top of it, each its
//! own object ([`super::AwsStore::store_ports`]).

use hooklane_core::domain::{SubscriptionId, TenantId};
use hooklane_core::ports::StoreResult;

use super::items::keys::{sub_sk, tenant_pk};
use super::{backend, Item, Pool};
use crate::{string_attr, Settings};

/// An `UpdateItem` whose expression is still to come.
pub(crate) type UpdateBuilder =
    aws_sdk_dynamodb::operation::update_item::builders::UpdateItemFluentBuilder;

/// The clients and names under every AWS store port: cheap to clone.
#[derive(Clone, Debug)]
pub struct Table {
    pub(crate) ddb: aws_sdk_dynamodb::Client,
    pub(crate) sqs: aws_sdk_sqs::Client,
    pub(crate) settings: std::sync::Arc<Settings>,
    /// The delivery pool this process runs.
    pub(crate) pool: Pool,
    /// The tenant backlog counts' state in this process
    /// ([`super::backlog_tally`]).
    pub(crate) tally: std::sync::Arc<super::backlog_tally::Tally>,
}

impl Table {
    /// Reads one item with a strongly consistent `GetItem` on the base
    /// table (indexes are never consistent).
    pub(crate) async fn get_consistent(&self, pk: String, sk: String) -> StoreResult<Option<Item>> {
        let resp = self
            .ddb
            .get_item()
            .table_name(&self.settings.table)
            .key("pk", string_attr(pk))
            .key("sk", string_attr(sk))
            .consistent_read(true)
            .send()
            .await
            .map_err(backend)?;
        Ok(resp.item)
    }

    /// An `UpdateItem` of a subscription's item (its expression to come).
    pub(crate) fn update_sub(&self, tenant: &TenantId, id: &SubscriptionId) -> UpdateBuilder {
        self.ddb
            .update_item()
            .table_name(&self.settings.table)
            .key("pk", string_attr(tenant_pk(tenant)))
            .key("sk", string_attr(sub_sk(id)))
    }

    /// An `UpdateItem` of one of a tenant's items (its expression to come).
    pub(crate) fn tenant_item(&self, tenant: &TenantId, sk: String) -> UpdateBuilder {
        self.ddb
            .update_item()
            .table_name(&self.settings.table)
            .key("pk", string_attr(tenant_pk(tenant)))
            .key("sk", string_attr(sk))
    }

    /// The pool this process runs.
    pub fn pool(&self) -> Pool {
        self.pool
    }

    /// The queue the pool this process runs consumes.
    pub fn own_queue_url(&self) -> &str {
        match (self.pool, &self.settings.slow_queue_url) {
            (Pool::Slow, Some(url)) => url,
            _ => &self.settings.delivery_queue_url,
        }
    }

    /// The resource names in use.
    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// The SQS client.
    pub fn sqs(&self) -> &aws_sdk_sqs::Client {
        &self.sqs
    }
}

/// A store port of its own over the [`Table`]: a struct holding it, that
/// reads its clients and names through it.
macro_rules! table_port {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, Debug)]
        pub struct $name(pub(crate) $crate::store::Table);

        impl std::ops::Deref for $name {
            type Target = $crate::store::Table;

            fn deref(&self) -> &$crate::store::Table {
                &self.0
            }
        }
    };
}
pub(crate) use table_port;
