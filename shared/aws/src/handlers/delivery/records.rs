//! The delivery record as the delivery handler reads it before an attempt
//! of a redelivered message: due or not, finished (done, after the refill
//! a crash may have left), reset when an operator redrove it from the
//! dead-letter queue, or parked as unreadable.

use aws_lambda_events::event::sqs::SqsMessage;
use hooklane_core::domain::{DeliveryRecord, DeliveryState};
use hooklane_core::ports::StoreError;
use hooklane_core::telemetry::Chain;
use time::OffsetDateTime;
use tracing::error;

use super::super::delivery_message::Parsed;
use super::super::Outcome;
use super::Deliver;

/// Parks a delivery that cannot be read (its message or its record) with
/// the reason (counted with the other parks, `Parked`); the message goes
/// back if even that fails.
pub(super) async fn park_unreadable(
    ctx: &Deliver,
    m: &SqsMessage,
    key: &str,
    why: &str,
) -> Outcome {
    let body = super::super::unreadable_body(m);
    let group = super::super::group_of(m);
    match ctx
        .store
        .dead_letters()
        .park_unreadable(key, body, &group, why)
        .await
    {
        Ok(()) => {
            ctx.engine.metrics.parked.inc();
            Outcome::Done
        }
        Err(e) => {
            error!(error = %Chain(&e), "parking an unreadable delivery failed");
            Outcome::Poison
        }
    }
}

/// The delivery's record, when an attempt is still to be made from `from`
/// on; otherwise what the message comes to (done, back, or parked as
/// unreadable).
pub(super) async fn record_to_attempt(
    ctx: &Deliver,
    m: &SqsMessage,
    p: &Parsed,
    from: OffsetDateTime,
) -> Result<DeliveryRecord, Outcome> {
    let record = match ctx
        .store
        .records()
        .record_to_attempt(&p.sub, &p.event, from)
        .await
    {
        Ok(r) => r.unwrap_or_else(DeliveryRecord::queued),
        Err(StoreError::Unreadable(why)) => {
            let key = format!("D#{}/E#{}", p.sub, p.event);
            let why = format!("the delivery record does not parse: {why}");
            return Err(park_unreadable(ctx, m, &key, &why).await);
        }
        Err(e) => {
            error!(error = %Chain(&e), "reading delivery record failed");
            return Err(Outcome::Retry);
        }
    };
    let redriven =
        record.state == DeliveryState::Parked && m.message_attributes.contains_key("reason");
    if redriven {
        return match ctx
            .store
            .dead_letters()
            .reset_parked(&p.sub, &p.event)
            .await
        {
            Ok(_) => Ok(DeliveryRecord::queued()),
            Err(e) => {
                error!(error = %Chain(&e), "resetting a redriven delivery failed");
                Err(Outcome::Retry)
            }
        };
    }
    match record.state {
        // A finished delivery seen again: the process that finished it may
        // have stopped between the outcome write and moving the lane's
        // spilled deliveries back to the queue. Move them now, or they
        // would wait for a lane with nothing left in the queue.
        DeliveryState::Delivered | DeliveryState::Parked => {
            match ctx.store.resume_refill((&p.tenant, &p.sub, p.lane)).await {
                Ok(()) => Err(Outcome::Done),
                Err(e) => {
                    error!(error = %Chain(&e), "refilling after a finished delivery failed");
                    Err(Outcome::Retry)
                }
            }
        }
        DeliveryState::Dropped | DeliveryState::Held => Err(Outcome::Done),
        DeliveryState::Pending => Ok(record),
    }
}
