//! `DeliveryQueue` on SQS FIFO + DynamoDB delivery records.
//!
//! A delivery is a message in the delivery FIFO queue (group = subscription,
//! deduplication id = hash(event, subscription)). Its record (attempt
//! count, state) is written at the first attempt and updated at each, so
//! attempt numbers come from our own record, not from
//! `ApproximateReceiveCount`. Parking writes the record and sends the
//! message to the FIFO dead-letter queue with attributes saying why.

use std::collections::HashMap;

use async_trait::async_trait;
use aws_sdk_sqs::types::{MessageAttributeValue, SendMessageBatchRequestEntry};
use hooklane_core::domain::{
    Attempt, DeadLetter, Delivery, EventId, EventType, Health, Subscription, SubscriptionId,
    TenantId,
};
use hooklane_core::ports::{
    DeliveryQueue, DeliveryView, Finish, NewDelivery, StoreError, StoreResult, SubscriptionStore,
};
use hooklane_core::record::{from_ms, ms};
use time::OffsetDateTime;

use super::{
    backend, corrupt, get_n, get_s, is_condition_failed, padded, readable, required_n, time_seq,
    took_effect, AwsStore, Item, RETENTION_SECS,
};
use crate::messages::{dedup_id, CarriedEvent, DeliveryMessage};
use crate::{n, s};

/// How often a batch send retries the entries SQS refused.
const BATCH_RETRIES: usize = 3;
/// Tries of the write that starts an attempt, each with the SDK's own
/// retries, before the delivery step fails (its message then comes back).
const BEGIN_TRIES: u32 = 4;

pub(crate) fn record_pk(sub: &SubscriptionId) -> String {
    format!("D#{}", sub.as_str())
}

pub(crate) fn record_sk(event: &EventId) -> String {
    format!("E#{}", event.as_str())
}

fn by_event_pk(tenant: &TenantId, event: &EventId) -> String {
    format!("V#{}#{}", tenant.as_str(), event.as_str())
}

fn parked_pk(tenant: &TenantId) -> String {
    format!("P#{}", tenant.as_str())
}

/// A delivery record as the delivery handler needs it (default: never
/// attempted).
#[derive(Debug, Clone)]
pub struct DeliveryRecord {
    /// `pending`, `delivered`, `parked` or `dropped`.
    pub state: String,
    /// Attempts started.
    pub attempts: u32,
    /// When the first attempt started.
    pub first_attempt_at: Option<OffsetDateTime>,
    /// When the next attempt is due.
    pub next_attempt_at: Option<OffsetDateTime>,
}

impl Default for DeliveryRecord {
    fn default() -> Self {
        Self {
            state: "pending".into(),
            attempts: 0,
            first_attempt_at: None,
            next_attempt_at: None,
        }
    }
}

fn message_of(d: &NewDelivery) -> DeliveryMessage {
    let mut m = DeliveryMessage::new(
        d.tenant.as_str(),
        d.subscription_id.as_str(),
        d.event_id.as_str(),
        d.event_type.as_str(),
    );
    m.event = d.event.as_ref().and_then(CarriedEvent::of);
    m
}

fn attr(v: impl Into<String>, number: bool) -> StoreResult<MessageAttributeValue> {
    MessageAttributeValue::builder()
        .data_type(if number { "Number" } else { "String" })
        .string_value(v)
        .build()
        .map_err(backend)
}

