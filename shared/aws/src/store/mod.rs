//! The AWS adapter of every port: one DynamoDB table (single-table design)
//! and the SQS FIFO queues.
//!
//! Keys (`pk`, `sk`):
//! - subscription: `T#{tenant}`, `S#{id}` (tombstone: `deleted_at`)
//! - event: `T#{tenant}`, `E#{id}` (TTL `expires_at`, 14 days)
//! - delivery record: `D#{subscription}`, `E#{event}`; `gsi1` by event
//!   (`V#{tenant}#{event}`) once retried or ended otherwise than delivered
//!   at its first attempt, `gsi2` for parked ones (`P#{tenant}`, parked
//!   order); created at the first attempt, so the attempt number is exact
//! - attempt: `A#{tenant}#{subscription}`, zero-padded sequence; a first
//!   attempt's at a key its record names, its outcome when it delivered
//!   ([`first_attempt`])
//! - spilled delivery: `L#{subscription}`, zero-padded sequence
//! - rate limit: `R#{subscription}`, `rate` (only rate-limited ones; TTL)
//! - a tenant's lane counter and attempt slots: `T#{tenant}`, `Q#lanes`
//!   and `Q#slots#{n}` ([`tenant_share`])
//!
//! TTL deletion can be days late, so reads drop expired items in code.

mod attempts;
mod backfill;
mod conflicts;
mod dead_letters;
mod deliveries;
mod events;
mod fan_out_path;
mod first_attempt;
mod lane_change;
mod lane_flags;
mod placements;
mod rates;
mod records;
mod resources;
mod slow_pool;
mod spill;
mod subscriptions;
mod tenant_share;
mod type_index;
mod views;

use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;
use hooklane_core::ports::{StoreError, StoreResult};

use crate::Settings;

/// How often a `BatchGetItem` asks again for keys left unprocessed.
const BATCH_GET_RETRIES: u32 = 5;

pub use fan_out_path::fan_out_in_api_from_env;
pub use resources::Resources;
pub use slow_pool::Handover;

/// How long archived items live (TTL), in seconds.
pub(crate) const RETENTION_SECS: i64 = 14 * 24 * 3600;

/// A DynamoDB item.
pub(crate) type Item = HashMap<String, AttributeValue>;

/// The adapter's DynamoDB client settings: the shared ones, plus retries
/// of writes a transaction got in the way of ([`conflicts`]).
fn ddb_config(sdk: &aws_config::SdkConfig) -> aws_sdk_dynamodb::config::Builder {
    aws_sdk_dynamodb::config::Builder::from(sdk)
        .retry_classifier(conflicts::RetryTransactionConflicts)
}

/// The AWS adapter: clients built once, cheap to clone.
#[derive(Clone, Debug)]
pub struct AwsStore {
    pub(crate) ddb: aws_sdk_dynamodb::Client,
    pub(crate) sqs: aws_sdk_sqs::Client,
    pub(crate) settings: Settings,
    /// Lane spill flags as last read (shared by clones).
    pub(crate) lane_flags: std::sync::Arc<lane_flags::LaneFlags>,
    /// Lane placements as last read (shared by clones).
    pub(crate) placements: std::sync::Arc<placements::Placements>,
    /// Tenants' lane counts as last read (shared by clones).
    pub(crate) tenant_lanes: std::sync::Arc<tenant_share::TenantLanes>,
    /// Tenants seen moved to the ingest queue (shared by clones).
    pub(crate) moved: std::sync::Arc<fan_out_path::MovedTenants>,
    /// Tenants whose fan-out reads through the type index (shared by
    /// clones).
    pub(crate) type_indexes: std::sync::Arc<type_index::TypeIndexes>,
    /// First attempts begun and not finished, with their starts (shared by
    /// clones).
    pub(crate) first_starts: std::sync::Arc<first_attempt::FirstStarts>,
    /// The delivery pool this process runs.
    pub(crate) pool: Pool,
}

/// The pool of the delivery function a process runs: the main one, or
/// the slow one that lanes whose receivers do not answer in time move to
/// ([`slow_pool`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Pool {
    /// The delivery queue.
    #[default]
    Main,
    /// The slow pool's queue.
    Slow,
}

impl AwsStore {
    /// An adapter over these clients and resources.
    pub fn new(sdk: &aws_config::SdkConfig, settings: Settings) -> Self {
        Self::build(sdk, settings, crate::calls::enabled())
    }

