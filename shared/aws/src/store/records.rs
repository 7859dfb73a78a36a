//! The delivery record's writes: the conditional attempt start (exact,
//! idempotent attempt numbers), the outcome (on condition the delivery is
//! still pending at its attempt) and the hold of a suspended
//! subscription's delivery.

use hooklane_core::domain::{Delivery, DeliveryState};
use hooklane_core::ports::{End, Finish, StoreError, StoreResult};
use hooklane_core::record::ms;
use time::OffsetDateTime;

use super::items::attrs::truncate;
use super::items::keys::{by_event_pk, parked_pk, record_pk, record_sk};
use super::{padded, parked_seq, took_effect, RETENTION_SECS};
use crate::{number_attr, string_attr};

super::table::table_port!(
    /// Delivery records on DynamoDB: their writes here, their settled
    /// reads in [`super::first_attempt`]. The lane queue and the views
    /// work through it.
    AwsRecords
);

impl AwsRecords {
    /// Ends a delivery without an attempt, creating its record if it has
    /// none yet (so `GET /events/{id}` shows it); `true` when this call
    /// ended it (not an end before): held, when its
    /// subscription is suspended (the backfill after re-enabling covers
    /// it), or dropped, when its subscription is gone. Unavailable when an
    /// attempt of it still runs: its message comes back, and is ended then
    /// (by that attempt's outcome, or by this once its lease has passed).
    pub(super) async fn end_unattempted_settled(
        &self,
        d: &Delivery,
        state: DeliveryState,
    ) -> StoreResult<bool> {
        if self.end_unattempted(d, state, None).await? {
            return Ok(true);
        }
        // Refused: finished, or past the attempts `d` was read with (a
        // message back that looked like a first receive, read without its
        // record). Settled (a first attempt whose lease has ended by `now`
        // claimed, so a late outcome cannot stand beside the hold), a
        // pending one is ended at its own attempts if no attempt of it
        // runs as of that same `now`; a finished one is left as it is.
        let now = OffsetDateTime::now_utc();
        let Some(record) = self
            .record_to_attempt(&d.subscription_id, &d.event_id, now)
            .await?
        else {
            return Ok(false);
        };
        if record.state != DeliveryState::Pending || record.attempts == d.attempts {
            return Ok(false);
        }
        let read = Delivery {
            attempts: record.attempts,
            ..d.clone()
        };
        if self.end_unattempted(&read, state, Some(now)).await? {
            return Ok(true);
        }
        Err(StoreError::unavailable(format!(
            "delivery of event {} to subscription {} has attempt {} running; it is {} when its message comes back",
            d.event_id.as_str(),
            d.subscription_id.as_str(),
            record.attempts,
            state.as_str()
        )))
    }

