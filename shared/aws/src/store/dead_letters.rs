//! Dead letters on AWS: a parked delivery's record is indexed by tenant in
//! park order (`gsi2`) for the API's list, and its message goes to the FIFO
//! dead-letter queue with attributes saying why, for operators' tools
//! (`hooklane dlq`). A replay (the lanes' requeue) resets the record and
//! sends the message again.

use std::collections::HashMap;

use async_trait::async_trait;
use aws_sdk_sqs::types::MessageAttributeValue;
use hooklane_core::domain::{
    Attempt, DeadLetter, Delivery, EventId, Retake, SubscriptionId, TenantId,
};
use hooklane_core::ports::{DeadLetters, StoreResult};
use hooklane_core::record::ms;

use super::items::attrs::truncate;
use super::items::dead_letter::dead_letter_of;
use super::items::event::expired;
use super::items::keys::{parked_pk, record_pk, record_sk};
use super::{backend, get_s, padded, readable, took_effect};
use crate::messages::{dedup_id, DeliveryMessage};
use crate::{number_attr, string_attr};

fn attr(v: impl Into<String>, number: bool) -> StoreResult<MessageAttributeValue> {
    MessageAttributeValue::builder()
        .data_type(if number { "Number" } else { "String" })
        .string_value(v)
        .build()
        .map_err(backend)
}

super::table::table_port!(
    /// Dead letters on DynamoDB (the parked index) and the dead-letter
    /// queue.
    AwsDeadLetters
);

impl AwsDeadLetters {
    /// Puts a parked record back to pending with a fresh ladder (a
    /// message back from the dead-letter queue); `false` when it was not
    /// parked.
    pub async fn reset_parked(&self, sub: &SubscriptionId, event: &EventId) -> StoreResult<bool> {
        self.reset_to_pending(sub, event, Retake::Parked).await
    }

    /// Makes a delivery that `rule` takes pending again with a fresh
    /// ladder, in one conditional write built from the rule; `false` when
    /// the rule does not take it.
    pub(crate) async fn reset_to_pending(
        &self,
        sub: &SubscriptionId,
        event: &EventId,
        rule: Retake,
    ) -> StoreResult<bool> {
        let states = rule.states();
        let marks: Vec<String> = (0..states.len()).map(|i| format!(":s{i}")).collect();
        let mut condition = format!("#state IN ({})", marks.join(", "));
        if rule.takes(None) {
            condition = format!("attribute_not_exists(pk) OR {condition}");
        }
        let mut req = self
            .ddb
            .update_item()
            .table_name(&self.settings.table)
            .key("pk", string_attr(record_pk(sub)))
            .key("sk", string_attr(record_sk(event)))
            .update_expression(
                "SET #state = :pending, attempts = :zero \
                 REMOVE gsi2pk, gsi2sk, reason, parked_at, first_attempt_at, next_attempt_at",
            )
            .condition_expression(condition)
            .expression_attribute_names("#state", "state")
            .expression_attribute_values(":pending", string_attr("pending"))
            .expression_attribute_values(":zero", number_attr(0));
        for (mark, state) in marks.iter().zip(&states) {
            req = req.expression_attribute_values(mark, string_attr(state.as_str()));
        }
        took_effect(req.send().await)
    }

