//! The fan-out function: consumes the ingest FIFO queue (group = tenant, so
//! a tenant's events fan out in acceptance order) and enqueues one delivery
//! per matching subscription. A fan-out too large for one invocation saves
//! its cursor on the event and hands its message straight back, so the next
//! receive resumes where it stopped, still at the head of its group.
//! Consecutive events of one tenant in a batch, each small enough to ride
//! in its message, fan out together: their deliveries go in one enqueue.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent, SqsMessage};
use hooklane_core::domain::{Event, EventId, SubscriptionId, TenantId};
use hooklane_core::engine::Engine;
use hooklane_core::telemetry::Chain;
use hooklane_core::trace;
use tracing::{error, info, warn, Instrument};

use super::{run_groups, Outcome};
use crate::messages::{BackfillMessage, FanOutMessage};
use crate::AwsStore;

/// Pages (of 500 subscriptions) one pass fans out before checking time:
/// one, so the cursor a failed pass leaves is right after the last page
/// queued (a page queued again is counted again in the tenant backlog
/// counts).
const PAGES_PER_PASS: usize = 1;
/// How long one backfill pass is: the engine queues what the rate allows
/// in it, and the message comes back after it.
const BACKFILL_PASS: Duration = Duration::from_secs(10);

/// What the fan-out handler needs, built once per cold start.
#[derive(Clone)]
pub struct FanOut {
    /// The engine over the AWS ports.
    pub engine: Arc<Engine>,
    /// The AWS adapter.
    pub store: AwsStore,
    /// How long one invocation may spend before handing work back.
    pub budget: Duration,
}

/// Handles one batch from the ingest queue.
pub async fn handle(ctx: &FanOut, event: SqsEvent) -> SqsBatchResponse {
    let started = Instant::now();
    let source = super::Source {
        sqs: ctx.store.sqs().clone(),
        queue_url: ctx.store.settings().ingest_queue_url.clone(),
    };
    let together = fan_out_together(ctx, &event.records).await;
    let batch = run_groups(
        event.records,
        |m| {
            let done = m
                .message_id
                .as_ref()
                .is_some_and(|id| together.contains(id));
            async move {
                if done {
                    Outcome::Done
                } else {
                    process(ctx, m, started).await
                }
            }
        },
        Some(&source),
    )
    .await;
    super::release(
        ctx.store.sqs(),
        &ctx.store.settings().ingest_queue_url,
        batch.held_back,
    )
    .await;
    batch.response
}

/// The event a message carries, when fanning it out needs nothing but
/// the event: a first receive (no cursor left by an earlier one) of an
/// event small enough to travel in its message, not a backfill; and
/// whether its fan-out counts the deliveries (`FanOutMessage::count`).
fn carried_event(m: &SqsMessage) -> Option<(Event, bool)> {
    if !super::first_receive(m) {
        return None;
    }
    let msg: FanOutMessage = serde_json::from_str(m.body.as_deref()?).ok()?;
    if msg.backfill.is_some() {
        return None;
    }
    let tenant = TenantId::parse(&msg.tenant).ok()?;
    let id = EventId::parse(&msg.event_id).ok()?;
    Some((msg.event.as_ref()?.event(&tenant, &id)?, msg.count))
}

/// Runs a fan-out of `events` with those whose messages say to count
/// held meanwhile (`backlog_tally`).
async fn counting<T>(
    events: &[(&Event, bool)],
    fan_out: impl std::future::Future<Output = T>,
) -> T {
    let counted = events.iter().filter(|(_, count)| *count);
    crate::store::Tally::holding(counted.map(|(e, _)| (&e.tenant, &e.id)), fan_out).await
}

/// One group's leading run of carried events: their message ids and
/// events, and whether a message that is not one ended it.
struct Run {
    group: String,
    events: Vec<(String, (Event, bool))>,
    ended: bool,
}

