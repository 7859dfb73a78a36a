//! Runs the AWS path on one machine: `serve --backend aws` serves the API
//! over the AWS adapters and stands in for Lambda's SQS event source
//! mappings ([`crate::event_source`]) on each queue, running the same
//! handlers the Lambda functions run. Pointed at any endpoint by
//! `AWS_ENDPOINT_URL` (a local AWS-compatible server in tests).

use std::future::Future;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use hooklane_core::config::Config;
use hooklane_core::engine::{Engine, Outside};
use tracing::info;

pub use crate::event_source::to_event;
use crate::event_source::{poll, Handler, Pollers};
use crate::handlers::{delivery, fanout};
use crate::wiring::{engine_with, pool_config};
use crate::{AwsStore, Settings};
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
pub fn start_pollers(engines: Engines, store: AwsStore, invocations: (usize, usize)) -> Pollers {
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
    let del_handler = delivery_handler(delivery, store.clone());
    let s = store.settings().clone();
    let sqs = store.sqs();
    let (main, slow_pool) = invocations;
    let polled = s.local_poll;
    let (mut mappings, stopping) = (Vec::new(), Arc::new(AtomicBool::new(false)));
    if let (Some(engine), Some(url), true) = (slow, s.slow_queue_url.clone(), polled.slow) {
        let handler = delivery_handler(engine, store.clone().in_slow_pool());
        mappings.push(poll(
            sqs.clone(),
            url,
            ("delivery-slow", handler),
            (slow_pool, &stopping),
        ));
    }
    if polled.ingest {
        mappings.push(poll(
            sqs.clone(),
            s.ingest_queue_url,
            ("fanout", fan_handler),
            (main, &stopping),
        ));
    }
    if polled.deliveries {
        mappings.push(poll(
            sqs.clone(),
            s.delivery_queue_url,
            ("delivery", del_handler),
            (main, &stopping),
        ));
    }
    Pollers { mappings, stopping }
}

/// The delivery function's handler over `engine` and `store` (a pool's).
fn delivery_handler(engine: Arc<Engine>, store: AwsStore) -> Handler {
    let del = delivery::Deliver { engine, store };
    Arc::new(move |ev| {
        let del = del.clone();
        Box::pin(async move { delivery::handle(&del, ev).await })
    })
}

/// Serves the API and runs the workers over the AWS adapters until
/// `shutdown` resolves, under the engine's `config` and the AWS side's
/// `env`, resolving names and reading the time through `outside` (the
/// system's but in tests). With `create` set, creates the resources first (named from its
/// prefix), for a local AWS-compatible server, with the settings `env`
/// gives beside the names; otherwise uses `settings`, or the resources
/// `env` names.
pub async fn serve(
    listener: tokio::net::TcpListener,
    (config, env, outside): (Config, crate::AwsEnv, Outside),
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
    let (timeouts, grace) = (config.read_timeouts, config.shutdown_grace);
    let store = AwsStore::new(&sdk, settings);
    // One process: the pools share the API's circuit breakers.
    let with = || (&sdk, outside.clone());
    let api = engine_with(config.clone(), &store, with(), None)?;
    let pool = pool_config(config.clone(), &store);
    let delivery = engine_with(pool, &store, with(), Some(&api))?;
    let slow = match store.settings().slow_queue_url {
        Some(_) => {
            let slow_store = store.clone().in_slow_pool();
            Some(engine_with(config, &slow_store, with(), Some(&api))?)
        }
        None => None,
    };
    api.ensure_operator_subscription().await?;
    let engines = Engines {
        api: api.clone(),
        delivery,
        slow,
    };
    let pollers = start_pollers(engines, store, invocations);
    let app = hooklane_core::api::router(hooklane_core::api::AppState {
        engine: api,
        auth: hooklane_core::api::Auth::Token(token),
    });
    info!(addr = %listener.local_addr()?, "hooklane serving (aws backend)");
    // A clean stop, as `serve` on the embedded backend makes it: no
    // receive after the signal, the API's requests and the invocations
    // running finish within the grace from the signal.
    let shutdown = pollers.stopping_on(shutdown);
    let stopped =
        hooklane_core::api::serve::serve(listener, app, (timeouts, grace), shutdown).await?;
    pollers.finish(stopped + grace).await;
    Ok(())
}
