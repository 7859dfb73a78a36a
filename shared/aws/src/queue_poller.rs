//! Runs the AWS path on one machine: `serve --backend aws` serves the API
//! over the AWS adapters and stands in for Lambda's SQS event source
//! mappings: it polls each queue (batches of up to 10), runs the same
//! handler the Lambda function runs, deletes what succeeded and leaves the
//! reported failures to their visibility timeout, as the real mapping does.
//! Pointed at any endpoint by `AWS_ENDPOINT_URL` (a local AWS-compatible
//! server in tests).
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
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent, SqsMessage, SqsMessageAttribute};
use aws_sdk_sqs::types::{DeleteMessageBatchRequestEntry, Message, MessageSystemAttributeName};
use hooklane_core::config::Config;
use hooklane_core::engine::Engine;
use tokio::sync::Semaphore;
use tracing::{error, info};

use crate::handlers::{delivery, fanout};
use crate::wiring::{engine, pool_config};
use crate::{AwsStore, Settings};

/// The first pause after an empty receive, and the longest.
const IDLE_PAUSE: (Duration, Duration) = (Duration::from_millis(200), Duration::from_secs(1));

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

/// One queue's stand-in mapping: its invocation slots, and how many
/// receive loops (pollers) run.
struct Mapping {
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
}

/// Polls one queue forever, running `handler` on each batch, at most
/// `invocations` batches at once. `function` names the Lambda function it
/// stands in for (the ledger's invocation counts).
///
/// As Lambda's pollers do, it scales its receive loops with the backlog:
/// one loop while the queue is idle, one more each time a receive comes
/// back full (up to one per invocation), each extra loop ending at its
/// first empty receive. So a burst is received as fast as the queue
/// answers, with every invocation slot taking a batch as soon as it is
/// free, and an idle queue costs one short poll a second.
async fn poll(
    sqs: aws_sdk_sqs::Client,
    queue_url: String,
    (function, handler): (&'static str, Handler),
    invocations: usize,
) {
    let mapping = Arc::new(Mapping {
        sqs,
        queue_url,
        function,
        handler,
        slots: Arc::new(Semaphore::new(invocations)),
        pollers: AtomicUsize::new(1),
        invocations,
    });
    receive_loop(mapping, true).await;
}

/// One receive loop; the first (`lead`) runs forever, the others end at
/// their first empty receive.
fn receive_loop(mapping: Arc<Mapping>, lead: bool) -> Pin<Box<dyn Future<Output = ()> + Send>> {
    Box::pin(async move {
        let mut pause = IDLE_PAUSE.0;
        loop {
            let Ok(permit) = mapping.slots.clone().acquire_owned().await else {
                return;
            };
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

/// The engines of one process running every function: the API's and
/// fan-out's, the delivery pool's (whose attempts may be cut off for the
/// slow pool) and the slow pool's, when there is one.
pub struct Engines {
    /// The API and fan-out.
    pub api: Arc<Engine>,
    /// The main delivery pool.
    pub delivery: Arc<Engine>,
    /// The slow pool.
    pub slow: Option<Arc<Engine>>,
}

/// Starts the stand-in event source mappings for both queues, each running
/// at most `invocations.0` batches at once, and for the slow pool's queue
/// (at most `invocations.1`), when there is one.
pub fn start_pollers(engines: Engines, store: AwsStore, invocations: (usize, usize)) {
    let Engines {
        api: engine,
        delivery,
        slow,
    } = engines;
    let fan = fanout::FanOut {
        engine,
        store: store.clone(),
        budget: Duration::from_secs(60),
    };
    let fan_handler: Handler = Arc::new(move |ev| {
        let fan = fan.clone();
        Box::pin(async move { fanout::handle(&fan, ev).await })
    });
    let del = delivery::Deliver {
        engine: delivery,
        store: store.clone(),
    };
    let del_handler: Handler = Arc::new(move |ev| {
        let del = del.clone();
        Box::pin(async move { delivery::handle(&del, ev).await })
    });
    let s = store.settings().clone();
    let sqs = store.sqs();
    let (main, slow_pool) = invocations;
    let polled = s.local_poll;
    if let (Some(engine), Some(url), true) = (slow, s.slow_queue_url.clone(), polled.slow) {
        let del = delivery::Deliver {
            engine,
            store: store.clone().in_slow_pool(),
        };
        let handler: Handler = Arc::new(move |ev| {
            let del = del.clone();
            Box::pin(async move { delivery::handle(&del, ev).await })
        });
        tokio::spawn(poll(
            sqs.clone(),
            url,
            ("delivery-slow", handler),
            slow_pool,
        ));
    }
    if polled.ingest {
        tokio::spawn(poll(
            sqs.clone(),
            s.ingest_queue_url,
            ("fanout", fan_handler),
            main,
        ));
    }
    if polled.deliveries {
        tokio::spawn(poll(
            sqs.clone(),
            s.delivery_queue_url,
            ("delivery", del_handler),
            main,
        ));
    }
}

/// Serves the API and runs the workers over the AWS adapters until
/// `shutdown` resolves, under the engine's `config` and the AWS side's
/// `env`. With `create` set, creates the resources first (named from its
/// prefix), for a local AWS-compatible server, with the settings `env`
/// gives beside the names; otherwise uses `settings`, or the resources
/// `env` names.
pub async fn serve(
    listener: tokio::net::TcpListener,
    (config, env): (Config, crate::AwsEnv),
    sdk: aws_config::SdkConfig,
    settings: Option<Settings>,
    create: Option<crate::Resources>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let invocations = config.local_invocations;
    // The stand-in's main pool is the deployment's `DeliveryMaxConcurrency`.
    let mut config = config;
    config.delivery_max_concurrency = invocations.0;
    let settings = match (create, settings) {
        (Some(r), _) => env.onto(r.create(&sdk).await?),
        (None, Some(s)) => env.onto(s),
        (None, None) => env.settings()?,
    };
    let token: Arc<str> = config
        .api_token
        .clone()
        .ok_or_else(|| anyhow::anyhow!("an API token is required"))?
        .into();
    let timeouts = config.read_timeouts;
    let store = AwsStore::new(&sdk, settings);
    // One process: the pools share the API's circuit breakers.
    let api = engine(config.clone(), &store, &sdk, None)?;
    let delivery = engine(
        pool_config(config.clone(), &store),
        &store,
        &sdk,
        Some(&api),
    )?;
    let slow = match store.settings().slow_queue_url {
        Some(_) => {
            let slow_store = store.clone().in_slow_pool();
            Some(engine(config, &slow_store, &sdk, Some(&api))?)
        }
        None => None,
    };
    let engine = api;
    engine.ensure_operator_subscription().await?;
    let engines = Engines {
        api: engine.clone(),
        delivery,
        slow,
    };
    start_pollers(engines, store, invocations);
    let app = hooklane_core::api::router(hooklane_core::api::AppState {
        engine,
        auth: hooklane_core::api::Auth::Token(token),
    });
    info!(addr = %listener.local_addr()?, "hooklane serving (aws backend)");
    hooklane_core::api::serve::serve(listener, app, timeouts, shutdown).await?;
    Ok(())
}
