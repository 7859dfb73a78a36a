//! The backfill on AWS: re-enabling sends one job to the ingest queue
//! (group `backfill-{subscription}`); the fan-out function runs it in
//! passes of about ten seconds' worth of deliveries at the configured rate
//! (ramping up from a quarter of it over two minutes), handing the job back
//! with a ten-second visibility between passes. Each backfilled event goes
//! to the subscription's own backfill message group (`{sub}#backfill`), so
//! it never holds up live deliveries. Events the subscription already has
//! (delivered, or pending) and events its filters do not match are
//! skipped. The pass's position is kept in `B#{subscription}`.

use std::time::Duration;

use hooklane_core::domain::{
    EventId, EventType, Subscription, SubscriptionId, SubscriptionStatus, TenantId,
};
use hooklane_core::health::backfill_interval;
use hooklane_core::ports::{StoreResult, SubscriptionStore};
use hooklane_core::record::{from_ms, ms};
use time::OffsetDateTime;

use super::subscriptions::{sub_sk, tenant_pk};
use super::{backend, get_n, get_s, AwsStore, Item};
use crate::messages::{dedup_id, BackfillMessage, DeliveryMessage, FanOutMessage};
use crate::{number_attr, string_attr};

/// How much of the rate one pass sends: ten seconds' worth.
const PASS: Duration = Duration::from_secs(10);

fn cursor_pk(sub: &str) -> String {
    format!("B#{sub}")
}

impl AwsStore {
    /// Schedules a backfill on the ingest queue.
    pub(crate) async fn send_backfill(
        &self,
        sub: &Subscription,
        since: OffsetDateTime,
        until: OffsetDateTime,
    ) -> StoreResult<()> {
        let job = BackfillMessage {
            subscription_id: sub.id.as_str().to_owned(),
            since: ms(since),
            until: ms(until),
            started: ms(until),
        };
        let body = serde_json::to_string(&FanOutMessage {
            tenant: sub.tenant.as_str().to_owned(),
            event_id: String::new(),
            backfill: Some(job),
            event: None,
        })
        .map_err(backend)?;
        self.sqs
            .send_message()
            .queue_url(&self.settings.ingest_queue_url)
            .message_group_id(format!("backfill-{}", sub.id.as_str()))
            .message_deduplication_id(dedup_id(&[
                sub.id.as_str(),
                "backfill",
                &ms(until).to_string(),
            ]))
            .message_body(body)
            .send()
            .await
            .map_err(backend)?;
        Ok(())
    }

    /// How many deliveries a subscription has spilled (waiting in DynamoDB).
    pub(crate) async fn spilled_count(&self, sub: &Subscription) -> StoreResult<u64> {
        let resp = self
            .ddb
            .get_item()
            .table_name(&self.settings.table)
            .key("pk", string_attr(tenant_pk(&sub.tenant)))
            .key("sk", string_attr(sub_sk(&sub.id)))
            .projection_expression("spilled")
            .send()
            .await
            .map_err(backend)?;
        Ok(resp
            .item
            .and_then(|i| get_n(&i, "spilled"))
            .unwrap_or(0)
            .max(0) as u64)
    }