    /// An adapter whose every AWS call is counted (see [`crate::calls`]).
    pub fn counting(sdk: &aws_config::SdkConfig, settings: Settings) -> Self {
        Self::build(sdk, settings, true)
    }

    fn build(sdk: &aws_config::SdkConfig, settings: Settings, count: bool) -> Self {
        let mut ddb = ddb_config(sdk);
        let mut sqs = aws_sdk_sqs::config::Builder::from(sdk);
        if count {
            ddb = ddb.interceptor(crate::calls::CountCalls);
            sqs = sqs.interceptor(crate::calls::CountCalls);
        }
        Self {
            ddb: aws_sdk_dynamodb::Client::from_conf(ddb.build()),
            sqs: aws_sdk_sqs::Client::from_conf(sqs.build()),
            settings,
            lane_flags: Default::default(),
            placements: Default::default(),
            tenant_lanes: Default::default(),
            moved: Default::default(),
            type_indexes: Default::default(),
            first_starts: Default::default(),
            pool: Pool::Main,
        }
    }

    /// An adapter with a given SQS client (tests substitute a mocked one
    /// where the local server lacks an operation).
    pub fn with_clients(
        sdk: aws_config::SdkConfig,
        sqs: aws_sdk_sqs::Client,
        settings: Settings,
    ) -> Self {
        Self {
            ddb: aws_sdk_dynamodb::Client::from_conf(ddb_config(&sdk).build()),
            sqs,
            settings,
            lane_flags: Default::default(),
            placements: Default::default(),
            tenant_lanes: Default::default(),
            moved: Default::default(),
            type_indexes: Default::default(),
            first_starts: Default::default(),
            pool: Pool::Main,
        }
    }

