//! The Lambda handlers, as plain async functions over a typed `SqsEvent`
//! (the function crates wrap them in `service_fn`; tests call them
//! directly). One batch can mix message groups: groups run concurrently,
//! each group's messages in order; when a message fails, it and the rest of
//! its own group are reported as batch-item failures, and no other group's.

pub mod delivery;
pub mod fanout;

use std::future::Future;

use aws_lambda_events::event::sqs::{BatchItemFailure, SqsBatchResponse, SqsMessage};
use futures::future::join_all;

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
fn group_of(m: &SqsMessage) -> String {
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

/// Runs `handle` over every record: groups concurrently, each in order.
pub async fn run_groups<F, Fut>(records: Vec<SqsMessage>, handle: F) -> Batch
where
    F: Fn(SqsMessage) -> Fut,
    Fut: Future<Output = Outcome>,
{
    let handle = &handle;
    let per_group = groups(records).into_iter().map(|group| async move {
        let (mut failed, mut held) = (Vec::new(), Vec::new());
        let mut rest = group.into_iter();
        while let Some(m) = rest.next() {
            let id = m.message_id.clone().unwrap_or_default();
            match handle(m).await {
                Outcome::Done => {}
                Outcome::Poison => failed.push(id),
                Outcome::Retry => {
                    failed.push(id);
                    for m in rest.by_ref() {
                        failed.push(m.message_id.unwrap_or_default());
                        held.extend(m.receipt_handle);
                    }
                }
            }
        }
        (failed, held)
    });
    let mut batch = Batch {
        response: SqsBatchResponse::default(),
        held_back: Vec::new(),
    };
    for (failed, held) in join_all(per_group).await {
        for id in failed {
            let mut f = BatchItemFailure::default();
            f.item_identifier = id;
            batch.response.batch_item_failures.push(f);
        }
        batch.held_back.extend(held);
    }
    batch
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
                aws_sdk_sqs::types::ChangeMessageVisibilityBatchRequestEntry::builder()
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

    #[tokio::test]
    async fn a_failure_fails_the_rest_of_its_group_only() {
        let records = vec![
            msg("a1", "A"),
            msg("b1", "B"),
            msg("a2", "A"),
            msg("b2", "B"),
            msg("a3", "A"),
        ];
        let resp = run_groups(records, |m| async move {
            if m.message_id.as_deref() == Some("a2") {
                Outcome::Retry
            } else {
                Outcome::Done
            }
        })
        .await
        .response;
        let mut failed: Vec<String> = resp
            .batch_item_failures
            .into_iter()
            .map(|f| f.item_identifier)
            .collect();
        failed.sort();
        assert_eq!(failed, ["a2", "a3"]);
    }

    #[tokio::test]
    async fn a_poison_record_fails_alone() {
        let records = vec![msg("a1", "A"), msg("a2", "A"), msg("a3", "A")];
        let resp = run_groups(records, |m| async move {
            if m.message_id.as_deref() == Some("a1") {
                Outcome::Poison
            } else {
                Outcome::Done
            }
        })
        .await
        .response;
        let failed: Vec<String> = resp
            .batch_item_failures
            .into_iter()
            .map(|f| f.item_identifier)
            .collect();
        assert_eq!(failed, ["a1"]);
    }

    #[tokio::test]
    async fn groups_run_concurrently_and_each_in_order() {
        use std::sync::{Arc, Mutex};
        let seen = Arc::new(Mutex::new(Vec::new()));
        let records = vec![msg("a1", "A"), msg("b1", "B"), msg("a2", "A")];
        let s = seen.clone();
        run_groups(records, move |m| {
            let s = s.clone();
            async move {
                if m.message_id.as_deref() == Some("a1") {
                    // B's message finishes while A's first is still running.
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                }
                s.lock().unwrap().push(m.message_id.unwrap_or_default());
                Outcome::Done
            }
        })
        .await;
        assert_eq!(*seen.lock().unwrap(), ["b1", "a1", "a2"]);
    }
}
