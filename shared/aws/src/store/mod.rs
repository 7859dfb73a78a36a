//! The AWS adapter of every port: one DynamoDB table (single-table design)
//! and the SQS FIFO queues.
//!
//! Keys (`pk`, `sk`):
//! - subscription: `T#{tenant}`, `S#{id}` (tombstone: `deleted_at`); `gsi2`
//!   while suspended (`SUSPENDED`, since when, tenant, id: the status's list)
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
//! - tenant key: `K#{hash of its text}`, `key` (what a request reads) and
//!   `T#{tenant}`, `K#{id}` (the list); the portal key: `C#portal`, `key`
//!   ([`access`])
//! - a tenant's fan-out path: `T#{tenant}`, `Q#fan-out` ([`fan_out_path`])
//! - backfill job: `B#{subscription}`, `B` ([`backfill`])
//! - type index entry: `F#{tenant}#{filter}`, `S#{id}`; its marker
//!   `F#{tenant}`, `complete` ([`type_index`])
//! - a tenant's count of the deliveries queued in one minute (only with
//!   `HOOKLANE_TENANT_BACKLOG`): `N#{shard}`, `{tenant}#{minute}` (TTL;
//!   [`backlog_counts`])
//!
//! Every key is built in [`items::keys`], and every item is mapped to and
//! from the core's records in [`items`].
//!
//! TTL deletion can be days late, so reads drop expired items in code.

pub mod access;
pub mod attempts;
pub mod backfill;
mod backlog_counts;
mod backlog_tally;
mod batches;
mod conflicts;
pub mod dead_letter_queue;
pub mod dead_letters;
mod deliveries;
pub mod events;
mod fan_out_path;
mod first_attempt;
mod health;
/// The store's bottom: keys, attribute reads and item mapping (the call
/// counts read its key names to tell the overview's reads apart).
pub(crate) mod items;
mod lane_change;
mod lane_flags;
mod overview;
mod placements;
pub mod rates;
mod received;
pub mod records;
mod resources;
mod sending;
mod slow_lanes;
mod slow_pool;
mod spill;
pub mod subs;
mod subscriptions;
pub mod suspensions;
mod table;
mod tenant_lanes;
mod tenant_share;
mod type_index;

pub(crate) use backlog_tally::Tally;
mod type_index_known;
pub mod views;

use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;
use hooklane_core::ports::StoreResult;

use crate::Settings;

pub(crate) use items::errors::{backend, cancelled_by_condition, is_condition_failed};

pub use received::Received;
pub use resources::Resources;
pub use slow_pool::{Handover, DUE};
pub use table::Table;

pub(crate) use items::attrs::{
    corrupt, get_n, get_s, key_of, padded, parked_seq, readable, readable_keyed, time_seq,
};

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

/// The AWS adapter: clients built once, cheap to clone. Every port but the
/// lane queue is an object of its own over its [`Table`]
/// ([`AwsStore::store_ports`]); it is the lane queue, reading and noting
/// subscription items through the subscription store's caches, and reads
/// its table's fields through it (`Deref`).
#[derive(Clone, Debug)]
pub struct AwsStore {
    pub(crate) table: Table,
    /// The subscription store, whose caches of what subscription items
    /// say (lane flags, placements, lane counts) the lanes read.
    pub(crate) subs: subs::AwsSubscriptions,
    /// The event archive, a port of its own (sharing the tenants seen
    /// moved to the ingest queue with its clones).
    pub(crate) archive: events::AwsArchive,
    /// First attempts begun and not finished, with their starts (shared by
    /// clones).
    pub(crate) first_starts: std::sync::Arc<first_attempt::FirstStarts>,
}

impl std::ops::Deref for AwsStore {
    type Target = Table;

