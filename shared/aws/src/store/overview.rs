//! The overview on AWS (`GET /status`, the backlog gauges): what SQS
//! tells of the delivery queues without reading a message. Pending
//! deliveries are the queues' approximate message counts (visible, in
//! flight and delayed) on the main and the slow pool's queue, summed (and
//! the slow pool's apart): SQS
//! keeps no count per message group, so there is no per-tenant split
//! unless the store keeps its own counts (`HOOKLANE_TENANT_BACKLOG`,
//! [`super::backlog_counts`]: then the backlog is per tenant, with the
//! oldest's age, from those counts), and otherwise the age of the oldest
//! message is CloudWatch's
//! `ApproximateAgeOfOldestMessage` (the template's dashboard and alarm),
//! not something a call returns. A deep lane's overflow kept in the table
//! (the spill) is not in the queues' count (it is in the store's own).
//! Suspended subscriptions are read from their index (`gsi2`, partition `SUSPENDED`: the 100 longest suspended,
//! and a count), and the lanes in the slow pool from their markers
//! ([`super::slow_lanes`]); parked counts per tenant would need a read of
//! every tenant's: they are left out.
//!
//! Those counts cost a write per publish request and one per delivery
//! batch ($0.11 to $0.64 more per million deliveries against a target of
//! $2.00, BENCHMARKS.md figure 5), so they are off unless chosen: without
//! them an operator on AWS reads the totals here and CloudWatch's age, and
//! a tenant's own backlog from `GET /v1/tenants/{tenant}/events` and its
//! deliveries.

use aws_sdk_dynamodb::types::Select;
use aws_sdk_sqs::types::QueueAttributeName as Attr;
use hooklane_core::domain::{Overview, SuspendedSubscription, SUSPENDED_LISTED};
use hooklane_core::ports::StoreResult;

use super::items::keys::SUSPENDED_PK;
use super::items::subscription::suspended_of;
use super::{backend, readable, Table};
use crate::string_attr;

const COUNTS: [Attr; 3] = [
    Attr::ApproximateNumberOfMessages,
    Attr::ApproximateNumberOfMessagesNotVisible,
    Attr::ApproximateNumberOfMessagesDelayed,
];

impl Table {
    /// The messages on one queue: visible, in flight and delayed.
    async fn messages_on(&self, url: &str) -> StoreResult<u64> {
        let attrs = self
            .sqs
            .get_queue_attributes()
            .queue_url(url)
            .set_attribute_names(Some(COUNTS.to_vec()))
            .send()
            .await
            .map_err(backend)?
            .attributes
            .unwrap_or_default();
        Ok(COUNTS
            .iter()
            .filter_map(|a| attrs.get(a)?.parse::<u64>().ok())
            .sum())
    }

    /// A query of the index of suspended subscriptions.
    fn suspended_query(&self) -> aws_sdk_dynamodb::operation::query::builders::QueryFluentBuilder {
        self.ddb
            .query()
            .table_name(&self.settings.table)
            .index_name("gsi2")
            .key_condition_expression("gsi2pk = :p")
            .expression_attribute_values(":p", string_attr(SUSPENDED_PK))
    }

    /// The longest suspended subscriptions, and how many are suspended.
    /// A list that holds every suspended subscription gives the count
    /// itself, so the two always agree (a count read after the list could
    /// see one suspended in between).
    async fn suspended(&self) -> StoreResult<(Vec<SuspendedSubscription>, u64)> {
        let page = self
            .suspended_query()
            .limit(SUSPENDED_LISTED as i32)
            .send()
            .await
            .map_err(backend)?;
        let whole = page.last_evaluated_key.is_none();
        let items = page.items.unwrap_or_default();
        let mut listed = Vec::new();
        for item in &items {
            listed.extend(readable(
                "suspended subscription",
                item,
                suspended_of(item),
            )?);
        }
        if whole {
            return Ok((listed, items.len() as u64));
        }
        let mut total = 0;
        let mut start = None;
        loop {
            let page = self
                .suspended_query()
                .select(Select::Count)
                .set_exclusive_start_key(start)
                .send()
                .await
                .map_err(backend)?;
            total += page.count.max(0) as u64;
            start = page.last_evaluated_key;
            if start.is_none() {
                break;
            }
        }
        Ok((listed, total))
    }

    /// The overview ([`self`]'s module doc).
    pub(crate) async fn queue_overview(&self) -> StoreResult<Overview> {
        let main = self.messages_on(&self.settings.delivery_queue_url).await?;
        let slow = match &self.settings.slow_queue_url {
            Some(url) => Some(self.messages_on(url).await?),
            None => None,
        };
        let slow_lanes = match slow {
            Some(_) => Some(self.slow_lanes().await?),
            None => None,
        };
        let (suspended, total) = self.suspended().await?;
        let backlog = match self.settings.tenant_backlog {
            // Without the counts, the queues' totals still answer.
            true => match self.tenant_backlog().await {
                Ok(rows) => Some(rows),
                Err(e) => {
                    tracing::warn!(error = %hooklane_core::telemetry::Chain(&e), "reading the tenant backlog counts failed; the overview gives the totals");
                    None
                }
            },
            false => None,
        };
        Ok(Overview {
            backlog,
            pending_total: Some(main + slow.unwrap_or(0)),
            slow_pool_pending: slow,
            slow_pool_lanes: slow_lanes,
            suspended: Some(suspended),
            suspended_total: Some(total),
            ..Overview::default()
        })
    }
}