    /// A tenant's archived events accepted in `[since, until]`, oldest
    /// first: (acceptance time, id, type).
    async fn events_between(
        &self,
        tenant: &TenantId,
        since: i64,
        until: i64,
    ) -> StoreResult<Vec<(i64, String, String)>> {
        let mut out = Vec::new();
        let mut start: Option<Item> = None;
        loop {
            let resp = self
                .ddb
                .query()
                .table_name(&self.settings.table)
                .key_condition_expression("pk = :pk AND begins_with(sk, :e)")
                .filter_expression("created_at BETWEEN :since AND :until")
                .projection_expression("id, #type, created_at")
                .expression_attribute_names("#type", "type")
                .expression_attribute_values(":pk", string_attr(tenant_pk(tenant)))
                .expression_attribute_values(":e", string_attr("E#"))
                .expression_attribute_values(":since", number_attr(since))
                .expression_attribute_values(":until", number_attr(until))
                .set_exclusive_start_key(start.take())
                .send()
                .await
                .map_err(backend)?;
            for i in resp.items.unwrap_or_default() {
                match (get_n(&i, "created_at"), get_s(&i, "id"), get_s(&i, "type")) {
                    (Some(at), Some(id), Some(ty)) => out.push((at, id.to_owned(), ty.to_owned())),
                    _ => hooklane_core::record::unreadable(
                        "event",
                        &super::key_of(&i),
                        "an archived event lacks its time, id or type",
                    ),
                }
            }
            match resp.last_evaluated_key {
                Some(k) if !k.is_empty() => start = Some(k),
                _ => break,
            }
        }
        out.sort();
        Ok(out)
    }

    async fn cursor(&self, sub: &str) -> StoreResult<usize> {
        let item = self.get_consistent(cursor_pk(sub), "B".into()).await?;
        Ok(item.and_then(|i| get_n(&i, "next")).unwrap_or(0).max(0) as usize)
    }

    async fn save_cursor(&self, sub: &str, next: Option<usize>) -> StoreResult<()> {
        let table = &self.settings.table;
        match next {
            Some(next) => self
                .ddb
                .put_item()
                .table_name(table)
                .item("pk", string_attr(cursor_pk(sub)))
                .item("sk", string_attr("B"))
                .item("next", number_attr(next))
                .send()
                .await
                .map(|_| ())
                .map_err(backend),
            None => self
                .ddb
                .delete_item()
                .table_name(table)
                .key("pk", string_attr(cursor_pk(sub)))
                .key("sk", string_attr("B"))
                .send()
                .await
                .map(|_| ())
                .map_err(backend),
        }
    }

    /// Runs one pass of a backfill at `rate` per second; `true` when the
    /// backfill is finished.
    pub(crate) async fn backfill_pass(
        &self,
        tenant: &TenantId,
        job: &BackfillMessage,
        rate: f64,
    ) -> StoreResult<bool> {
        let Ok(sub_id) = SubscriptionId::parse(&job.subscription_id) else {
            return Ok(true);
        };
        let sub = match SubscriptionStore::get(self, tenant, &sub_id).await? {
            Some(sub) if sub.status == SubscriptionStatus::Active => sub,
            _ => return Ok(true),
        };
        let events = self.events_between(tenant, job.since, job.until).await?;
        let mut next = self.cursor(&job.subscription_id).await?;
        let elapsed = (OffsetDateTime::now_utc() - from_ms(job.started))
            .try_into()
            .unwrap_or_default();
        let budget =
            (PASS.as_secs_f64() / backfill_interval(rate, elapsed).as_secs_f64()).max(1.0) as usize;
        let mut batch = Vec::new();
        while next < events.len() && batch.len() < budget {
            let (_, id, ty) = &events[next];
            next += 1;
            let (event, event_type) = match (EventId::parse(id), EventType::parse(ty)) {
                (Ok(event), Ok(event_type)) => (event, event_type),
                _ => {
                    let why = "an archived event's id or type does not parse";
                    hooklane_core::record::unreadable("event", id, why);
                    continue;
                }
            };
            let matches = sub.filters.iter().any(|f| f.matches(&event_type));
            if matches && self.reset_to_pending(&sub.id, &event, true).await? {
                batch.push(DeliveryMessage {
                    lane: Some("backfill".into()),
                    ..DeliveryMessage::new(tenant.as_str(), sub.id.as_str(), id, ty)
                });
            }
        }
        self.send_deliveries(&batch, &format!("backfill-{}", job.started))
            .await?;
        let done = next >= events.len();
        self.save_cursor(&job.subscription_id, (!done).then_some(next))
            .await?;
        Ok(done)
    }
}