    pub(crate) async fn park_to_dlq(
        &self,
        d: &Delivery,
        reason: &str,
        last: &Attempt,
    ) -> StoreResult<()> {
        let msg = DeliveryMessage::new(
            d.tenant.as_str(),
            d.subscription_id.as_str(),
            d.event_id.as_str(),
            d.event_type.as_str(),
        );
        let first = d.first_attempt_at.unwrap_or(last.started_at);
        let mut attrs: HashMap<String, MessageAttributeValue> = HashMap::new();
        attrs.insert("tenant".into(), attr(msg.tenant.clone(), false)?);
        attrs.insert(
            "subscription_id".into(),
            attr(msg.subscription_id.clone(), false)?,
        );
        attrs.insert("event_id".into(), attr(msg.event_id.clone(), false)?);
        attrs.insert("event_type".into(), attr(msg.event_type.clone(), false)?);
        attrs.insert("attempts".into(), attr(last.attempt.to_string(), true)?);
        attrs.insert(
            "last_status".into(),
            attr(
                last.status_code
                    .map(|c| c.to_string())
                    .unwrap_or_else(|| "none".into()),
                false,
            )?,
        );
        attrs.insert("reason".into(), attr(truncate(reason, 1000), false)?);
        attrs.insert(
            "first_attempt_at".into(),
            attr(hooklane_core::domain::rfc3339(first), false)?,
        );
        attrs.insert(
            "last_attempt_at".into(),
            attr(hooklane_core::domain::rfc3339(last.started_at), false)?,
        );
        self.sqs
            .send_message()
            .queue_url(&self.settings.dlq_url)
            .message_group_id(&msg.subscription_id)
            .message_deduplication_id(dedup_id(&[
                &msg.event_id,
                &msg.subscription_id,
                &ms(last.started_at).to_string(),
            ]))
            .message_body(serde_json::to_string(&msg).map_err(backend)?)
            .set_message_attributes(Some(attrs))
            .send()
            .await
            .map_err(backend)?;
        Ok(())
    }

    /// Parks a delivery whose message or record does not parse: reports it
    /// with its key, and sends the message's body as it is to the
    /// dead-letter queue with the reason, where operators find it
    /// (`hooklane dlq list` shows the attributes).
    pub(crate) async fn park_unreadable(
        &self,
        key: &str,
        body: &str,
        group: &str,
        why: &str,
    ) -> StoreResult<()> {
        hooklane_core::record::unreadable("delivery", key, why);
        self.park_unreadable_in(&self.settings.dlq_url, key, body, group, why)
            .await
    }

    /// Moves an ingest message that does not parse to the ingest queue's
    /// dead-letter queue at once, as it is, with the reason; false when no
    /// such queue is configured (the ingest queue's redrive then moves it
    /// after repeated receives, without a reason).
    pub(crate) async fn park_unreadable_ingest(
        &self,
        key: &str,
        body: &str,
        group: &str,
        why: &str,
    ) -> StoreResult<bool> {
        hooklane_core::record::unreadable("fan-out message", key, why);
        let Some(url) = &self.settings.ingest_dlq_url else {
            return Ok(false);
        };
        self.park_unreadable_in(url, key, body, group, why).await?;
        Ok(true)
    }

    async fn park_unreadable_in(
        &self,
        queue_url: &str,
        key: &str,
        body: &str,
        group: &str,
        why: &str,
    ) -> StoreResult<()> {
        let mut attrs: HashMap<String, MessageAttributeValue> = HashMap::new();
        attrs.insert("reason".into(), attr(truncate(why, 1000), false)?);
        attrs.insert("unreadable".into(), attr(key, false)?);
        self.sqs
            .send_message()
            .queue_url(queue_url)
            .message_group_id(group)
            .message_deduplication_id(dedup_id(&[key, body]))
            .message_body(body)
            .set_message_attributes(Some(attrs))
            .send()
            .await
            .map_err(backend)?;
        Ok(())
    }
}

#[async_trait]
impl DeadLetters for AwsDeadLetters {
    async fn list(
        &self,
        tenant: &TenantId,
        subscription: Option<&SubscriptionId>,
        after: Option<i64>,
        limit: usize,
    ) -> StoreResult<Vec<(i64, DeadLetter)>> {
        let query = self
            .ddb
            .query()
            .table_name(&self.settings.table)
            .index_name("gsi2")
            .key_condition_expression("gsi2pk = :pk AND gsi2sk > :after")
            .expression_attribute_values(":pk", string_attr(parked_pk(tenant)))
            .expression_attribute_values(":after", string_attr(padded(after.unwrap_or(0))));
        let now = time::OffsetDateTime::now_utc();
        super::query_items(query, limit, |item| {
            // Past its retention, and not deleted by TTL yet: not served.
            if get_s(&item, "state") != Some("parked") || expired(&item, now) {
                return Ok(None);
            }
            let dl = readable("parked delivery", &item, dead_letter_of(&item))?;
            Ok(dl.filter(|dl| subscription.is_none_or(|s| s == &dl.1.subscription_id)))
        })
        .await
    }
}
