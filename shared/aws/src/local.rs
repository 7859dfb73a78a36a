//! Running the AWS path on one machine: `serve --backend aws` serves the
//! API over the AWS adapters and stands in for Lambda's SQS event source
//! mappings: it polls each queue (batches of up to 10), runs the same
//! handler the Lambda function runs, deletes what succeeded and leaves the
//! reported failures to their visibility timeout, as the real mapping does.
//! Pointed at any endpoint by `AWS_ENDPOINT_URL` (a local AWS-compatible
//! server in tests).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent, SqsMessage, SqsMessageAttribute};
use aws_sdk_sqs::types::{DeleteMessageBatchRequestEntry, Message, MessageSystemAttributeName};
use hooklane_core::config::Config;
use hooklane_core::engine::{Engine, Ports};
use hooklane_core::ports::{
    Dns, NoNotifier, Notifier, StoreResult, SystemClock, SystemDns, Wakeup,
};
use hooklane_core::sender::HttpSender;
use tokio::sync::Semaphore;
use tracing::{error, info};

use crate::handlers::{delivery, fanout};
use crate::{AwsStore, Settings};

/// Concurrent invocations per queue, like the mapping's
/// `ScalingConfig.MaximumConcurrency` (each holds up to 10 messages).
const MAX_INVOCATIONS: usize = 500;

/// The queue triggers the workers: nothing to wake.
struct QueueTriggered;

impl Wakeup for QueueTriggered {
    fn fan_out(&self) {}
    fn lanes(
        &self,
        _: &hooklane_core::domain::TenantId,
        _: &[hooklane_core::domain::SubscriptionId],
    ) {
    }
    fn backfill(&self) {}
}

/// Suspension notices to the stack's SNS topic
/// (`HOOKLANE_OPERATOR_TOPIC_ARN`).
struct SnsNotifier {
    sns: aws_sdk_sns::Client,
    topic: String,
}

#[async_trait::async_trait]
impl Notifier for SnsNotifier {
    async fn suspended(&self, notice: &serde_json::Value) -> StoreResult<()> {
        let subject = format!(
            "hooklane: subscription {} suspended",
            notice["subscription_id"].as_str().unwrap_or("?")
        );
        self.sns
            .publish()
            .topic_arn(&self.topic)
            .subject(subject.chars().take(100).collect::<String>())
            .message(serde_json::to_string_pretty(notice).map_err(crate::store::backend)?)
            .send()
            .await
            .map_err(crate::store::backend)?;
        Ok(())
    }
}

/// The SNS notifier when a topic is configured.
fn notifier(sdk: &aws_config::SdkConfig) -> Arc<dyn Notifier> {
    match std::env::var("HOOKLANE_OPERATOR_TOPIC_ARN")
        .ok()
        .filter(|t| !t.is_empty())
    {
        Some(topic) => Arc::new(SnsNotifier {
            sns: aws_sdk_sns::Client::new(sdk),
            topic,
        }),
        None => Arc::new(NoNotifier),
    }
}

/// The engine over the AWS adapters, with SNS notices when
/// `HOOKLANE_OPERATOR_TOPIC_ARN` names a topic.
pub fn engine(
    config: Config,
    store: &AwsStore,
    sdk: &aws_config::SdkConfig,
) -> anyhow::Result<Arc<Engine>> {
    let dns: Arc<dyn Dns> = Arc::new(SystemDns);
    let sender = HttpSender::new(config.egress, config.attempt_timeout, dns.clone())?;
    let ports = Ports {
        subscriptions: Arc::new(store.clone()),
        events: Arc::new(store.clone()),
        queue: Arc::new(store.clone()),
        attempts: Arc::new(store.clone()),
        clock: Arc::new(SystemClock),
        sender: Arc::new(sender),
        dns,
        wakeup: Arc::new(QueueTriggered),
        notifier: notifier(sdk),
    };
    let engine = Engine::new(ports, config);
    if crate::calls::enabled() {
        let _ = engine.metrics.extra.set(crate::calls::render);
    }
    Ok(engine)
}