/// Fans out each group's leading run of carried events
/// ([`carried_event`]) together ([`Engine::fan_out_run`]): at load, a
/// receive of ten events of one tenant sends its deliveries in one
/// `SendMessageBatch` per ten rather than one per event. Returns the ids
/// of the messages so fanned out; everything else (the rest of a group,
/// or a whole run whose fan-out failed) goes through [`process`] one by
/// one, which is safe: a fan-out run again queues nothing twice.
pub async fn fan_out_together(ctx: &FanOut, records: &[SqsMessage]) -> HashSet<String> {
    let mut runs: Vec<Run> = Vec::new();
    for m in records {
        let group = super::group_of(m);
        let i = match runs.iter().position(|r| r.group == group) {
            Some(i) => i,
            None => {
                runs.push(Run {
                    group,
                    events: Vec::new(),
                    ended: false,
                });
                runs.len() - 1
            }
        };
        let run = &mut runs[i];
        if run.ended {
            continue;
        }
        match (m.message_id.clone(), carried_event(m)) {
            (Some(id), Some(event)) => run.events.push((id, event)),
            _ => run.ended = true,
        }
    }
    let fanned = runs
        .into_iter()
        .map(|r| r.events)
        .filter(|run| run.len() > 1)
        .map(|run| async move {
            let events: Vec<Event> = run.iter().map(|(_, (e, _))| e.clone()).collect();
            let counted: Vec<(&Event, bool)> = run.iter().map(|(_, (e, c))| (e, *c)).collect();
            let span = trace::fan_out(&events);
            let fanned = ctx.engine.fan_out_run(&events, usize::MAX);
            match counting(&counted, fanned.instrument(span)).await {
                Ok(whole) => {
                    info!(
                        tenant = events[0].tenant.as_str(),
                        events = whole,
                        "fanned out together"
                    );
                    run.into_iter().take(whole).map(|(id, _)| id).collect()
                }
                Err(e) => {
                    warn!(error = %Chain(&e), "fanning out a run of events failed; one by one instead");
                    Vec::new()
                }
            }
        });
    futures::future::join_all(fanned)
        .await
        .into_iter()
        .flatten()
        .collect()
}

/// How many receives an ingest message that does not parse gets before it
/// is moved to the dead-letter queue: a message written by a newer version
/// than the function reading it (mid-deploy) is read again by the newer
/// function within these, rather than parked.
const UNREADABLE_RECEIVES: u32 = 3;

/// A fan-out message that does not parse fails alone: it is reported,
/// sent back until its [`UNREADABLE_RECEIVES`]th receive, then moved, with
/// the reason, to the ingest queue's dead-letter queue, and the rest of the
/// batch (its group's later messages included) goes on. Where no such queue
/// is configured, or the move fails, it is sent back and the queue's
/// redrive policy moves it after repeated receives (it names no delivery
/// to park).
async fn unreadable(ctx: &FanOut, m: &SqsMessage, why: &str) -> Outcome {
    let key = format!("message {}", m.message_id.as_deref().unwrap_or("(no id)"));
    let receives: u32 = m
        .attributes
        .get("ApproximateReceiveCount")
        .and_then(|c| c.parse().ok())
        .unwrap_or(1);
    if receives < UNREADABLE_RECEIVES {
        hooklane_core::record::unreadable("fan-out message", &key, why);
        return Outcome::Poison;
    }
    let body = super::unreadable_body(m);
    let group = super::group_of(m);
    match ctx
        .store
        .dead_letters()
        .park_unreadable_ingest(&key, body, &group, why)
        .await
    {
        // Counted by `record::unreadable`: no delivery was parked.
        Ok(true) => Outcome::Done,
        Ok(false) => Outcome::Poison,
        Err(e) => {
            error!(error = %Chain(&e), "moving an unreadable fan-out message to the dead-letter queue failed");
            Outcome::Poison
        }
    }
}

async fn process(ctx: &FanOut, m: SqsMessage, started: Instant) -> Outcome {
    let parsed = m
        .body
        .as_deref()
        .ok_or_else(|| "the message has no body".to_owned())
        .and_then(|b| serde_json::from_str::<FanOutMessage>(b).map_err(|e| e.to_string()))
        .and_then(|msg| match TenantId::parse(&msg.tenant) {
            Ok(tenant) => Ok((msg, tenant)),
            Err(e) => Err(format!("tenant: {e}")),
        });
    let (msg, tenant) = match parsed {
        Ok(parsed) => parsed,
        Err(why) => return unreadable(ctx, &m, &why).await,
    };
    if let Some(job) = &msg.backfill {
        return backfill(ctx, &m, &tenant, job).await;
    }
    let event_id = match EventId::parse(&msg.event_id) {
        Ok(id) => id,
        Err(e) => return unreadable(ctx, &m, &format!("event_id: {e}")).await,
    };
    let carried = msg.event.as_ref().and_then(|c| c.event(&tenant, &event_id));
    let archived = match carried {
        Some(e) => Ok(Some(e)),
        None => {
            hooklane_core::ports::EventArchive::get(ctx.store.archive(), &tenant, &event_id).await
        }
    };
    match archived {
        Ok(Some(event)) => {
            let counted = [(&event, msg.count)];
            counting(&counted, fan_out(ctx, &m, &event, started)).await
        }
        Ok(None) => {
            warn!(
                event_id = event_id.as_str(),
                "event no longer archived; nothing to fan out"
            );
            Outcome::Done
        }
        Err(e) => {
            error!(error = %Chain(&e), "reading event failed");
            Outcome::Retry
        }
    }
}