impl AwsStore {
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
                            nonce,
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
                if round == BATCH_RETRIES {
                    return Err(StoreError::Backend(format!(
                        "SendMessageBatch refused {} entries: {:?}",
                        failed.len(),
                        resp.failed
                            .iter()
                            .map(|f| f.message.clone())
                            .collect::<Vec<_>>()
                    )));
                }
                pending.retain(|e| failed.contains(&e.id));
            }
        }
        Ok(())
    }

    /// Puts a parked record back to pending with a fresh ladder; `false`
    /// when it was not parked.
    pub async fn reset_parked(&self, sub: &SubscriptionId, event: &EventId) -> StoreResult<bool> {
        self.reset_to_pending(sub, event, false).await
    }

    /// Makes a parked or held delivery (or, with `or_missing`, one never
    /// attempted) pending again with a fresh ladder; `false` when it is in
    /// any other state.
    pub(crate) async fn reset_to_pending(
        &self,
        sub: &SubscriptionId,
        event: &EventId,
        or_missing: bool,
    ) -> StoreResult<bool> {
        let condition = if or_missing {
            "attribute_not_exists(pk) OR #state IN (:parked, :held)"
        } else {
            "#state IN (:parked, :held)"
        };
        let res = self
            .ddb
            .update_item()
            .table_name(&self.settings.table)
            .key("pk", s(record_pk(sub)))
            .key("sk", s(record_sk(event)))
            .update_expression(
                "SET #state = :pending, attempts = :zero \
                 REMOVE gsi2pk, gsi2sk, reason, parked_at, first_attempt_at, next_attempt_at",
            )
            .condition_expression(condition)
            .expression_attribute_names("#state", "state")
            .expression_attribute_values(":pending", s("pending"))
            .expression_attribute_values(":parked", s("parked"))
            .expression_attribute_values(":held", s("held"))
            .expression_attribute_values(":zero", n(0))
            .send()
            .await;
        took_effect(res)
    }

    /// Marks a suspended subscription's delivery as held (the backfill
    /// after re-enabling covers it), creating the record if needed.
    async fn hold(&self, d: &Delivery) -> StoreResult<()> {
        let now = OffsetDateTime::now_utc();
        let res = self
            .ddb
            .update_item()
            .table_name(&self.settings.table)
            .key("pk", s(record_pk(&d.subscription_id)))
            .key("sk", s(record_sk(&d.event_id)))
            .update_expression(
                "SET #state = :held, tenant = :t, subscription_id = :s, event_id = :e, event_type = :ty, \
                 attempts = if_not_exists(attempts, :zero), gsi1pk = :g1, gsi1sk = :s, expires_at = :exp",
            )
            .condition_expression("attribute_not_exists(pk) OR #state = :pending")
            .expression_attribute_names("#state", "state")
            .expression_attribute_values(":held", s("held"))
            .expression_attribute_values(":pending", s("pending"))
            .expression_attribute_values(":zero", n(0))
            .expression_attribute_values(":t", s(d.tenant.as_str()))
            .expression_attribute_values(":s", s(d.subscription_id.as_str()))
            .expression_attribute_values(":e", s(d.event_id.as_str()))
            .expression_attribute_values(":ty", s(d.event_type.as_str()))
            .expression_attribute_values(":g1", s(by_event_pk(&d.tenant, &d.event_id)))
            .expression_attribute_values(":exp", n(now.unix_timestamp() + RETENTION_SECS))
            .send()
            .await;
        took_effect(res).map(|_| ())
    }

    /// Reads a delivery record (consistent).
    pub async fn delivery_record(
        &self,
        sub: &SubscriptionId,
        event: &EventId,
    ) -> StoreResult<Option<DeliveryRecord>> {
        let item = self
            .get_consistent(record_pk(sub), record_sk(event))
            .await?;
        item.map(|i| {
            Ok(DeliveryRecord {
                state: state_of(&i)?.to_owned(),
                attempts: required_n(&i, "attempts")? as u32,
                first_attempt_at: get_n(&i, "first_attempt_at").map(from_ms),
                next_attempt_at: get_n(&i, "next_attempt_at").map(from_ms),
            })
        })
        .transpose()
    }

    /// One try of the conditional write that starts attempt
    /// `d.attempts + 1`: it holds for a new record at attempt zero, for a
    /// pending record still at `d.attempts`, or for this very write (its
    /// `token`) already applied.
    async fn try_begin_attempt(
        &self,
        d: &Delivery,
        now: OffsetDateTime,
        lease_until: OffsetDateTime,
        token: &str,
    ) -> StoreResult<bool> {
        let res = self
            .ddb
            .update_item()
            .table_name(&self.settings.table)
            .key("pk", s(record_pk(&d.subscription_id)))
            .key("sk", s(record_sk(&d.event_id)))
            .update_expression(
                "SET attempts = :next, tenant = :t, subscription_id = :s, \
                 event_id = :e, event_type = :ty, #state = :pending, attempt_token = :token, \
                 first_attempt_at = if_not_exists(first_attempt_at, :now), last_attempt_at = :now, \
                 next_attempt_at = :lease, gsi1pk = :g1, gsi1sk = :s, expires_at = :exp",
            )
            .condition_expression(
                "(attribute_not_exists(pk) AND :n = :zero) OR (#state = :pending AND attempts = :n) \
                 OR attempt_token = :token",
            )
            .expression_attribute_names("#state", "state")
            .expression_attribute_values(":zero", n(0))
            .expression_attribute_values(":n", n(d.attempts))
            .expression_attribute_values(":next", n(d.attempts + 1))
            .expression_attribute_values(":token", s(token))
            .expression_attribute_values(":t", s(d.tenant.as_str()))
            .expression_attribute_values(":s", s(d.subscription_id.as_str()))
            .expression_attribute_values(":e", s(d.event_id.as_str()))
            .expression_attribute_values(":ty", s(d.event_type.as_str()))
            .expression_attribute_values(":pending", s("pending"))
            .expression_attribute_values(":now", n(ms(now)))
            .expression_attribute_values(":lease", n(ms(lease_until)))
            .expression_attribute_values(":g1", s(by_event_pk(&d.tenant, &d.event_id)))
            .expression_attribute_values(":exp", n(now.unix_timestamp() + RETENTION_SECS))
            .send()
            .await;
        took_effect(res)
    }

    async fn park_to_dlq(&self, d: &Delivery, reason: &str, last: &Attempt) -> StoreResult<()> {
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
            attr(hooklane_core::api::input::rfc3339(first), false)?,
        );
        attrs.insert(
            "last_attempt_at".into(),
            attr(hooklane_core::api::input::rfc3339(last.started_at), false)?,
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
}