    /// [`Self::end_unattempted_settled`]'s write, at `d.attempts` and, with
    /// `idle_at`, on condition that no attempt runs then (its lease has
    /// ended by that time, or an outcome was written after its start);
    /// `false` when refused.
    async fn end_unattempted(
        &self,
        d: &Delivery,
        state: DeliveryState,
        idle_at: Option<OffsetDateTime>,
    ) -> StoreResult<bool> {
        let now = OffsetDateTime::now_utc();
        let condition = if idle_at.is_some() {
            "#state = :pending AND attempts = :n \
             AND (next_attempt_at <= :idle OR updated_at >= last_attempt_at)"
        } else {
            "attribute_not_exists(pk) OR (#state = :pending AND attempts = :n)"
        };
        let mut req = self
            .ddb
            .update_item()
            .table_name(&self.settings.table)
            .key("pk", string_attr(record_pk(&d.subscription_id)))
            .key("sk", string_attr(record_sk(&d.event_id)))
            .update_expression(
                "SET #state = :end, updated_at = :now, tenant = :t, subscription_id = :s, event_id = :e, event_type = :ty, \
                 attempts = if_not_exists(attempts, :zero), gsi1pk = :g1, gsi1sk = :s, expires_at = :exp, \
                 lane = :lane",
            )
            // At the attempts it was read with: a record past them may be
            // settled by its first attempt's log entry (`first_attempt`),
            // and only a reader that settled it may end it.
            .condition_expression(condition)
            .expression_attribute_values(":n", number_attr(d.attempts))
            .expression_attribute_names("#state", "state")
            .expression_attribute_values(":end", string_attr(state.as_str()))
            .expression_attribute_values(":now", number_attr(ms(now)))
            .expression_attribute_values(":pending", string_attr("pending"))
            .expression_attribute_values(":zero", number_attr(0))
            .expression_attribute_values(":t", string_attr(d.tenant.as_str()))
            .expression_attribute_values(":s", string_attr(d.subscription_id.as_str()))
            .expression_attribute_values(":e", string_attr(d.event_id.as_str()))
            .expression_attribute_values(":ty", string_attr(d.event_type.as_str()))
            .expression_attribute_values(":lane", number_attr(d.lane))
            .expression_attribute_values(":g1", string_attr(by_event_pk(&d.tenant, &d.event_id)))
            .expression_attribute_values(":exp", number_attr(now.unix_timestamp() + RETENTION_SECS));
        if let Some(at) = idle_at {
            req = req.expression_attribute_values(":idle", number_attr(ms(at)));
        }
        took_effect(req.send().await)
    }

    /// One try of the conditional write that starts attempt
    /// `d.attempts + 1`: it holds for a new record at attempt zero, for a
    /// pending record still at `d.attempts`, or for this very write (its
    /// `token`) already applied.
    pub(super) async fn try_begin(
        &self,
        d: &Delivery,
        now: OffsetDateTime,
        lease_until: OffsetDateTime,
        token: &str,
    ) -> StoreResult<bool> {
        // A first attempt's record is not in the `gsi1` index: its outcome
        // puts it there unless it was delivered (at most one index write
        // per delivery, none on the happy path). `GET /events/{id}` reads
        // it by key meanwhile (`views`).
        let mut expression = "SET attempts = :next, tenant = :t, subscription_id = :s, \
             event_id = :e, event_type = :ty, #state = :pending, attempt_token = :token, \
             first_attempt_at = if_not_exists(first_attempt_at, :now), last_attempt_at = :now, \
             next_attempt_at = :lease, expires_at = :exp, lane = :lane"
            .to_owned();
        if d.attempts > 0 {
            expression.push_str(", gsi1pk = :g1, gsi1sk = :s");
        } else {
            // No outcome written at this attempt yet: its log entry may
            // settle the record (`first_attempt`).
            expression.push_str(" REMOVE updated_at");
        }
        let mut req = self
            .ddb
            .update_item()
            .table_name(&self.settings.table)
            .key("pk", string_attr(record_pk(&d.subscription_id)))
            .key("sk", string_attr(record_sk(&d.event_id)))
            .update_expression(expression);
        if d.attempts > 0 {
            req = req.expression_attribute_values(
                ":g1",
                string_attr(by_event_pk(&d.tenant, &d.event_id)),
            );
        }
        let res = req
            .condition_expression(
                "(attribute_not_exists(pk) AND :n = :zero) OR (#state = :pending AND attempts = :n) \
                 OR attempt_token = :token",
            )
            .expression_attribute_names("#state", "state")
            .expression_attribute_values(":zero", number_attr(0))
            .expression_attribute_values(":n", number_attr(d.attempts))
            .expression_attribute_values(":next", number_attr(d.attempts + 1))
            .expression_attribute_values(":token", string_attr(token))
            .expression_attribute_values(":t", string_attr(d.tenant.as_str()))
            .expression_attribute_values(":s", string_attr(d.subscription_id.as_str()))
            .expression_attribute_values(":e", string_attr(d.event_id.as_str()))
            .expression_attribute_values(":ty", string_attr(d.event_type.as_str()))
            .expression_attribute_values(":lane", number_attr(d.lane))
            .expression_attribute_values(":pending", string_attr("pending"))
            .expression_attribute_values(":now", number_attr(ms(now)))
            .expression_attribute_values(":lease", number_attr(ms(lease_until)))
            .expression_attribute_values(":exp", number_attr(now.unix_timestamp() + RETENTION_SECS))
            .send()
            .await;
        took_effect(res)
    }

