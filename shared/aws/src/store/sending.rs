//! Putting new deliveries on the delivery queue: each goes to its lane's
//! placement (the live lane, or behind a change of lanes' fence), spills
//! to DynamoDB while its lane spills ([`super::spill`]), or goes out in
//! `SendMessageBatch` calls of ten, the entries SQS refused sent again.

use std::collections::HashMap;

use aws_sdk_sqs::types::SendMessageBatchRequestEntry;
use hooklane_core::domain::{SubscriptionId, TenantId};
use hooklane_core::ports::{NewDelivery, StoreError, StoreResult};

use super::{backend, corrupt, AwsStore};
use crate::messages::{dedup_id, CarriedEvent, DeliveryMessage};

/// How often a batch send retries the entries SQS refused.
const BATCH_RETRIES: usize = 3;

/// The placements taken for one batch of deliveries, by subscription.
pub(super) type Batch = HashMap<SubscriptionId, Option<super::items::placement::Placement>>;

/// A new delivery's message; `stamped`: with the time its tenant backlog
/// count goes by (`backlog_counts`): its event's acceptance where known (a
/// fan-out, a backfill: every copy of the message carries the same), else
/// now (a replay).
pub(super) fn message_of(d: &NewDelivery, stamped: bool) -> DeliveryMessage {
    let mut m = DeliveryMessage::new(
        d.tenant.as_str(),
        d.subscription_id.as_str(),
        d.event_id.as_str(),
        d.event_type.as_str(),
    );
    m.event = d.event.as_deref().and_then(CarriedEvent::of);
    m.lane_no = (d.lanes.get() > 1).then_some(d.lane);
    m.ordering_key = d.ordering_key.as_ref().map(|k| k.as_str().to_owned());
    m.queued_at = stamped.then(|| {
        let at = d.event.as_ref().map(|e| e.created_at).or(d.accepted_at);
        hooklane_core::record::ms(at.unwrap_or_else(time::OffsetDateTime::now_utc))
    });
    m
}

impl AwsStore {
    /// The message of a live delivery, on its lane as the subscription's
    /// placement says (`lane_change`), with its count's time when `stamped`
    /// ([`message_of`]).
    /// `batch` keeps each subscription's placement for the rest of the
    /// batch.
    pub(super) async fn placed(
        &self,
        d: &NewDelivery,
        batch: &mut Batch,
        stamped: bool,
    ) -> StoreResult<DeliveryMessage> {
        let p = match batch.get(&d.subscription_id) {
            Some(p) => p.clone(),
            None => {
                let p = self
                    .settled_placement(&d.tenant, &d.subscription_id)
                    .await?;
                batch.insert(d.subscription_id.clone(), p.clone());
                p
            }
        };
        let mut msg = message_of(d, stamped);
        if let Some(p) = p {
            let (lane, after) = p.place(d.ordering_key.as_ref(), &d.event_id);
            msg.lane_no = (p.sent.get() > 1).then_some(lane);
            msg.after = after;
        }
        Ok(msg)
    }

    /// Queues messages on their lanes: to the queue, or behind the lane's
    /// spilled deliveries while it spills.
    pub(crate) async fn dispatch(
        &self,
        msgs: Vec<DeliveryMessage>,
        nonce: &str,
    ) -> StoreResult<()> {
        let mut queue = Vec::with_capacity(msgs.len());
        let mut spill = Vec::new();
        for mut msg in msgs {
            if !nonce.is_empty() {
                msg.nonce = Some(nonce.to_owned());
            }
            let tenant = TenantId::parse(&msg.tenant).map_err(|_| corrupt("tenant"))?;
            let sub = SubscriptionId::parse(&msg.subscription_id)
                .map_err(|_| corrupt("subscription id"))?;
            if self
                .spilling((&tenant, &sub, msg.lane_no.unwrap_or(0)))
                .await?
            {
                spill.push(msg);
            } else {
                queue.push(msg);
            }
        }
        self.send_deliveries(&queue, nonce).await?;
        for msg in spill {
            if !self.spill(&msg).await? {
                // The lane stopped spilling after its flag was read:
                // nothing is left in the spill store, so the queue keeps
                // the lane's order.
                self.send_deliveries(std::slice::from_ref(&msg), nonce)
                    .await?;
            }
        }
        Ok(())
    }

    /// Sends delivery messages in batches of ten, retrying refused entries;
    /// `nonce` makes replays distinct from the original send.
    pub(crate) async fn send_deliveries(
        &self,
        msgs: &[DeliveryMessage],
        nonce: &str,
    ) -> StoreResult<()> {
        for chunk in msgs.chunks(10) {
            let mut pending: Vec<SendMessageBatchRequestEntry> = Vec::with_capacity(chunk.len());
            for (i, m) in chunk.iter().enumerate() {
                pending.push(
                    SendMessageBatchRequestEntry::builder()
                        .id(i.to_string())
                        .message_body(m.body().map_err(backend)?)
                        .message_group_id(m.group())
                        .message_deduplication_id(dedup_id(&[
                            &m.event_id,
                            &m.subscription_id,
                            m.nonce.as_deref().unwrap_or(nonce),
                        ]))
                        .build()
                        .map_err(backend)?,
                );
            }
            for round in 0..=BATCH_RETRIES {
                let resp = self
                    .sqs
                    .send_message_batch()
                    .queue_url(&self.settings.delivery_queue_url)
                    .set_entries(Some(pending.clone()))
                    .send()
                    .await
                    .map_err(backend)?;
                // An OK response can hide failed entries: resend those.
                let failed: Vec<String> = resp.failed.iter().map(|f| f.id.clone()).collect();
                if failed.is_empty() {
                    break;
                }
                warn_if_order_broken(&pending, &failed);
                if round == BATCH_RETRIES {
                    let why = format!(
                        "SendMessageBatch refused {} entries: {:?}",
                        failed.len(),
                        resp.failed
                            .iter()
                            .map(|f| f.message.clone())
                            .collect::<Vec<_>>()
                    );
                    // Refused on SQS's side (throttling, its own trouble):
                    // those entries were not sent; try later.
                    return Err(match resp.failed.iter().any(|f| f.sender_fault) {
                        true => StoreError::backend(why),
                        false => StoreError::unavailable(why),
                    });
                }
                pending.retain(|e| failed.contains(&e.id));
            }
        }
        Ok(())
    }
}

/// Says so when SQS refused an entry of a batch but took a later one of
/// the same lane (message group): the refused one, sent again, then
/// arrives after it. Entries are refused for throttling or internal
/// errors, rarely; nothing is lost, but that lane's order is not kept for
/// the pair, and the error log says which.
fn warn_if_order_broken(sent: &[SendMessageBatchRequestEntry], failed: &[String]) {
    for (i, entry) in sent.iter().enumerate() {
        if !failed.contains(&entry.id) {
            continue;
        }
        let overtaken = sent[i + 1..].iter().any(|later| {
            !failed.contains(&later.id) && later.message_group_id == entry.message_group_id
        });
        if overtaken {
            tracing::error!(
                group = entry.message_group_id.as_deref().unwrap_or(""),
                "SQS refused a delivery message and took a later one of its lane: the refused one is sent again, after it"
            );
        }
    }
}
