//! The Lambda handlers, as plain async functions over a typed `SqsEvent`
//! (the function crates wrap them in `service_fn`; tests call them
//! directly). One batch can mix message groups: groups run concurrently,
//! each group's messages in order; when a message fails, it and the rest of
//! its own group are reported as batch-item failures, and no other group's.
//!
//! A FIFO queue hands out no message of a group while an earlier one of
//! that group is in flight, and Lambda deletes a batch's messages only when
//! the whole invocation returns. So a group that finishes while another
//! group of the same batch is still running (a receiver holding its request
//! open until the attempt timeout) has its messages deleted by the handler
//! itself after a short grace ([`EARLY_DELETE_GRACE`]); otherwise its next
//! message would wait for the slowest group of the batch. Lambda's own
//! delete afterwards is a no-op for those. A batch whose groups all finish
//! together costs no extra call.

pub mod delivery;
mod delivery_message;
pub mod fanout;

use std::future::Future;
use std::time::Duration;

use aws_lambda_events::event::sqs::{BatchItemFailure, SqsBatchResponse, SqsMessage};
use aws_sdk_sqs::types::{
    ChangeMessageVisibilityBatchRequestEntry, DeleteMessageBatchRequestEntry,
};
use futures::stream::{FuturesUnordered, StreamExt};
use hooklane_core::telemetry::Chain;
use tokio::task::JoinHandle;

/// How long finished groups wait for the rest of their batch before the
/// handler deletes their messages itself.
pub const EARLY_DELETE_GRACE: Duration = Duration::from_millis(250);

/// What handling one message came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Done: the message may be deleted.
    Done,
    /// Not done: this message and the rest of its group go back.
    Retry,
    /// This message alone is unusable (it fails alone; the redrive policy
    /// moves it to the dead-letter queue after repeated receives).
    Poison,
}

/// The group of a record (`MessageGroupId`), or its own id when absent.
pub(crate) fn group_of(m: &SqsMessage) -> String {
    m.attributes
        .get("MessageGroupId")
        .cloned()
        .or_else(|| m.message_id.clone())
        .unwrap_or_default()
}

/// Splits records into groups, keeping arrival order within each.
pub fn groups(records: Vec<SqsMessage>) -> Vec<Vec<SqsMessage>> {
    let mut order: Vec<String> = Vec::new();
    let mut by_group: std::collections::HashMap<String, Vec<SqsMessage>> = Default::default();
    for r in records {
        let g = group_of(&r);
        if !by_group.contains_key(&g) {
            order.push(g.clone());
        }
        by_group.entry(g).or_default().push(r);
    }
    order
        .into_iter()
        .filter_map(|g| by_group.remove(&g))
        .collect()
}

/// The result of a batch: the batch-item failures, and the receipt
/// handles of the messages held back behind a failed one of their group
/// (never attempted; the caller makes them visible again at once, and the
/// FIFO queue still hands them out only after the failed one).
pub struct Batch {
    /// What Lambda gets back.
    pub response: SqsBatchResponse,
    /// Receipt handles of held-back messages.
    pub held_back: Vec<String>,
}

/// The queue a batch came from, for deleting finished groups' messages
/// before the batch as a whole returns.
#[derive(Clone)]
pub struct Source {
    /// The SQS client.
    pub sqs: aws_sdk_sqs::Client,
    /// The queue's URL.
    pub queue_url: String,
}

/// What one group came to.
#[derive(Default)]
struct GroupResult {
    failed: Vec<String>,
    held: Vec<String>,
    /// Receipt handles of the messages that are done.
    done: Vec<String>,
}

