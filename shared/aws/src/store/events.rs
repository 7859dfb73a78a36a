//! `EventArchive` on DynamoDB + the ingest FIFO queue: an event is archived
//! with a conditional put (the id is the idempotency key), then fanned out
//! by the API function before it answers, or sent to the ingest queue
//! (group = tenant) for the fan-out function ([`super::fan_out_path`]
//! decides which, per tenant). A duplicate publish fans out again, so a
//! failure between the put and the fan-out loses nothing: the publisher's
//! retry, which the failure's 5xx asks for, completes it.
//!
//! Payloads are stored deflated when that makes them smaller
//! ([`super::items::event_payload`]).

use async_trait::async_trait;
use hooklane_core::domain::{
    ArchivePosition, ArchivedEvent, Event, EventId, RecentEvents, TenantId,
};
use hooklane_core::ports::{Accepted, EventArchive, FanOutBy, StoreError, StoreResult};
use hooklane_core::record::ms;
use time::OffsetDateTime;

use super::items::event::{archived_of, event_of, expired};
use super::items::event_payload::payload_attr;
use super::items::keys::{event_sk, tenant_pk};
use super::{
    backend, corrupt, get_s, is_condition_failed, key_of, readable, took_effect, Item, Table,
    RETENTION_SECS,
};
use crate::messages::{body_within, dedup_id, CarriedEvent, FanOutMessage, CARRY_LIMIT};
use crate::{number_attr, string_attr};

/// How long an event id stays reserved (G12), in milliseconds.
const IDEMPOTENCY_MS: i64 = 24 * 3600 * 1000;

/// The event archive on DynamoDB and the ingest queue, a port of its own
/// over the table, with the tenants this process saw move to the ingest
/// queue ([`super::fan_out_path`]; shared by clones).
#[derive(Clone, Debug)]
pub struct AwsArchive {
    pub(crate) table: Table,
    pub(crate) moved: std::sync::Arc<super::fan_out_path::MovedTenants>,
}

impl std::ops::Deref for AwsArchive {
    type Target = Table;

    fn deref(&self) -> &Table {
        &self.table
    }
}

impl AwsArchive {
    async fn get_event_item(&self, tenant: &TenantId, id: &EventId) -> StoreResult<Option<Item>> {
        let item = self.get_consistent(tenant_pk(tenant), event_sk(id)).await?;
        Ok(item.filter(|i| !expired(i, time::OffsetDateTime::now_utc())))
    }

    /// Sends an event to the ingest queue for fan-out, carrying it when
    /// small.
    pub(crate) async fn send_fan_out(&self, event: &Event) -> StoreResult<()> {
        let msg = FanOutMessage {
            tenant: event.tenant.as_str().to_owned(),
            event_id: event.id.as_str().to_owned(),
            backfill: None,
            event: CarriedEvent::of(event),
            // The note of a newly archived event goes with its fan-out.
            count: self.tally.take(&event.tenant, &event.id),
        };
        let body = body_within(&msg, CARRY_LIMIT, |m| FanOutMessage {
            event: None,
            ..m.clone()
        })
        .map_err(backend)?;
        self.sqs
            .send_message()
            .queue_url(&self.settings.ingest_queue_url)
            .message_group_id(event.tenant.as_str())
            .message_deduplication_id(dedup_id(&[event.tenant.as_str(), event.id.as_str()]))
            .message_body(body)
            .send()
            .await
            .map_err(backend)?;
        Ok(())
    }
}

impl AwsArchive {
    /// Archives an event (one conditional put): new, or the original of a
    /// duplicate within 24 h; an older reuse of the id is a conflict.
    async fn archive(&self, event: Event) -> StoreResult<Accepted> {
        let payload = String::from_utf8(event.payload.to_vec()).map_err(|_| corrupt("payload"))?;
        // Idempotent (see `write_token`): a put whose answer was lost and
        // that the SDK sends again is this accept, not a duplicate publish.
        let token = super::write_token();
        let stored = payload_attr(&payload);
        let mut put = self
            .ddb
            .put_item()
            .table_name(&self.settings.table)
            .item("pk", string_attr(tenant_pk(&event.tenant)))
            .item("sk", string_attr(event_sk(&event.id)))
            .item("id", string_attr(event.id.as_str()))
            .item("tenant", string_attr(event.tenant.as_str()))
            .item("type", string_attr(event.event_type.as_str()))
            .item("created_at", number_attr(ms(event.created_at)))
            .item(stored.0, stored.1)
            .item(
                "expires_at",
                number_attr(event.created_at.unix_timestamp() + RETENTION_SECS),
            )
            .item("accept_token", string_attr(&token))
            .condition_expression("attribute_not_exists(pk) OR accept_token = :token")
            .expression_attribute_values(":token", string_attr(token));
        if let Some(key) = &event.ordering_key {
            put = put.item("ordering_key", string_attr(key.as_str()));
        }
        if let Some(t) = &event.traceparent {
            put = put.item("traceparent", string_attr(t));
        }
        if let Some(s) = &event.only_for {
            put = put.item("only_for", string_attr(s.as_str()));
        }
        match put.send().await {
            Ok(_) => Ok(Accepted::New(event)),
            Err(e) if is_condition_failed(&e) => {
                let item = self
                    .get_event_item(&event.tenant, &event.id)
                    .await?
                    .ok_or_else(|| StoreError::Conflict("this event id is being reused".into()))?;
                let original = event_of(&item)?;
                if ms(event.created_at) - ms(original.created_at) >= IDEMPOTENCY_MS {
                    return Err(StoreError::Conflict(
                        "this event id was used more than 24 hours ago".into(),
                    ));
                }
                Ok(Accepted::Duplicate(original))
            }
            Err(e) => Err(backend(e)),
        }
    }
}

