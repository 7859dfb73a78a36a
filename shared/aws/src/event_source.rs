//! The stand-in for Lambda's SQS event source mappings, for `serve
//! --backend aws` ([`crate::queue_poller`]): polls one queue (batches of up
//! to 10), runs the same handler the Lambda function runs, deletes what
//! succeeded and leaves the reported failures to their visibility timeout,
//! as the real mapping does, with at most as many batches at once as the
//! mapping's `MaximumConcurrency`. A stop ends the receives and waits for
//! the invocations running.
//!
//! Receives are short polls: a receive that comes back empty is followed
//! by a pause that doubles from 200 ms up to 1 s (reset by the first
//! message), so an idle queue costs about what one-second long polls cost.
//! Long polls are not used because on a FIFO queue whose visible messages
//! all belong to groups in flight (hung receivers holding their lanes),
//! the local AWS-compatible server answers a long poll by scanning the
//! queue over and over for the whole wait, which starves every other call
//! it serves (a fan-out's sends took a second each).

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent, SqsMessage, SqsMessageAttribute};
use aws_sdk_sqs::types::{DeleteMessageBatchRequestEntry, Message, MessageSystemAttributeName};
use tokio::sync::Semaphore;
use tracing::{error, info, warn};

/// The first pause after an empty receive, and the longest.
const IDLE_PAUSE: (Duration, Duration) = (Duration::from_millis(200), Duration::from_secs(1));

pub(crate) type Handler =
    Arc<dyn Fn(SqsEvent) -> Pin<Box<dyn Future<Output = SqsBatchResponse> + Send>> + Send + Sync>;

/// Converts received messages into the event Lambda would pass.
pub fn to_event(messages: &[Message]) -> SqsEvent {
    let mut event = SqsEvent::default();
    for m in messages {
        let mut rec = SqsMessage::default();
        rec.message_id = m.message_id.clone();
        rec.receipt_handle = m.receipt_handle.clone();
        rec.body = m.body.clone();
        if let Some(attrs) = &m.attributes {
            for (k, v) in attrs {
                rec.attributes.insert(k.as_str().to_owned(), v.clone());
            }
        }
        if let Some(attrs) = &m.message_attributes {
            for (k, v) in attrs {
                let mut a = SqsMessageAttribute::default();
                a.string_value = v.string_value.clone();
                a.data_type = Some(v.data_type.clone());
                rec.message_attributes.insert(k.clone(), a);
            }
        }
        event.records.push(rec);
    }
    event
}

/// One queue's stand-in mapping: its invocation slots, and how many
/// receive loops (pollers) run.
pub(crate) struct Mapping {
    sqs: aws_sdk_sqs::Client,
    queue_url: String,
    function: &'static str,
    handler: Handler,
    /// One permit per invocation that may run at once.
    slots: Arc<Semaphore>,
    /// Receive loops running.
    pollers: AtomicUsize,
    /// The most invocations at once (and so the most pollers).
    invocations: usize,
    /// Set by a stop: no receive starts after it.
    stopping: Arc<AtomicBool>,
}

/// The stand-in mappings started by [`crate::queue_poller::start_pollers`].
pub struct Pollers {
    pub(crate) mappings: Vec<Arc<Mapping>>,
    pub(crate) stopping: Arc<AtomicBool>,
}

impl Pollers {
    /// `shutdown`, after which no receive starts.
    pub(crate) fn stopping_on(
        &self,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> impl Future<Output = ()> + Send + 'static {
        let stopping = self.stopping.clone();
        async move {
            shutdown.await;
            stopping.store(true, Ordering::SeqCst);
            info!("stopping: no new receives; requests and invocations in progress finish");
        }
    }

    /// Stops receiving on every queue and waits, until `deadline`, for the
    /// invocations running to finish (each deletes what it delivered).
    /// Those still running then are left: their messages come back after
    /// their visibility timeout, each attempt with the next number.
    pub(crate) async fn finish(&self, deadline: std::time::Instant) {
        self.stopping.store(true, Ordering::SeqCst);
        let deadline = tokio::time::Instant::from_std(deadline);
        let mut running = 0;
        for m in &self.mappings {
            let all = u32::try_from(m.invocations).unwrap_or(u32::MAX);
            if tokio::time::timeout_at(deadline, m.slots.acquire_many(all))
                .await
                .is_err()
            {
                running += m.invocations - m.slots.available_permits();
            }
        }
        match running {
            0 => info!("stopped: every invocation in progress finished"),
            n => warn!(running = n, "stopped at the end of the grace with invocations still running; their messages come back after their visibility timeout"),
        }
    }
}