/// Runs `handle` over every record: groups concurrently, each in order.
/// With a `source`, the messages of groups that finish while others still
/// run are deleted after [`EARLY_DELETE_GRACE`].
pub async fn run_groups<F, Fut>(
    records: Vec<SqsMessage>,
    handle: F,
    source: Option<&Source>,
) -> Batch
where
    F: Fn(SqsMessage) -> Fut,
    Fut: Future<Output = Outcome>,
{
    let handle = &handle;
    let mut pending: FuturesUnordered<_> = groups(records)
        .into_iter()
        .map(|group| run_group(group, handle))
        .collect();
    let mut batch = Batch {
        response: SqsBatchResponse::default(),
        held_back: Vec::new(),
    };
    // Done messages not yet deleted early, and since when the oldest waits.
    let mut waiting: Vec<String> = Vec::new();
    let mut since: Option<tokio::time::Instant> = None;
    let mut deletes: Vec<JoinHandle<()>> = Vec::new();
    loop {
        let due = async {
            match since {
                Some(t) => tokio::time::sleep_until(t + EARLY_DELETE_GRACE).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            next = pending.next() => {
                let Some(out) = next else { break };
                for id in out.failed {
                    let mut f = BatchItemFailure::default();
                    f.item_identifier = id;
                    batch.response.batch_item_failures.push(f);
                }
                batch.held_back.extend(out.held);
                if !out.done.is_empty() {
                    waiting.extend(out.done);
                    since.get_or_insert_with(tokio::time::Instant::now);
                }
            }
            () = due, if source.is_some() => {
                if let Some(src) = source {
                    deletes.push(tokio::spawn(delete(src.clone(), std::mem::take(&mut waiting))));
                }
                since = None;
            }
        }
    }
    for d in deletes {
        if let Err(e) = d.await {
            tracing::error!(error = %Chain(&e), "an early delete's task failed");
        }
    }
    batch
}

/// Runs one group's messages in order; on a failure, that message and the
/// rest of the group go back.
async fn run_group<F, Fut>(group: Vec<SqsMessage>, handle: &F) -> GroupResult
where
    F: Fn(SqsMessage) -> Fut,
    Fut: Future<Output = Outcome>,
{
    let mut out = GroupResult::default();
    let mut rest = group.into_iter();
    while let Some(m) = rest.next() {
        let id = m.message_id.clone().unwrap_or_default();
        let receipt = m.receipt_handle.clone();
        match handle(m).await {
            Outcome::Done => out.done.extend(receipt),
            Outcome::Poison => out.failed.push(id),
            Outcome::Retry => {
                out.failed.push(id);
                for m in rest.by_ref() {
                    out.failed.push(m.message_id.unwrap_or_default());
                    out.held.extend(m.receipt_handle);
                }
            }
        }
    }
    out
}

/// Deletes messages in chunks of ten. A failure is only logged: Lambda
/// deletes every message not reported failed when the batch returns.
async fn delete(src: Source, done: Vec<String>) {
    for chunk in done.chunks(10) {
        let entries: Vec<_> = chunk
            .iter()
            .enumerate()
            .filter_map(|(i, receipt)| {
                DeleteMessageBatchRequestEntry::builder()
                    .id(i.to_string())
                    .receipt_handle(receipt)
                    .build()
                    .ok()
            })
            .collect();
        let res = src
            .sqs
            .delete_message_batch()
            .queue_url(&src.queue_url)
            .set_entries(Some(entries))
            .send()
            .await;
        match res {
            Err(e) => {
                tracing::warn!(error = %aws_smithy_types::error::display::DisplayErrorContext(e), "deleting finished messages early failed");
            }
            Ok(out) if !out.failed.is_empty() => {
                tracing::warn!(
                    failed = out.failed.len(),
                    "some finished messages were not deleted early"
                );
            }
            Ok(_) => {}
        }
    }
}

/// Whether SQS says this is the message's first receive. The count is
/// approximate and may be missing: callers treat "not first" as the safe
/// side (read what an earlier receive may have left).
pub(crate) fn first_receive(m: &SqsMessage) -> bool {
    m.attributes
        .get("ApproximateReceiveCount")
        .is_some_and(|c| c == "1")
}

/// How long a message waited in its queue since it was sent (its
/// `SentTimestamp`; zero when not said).
pub(crate) fn waited(m: &SqsMessage) -> std::time::Duration {
    let sent = m
        .attributes
        .get("SentTimestamp")
        .and_then(|t| t.parse::<i64>().ok());
    let now = hooklane_core::record::ms(time::OffsetDateTime::now_utc());
    sent.map_or(std::time::Duration::ZERO, |sent| {
        std::time::Duration::from_millis(now.saturating_sub(sent).max(0) as u64)
    })
}

/// The body of a message that does not parse, as it is kept in a
/// dead-letter queue (which takes no empty body).
pub(crate) fn unreadable_body(m: &SqsMessage) -> &str {
    m.body
        .as_deref()
        .filter(|b| !b.is_empty())
        .unwrap_or("(empty)")
}

/// Makes held-back messages visible again at once (they would otherwise
/// wait out the queue's whole visibility timeout after the failed message
/// ahead of them is done).
pub async fn release(sqs: &aws_sdk_sqs::Client, queue_url: &str, handles: Vec<String>) {
    for chunk in handles.chunks(10) {
        let entries: Vec<_> = chunk
            .iter()
            .enumerate()
            .filter_map(|(i, h)| {
                ChangeMessageVisibilityBatchRequestEntry::builder()
                    .id(i.to_string())
                    .receipt_handle(h)
                    .visibility_timeout(0)
                    .build()
                    .ok()
            })
            .collect();
        let res = sqs
            .change_message_visibility_batch()
            .queue_url(queue_url)
            .set_entries(Some(entries))
            .send()
            .await;
        if let Err(e) = res {
            tracing::warn!(error = %aws_smithy_types::error::display::DisplayErrorContext(e), "releasing held-back messages failed");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(id: &str, group: &str) -> SqsMessage {
        let mut m = SqsMessage::default();
        m.message_id = Some(id.into());
        m.attributes.insert("MessageGroupId".into(), group.into());
        m
    }

    /// Runs a batch in which the message `id` comes to `outcome` and every
    /// other is done; the reported failures, sorted.
    async fn failed_when(records: Vec<SqsMessage>, id: &str, outcome: Outcome) -> Vec<String> {
        let resp = run_groups(
            records,
            |m| async move {
                if m.message_id.as_deref() == Some(id) {
                    outcome
                } else {
                    Outcome::Done
                }
            },
            None,
        )
        .await
        .response;
        let mut failed: Vec<String> = resp
            .batch_item_failures
            .into_iter()
            .map(|f| f.item_identifier)
            .collect();
        failed.sort();
        failed
    }

    #[tokio::test]
    async fn a_failure_fails_the_rest_of_its_group_only() {
        let records = vec![
            msg("a1", "A"),
            msg("b1", "B"),
            msg("a2", "A"),
            msg("b2", "B"),
            msg("a3", "A"),
        ];
        assert_eq!(
            failed_when(records, "a2", Outcome::Retry).await,
            ["a2", "a3"]
        );
    }

    #[tokio::test]
    async fn a_poison_record_fails_alone() {
        let records = vec![msg("a1", "A"), msg("a2", "A"), msg("a3", "A")];
        assert_eq!(failed_when(records, "a1", Outcome::Poison).await, ["a1"]);
    }

    #[tokio::test]
    async fn groups_run_concurrently_and_each_in_order() {
        use std::sync::{Arc, Mutex};
        let seen = Arc::new(Mutex::new(Vec::new()));
        let records = vec![msg("a1", "A"), msg("b1", "B"), msg("a2", "A")];
        let s = seen.clone();
        run_groups(
            records,
            move |m| {
                let s = s.clone();
                async move {
                    if m.message_id.as_deref() == Some("a1") {
                        // B's message finishes while A's first is still running.
                        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    }
                    s.lock().unwrap().push(m.message_id.unwrap_or_default());
                    Outcome::Done
                }
            },
            None,
        )
        .await;
        assert_eq!(*seen.lock().unwrap(), ["b1", "a1", "a2"]);
    }
}
