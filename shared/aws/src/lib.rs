//! hooklane on AWS: the DynamoDB and SQS FIFO adapters of every port, the
//! Lambda handlers (fan-out, delivery) the function crates wrap, the
//! dead-letter queue operations behind `hooklane dlq`, the production
//! wiring ([`wiring`]), and a queue poller that stands in for Lambda's SQS
//! event source mappings on one machine ([`queue_poller`], `hooklane serve
//! --backend aws`).
//!
//! Flow on AWS: the API archives an event in DynamoDB and sends it to the
//! ingest FIFO queue (group = tenant, so a tenant's events fan out in
//! order). The fan-out handler pages through matching subscriptions and
//! sends one message per subscription to the delivery FIFO queue (group =
//! subscription id, deduplication id = hash(event, subscription)). The
//! delivery handler runs each group's messages in order, groups
//! concurrently; it reads the subscription with a consistent read before
//! every attempt, backs off by message visibility, and parks to the FIFO
//! dead-letter queue with attributes that say why.

pub mod call_metrics;
pub mod calls;
pub mod capacity;
pub mod env;
mod event_source;
pub mod handlers;
mod messages;
pub mod queue_poller;
mod store;
pub mod wiring;

pub use env::{AuthMode, AwsEnv, LocalPoll};
pub use store::dead_letter_queue as dlq;
pub use store::{AwsStore, Pool, Resources, DUE};

use aws_sdk_dynamodb::types::AttributeValue;

/// The names of the AWS resources hooklane uses and the settings that go
/// with them: from the environment ([`AwsEnv::settings`]: `HOOKLANE_TABLE`,
/// `HOOKLANE_INGEST_QUEUE_URL`, `HOOKLANE_DELIVERY_QUEUE_URL`,
/// `HOOKLANE_DLQ_URL`, `HOOKLANE_INGEST_DLQ_URL`, and `HOOKLANE_SLOW_QUEUE_URL` for the slow pool, when
/// there is one), or made by the process ([`Resources::create`]).
#[derive(Debug, Clone, Default)]
pub struct Settings {
    /// The DynamoDB table (single-table design).
    pub table: String,
    /// The ingest FIFO queue URL.
    pub ingest_queue_url: String,
    /// The delivery FIFO queue URL.
    pub delivery_queue_url: String,
    /// The dead-letter FIFO queue URL.
    pub dlq_url: String,
    /// The ingest queue's dead-letter FIFO queue URL
    /// (`HOOKLANE_INGEST_DLQ_URL`): an ingest message that does not parse
    /// is moved there at once with the reason (none: it reaches that queue
    /// only by the ingest queue's redrive policy, without one).
    pub ingest_dlq_url: Option<String>,
    /// The slow pool's FIFO queue URL: lanes whose receivers do not answer
    /// in time are delivered from there (none: no slow pool).
    pub slow_queue_url: Option<String>,
    /// Whether the API function fans events out itself rather than through
    /// the ingest queue (`HOOKLANE_FAN_OUT_IN_API`, on unless `false`; see
    /// the store's `fan_out_path`).
    pub fan_out_in_api: bool,
    /// How long a process runs before it writes a wide tenant's type index
    /// (see the store's `type_index`): long enough for registrations by
    /// the version before, which write no entries, to have ended. Zero for
    /// `serve --backend aws --create-resources` (one process, no older
    /// version beside it).
    pub type_index_settle: std::time::Duration,
    /// The SNS topic told of suspensions (`HOOKLANE_OPERATOR_TOPIC_ARN`).
    pub operator_topic_arn: Option<String>,
    /// Whether every AWS call is counted (`HOOKLANE_COUNT_AWS_CALLS`).
    pub count_calls: bool,
    /// Which queues the stand-in polls (`HOOKLANE_LOCAL_POLL`).
    pub local_poll: LocalPoll,
    /// The CloudWatch namespace of the functions' EMF lines
    /// (`HOOKLANE_METRICS_NAMESPACE`; none: no lines).
    pub metrics_namespace: Option<String>,
    /// Whether pending deliveries are counted per tenant beside the queues
    /// (`HOOKLANE_TENANT_BACKLOG`; see the store's `backlog_counts`).
    pub tenant_backlog: bool,
}

/// A deployed process's wait before it writes a type index: a stack
/// update replaces every function's code within it, and the old
/// instances finish their invocations (at most the API's 29 s integration
/// timeout) well within it.
pub(crate) const TYPE_INDEX_SETTLE: std::time::Duration = std::time::Duration::from_secs(600);

/// Builds the SDK configuration once (region, credentials and, for a local
/// AWS-compatible server, `AWS_ENDPOINT_URL` from the environment).
pub async fn sdk_config() -> aws_config::SdkConfig {
    aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await
}

/// A string attribute.
pub(crate) fn string_attr(v: impl Into<String>) -> AttributeValue {
    AttributeValue::S(v.into())
}

/// A number attribute.
pub(crate) fn number_attr(v: impl ToString) -> AttributeValue {
    AttributeValue::N(v.to_string())
}