    /// The outcome's one conditional update of the delivery record (on
    /// condition it is still pending at this attempt); `false` when it was
    /// not.
    pub(super) async fn write_outcome(&self, d: &Delivery, finish: &Finish) -> StoreResult<bool> {
        let last = finish.attempt.as_ref();
        let now = OffsetDateTime::now_utc();
        let mut req = self
            .ddb
            .update_item()
            .table_name(&self.settings.table)
            .key("pk", string_attr(record_pk(&d.subscription_id)))
            .key("sk", string_attr(record_sk(&d.event_id)))
            .expression_attribute_names("#state", "state")
            .expression_attribute_values(":pending", string_attr("pending"))
            .expression_attribute_values(":updated", number_attr(ms(now)));
        // Into the `gsi1` index (a first attempt's record is not in it
        // yet), unless it was delivered at its first attempt: the event's
        // view reads those by key (`views`), and the delivery path pays no
        // index write.
        let mut set = vec!["#state = :state", "updated_at = :updated"];
        if !(d.attempts == 0 && matches!(finish.end, End::Delivered)) {
            set.extend(["gsi1pk = :g1", "gsi1sk = :sub"]);
            req = req
                .expression_attribute_values(
                    ":g1",
                    string_attr(by_event_pk(&d.tenant, &d.event_id)),
                )
                .expression_attribute_values(":sub", string_attr(d.subscription_id.as_str()));
        }
        if let Some(code) = last.and_then(|a| a.status_code) {
            set.push("last_status = :status");
            req = req.expression_attribute_values(":status", number_attr(code));
        }
        if let Some(err) = last.and_then(|a| a.error.as_ref()) {
            set.push("last_error = :error");
            req = req.expression_attribute_values(":error", string_attr(truncate(err, 1000)));
        }
        let state = finish.end.state();
        req = end_fields(req, &mut set, d, &finish.end, now);
        // A delivery never attempted has no record: nothing to finish. A
        // later attempt started meanwhile (after this one's lease) has its
        // own outcome to write.
        let condition = "#state = :pending AND attempts = :this";
        let res = req
            .update_expression(format!("SET {}", set.join(", ")))
            .condition_expression(condition)
            .expression_attribute_values(":this", number_attr(d.attempts + 1))
            .expression_attribute_values(":state", string_attr(state.as_str()))
            .send()
            .await;
        took_effect(res)
    }
}

type UpdateBuilder = aws_sdk_dynamodb::operation::update_item::builders::UpdateItemFluentBuilder;

/// The fields an outcome's end adds to the record's update: a retry's
/// next attempt, or a parked delivery's reason and its place in the
/// tenant's parked index.
fn end_fields(
    req: UpdateBuilder,
    set: &mut Vec<&'static str>,
    d: &Delivery,
    end: &End,
    now: OffsetDateTime,
) -> UpdateBuilder {
    match end {
        End::Retry(at) => {
            set.push("next_attempt_at = :next");
            req.expression_attribute_values(":next", number_attr(ms(*at)))
        }
        End::Parked(reason) => {
            set.push("reason = :reason, parked_at = :updated, gsi2pk = :g2, gsi2sk = :g2s");
            req.expression_attribute_values(":reason", string_attr(truncate(reason, 1000)))
                .expression_attribute_values(":g2", string_attr(parked_pk(&d.tenant)))
                .expression_attribute_values(":g2s", string_attr(padded(parked_seq(now))))
        }
        End::Delivered | End::Dropped | End::Held => req,
    }
}