impl AwsStore {
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
        let mut attrs: HashMap<String, MessageAttributeValue> = HashMap::new();
        attrs.insert("reason".into(), attr(truncate(why, 1000), false)?);
        attrs.insert("unreadable".into(), attr(key, false)?);
        self.sqs
            .send_message()
            .queue_url(&self.settings.dlq_url)
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

fn truncate(text: &str, max: usize) -> String {
    text.chars().take(max).collect()
}

#[async_trait]
impl DeliveryQueue for AwsStore {
    async fn enqueue(&self, deliveries: &[NewDelivery]) -> StoreResult<()> {
        let (spill, queue): (Vec<&NewDelivery>, Vec<&NewDelivery>) =
            deliveries.iter().partition(|d| d.spill);
        let msgs: Vec<DeliveryMessage> = queue.into_iter().map(message_of).collect();
        self.send_deliveries(&msgs, "").await?;
        for d in spill {
            let msg = message_of(d);
            if !self.spill(&msg).await? {
                // The lane stopped spilling after fan-out read its flag:
                // nothing is left in the spill store, so the queue keeps
                // the lane's order.
                self.send_deliveries(std::slice::from_ref(&msg), "").await?;
            }
        }
        Ok(())
    }

    async fn begin_attempt(
        &self,
        d: &Delivery,
        now: OffsetDateTime,
        lease_until: OffsetDateTime,
    ) -> StoreResult<bool> {
        // The attempt number comes from this write, so it must not be
        // taken without being used: a write whose answer was lost is sent
        // again with the same token until it has an answer (idempotent, see
        // `write_token`), rather than leaving attempt n + 1 recorded and
        // never sent, and the next one numbered n + 2.
        let token = super::write_token();
        let mut tries = 0;
        loop {
            tries += 1;
            match self.try_begin_attempt(d, now, lease_until, &token).await {
                Err(e) if tries < BEGIN_TRIES => {
                    tracing::warn!(error = %e, tries, "recording an attempt's start failed; trying again");
                    tokio::time::sleep(std::time::Duration::from_millis(100 << tries)).await;
                }
                answered => return answered,
            }
        }
    }

    async fn defer(&self, _: &Delivery, _: OffsetDateTime) -> StoreResult<()> {
        // The delivery function backs the message off by visibility.
        Ok(())
    }

    async fn start_backfill(
        &self,
        sub: &Subscription,
        since: OffsetDateTime,
        until: OffsetDateTime,
    ) -> StoreResult<()> {
        self.send_backfill(sub, since, until).await
    }

    async fn waiting(&self, sub: &Subscription) -> StoreResult<u64> {
        self.spilled_count(sub).await
    }