    fn deref(&self) -> &Table {
        &self.table
    }
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
        let count = settings.count_calls;
        Self::build(sdk, settings, count)
    }

    /// An adapter whose every AWS call is counted (see [`crate::calls`]).
    pub fn counting(sdk: &aws_config::SdkConfig, settings: Settings) -> Self {
        Self::build(sdk, settings, true)
    }

    fn build(sdk: &aws_config::SdkConfig, settings: Settings, count: bool) -> Self {
        let mut ddb = ddb_config(sdk);
        let mut sqs = aws_sdk_sqs::config::Builder::from(sdk);
        if count {
            crate::calls::switch_on();
            ddb = ddb.interceptor(crate::calls::CountCalls);
            sqs = sqs.interceptor(crate::calls::CountCalls);
        }
        Self::over(Table {
            ddb: aws_sdk_dynamodb::Client::from_conf(ddb.build()),
            sqs: aws_sdk_sqs::Client::from_conf(sqs.build()),
            settings: std::sync::Arc::new(settings),
            pool: Pool::Main,
            tally: Default::default(),
        })
    }

    fn over(table: Table) -> Self {
        Self {
            archive: events::AwsArchive {
                table: table.clone(),
                moved: Default::default(),
            },
            subs: subs::AwsSubscriptions::over(table.clone()),
            table,
            first_starts: Default::default(),
        }
    }

    /// An adapter with a given SQS client (tests substitute a mocked one
    /// where the local server lacks an operation).
    pub fn with_clients(
        sdk: aws_config::SdkConfig,
        sqs: aws_sdk_sqs::Client,
        settings: Settings,
    ) -> Self {
        Self::over(Table {
            ddb: aws_sdk_dynamodb::Client::from_conf(ddb_config(&sdk).build()),
            sqs,
            settings: std::sync::Arc::new(settings),
            pool: Pool::Main,
            tally: Default::default(),
        })
    }

    /// The same adapter over another DynamoDB client (tests observe the
    /// requests the adapter sends through one with an interceptor).
    pub fn with_dynamodb(self, ddb: aws_sdk_dynamodb::Client) -> Self {
        self.retable(|t| t.ddb = ddb.clone())
    }

    /// The same adapter, running the slow pool.
    pub fn in_slow_pool(self) -> Self {
        self.retable(|t| t.pool = Pool::Slow)
    }

    /// The same adapter with `change` made to its table and to the tables
    /// of the port objects it holds (their caches stay shared).
    fn retable(mut self, change: impl Fn(&mut Table)) -> Self {
        change(&mut self.table);
        change(&mut self.subs.table);
        change(&mut self.archive.table);
        self
    }

    /// The subscription store, a port of its own (sharing its caches with
    /// this adapter's lanes).
    pub fn subscriptions(&self) -> &subs::AwsSubscriptions {
        &self.subs
    }

    /// The event archive, a port of its own.
    pub fn archive(&self) -> &events::AwsArchive {
        &self.archive
    }

    /// The delivery records, read and written by the lane queue and the
    /// views.
    pub fn records(&self) -> records::AwsRecords {
        records::AwsRecords(self.table.clone())
    }

    /// The delivery views, a port of their own over the records, the
    /// archive and this adapter's subscriptions.
    pub fn views(&self) -> views::AwsViews {
        views::AwsViews {
            records: self.records(),
            archive: self.archive.clone(),
            subscriptions: std::sync::Arc::new(self.subs.clone()),
        }
    }

    /// The dead letters, a port of its own over the table.
    pub fn dead_letters(&self) -> dead_letters::AwsDeadLetters {
        dead_letters::AwsDeadLetters(self.table.clone())
    }

    /// The attempt log, a port of its own over the table.
    pub fn attempt_log(&self) -> attempts::AwsAttemptLog {
        attempts::AwsAttemptLog(self.table.clone())
    }

    /// Suspension and re-enabling, a port of its own over the table.
    pub fn suspensions(&self) -> suspensions::AwsSuspensions {
        suspensions::AwsSuspensions(self.table.clone())
    }
}

impl hooklane_core::engine::Store for AwsStore {
    /// The ports split out of the adapter are objects of their own over
    /// its table; the adapter is the others.
    fn store_ports(self) -> hooklane_core::engine::StorePorts {
        use std::sync::Arc;
        let views = self.views();
        hooklane_core::engine::StorePorts {
            suspensions: Arc::new(self.suspensions()),
            attempts: Arc::new(self.attempt_log()),
            rates: Arc::new(rates::AwsRateLimits(self.table.clone())),
            access: Arc::new(access::AwsAccess(self.table.clone())),
            events: Arc::new(self.archive.clone()),
            dead_letters: Arc::new(self.dead_letters()),
            backfills: Arc::new(backfill::AwsBackfills(self.table.clone())),
            subscriptions: views.subscriptions.clone(),
            views: Arc::new(views),
            lanes: Arc::new(self),
        }
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
