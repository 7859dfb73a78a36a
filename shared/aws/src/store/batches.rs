//! Many items at once: `BatchGetItem` in chunks of 100 and
//! `BatchWriteItem` in chunks of 25, each asking again, a few times and
//! after a short pause, for what DynamoDB leaves unprocessed (it does when
//! a partition is throttled), and failing when some is still left; and
//! `TransactWriteItems`, tried again when a concurrent transaction on the
//! same items, or throttling, cancelled it.

use aws_sdk_dynamodb::types::{DeleteRequest, PutRequest, WriteRequest};
use hooklane_core::ports::{StoreError, StoreResult};

use std::time::Duration;

use aws_sdk_dynamodb::types::TransactWriteItem;
use time::OffsetDateTime;

use super::{backend, Item, Table};

/// How often a `BatchGetItem` asks again for keys left unprocessed.
const BATCH_GET_RETRIES: u32 = 5;

/// How often a `BatchWriteItem` chunk is sent, at most.
const BATCH_TRIES: u32 = 6;

/// Tries of a transaction that a concurrent one on the same items
/// cancelled (two fan-outs spilling at once, say), before the caller
/// gives up (its message then comes back).
const CONFLICT_TRIES: u32 = 8;

impl Table {
    /// Several items by key (`pk`, `sk`), strongly consistent when
    /// `consistent`, in `BatchGetItem` calls of 100, asking again for the
    /// keys DynamoDB left unprocessed; items that do not exist are absent.
    pub(crate) async fn get_many(
        &self,
        keys: Vec<(String, String)>,
        consistent: bool,
    ) -> StoreResult<Vec<Item>> {
        use aws_sdk_dynamodb::types::KeysAndAttributes;
        let mut found = Vec::new();
        for chunk in keys.chunks(100) {
            let mut wanted: Vec<Item> = chunk
                .iter()
                .map(|(pk, sk)| {
                    Item::from([
                        ("pk".to_owned(), crate::string_attr(pk)),
                        ("sk".to_owned(), crate::string_attr(sk)),
                    ])
                })
                .collect();
            for round in 0..=BATCH_GET_RETRIES {
                if wanted.is_empty() {
                    break;
                }
                if round == BATCH_GET_RETRIES {
                    // Throttled partitions: nothing wrong, try later.
                    return Err(StoreError::unavailable(format!(
                        "BatchGetItem left {} keys unprocessed",
                        wanted.len()
                    )));
                }
                let ask = KeysAndAttributes::builder()
                    .set_keys(Some(std::mem::take(&mut wanted)))
                    .consistent_read(consistent)
                    .build()
                    .map_err(backend)?;
                let resp = self
                    .ddb
                    .batch_get_item()
                    .request_items(&self.settings.table, ask)
                    .send()
                    .await
                    .map_err(backend)?;
                if let Some(mut items) = resp.responses {
                    found.extend(items.remove(&self.settings.table).unwrap_or_default());
                }
                if let Some(mut left) = resp.unprocessed_keys {
                    if let Some(k) = left.remove(&self.settings.table) {
                        wanted = k.keys;
                        tokio::time::sleep(std::time::Duration::from_millis(50 << round)).await;
                    }
                }
            }
        }
        Ok(found)
    }

    /// Writes in `BatchWriteItem` calls of 25, `at_once` calls at a time.
    pub(crate) async fn write_many(
        &self,
        writes: Vec<WriteRequest>,
        at_once: usize,
    ) -> StoreResult<()> {
        use futures::{StreamExt, TryStreamExt};
        let chunks: Vec<Vec<WriteRequest>> = writes.chunks(25).map(<[_]>::to_vec).collect();
        futures::stream::iter(chunks)
            .map(|c| self.write_all(c))
            .buffer_unordered(at_once)
            .try_collect::<Vec<()>>()
            .await
            .map(|_| ())
    }

    /// Writes in `BatchWriteItem` calls of 25, asking again for what
    /// DynamoDB left unprocessed.
    pub(crate) async fn write_all(&self, writes: Vec<WriteRequest>) -> StoreResult<()> {
        for chunk in writes.chunks(25) {
            let mut pending = chunk.to_vec();
            for _ in 0..BATCH_TRIES {
                if pending.is_empty() {
                    break;
                }
                let resp = self
                    .ddb
                    .batch_write_item()
                    .request_items(&self.settings.table, std::mem::take(&mut pending))
                    .send()
                    .await
                    .map_err(backend)?;
                if let Some(left) = resp
                    .unprocessed_items
                    .and_then(|mut u| u.remove(&self.settings.table))
                {
                    pending = left;
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                }
            }
            if !pending.is_empty() {
                // Throttled partitions; what was written is written again
                // by the caller's retry (puts and deletes, idempotent).
                return Err(StoreError::unavailable(format!(
                    "BatchWriteItem left {} items unwritten",
                    pending.len()
                )));
            }
        }
        Ok(())
    }
}

/// A put of `item` in a `BatchWriteItem`.
pub(crate) fn put(item: Item) -> StoreResult<WriteRequest> {
    Ok(WriteRequest::builder()
        .put_request(
            PutRequest::builder()
                .set_item(Some(item))
                .build()
                .map_err(backend)?,
        )
        .build())
}

/// A delete of the item at `key` in a `BatchWriteItem`.
pub(crate) fn delete(key: Item) -> StoreResult<WriteRequest> {
    Ok(WriteRequest::builder()
        .delete_request(
            DeleteRequest::builder()
                .set_key(Some(key))
                .build()
                .map_err(backend)?,
        )
        .build())
}

/// How a transaction ended.
pub(crate) enum Txn {
    /// Applied.
    Done,
    /// The condition of the action at this index did not hold.
    ConditionFailed(usize),
}

impl Table {
    /// Runs one transaction; tries again when a concurrent transaction on
    /// the same items, or throttling of one of them, cancelled it.
    pub(crate) async fn transact(&self, actions: Vec<TransactWriteItem>) -> StoreResult<Txn> {
        let mut tries = 0;
        loop {
            tries += 1;
            let res = self
                .ddb
                .transact_write_items()
                .set_transact_items(Some(actions.clone()))
                .send()
                .await;
            let Err(e) = res else {
                return Ok(Txn::Done);
            };
            let reasons: Vec<String> = match e.as_service_error() {
                Some(aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError::TransactionCanceledException(c)) => c
                    .cancellation_reasons()
                    .iter()
                    .map(|r| r.code().unwrap_or("None").to_owned())
                    .collect(),
                _ => return Err(backend(e)),
            };
            if let Some(i) = reasons.iter().position(|c| c == "ConditionalCheckFailed") {
                return Ok(Txn::ConditionFailed(i));
            }
            // A cancellation for throttling is not an error the SDK retries
            // (the call itself answered): it is tried again here, with a
            // longer pause than a conflict's.
            let throttled = reasons
                .iter()
                .any(|c| c == "ThrottlingError" || c == "ProvisionedThroughputExceeded");
            let conflict = reasons.iter().any(|c| c == "TransactionConflict");
            if !(conflict || throttled) {
                return Err(backend(e));
            }
            if tries >= CONFLICT_TRIES {
                // Cancelled whole each time: nothing was applied.
                return Err(StoreError::unavailable_from(
                    "a transaction was cancelled by throttling or conflicts every time",
                    e,
                ));
            }
            let jitter = u64::from(OffsetDateTime::now_utc().nanosecond() % 20);
            let pause = match throttled {
                true => (25u64 << tries).min(1_000),
                false => 10 * u64::from(tries),
            };
            tokio::time::sleep(Duration::from_millis(pause + jitter)).await;
        }
    }
}
