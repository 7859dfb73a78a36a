//! The delivery function: consumes the delivery FIFO queue. For each
//! message, in its group's order: read our own delivery record (exact
//! attempt number, state), let the engine make one attempt (it reads the
//! subscription with a consistent read first, so an unregistered
//! subscription's deliveries are dropped, not parked), then delete the
//! message (delivered, parked, dropped) or back off by message visibility
//! and report it and the rest of its group as batch-item failures.
//!
//! A message that returns from the dead-letter queue (operator redrive
//! with `StartMessageMoveTask`; it still carries its `reason` attribute)
//! resets its parked record and starts a fresh ladder.

use std::sync::Arc;
use std::time::Duration;

use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent, SqsMessage};
use hooklane_core::domain::{Delivery, DeliveryRecord, SubscriptionId, TenantId};
use hooklane_core::engine::{Engine, Step};
use hooklane_core::lane_rules::{self, MessageNext};
use hooklane_core::ports::{End, StoreError};
use hooklane_core::telemetry::Chain;
use time::OffsetDateTime;
use tracing::error;

mod fences;
mod records;

use fences::{process_fence, wait_behind_fence};
use records::{park_unreadable, record_to_attempt};

use super::delivery_message::{parse, Message, Parsed};
use super::{run_groups, Outcome};
use crate::messages::DeliveryMessage;
use crate::store::{Handover, Received, DUE};
use crate::{AwsStore, Pool};

/// How long before it is due a delivery is attempted rather than put off
/// again (SQS hides a message for whole seconds).
const EARLY: Duration = Duration::from_millis(500);

/// The longest SQS lets a message stay invisible.
const MAX_VISIBILITY: Duration = Duration::from_secs(12 * 3600);
/// How long a message whose step the store could not take for now stays
/// away: longer than an attempt's lease as the template allows it (a
/// timeout of at most 25 s, and 5 s). A message back before a longer lease
/// ends is read with its record and put off until it ends.
const UNAVAILABLE_WAIT: time::Duration = time::Duration::seconds(40);

/// What the delivery handler needs, built once per cold start.
#[derive(Clone)]
pub struct Deliver {
    /// The engine over the AWS ports.
    pub engine: Arc<Engine>,
    /// The AWS adapter.
    pub store: AwsStore,
}

/// Handles one batch from the delivery queue.
pub async fn handle(ctx: &Deliver, event: SqsEvent) -> SqsBatchResponse {
    let source = super::Source {
        sqs: ctx.store.sqs().clone(),
        queue_url: ctx.store.own_queue_url().to_owned(),
    };
    let batch = run_groups(event.records, |m| process_in_pool(ctx, m), Some(&source)).await;
    super::release(ctx.store.sqs(), ctx.store.own_queue_url(), batch.held_back).await;
    // The batch's ends come off the tenant backlog counts together.
    ctx.store.flush_ended().await;
    batch.response
}

/// One message; in the slow pool, a message done there may also bring its
/// lane back to the main pool ([`AwsStore::finished_slow`]).
async fn process_in_pool(ctx: &Deliver, m: SqsMessage) -> Outcome {
    if ctx.store.pool() == Pool::Main {
        return process(ctx, &m).await.0;
    }
    let started = std::time::Instant::now();
    let (outcome, attempted) = process(ctx, &m).await;
    if outcome != Outcome::Done {
        return outcome;
    }
    // Its last attempt ended in time (delivered, or parked after an answer:
    // a receiver that fails at once holds no invocation either).
    let fast = attempted && started.elapsed() < ctx.engine.config.slow_after;
    let Some(body) = m.body.as_deref() else {
        return outcome;
    };
    let Ok(msg) = serde_json::from_str::<DeliveryMessage>(body) else {
        return outcome;
    };
    let (Ok(tenant), Ok(sub)) = (
        TenantId::parse(&msg.tenant),
        SubscriptionId::parse(&msg.subscription_id),
    ) else {
        return outcome;
    };
    let group = super::group_of(&m);
    let lane = if msg.lane.is_some() {
        0
    } else {
        msg.lane_no.unwrap_or(0)
    };
    let h = Handover {
        tenant: &tenant,
        sub: &sub,
        lane,
        group: &group,
        body,
        due: None,
        marked: false,
    };
    match ctx.store.finished_slow(&h, fast).await {
        Ok(()) => outcome,
        Err(e) => {
            // The message is done; its mark stays, and the lane with it in
            // the slow pool until a later message of it finishes there.
            error!(error = %Chain(&e), "recording a message finished in the slow pool failed");
            outcome
        }
    }
}