/// A duplicate is fanned out again, on whichever path: the first accept
/// may have failed between its put and its fan-out. That is idempotent: a
/// delivery already queued within five minutes is deduplicated by SQS, and
/// one already attempted finds its record and is skipped.
#[async_trait]
impl EventArchive for AwsArchive {
    async fn accept(&self, event: Event) -> StoreResult<Accepted> {
        let accepted = self.archive(event).await?;
        self.fan_out_later(accepted.event()).await?;
        Ok(accepted)
    }

    async fn accept_routed(
        &self,
        event: Event,
        decided: Option<FanOutBy>,
    ) -> StoreResult<(Accepted, FanOutBy)> {
        let accepted = self.archive(event).await?;
        if let (Accepted::New(e), true) = (&accepted, self.settings.tenant_backlog) {
            // Its first fan-out counts its deliveries (`backlog_tally`).
            self.tally.note(&e.tenant, &e.id);
        }
        let here = match decided {
            Some(by) => by == FanOutBy::Caller,
            None => {
                self.moved
                    .fans_out_in_api(&self.table, &accepted.event().tenant)
                    .await?
            }
        };
        if here {
            return Ok((accepted, FanOutBy::Caller));
        }
        self.send_fan_out(accepted.event()).await?;
        Ok((accepted, FanOutBy::Schedule))
    }

    async fn fan_out_later(&self, event: &Event) -> StoreResult<()> {
        self.moved.move_to_queue(&self.table, &event.tenant).await?;
        self.send_fan_out(event).await
    }

    async fn get(&self, tenant: &TenantId, id: &EventId) -> StoreResult<Option<Event>> {
        match self.get_event_item(tenant, id).await? {
            Some(item) => event_of(&item).map(Some),
            None => Ok(None),
        }
    }

    /// The archive is keyed by event id, not by time: the window's events
    /// are read with a filter on their time (every page of the tenant's
    /// events), then put in acceptance order.
    async fn window(
        &self,
        tenant: &TenantId,
        after: &ArchivePosition,
        until: OffsetDateTime,
        limit: usize,
    ) -> StoreResult<Vec<ArchivedEvent>> {
        let mut out = self.archived_between(tenant, after.at, until).await?;
        out.retain(|e| e.position() > *after);
        out.sort_by(|a, b| (a.created_at, &a.id).cmp(&(b.created_at, &b.id)));
        out.truncate(limit);
        Ok(out)
    }

    /// Read as [`Self::window`] reads (every page of the tenant's events in
    /// the time range), then picked newest first.
    async fn recent(
        &self,
        tenant: &TenantId,
        query: &RecentEvents,
    ) -> StoreResult<Vec<ArchivedEvent>> {
        let between = self.archived_between(tenant, query.since, query.until);
        Ok(query.pick(between.await?))
    }
}

impl AwsArchive {
    /// A tenant's archived events accepted in `since..=until`, without
    /// their payloads, in no particular order.
    async fn archived_between(
        &self,
        tenant: &TenantId,
        since: OffsetDateTime,
        until: OffsetDateTime,
    ) -> StoreResult<Vec<ArchivedEvent>> {
        let query = self
            .ddb
            .query()
            .table_name(&self.settings.table)
            .key_condition_expression("pk = :pk AND begins_with(sk, :e)")
            // An item past its retention that TTL has not deleted yet is
            // not served (TTL deletes within days, not at the second).
            .filter_expression(
                "created_at BETWEEN :since AND :until \
                 AND (attribute_not_exists(expires_at) OR expires_at >= :now)",
            )
            .projection_expression("pk, sk, id, #type, created_at, ordering_key, only_for")
            .expression_attribute_names("#type", "type")
            .expression_attribute_values(":pk", string_attr(tenant_pk(tenant)))
            .expression_attribute_values(":e", string_attr("E#"))
            .expression_attribute_values(":since", number_attr(ms(since)))
            .expression_attribute_values(":until", number_attr(ms(until)))
            .expression_attribute_values(
                ":now",
                number_attr(OffsetDateTime::now_utc().unix_timestamp()),
            );
        super::query_items(query, usize::MAX, |item| {
            readable("event", &item, archived_of(&item))
        })
        .await
    }
}

impl AwsArchive {
    /// Where an interrupted fan-out resumes (the last subscription done).
    pub(crate) async fn fan_out_cursor(
        &self,
        tenant: &TenantId,
        id: &EventId,
    ) -> StoreResult<Option<hooklane_core::domain::SubscriptionId>> {
        let Some(item) = self.get_event_item(tenant, id).await? else {
            return Ok(None);
        };
        let Some(cursor) = get_s(&item, "fanout_after") else {
            return Ok(None);
        };
        match hooklane_core::domain::SubscriptionId::parse(cursor) {
            Ok(after) => Ok(Some(after)),
            Err(e) => {
                // Fan-out is idempotent: it starts over from the first page.
                hooklane_core::record::unreadable("fan-out cursor", &key_of(&item), &e.0);
                Ok(None)
            }
        }
    }

    /// Saves where an interrupted fan-out resumes.
    pub(crate) async fn save_fan_out_cursor(
        &self,
        tenant: &TenantId,
        id: &EventId,
        after: &hooklane_core::domain::SubscriptionId,
    ) -> StoreResult<()> {
        took_effect(
            self.ddb
                .update_item()
                .table_name(&self.settings.table)
                .key("pk", string_attr(tenant_pk(tenant)))
                .key("sk", string_attr(event_sk(id)))
                .update_expression("SET fanout_after = :a")
                .condition_expression("attribute_exists(pk)")
                .expression_attribute_values(":a", string_attr(after.as_str()))
                .send()
                .await,
        )
        .map(|_| ())
    }
}