    async fn finish(
        &self,
        d: &Delivery,
        sub: Option<&Subscription>,
        finish: &Finish,
        last: Option<&Attempt>,
        health: Option<&Health>,
    ) -> StoreResult<()> {
        if matches!(finish, Finish::Held) {
            return self.hold(d).await;
        }
        if let Some(a) = last {
            hooklane_core::ports::AttemptLog::record(self, a).await?;
        }
        if let Some(h) = health {
            SubscriptionStore::record_health(self, &d.tenant, &d.subscription_id, h).await?;
        }
        let now = OffsetDateTime::now_utc();
        let mut req = self
            .ddb
            .update_item()
            .table_name(&self.settings.table)
            .key("pk", s(record_pk(&d.subscription_id)))
            .key("sk", s(record_sk(&d.event_id)))
            .expression_attribute_names("#state", "state")
            .expression_attribute_values(":pending", s("pending"))
            .expression_attribute_values(":updated", n(ms(now)));
        let mut set = vec!["#state = :state", "updated_at = :updated"];
        if let Some(code) = last.and_then(|a| a.status_code) {
            set.push("last_status = :status");
            req = req.expression_attribute_values(":status", n(code));
        }
        if let Some(err) = last.and_then(|a| a.error.as_ref()) {
            set.push("last_error = :error");
            req = req.expression_attribute_values(":error", s(truncate(err, 1000)));
        }
        let state = match finish {
            Finish::Delivered => "delivered",
            Finish::Dropped | Finish::Held => "dropped",
            Finish::RetryAt(at) => {
                set.push("next_attempt_at = :next");
                req = req.expression_attribute_values(":next", n(ms(*at)));
                "pending"
            }
            Finish::Parked(reason) => {
                set.push("reason = :reason, parked_at = :updated, gsi2pk = :g2, gsi2sk = :g2s");
                req = req
                    .expression_attribute_values(":reason", s(truncate(reason, 1000)))
                    .expression_attribute_values(":g2", s(parked_pk(&d.tenant)))
                    .expression_attribute_values(":g2s", s(padded(time_seq(now))));
                "parked"
            }
        };
        // A delivery never attempted has no record: nothing to finish.
        let condition = "#state = :pending";
        let res = req
            .update_expression(format!("SET {}", set.join(", ")))
            .condition_expression(condition)
            .expression_attribute_values(":state", s(state))
            .send()
            .await;
        match res {
            Ok(_) => {}
            Err(e) if is_condition_failed(&e) => return Ok(()),
            Err(e) => return Err(backend(e)),
        }
        match (finish, sub) {
            (Finish::Parked(reason), sub) => {
                if let Some(last) = last {
                    self.park_to_dlq(d, reason, last).await?;
                }
                match sub {
                    Some(sub) if sub.spilling => self.refill(sub).await,
                    _ => Ok(()),
                }
            }
            (Finish::RetryAt(_), Some(sub)) if !sub.spilling => self.start_spilling(sub).await,
            // The lane moved on (delivered, or parked and out of the
            // way): its spilled deliveries go back to the queue in order.
            (Finish::Delivered, Some(sub)) if sub.spilling => self.refill(sub).await,
            _ => Ok(()),
        }
    }

    async fn dead_letters(
        &self,
        tenant: &TenantId,
        subscription: Option<&SubscriptionId>,
        after: Option<i64>,
        limit: usize,
    ) -> StoreResult<Vec<(i64, DeadLetter)>> {
        let mut out = Vec::new();
        let mut start: Option<Item> = None;
        loop {
            let resp = self
                .ddb
                .query()
                .table_name(&self.settings.table)
                .index_name("gsi2")
                .key_condition_expression("gsi2pk = :pk AND gsi2sk > :after")
                .expression_attribute_values(":pk", s(parked_pk(tenant)))
                .expression_attribute_values(":after", s(padded(after.unwrap_or(0))))
                .set_exclusive_start_key(start.take())
                .send()
                .await
                .map_err(backend)?;
            for item in resp.items.unwrap_or_default() {
                if get_s(&item, "state") != Some("parked") {
                    continue;
                }
                let Some(dl) = readable("parked delivery", &item, dead_letter(&item))? else {
                    continue;
                };
                if subscription.is_some_and(|s| s != &dl.1.subscription_id) {
                    continue;
                }
                out.push(dl);
                if out.len() >= limit {
                    return Ok(out);
                }
            }
            match resp.last_evaluated_key {
                Some(k) if !k.is_empty() => start = Some(k),
                _ => return Ok(out),
            }
        }
    }