/// Polls one queue until a stop, running `handler` on each batch, at most
/// `invocations` batches at once. `function` names the Lambda function it
/// stands in for (the ledger's invocation counts).
///
/// As Lambda's pollers do, it scales its receive loops with the backlog:
/// one loop while the queue is idle, one more each time a receive comes
/// back full (up to one per invocation), each extra loop ending at its
/// first empty receive. So a burst is received as fast as the queue
/// answers, with every invocation slot taking a batch as soon as it is
/// free, and an idle queue costs one short poll a second.
pub(crate) fn poll(
    sqs: aws_sdk_sqs::Client,
    queue_url: String,
    (function, handler): (&'static str, Handler),
    (invocations, stopping): (usize, &Arc<AtomicBool>),
) -> Arc<Mapping> {
    let mapping = Arc::new(Mapping {
        sqs,
        queue_url,
        function,
        handler,
        slots: Arc::new(Semaphore::new(invocations)),
        pollers: AtomicUsize::new(1),
        invocations,
        stopping: stopping.clone(),
    });
    tokio::spawn(receive_loop(mapping.clone(), true));
    mapping
}

/// One receive loop; the first (`lead`) runs until a stop, the others end
/// at their first empty receive (or the stop).
fn receive_loop(mapping: Arc<Mapping>, lead: bool) -> Pin<Box<dyn Future<Output = ()> + Send>> {
    Box::pin(async move {
        let mut pause = IDLE_PAUSE.0;
        loop {
            let Ok(permit) = mapping.slots.clone().acquire_owned().await else {
                return;
            };
            if mapping.stopping.load(Ordering::SeqCst) {
                return;
            }
            let received = mapping
                .sqs
                .receive_message()
                .queue_url(&mapping.queue_url)
                .max_number_of_messages(10)
                .wait_time_seconds(0)
                .message_system_attribute_names(MessageSystemAttributeName::All)
                .message_attribute_names("All")
                .send()
                .await;
            let messages = match received {
                Ok(r) => r.messages.unwrap_or_default(),
                Err(e) => {
                    error!(error = %aws_smithy_types::error::display::DisplayErrorContext(e), "receive failed");
                    tokio::time::sleep(Duration::from_millis(500)).await;
                    continue;
                }
            };
            if messages.is_empty() {
                drop(permit);
                if !lead {
                    mapping.pollers.fetch_sub(1, Ordering::SeqCst);
                    return;
                }
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(IDLE_PAUSE.1);
                continue;
            }
            pause = IDLE_PAUSE.0;
            if messages.len() == 10 {
                scale_up(&mapping);
            }
            let m = mapping.clone();
            tokio::spawn(async move {
                invoke(&m.sqs, &m.queue_url, (m.function, &m.handler), messages).await;
                drop(permit);
            });
        }
    })
}

/// Starts one more receive loop, unless one per invocation runs already.
fn scale_up(mapping: &Arc<Mapping>) {
    let more = mapping
        .pollers
        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
            (n < mapping.invocations).then_some(n + 1)
        })
        .is_ok();
    if more {
        tokio::spawn(receive_loop(mapping.clone(), false));
    }
}

/// One invocation: the handler on the batch, then, as the mapping does,
/// the deletion of every message not reported as a failure.
async fn invoke(
    sqs: &aws_sdk_sqs::Client,
    queue_url: &str,
    (function, handler): (&str, &Handler),
    messages: Vec<Message>,
) {
    let started = std::time::Instant::now();
    let response = handler(to_event(&messages)).await;
    crate::calls::invoked(function, started.elapsed());
    let failed: Vec<String> = response
        .batch_item_failures
        .into_iter()
        .map(|f| f.item_identifier)
        .collect();
    let done: Vec<DeleteMessageBatchRequestEntry> = messages
        .iter()
        .filter(|m| m.message_id.as_ref().is_some_and(|id| !failed.contains(id)))
        .filter_map(|m| {
            DeleteMessageBatchRequestEntry::builder()
                .id(m.message_id.clone()?)
                .receipt_handle(m.receipt_handle.clone()?)
                .build()
                .ok()
        })
        .collect();
    if done.is_empty() {
        return;
    }
    let deleted = sqs
        .delete_message_batch()
        .queue_url(queue_url)
        .set_entries(Some(done))
        .send()
        .await;
    if let Err(e) = deleted {
        error!(error = %aws_smithy_types::error::display::DisplayErrorContext(e), "delete failed");
    }
}