/// Fans an event out page by page from where an earlier receive stopped,
/// handing the message back with its cursor when the time budget is spent
/// or a page fails.
async fn fan_out(ctx: &FanOut, m: &SqsMessage, event: &Event, started: Instant) -> Outcome {
    let (tenant, event_id) = (&event.tenant, &event.id);
    // A cursor exists only if an earlier receive of this message handed it
    // back part-way; the first receive has nothing to read.
    let cursor = if !super::first_receive(m) {
        ctx.store.archive().fan_out_cursor(tenant, event_id).await
    } else {
        Ok(None)
    };
    let mut after = match cursor {
        Ok(c) => c,
        Err(e) => {
            error!(error = %Chain(&e), "reading fan-out cursor failed");
            return Outcome::Retry;
        }
    };
    loop {
        match ctx
            .engine
            .fan_out_pages(event, after.clone(), PAGES_PER_PASS)
            .instrument(trace::fan_out(std::slice::from_ref(event)))
            .await
        {
            Ok((n, None)) => {
                info!(
                    tenant = tenant.as_str(),
                    event_id = event_id.as_str(),
                    deliveries = n,
                    "fanned out"
                );
                return Outcome::Done;
            }
            Ok((_, Some(cursor))) => {
                after = Some(cursor);
                if started.elapsed() >= ctx.budget {
                    return hand_back(ctx, m, tenant, event_id, after.as_ref()).await;
                }
            }
            Err(e) => {
                error!(error = %Chain(&e), "fan-out failed");
                return hand_back(ctx, m, tenant, event_id, after.as_ref()).await;
            }
        }
    }
}

/// One pass of a backfill ([`Engine::backfill_pass`]); between passes the
/// message waits out a visibility of the pass's length, which paces it.
async fn backfill(
    ctx: &FanOut,
    m: &SqsMessage,
    tenant: &TenantId,
    job: &BackfillMessage,
) -> Outcome {
    let Ok(sub) = SubscriptionId::parse(&job.subscription_id) else {
        return unreadable(ctx, m, "backfill: subscription_id does not parse").await;
    };
    match ctx.engine.backfill_pass(tenant, &sub, BACKFILL_PASS).await {
        Ok(pass) => match pass.again_in {
            None => Outcome::Done,
            Some(wait) => {
                set_visibility(ctx, m, wait.as_secs() as i32).await;
                Outcome::Retry
            }
        },
        Err(e) => {
            error!(error = %Chain(&e), "backfill pass failed");
            Outcome::Retry
        }
    }
}

async fn set_visibility(ctx: &FanOut, m: &SqsMessage, secs: i32) {
    if let Some(handle) = &m.receipt_handle {
        let _ = ctx
            .store
            .sqs()
            .change_message_visibility()
            .queue_url(&ctx.store.settings().ingest_queue_url)
            .receipt_handle(handle)
            .visibility_timeout(secs)
            .send()
            .await;
    }
}

/// Saves the cursor and makes the message visible again at once.
async fn hand_back(
    ctx: &FanOut,
    m: &SqsMessage,
    tenant: &TenantId,
    event_id: &EventId,
    after: Option<&SubscriptionId>,
) -> Outcome {
    if let Some(cursor) = after {
        if let Err(e) = ctx
            .store
            .archive()
            .save_fan_out_cursor(tenant, event_id, cursor)
            .await
        {
            error!(error = %Chain(&e), "saving fan-out cursor failed");
        }
    }
    set_visibility(ctx, m, 0).await;
    Outcome::Retry
}
