//! The overview on AWS (`GET /status`, the backlog gauges): what SQS
//! tells of the delivery queues without reading a message. Pending
//! deliveries are the queues' approximate message counts (visible, in
//! flight and delayed) on the main and the slow pool's queue, summed: SQS
//! keeps no count per message group, so there is no per-tenant split, and
//! the age of the oldest message is CloudWatch's
//! `ApproximateAgeOfOldestMessage` (the template's dashboard and alarm),
//! not something a call returns. A deep lane's overflow kept in the table
//! (the spill) is not in the count. Suspended subscriptions and parked
//! counts would need a scan of every tenant: they are left out.

use aws_sdk_sqs::types::QueueAttributeName as Attr;
use hooklane_core::domain::Overview;
use hooklane_core::ports::StoreResult;

use super::{backend, Table};

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

    /// The overview: the pending sum only ([`self`]'s module doc).
    pub(crate) async fn queue_overview(&self) -> StoreResult<Overview> {
        let mut pending = self.messages_on(&self.settings.delivery_queue_url).await?;
        if let Some(slow) = &self.settings.slow_queue_url {
            pending += self.messages_on(slow).await?;
        }
        Ok(Overview {
            pending_total: Some(pending),
            ..Overview::default()
        })
    }
}