/// Hands a message of a lane in the slow pool over to the slow queue,
/// with when it is due when known (and whether its mark is written
/// already): done here, or back at once when the lane came back meanwhile.
async fn hand_over_as(
    ctx: &Deliver,
    m: &SqsMessage,
    (tenant, sub, lane): (&TenantId, &SubscriptionId, u16),
    (due, marked): (Option<OffsetDateTime>, bool),
) -> Outcome {
    let (Some(body), group) = (m.body.as_deref(), super::group_of(m)) else {
        return Outcome::Retry;
    };
    let h = Handover {
        tenant,
        sub,
        lane,
        group: &group,
        body,
        due,
        marked,
    };
    match ctx.store.hand_over(&h).await {
        Ok(true) => Outcome::Done,
        Ok(false) => back_off(ctx, m, time::Duration::ZERO).await,
        Err(e) => {
            error!(error = %Chain(&e), "handing a delivery over to the slow pool failed");
            back_off(ctx, m, time::Duration::SECOND).await
        }
    }
}

/// One message: what it came to, and whether its delivery ended with an
/// attempt (delivered, or parked).
async fn process(ctx: &Deliver, m: &SqsMessage) -> (Outcome, bool) {
    let m = m.clone();
    let p = match parse(&m) {
        Ok(Message::Delivery(p)) => p,
        Ok(Message::Fence(tenant, sub, fence)) => {
            return (process_fence(ctx, &m, &tenant, &sub, &fence).await, false)
        }
        Err(why) => {
            let key = format!("message {}", m.message_id.as_deref().unwrap_or("(no id)"));
            let why = format!("the delivery message does not parse: {why}");
            return (park_unreadable(ctx, &m, &key, &why).await, false);
        }
    };
    if let Some(due) =
        handed_over_due(ctx, &m).filter(|due| *due > OffsetDateTime::now_utc() + EARLY)
    {
        return (
            back_off(ctx, &m, due - OffsetDateTime::now_utc()).await,
            false,
        );
    }
    if let Some(outcome) = wait_behind_fence(ctx, &m, &p).await {
        return (outcome, false);
    }
    // A message received for the first time has had no attempt: its
    // record, if any, is a fresh one (a replay's or a backfill's reset) or
    // a finished one (the pair was fanned out again), and the conditional
    // write that starts the attempt refuses the latter. Only a redelivery,
    // or a message back from the dead-letter queue, needs the record read.
    // A message handed over from the main pool has had attempts, like
    // one back from the dead-letter queue.
    let first_receive = super::first_receive(&m)
        && !m.message_attributes.contains_key("reason")
        && ctx.store.pool() == Pool::Main;
    let (outcome, skipped, step) = match attempt(ctx, &m, &p, !first_receive).await {
        // Refused without the record read: the receive count is only
        // approximate, so read the record and decide again rather than
        // let the message go.
        (_, true, _) if first_receive => attempt(ctx, &m, &p, true).await,
        first => first,
    };
    let step = if skipped { None } else { step };
    let attempted = matches!(step, Some(Step::Ended(End::Delivered | End::Parked(_))));
    (outcome, attempted)
}

/// When a message the main pool just handed over is due (its `due`
/// attribute), at its first receive in the slow pool.
fn handed_over_due(ctx: &Deliver, m: &SqsMessage) -> Option<OffsetDateTime> {
    if ctx.store.pool() != Pool::Slow || !super::first_receive(m) {
        return None;
    }
    let due = m.message_attributes.get(DUE)?.string_value.as_deref()?;
    Some(hooklane_core::record::from_ms(due.parse().ok()?))
}

/// The delivery a parsed message carries, as its record has it, due `now`.
fn delivery_of(p: &Parsed, record: &DeliveryRecord, now: OffsetDateTime) -> Delivery {
    Delivery {
        seq: p.queued_at,
        tenant: p.tenant.clone(),
        subscription_id: p.sub.clone(),
        event_id: p.event.clone(),
        event_type: p.event_type.clone(),
        lane: p.lane,
        attempts: record.attempts,
        first_attempt_at: record.first_attempt_at,
        next_attempt_at: now,
    }
}