    async fn replay(
        &self,
        tenant: &TenantId,
        subscription: Option<&SubscriptionId>,
        event_ids: Option<&[EventId]>,
        now: OffsetDateTime,
    ) -> StoreResult<Vec<SubscriptionId>> {
        let parked = self
            .dead_letters(tenant, subscription, None, 10_000)
            .await?;
        let mut replayed = Vec::new();
        for (_, dl) in parked {
            if event_ids.is_some_and(|ids| !ids.contains(&dl.event_id)) {
                continue;
            }
            if !self.reset_parked(&dl.subscription_id, &dl.event_id).await? {
                continue;
            }
            let msg = DeliveryMessage::new(
                tenant.as_str(),
                dl.subscription_id.as_str(),
                dl.event_id.as_str(),
                dl.event_type.as_str(),
            );
            self.send_deliveries(std::slice::from_ref(&msg), &format!("replay-{}", ms(now)))
                .await?;
            replayed.push(dl.subscription_id);
        }
        if !replayed.is_empty() {
            // The dead-letter queue's copies are stale now.
            crate::dlq::discard_replayed(self, tenant, &replayed, event_ids).await?;
        }
        Ok(replayed)
    }

    async fn event_deliveries(
        &self,
        tenant: &TenantId,
        event_id: &EventId,
    ) -> StoreResult<Vec<DeliveryView>> {
        let resp = self
            .ddb
            .query()
            .table_name(&self.settings.table)
            .index_name("gsi1")
            .key_condition_expression("gsi1pk = :pk")
            .expression_attribute_values(":pk", s(by_event_pk(tenant, event_id)))
            .send()
            .await
            .map_err(backend)?;
        let mut views: Vec<DeliveryView> = Vec::new();
        for item in resp.items.unwrap_or_default() {
            views.extend(readable("delivery", &item, view(&item))?);
        }
        // Records appear at the first attempt: a matching subscription that
        // existed when the event was accepted and has no record is pending.
        if let Some(event) = hooklane_core::ports::EventArchive::get(self, tenant, event_id).await?
        {
            let subs = hooklane_core::ports::SubscriptionStore::matching(
                self,
                tenant,
                &event.event_type,
                None,
                10_000,
            )
            .await?;
            for sub in subs {
                if sub.created_at <= event.created_at
                    && !views.iter().any(|v| v.subscription_id == sub.id)
                {
                    views.push(DeliveryView {
                        subscription_id: sub.id,
                        state: "pending",
                        attempts: 0,
                        last_status_code: None,
                        next_attempt_at: None,
                    });
                }
            }
        }
        views.sort_by(|a, b| a.subscription_id.cmp(&b.subscription_id));
        Ok(views)
    }
}

/// A record's state: one of those the adapter writes.
fn state_of(item: &Item) -> StoreResult<&str> {
    match get_s(item, "state") {
        Some(state @ ("pending" | "held" | "delivered" | "parked" | "dropped")) => Ok(state),
        _ => Err(corrupt("delivery state")),
    }
}

fn view(item: &Item) -> StoreResult<DeliveryView> {
    let attempts = required_n(item, "attempts")? as u32;
    let state = match (state_of(item)?, attempts) {
        ("pending" | "held", 0) => "pending",
        ("held", _) => "retrying",
        ("pending", _) => "retrying",
        ("delivered", _) => "delivered",
        ("parked", _) => "parked",
        _ => "dropped",
    };
    let sub = get_s(item, "subscription_id").ok_or_else(|| corrupt("subscription id"))?;
    Ok(DeliveryView {
        subscription_id: SubscriptionId::parse(sub).map_err(|_| corrupt("subscription id"))?,
        state,
        attempts,
        last_status_code: get_n(item, "last_status").map(|c| c as u16),
        next_attempt_at: matches!(state, "pending" | "retrying")
            .then(|| get_n(item, "next_attempt_at").map(from_ms))
            .flatten(),
    })
}

fn dead_letter(item: &Item) -> StoreResult<(i64, DeadLetter)> {
    let text = |k: &str| get_s(item, k).ok_or_else(|| corrupt("dead letter"));
    let seq = text("gsi2sk")?
        .parse::<i64>()
        .map_err(|_| corrupt("parked order"))?;
    Ok((
        seq,
        DeadLetter {
            subscription_id: SubscriptionId::parse(text("subscription_id")?)
                .map_err(|_| corrupt("subscription id"))?,
            event_id: EventId::parse(text("event_id")?).map_err(|_| corrupt("event id"))?,
            event_type: EventType::parse(text("event_type")?).map_err(|_| corrupt("event type"))?,
            attempts: required_n(item, "attempts")? as u32,
            last_status_code: get_n(item, "last_status").map(|c| c as u16),
            reason: text("reason")?.to_owned(),
            first_attempt_at: get_n(item, "first_attempt_at").map(from_ms),
            parked_at: from_ms(required_n(item, "parked_at")?),
        },
    ))
}
