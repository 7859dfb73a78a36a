//! Dead-letter queue operations for operators (`hooklane dlq`, which reaches
//! them as `hooklane_aws::dlq`) and for the API's replay: peek without consuming, selective replay (re-send and
//! delete), purge, and full redrive with `StartMessageMoveTask`.
//!
//! Peeking receives with a short visibility timeout and hands every message
//! straight back (visibility 0), so nothing is consumed. A FIFO queue hands
//! out a group's messages only while none of that group is in flight, so
//! one peek pass sees at most one batch per subscription; `--max` bounds a
//! pass.

use std::collections::HashMap;

use aws_sdk_sqs::types::{Message, MessageSystemAttributeName};
use hooklane_core::domain::{
    EventId, EventType, LaneCount, OrderingKey, Retake, SubscriptionId, TenantId,
};
use hooklane_core::ports::{LaneQueue, NewDelivery, StoreError, StoreResult};

use super::backend;
use crate::messages::DeliveryMessage;
use crate::AwsStore;

/// How long a peeked message stays hidden before it is handed back.
const PEEK_VISIBILITY: i32 = 30;
/// Receives per pass, at most (10 messages each).
const MAX_RECEIVES: usize = 1000;

/// One parked message as read from the dead-letter queue.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ParkedMessage {
    /// SQS message id.
    pub message_id: String,
    /// The delivery (tenant, subscription, event).
    pub delivery: DeliveryMessage,
    /// Why it was parked: tenant, subscription_id, event_id, event_type,
    /// attempts, last_status, reason, first_attempt_at, last_attempt_at.
    pub attributes: HashMap<String, String>,
    #[serde(skip)]
    receipt_handle: String,
}

fn parse(m: &Message) -> Option<ParkedMessage> {
    let delivery: DeliveryMessage = match serde_json::from_str(m.body()?) {
        Ok(d) => d,
        Err(e) => {
            // Kept where it is (handed back), reported; an unreadable
            // delivery parked with its reason has the `unreadable`
            // attribute naming its key.
            let key = format!("message {}", m.message_id().unwrap_or("(no id)"));
            hooklane_core::record::unreadable("dead letter", &key, &e.to_string());
            return None;
        }
    };
    let attributes = m
        .message_attributes()
        .map(|a| {
            a.iter()
                .filter_map(|(k, v)| Some((k.clone(), v.string_value()?.to_owned())))
                .collect()
        })
        .unwrap_or_default();
    Some(ParkedMessage {
        message_id: m.message_id()?.to_owned(),
        delivery,
        attributes,
        receipt_handle: m.receipt_handle()?.to_owned(),
    })
}

/// Which parked messages an operation takes.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    /// Only this tenant's.
    pub tenant: Option<String>,
    /// Only these subscriptions'.
    pub subscriptions: Option<Vec<String>>,
    /// Only these events'.
    pub events: Option<Vec<String>>,
}

impl Filter {
    fn matches(&self, d: &DeliveryMessage) -> bool {
        self.tenant.as_ref().is_none_or(|t| t == &d.tenant)
            && self
                .subscriptions
                .as_ref()
                .is_none_or(|s| s.contains(&d.subscription_id))
            && self.events.as_ref().is_none_or(|e| e.contains(&d.event_id))
    }
}

/// What to do with each matching message in a pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Action {
    Peek,
    Delete,
}

impl AwsStore {
    async fn release(&self, handles: Vec<String>) -> StoreResult<()> {
        for h in handles {
            self.sqs
                .change_message_visibility()
                .queue_url(&self.settings.dlq_url)
                .receipt_handle(h)
                .visibility_timeout(0)
                .send()
                .await
                .map_err(backend)?;
        }
        Ok(())
    }

    /// One pass over the dead-letter queue: returns the matching messages
    /// (up to `max`), deleting them when asked, handing back all others.
    async fn pass(
        &self,
        filter: &Filter,
        max: usize,
        action: Action,
        progress: &(dyn Fn(usize) + Sync),
    ) -> StoreResult<Vec<ParkedMessage>> {
        let mut taken = Vec::new();
        let mut handed_back = Vec::new();
        for _ in 0..MAX_RECEIVES {
            if taken.len() >= max {
                break;
            }
            let resp = self
                .sqs
                .receive_message()
                .queue_url(&self.settings.dlq_url)
                .max_number_of_messages(10)
                .visibility_timeout(PEEK_VISIBILITY)
                .message_attribute_names("All")
                .message_system_attribute_names(MessageSystemAttributeName::All)
                .send()
                .await
                .map_err(backend)?;
            let msgs = resp.messages.unwrap_or_default();
            if msgs.is_empty() {
                break;
            }
            for m in &msgs {
                let Some(parked) = parse(m) else {
                    if let Some(h) = m.receipt_handle() {
                        handed_back.push(h.to_owned());
                    }
                    continue;
                };
                if !filter.matches(&parked.delivery) || taken.len() >= max {
                    handed_back.push(parked.receipt_handle.clone());
                    continue;
                }
                if action == Action::Delete {
                    self.sqs
                        .delete_message()
                        .queue_url(&self.settings.dlq_url)
                        .receipt_handle(&parked.receipt_handle)
                        .send()
                        .await
                        .map_err(backend)?;
                } else {
                    handed_back.push(parked.receipt_handle.clone());
                }
                taken.push(parked);
            }
            progress(taken.len());
        }
        self.release(handed_back).await?;
        Ok(taken)
    }

