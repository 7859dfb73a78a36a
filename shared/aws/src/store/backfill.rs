//! Backfills on AWS: re-enabling records the job in DynamoDB
//! (`B#{subscription}`: its window and how far it got) and sends one
//! message to the ingest queue (group `backfill-{subscription}`); the
//! fan-out function runs a pass per receive
//! ([`hooklane_core::engine::Engine::backfill_pass`]) and hands the message
//! back with a visibility of the pass's length, which paces it. Backfilled
//! deliveries go to the subscription's own backfill message group
//! (`{sub}#backfill`), so they never hold up live deliveries.

use async_trait::async_trait;
use hooklane_core::domain::{BackfillJob, Subscription, SubscriptionId, TenantId};
use hooklane_core::ports::{Backfills, StoreResult};
use hooklane_core::record::ms;

use super::items::backfill::job_of;
use super::items::keys::{job_pk, sub_sk, tenant_pk, JOB_SK};
use super::items::lanes::{spilled_total, spilling_lanes};
use super::{backend, is_condition_failed, readable};
use crate::messages::{dedup_id, BackfillMessage, FanOutMessage};
use crate::{number_attr, string_attr};

/// A job's write refused because another job replaced it (or it ended):
/// nothing to do.
fn replaced<E, R>(e: aws_sdk_dynamodb::error::SdkError<E, R>) -> StoreResult<()>
where
    E: aws_sdk_dynamodb::error::ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    R: std::fmt::Debug + Send + Sync + 'static,
{
    if is_condition_failed(&e) {
        Ok(())
    } else {
        Err(backend(e))
    }
}

super::table::table_port!(
    /// Backfill jobs on DynamoDB and their messages on the ingest queue.
    AwsBackfills
);

impl AwsBackfills {
    /// Sends a backfill's message to the ingest queue.
    async fn send_backfill(&self, job: &BackfillJob) -> StoreResult<()> {
        let body = serde_json::to_string(&FanOutMessage {
            tenant: job.tenant.as_str().to_owned(),
            event_id: String::new(),
            backfill: Some(BackfillMessage {
                subscription_id: job.subscription_id.as_str().to_owned(),
                since: ms(job.after.at),
                until: ms(job.until),
                started: ms(job.started_at),
            }),
            event: None,
            // Its deliveries are counted as its requeue takes them.
            count: false,
        })
        .map_err(backend)?;
        let sub = job.subscription_id.as_str();
        self.sqs
            .send_message()
            .queue_url(&self.settings.ingest_queue_url)
            .message_group_id(format!("backfill-{sub}"))
            .message_deduplication_id(dedup_id(&[
                sub,
                "backfill",
                &ms(job.started_at).to_string(),
            ]))
            .message_body(body)
            .send()
            .await
            .map_err(backend)?;
        Ok(())
    }

    /// How many deliveries a subscription has spilled (waiting in DynamoDB).
    /// The spilled deliveries of every lane of a subscription, and how
    /// many of its lanes spill (each behind a delivery in retry).
    async fn spilled_count(&self, sub: &Subscription) -> StoreResult<(u64, u64)> {
        let resp = self
            .ddb
            .get_item()
            .table_name(&self.settings.table)
            .key("pk", string_attr(tenant_pk(&sub.tenant)))
            .key("sk", string_attr(sub_sk(&sub.id)))
            .send()
            .await
            .map_err(backend)?;
        // No count yet: nothing ever spilled.
        let Some(item) = resp.item else {
            return Ok((0, 0));
        };
        Ok((spilled_total(&item), spilling_lanes(&item).len() as u64))
    }
}

#[async_trait]
impl Backfills for AwsBackfills {
    async fn start(&self, job: &BackfillJob) -> StoreResult<()> {
        self.ddb
            .put_item()
            .table_name(&self.settings.table)
            .item("pk", string_attr(job_pk(&job.subscription_id)))
            .item("sk", string_attr(JOB_SK))
            .item("tenant", string_attr(job.tenant.as_str()))
            .item("subscription_id", string_attr(job.subscription_id.as_str()))
            .item("after_at", number_attr(ms(job.after.at)))
            .item("after_id", string_attr(job.after.id.clone()))
            .item("until", number_attr(ms(job.until)))
            .item("started", number_attr(ms(job.started_at)))
            .send()
            .await
            .map_err(backend)?;
        self.send_backfill(job).await
    }

    async fn load(
        &self,
        tenant: &TenantId,
        sub: &SubscriptionId,
    ) -> StoreResult<Option<BackfillJob>> {
        let Some(item) = self.get_consistent(job_pk(sub), JOB_SK.into()).await? else {
            return Ok(None);
        };
        let job = readable("backfill job", &item, job_of(&item))?;
        Ok(job.filter(|j| &j.tenant == tenant))
    }

    async fn save(&self, job: &BackfillJob) -> StoreResult<()> {
        self.ddb
            .update_item()
            .table_name(&self.settings.table)
            .key("pk", string_attr(job_pk(&job.subscription_id)))
            .key("sk", string_attr(JOB_SK))
            .update_expression("SET after_at = :at, after_id = :id")
            .condition_expression("started = :started")
            .expression_attribute_values(":at", number_attr(ms(job.after.at)))
            .expression_attribute_values(":id", string_attr(job.after.id.clone()))
            .expression_attribute_values(":started", number_attr(ms(job.started_at)))
            .send()
            .await
            .map(|_| ())
            .or_else(replaced)
    }

    async fn end(&self, job: &BackfillJob) -> StoreResult<()> {
        self.ddb
            .delete_item()
            .table_name(&self.settings.table)
            .key("pk", string_attr(job_pk(&job.subscription_id)))
            .key("sk", string_attr(JOB_SK))
            .condition_expression("started = :started")
            .expression_attribute_values(":started", number_attr(ms(job.started_at)))
            .send()
            .await
            .map(|_| ())
            .or_else(replaced)
    }

    async fn waiting(&self, sub: &Subscription) -> StoreResult<u64> {
        Ok(self.spilled_count(sub).await?.0)
    }

    /// The spilled deliveries (each waits behind a delivery in retry on its
    /// lane) and each spilling lane's delivery in retry. Messages queued on
    /// a lane before it began to spill are not counted (the queue does not
    /// say how many a group holds).
    async fn failing(&self, sub: &Subscription) -> StoreResult<u64> {
        let (spilled, lanes) = self.spilled_count(sub).await?;
        Ok(spilled + lanes)
    }
}