/// One attempt of a parsed message, reading its delivery record first
/// when `read_record`; also says whether the engine skipped it (the
/// conditional attempt start refused), and the engine's step.
async fn attempt(
    ctx: &Deliver,
    m: &SqsMessage,
    p: &Parsed,
    read_record: bool,
) -> (Outcome, bool, Option<Step>) {
    // One `now` for the record's read and the check of when it is due: a
    // first attempt's log key is claimed if, and only if, its lease ends
    // by the time this attempt may start (`first_attempt`).
    let now = OffsetDateTime::now_utc();
    let record = if read_record {
        match record_to_attempt(ctx, m, p, now + EARLY).await {
            Ok(record) => record,
            Err(outcome) => return (outcome, false, None),
        }
    } else {
        DeliveryRecord::queued()
    };
    if let Some(due) = record.next_attempt_at.filter(|due| *due > now + EARLY) {
        return (back_off(ctx, m, due - now).await, false, None);
    }
    let d = delivery_of(p, &record, now);
    // In the main pool the step runs with the message at hand: a move of
    // the lane to the slow pool (a timeout, or a first attempt to an
    // endpoint not known to answer while the pool is behind) writes the
    // message's hand-over mark in the same write.
    let deliver = ctx.engine.deliver(&d, p.carried.clone());
    let (stepped, marked) = match m.body.as_deref() {
        Some(body) if ctx.store.pool() == Pool::Main => {
            let cut_off = ctx.engine.config.unproven_cut_off;
            let behind = lane_rules::behind(super::first_receive(m), super::waited(m), cut_off);
            Received::scope((&super::group_of(m), body), behind, deliver).await
        }
        _ => (deliver.await, false),
    };
    let step = match stepped {
        // Refused without the record read: the caller reads it and decides
        // again, without hiding the message first.
        Ok(Step::Skipped) if !read_record => return (Outcome::Retry, true, None),
        Ok(step) => step,
        // Nothing changed and the same step can succeed later (the AWS
        // store says so of a hold or drop beside an attempt that still
        // runs, and of a throttled call; its other failures are backend
        // errors): back in the time an attempt's lease lasts at most, not
        // the queue's visibility timeout.
        Err(e @ StoreError::Unavailable(..)) => {
            tracing::warn!(reason = %Chain(&e), "delivery step put off");
            return (back_off(ctx, m, UNAVAILABLE_WAIT).await, false, None);
        }
        Err(e) => {
            error!(error = %Chain(&e), "delivery step failed");
            return (Outcome::Retry, false, None);
        }
    };
    after_step(ctx, m, p, step, marked).await
}

/// What a message comes to after the engine's step, as the lane rules
/// decide ([`lane_rules::message_after`]): handed over to the slow pool
/// (a retry whose timeout just moved its lane goes first there, with when
/// it is due; its mark written already when `marked`), hidden until it is
/// due, or done.
async fn after_step(
    ctx: &Deliver,
    m: &SqsMessage,
    p: &Parsed,
    step: Step,
    marked: bool,
) -> (Outcome, bool, Option<Step>) {
    let slow = lane_rules::asks_if_slow(&step, ctx.store.rules_pool())
        && match ctx.store.is_slow(&p.tenant, &p.sub, p.lane).await {
            Ok(slow) => slow,
            Err(e) => {
                error!(error = %Chain(&e), "reading whether a lane is slow failed");
                false
            }
        };
    let skipped = step == Step::Skipped;
    let lease = time::Duration::try_from(ctx.engine.lease()).unwrap_or(time::Duration::MINUTE);
    match lane_rules::message_after(&step, slow, OffsetDateTime::now_utc(), lease) {
        MessageNext::HandOver => {
            let due = match step {
                Step::Ended(End::Retry(at)) => Some(at),
                _ => None,
            };
            (
                hand_over_as(ctx, m, (&p.tenant, &p.sub, p.lane), (due, marked)).await,
                skipped,
                Some(Step::Elsewhere),
            )
        }
        MessageNext::HideFor(wait) => (back_off(ctx, m, wait).await, skipped, Some(step)),
        MessageNext::Delete => (Outcome::Done, skipped, Some(step)),
    }
}

/// Hides the message until its next attempt is due (FIFO queues have no
/// per-message delay), and reports it back.
async fn back_off(ctx: &Deliver, m: &SqsMessage, wait: time::Duration) -> Outcome {
    let wait: Duration = wait.try_into().unwrap_or_default();
    // SQS counts whole seconds: round to the nearest, so a message comes
    // back at most half a second early (the handler attempts it then).
    let secs = wait.min(MAX_VISIBILITY).as_secs_f64().round() as i32;
    if let Some(handle) = &m.receipt_handle {
        let res = ctx
            .store
            .sqs()
            .change_message_visibility()
            .queue_url(ctx.store.own_queue_url())
            .receipt_handle(handle)
            .visibility_timeout(secs)
            .send()
            .await;
        if let Err(e) = res {
            error!(error = %aws_smithy_types::error::display::DisplayErrorContext(e), "backing off failed");
        }
    }
    Outcome::Retry
}