    /// Lists parked messages without consuming them.
    pub async fn dlq_peek(&self, filter: &Filter, max: usize) -> StoreResult<Vec<ParkedMessage>> {
        self.pass(filter, max, Action::Peek, &|_| {}).await
    }

    /// Replays matching parked messages: resets their records, sends them
    /// back to the delivery queue with a fresh ladder, deletes them here.
    /// Returns how many were replayed.
    pub async fn dlq_replay(
        &self,
        filter: &Filter,
        max: usize,
        progress: &(dyn Fn(usize) + Sync),
    ) -> StoreResult<usize> {
        let parked = self.pass(filter, max, Action::Peek, progress).await?;
        let mut by_tenant: HashMap<String, Vec<ParkedMessage>> = HashMap::new();
        for p in parked {
            by_tenant
                .entry(p.delivery.tenant.clone())
                .or_default()
                .push(p);
        }
        let mut total = 0;
        for (tenant, msgs) in by_tenant {
            let tenant =
                TenantId::parse(&tenant).map_err(|_| StoreError::backend("bad tenant in DLQ"))?;
            let deliveries: Vec<NewDelivery> = msgs
                .iter()
                .filter_map(|m| requeued(&tenant, &m.delivery))
                .collect();
            let taken = LaneQueue::requeue(self, &deliveries, Retake::Parked, false).await?;
            total += taken.iter().filter(|t| **t).count();
        }
        Ok(total)
    }

    /// Deletes matching parked messages (after the operator confirmed);
    /// returns how many.
    pub async fn dlq_purge(
        &self,
        filter: &Filter,
        max: usize,
        progress: &(dyn Fn(usize) + Sync),
    ) -> StoreResult<usize> {
        Ok(self
            .pass(filter, max, Action::Delete, progress)
            .await?
            .len())
    }

    /// Moves every message back to the delivery queue with
    /// `StartMessageMoveTask`; the delivery function resets each one's
    /// record to a fresh ladder when it arrives. Returns the task handle.
    pub async fn dlq_redrive_all(&self) -> StoreResult<String> {
        let arn = |url: &str| {
            let sqs = self.sqs.clone();
            let url = url.to_owned();
            async move {
                sqs.get_queue_attributes()
                    .queue_url(url)
                    .attribute_names(aws_sdk_sqs::types::QueueAttributeName::QueueArn)
                    .send()
                    .await
                    .map_err(backend)?
                    .attributes
                    .and_then(|mut a| a.remove(&aws_sdk_sqs::types::QueueAttributeName::QueueArn))
                    .ok_or_else(|| StoreError::backend("queue has no ARN"))
            }
        };
        let source = arn(&self.settings.dlq_url).await?;
        let destination = arn(&self.settings.delivery_queue_url).await?;
        let resp = self
            .sqs
            .start_message_move_task()
            .source_arn(source)
            .destination_arn(destination)
            .send()
            .await
            .map_err(backend)?;
        Ok(resp.task_handle.unwrap_or_default())
    }
}

/// The delivery a parked message stands for, to requeue; `None` (reported)
/// when its ids do not parse.
fn requeued(tenant: &TenantId, d: &DeliveryMessage) -> Option<NewDelivery> {
    let parsed = (
        SubscriptionId::parse(&d.subscription_id),
        EventId::parse(&d.event_id),
        EventType::parse(&d.event_type),
    );
    let (Ok(subscription_id), Ok(event_id), Ok(event_type)) = parsed else {
        let key = format!("D#{}/E#{}", d.subscription_id, d.event_id);
        hooklane_core::record::unreadable("dead letter", &key, "its ids do not parse");
        return None;
    };
    // Its lane is picked again from the subscription's lanes when it is
    // requeued.
    Some(NewDelivery {
        tenant: tenant.clone(),
        subscription_id,
        event_id,
        event_type,
        event: None,
        lane: 0,
        lanes: LaneCount::default(),
        ordering_key: d
            .ordering_key
            .as_deref()
            .and_then(|k| OrderingKey::parse(k).ok()),
        // A replay is counted from when it is queued again.
        accepted_at: None,
    })
}

/// Deletes the dead-letter copies of deliveries just replayed through the
/// API (their records were reset and new messages sent).
pub(crate) async fn discard_replayed(
    store: &AwsStore,
    tenant: &TenantId,
    subs: &[SubscriptionId],
    events: Option<&[EventId]>,
) -> StoreResult<()> {
    let filter = Filter {
        tenant: Some(tenant.as_str().to_owned()),
        subscriptions: Some(subs.iter().map(|s| s.as_str().to_owned()).collect()),
        events: events.map(|e| e.iter().map(|e| e.as_str().to_owned()).collect()),
    };
    store
        .pass(&filter, usize::MAX, Action::Delete, &|_| {})
        .await
        .map(|_| ())
}