    /// Reads one item with a strongly consistent `GetItem` on the base
    /// table (indexes are never consistent).
    pub(crate) async fn get_consistent(&self, pk: String, sk: String) -> StoreResult<Option<Item>> {
        let resp = self
            .ddb
            .get_item()
            .table_name(&self.settings.table)
            .key("pk", crate::string_attr(pk))
            .key("sk", crate::string_attr(sk))
            .consistent_read(true)
            .send()
            .await
            .map_err(backend)?;
        Ok(resp.item)
    }

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
                    return Err(StoreError::Backend(format!(
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

    /// The same adapter over another DynamoDB client (tests observe the
    /// requests the adapter sends through one with an interceptor).
    pub fn with_dynamodb(mut self, ddb: aws_sdk_dynamodb::Client) -> Self {
        self.ddb = ddb;
        self
    }

    /// The same adapter, running the slow pool.
    pub fn in_slow_pool(mut self) -> Self {
        self.pool = Pool::Slow;
        self
    }

    /// The pool this adapter runs.
    pub fn pool(&self) -> Pool {
        self.pool
    }

    /// The queue the pool this adapter runs consumes.
    pub fn own_queue_url(&self) -> &str {
        match (self.pool, &self.settings.slow_queue_url) {
            (Pool::Slow, Some(url)) => url,
            _ => &self.settings.delivery_queue_url,
        }
    }

    /// The resource names in use.
    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// The SQS client.
    pub fn sqs(&self) -> &aws_sdk_sqs::Client {
        &self.sqs
    }
}

/// Runs `query` page by page and keeps what `pick` makes of each item,
/// until `limit` are kept or the pages end: the one paging loop of the
/// adapter's list reads.
pub(crate) async fn query_items<T>(
    query: aws_sdk_dynamodb::operation::query::builders::QueryFluentBuilder,
    limit: usize,
    mut pick: impl FnMut(Item) -> StoreResult<Option<T>>,
) -> StoreResult<Vec<T>> {
    let mut out = Vec::new();
    let mut start: Option<Item> = None;
    loop {
        let resp = query
            .clone()
            .set_exclusive_start_key(start.take())
            .send()
            .await
            .map_err(backend)?;
        for item in resp.items.unwrap_or_default() {
            out.extend(pick(item)?);
            if out.len() >= limit {
                return Ok(out);
            }
        }
        match resp.last_evaluated_key {
            Some(k) if !k.is_empty() => start = Some(k),
            _ => return Ok(out),
        }
    }
}

/// Maps an SDK error to a storage error, keeping the whole cause chain.
pub(crate) fn backend<E>(e: E) -> StoreError
where
    E: std::error::Error + Send + Sync + 'static,
{
    StoreError::Backend(format!(
        "{}",
        aws_smithy_types::error::display::DisplayErrorContext(e)
    ))
}

/// Whether an SDK error is a failed `ConditionExpression`.
pub(crate) fn is_condition_failed<E, R>(e: &aws_sdk_dynamodb::error::SdkError<E, R>) -> bool
where
    E: aws_sdk_dynamodb::error::ProvideErrorMetadata,
{
    e.as_service_error()
        .and_then(|s| s.code())
        .is_some_and(|c| c == "ConditionalCheckFailedException")
}

/// The outcome of a conditional write: `true` when it took effect,
/// `false` when its `ConditionExpression` did not hold.
pub(crate) fn took_effect<O, E, R>(
    res: Result<O, aws_sdk_dynamodb::error::SdkError<E, R>>,
) -> StoreResult<bool>
where
    E: aws_sdk_dynamodb::error::ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    R: std::fmt::Debug + Send + Sync + 'static,
{
    match res {
        Ok(_) => Ok(true),
        Err(e) if is_condition_failed(&e) => Ok(false),
        Err(e) => Err(backend(e)),
    }
}

/// A token that makes a conditional write idempotent. The write stores it,
/// and its condition also holds when the item already carries it. The SDK
/// sends a call again when its answer was lost (a connection reset after
/// the write landed, say), with the same token: the retry then finds its
/// own write and succeeds, where it would otherwise fail its condition and
/// report the write as refused.
pub(crate) fn write_token() -> String {
    ulid::Ulid::generate().to_string()
}

/// A zero-padded number, so string sort keys sort numerically.
pub(crate) fn padded(n: i64) -> String {
    format!("{n:020}")
}

/// A sequence number that orders by time: milliseconds × 1000 plus a
/// random part, unique enough within one key.
pub(crate) fn time_seq(now: time::OffsetDateTime) -> i64 {
    hooklane_core::record::ms(now) * 1000 + (rand_part() % 1000)
}

fn rand_part() -> i64 {
    use std::sync::atomic::{AtomicI64, Ordering};
    static COUNTER: AtomicI64 = AtomicI64::new(0);
    COUNTER.fetch_add(1, Ordering::Relaxed)
}

/// Reads a string attribute.
pub(crate) fn get_s<'a>(item: &'a Item, key: &str) -> Option<&'a str> {
    item.get(key)
        .and_then(|v| v.as_s().ok())
        .map(String::as_str)
}

/// Reads a number attribute.
pub(crate) fn get_n(item: &Item, key: &str) -> Option<i64> {
    item.get(key)
        .and_then(|v| v.as_n().ok())
        .and_then(|n| n.parse().ok())
}

/// Reads a number attribute that every item of its kind has.
pub(crate) fn required_n(item: &Item, key: &str) -> StoreResult<i64> {
    get_n(item, key).ok_or_else(|| corrupt(key))
}

/// A stored item that does not parse back.
pub(crate) fn corrupt(what: &str) -> StoreError {
    StoreError::Unreadable(format!("stored {what} does not parse"))
}

/// An item's key, for reports.
pub(crate) fn key_of(item: &Item) -> String {
    format!(
        "{}/{}",
        get_s(item, "pk").unwrap_or("(no pk)"),
        get_s(item, "sk").unwrap_or("(no sk)")
    )
}

/// Parses one item of a list read: an item that does not parse is kept,
/// reported with its key ([`hooklane_core::record::unreadable`]) and left
/// out (`None`), so one bad record never fails a list.
pub(crate) fn readable<T>(
    kind: &str,
    item: &Item,
    parsed: StoreResult<T>,
) -> StoreResult<Option<T>> {
    readable_keyed(kind, &key_of(item), parsed)
}

/// [`readable`] for an item already consumed by its parse, by its key.
pub(crate) fn readable_keyed<T>(
    kind: &str,
    key: &str,
    parsed: StoreResult<T>,
) -> StoreResult<Option<T>> {
    match parsed {
        Ok(v) => Ok(Some(v)),
        Err(StoreError::Unreadable(why)) => {
            hooklane_core::record::unreadable(kind, key, &why);
            Ok(None)
        }
        Err(e) => Err(e),
    }
}