type Handler =
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

/// Polls one queue forever, running `handler` on each batch.
async fn poll(sqs: aws_sdk_sqs::Client, queue_url: String, handler: Handler) {
    let slots = Arc::new(Semaphore::new(MAX_INVOCATIONS));
    loop {
        let Ok(permit) = slots.clone().acquire_owned().await else {
            return;
        };
        let received = sqs
            .receive_message()
            .queue_url(&queue_url)
            .max_number_of_messages(10)
            .wait_time_seconds(1)
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
            continue;
        }
        let (sqs, queue_url, handler) = (sqs.clone(), queue_url.clone(), handler.clone());
        tokio::spawn(async move {
            let response = handler(to_event(&messages)).await;
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
            if !done.is_empty() {
                if let Err(e) = sqs
                    .delete_message_batch()
                    .queue_url(&queue_url)
                    .set_entries(Some(done))
                    .send()
                    .await
                {
                    error!(error = %aws_smithy_types::error::display::DisplayErrorContext(e), "delete failed");
                }
            }
            drop(permit);
        });
    }
}

/// Starts the stand-in event source mappings for both queues.
pub fn start_pollers(engine: Arc<Engine>, store: AwsStore) {
    let fan = fanout::FanOut {
        engine: engine.clone(),
        store: store.clone(),
        budget: Duration::from_secs(60),
    };
    let fan_handler: Handler = Arc::new(move |ev| {
        let fan = fan.clone();
        Box::pin(async move { fanout::handle(&fan, ev).await })
    });
    let del = delivery::Deliver {
        engine,
        store: store.clone(),
    };
    let del_handler: Handler = Arc::new(move |ev| {
        let del = del.clone();
        Box::pin(async move { delivery::handle(&del, ev).await })
    });
    let s = store.settings().clone();
    tokio::spawn(poll(store.sqs().clone(), s.ingest_queue_url, fan_handler));
    tokio::spawn(poll(store.sqs().clone(), s.delivery_queue_url, del_handler));
}

/// Serves the API and runs the workers over the AWS adapters until
/// `shutdown` resolves. With `create` set, creates the resources first
/// (named from its prefix), for a local AWS-compatible server; otherwise
/// uses `settings` or reads them from the environment.
pub async fn serve(
    listener: tokio::net::TcpListener,
    config: Config,
    sdk: aws_config::SdkConfig,
    settings: Option<Settings>,
    create: Option<crate::Resources>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let settings = match (create, settings) {
        (Some(r), _) => r.create(&sdk).await?,
        (None, Some(s)) => s,
        (None, None) => Settings::from_env()?,
    };
    let token: Arc<str> = config
        .api_token
        .clone()
        .ok_or_else(|| anyhow::anyhow!("an API token is required"))?
        .into();
    let timeouts = config.read_timeouts;
    let store = AwsStore::new(&sdk, settings);
    let engine = engine(config, &store, &sdk)?;
    engine.ensure_operator_subscription().await?;
    start_pollers(engine.clone(), store);
    let app = hooklane_core::api::router(hooklane_core::api::AppState {
        engine,
        auth: hooklane_core::api::Auth::Token(token),
    });
    info!(addr = %listener.local_addr()?, "hooklane serving (aws backend)");
    hooklane_core::api::serve::serve(listener, app, timeouts, shutdown).await?;
    Ok(())
}

/// What every Lambda function builds once per cold start: configuration
/// from `HOOKLANE_*`, the SDK clients, the adapter and the engine.
pub async fn from_env() -> anyhow::Result<(AwsStore, Arc<Engine>)> {
    let config = Config::from_env()?;
    let sdk = crate::sdk_config().await;
    let store = AwsStore::new(&sdk, Settings::from_env()?);
    let engine = engine(config, &store, &sdk)?;
    engine.ensure_operator_subscription().await?;
    Ok((store, engine))
}
