//! The production wiring of the AWS backend: what every Lambda function
//! (and `serve --backend aws`) builds once per cold start: configuration
//! from `HOOKLANE_*`, the SDK clients, the adapter, the SNS notifier and the
//! engine over them.

use std::sync::Arc;

use hooklane_core::config::Config;
use hooklane_core::domain::OperatorEvent;
use hooklane_core::engine::{Engine, Outside, Ports};
use hooklane_core::ports::{NoNotifier, NoWakeup, Notifier, StoreResult};

use crate::{AwsEnv, AwsStore, Pool};

/// Operator events to the stack's SNS topic
/// (`HOOKLANE_OPERATOR_TOPIC_ARN`).
struct SnsNotifier {
    sns: aws_sdk_sns::Client,
    topic: String,
}

#[async_trait::async_trait]
impl Notifier for SnsNotifier {
    async fn send(&self, kind: OperatorEvent, notice: &serde_json::Value) -> StoreResult<()> {
        let subject = format!(
            "hooklane: {} of subscription {}",
            kind.name(),
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
fn notifier(sdk: &aws_config::SdkConfig, topic: Option<&String>) -> Arc<dyn Notifier> {
    match topic {
        Some(topic) => Arc::new(SnsNotifier {
            sns: aws_sdk_sns::Client::new(sdk),
            topic: topic.clone(),
        }),
        None => Arc::new(NoNotifier),
    }
}

/// The configuration of a delivery pool: in the main pool of a deployment
/// with a slow pool, an attempt may take `HOOKLANE_SLOW_AFTER` at most,
/// and one to a subscription whose last delivery did not arrive
/// `HOOKLANE_FIRST_CUT_OFF` (see the adapter's slow pool); elsewhere (the
/// slow pool, the API's re-enable probe) the whole
/// `HOOKLANE_ATTEMPT_TIMEOUT`.
pub fn pool_config(mut config: Config, store: &AwsStore) -> Config {
    if store.pool() == Pool::Main && store.settings().slow_queue_url.is_some() {
        config.attempt_timeout = config.attempt_timeout.min(config.slow_after);
        config.unproven_cut_off = Some(config.first_cut_off.min(config.attempt_timeout));
    }
    config
}

/// The engine over the AWS adapters, with SNS notices when
/// `HOOKLANE_OPERATOR_TOPIC_ARN` names a topic; sharing `shared_breakers`'
/// circuit breakers when given (one process, several engines).
pub fn engine(
    config: Config,
    store: &AwsStore,
    sdk: &aws_config::SdkConfig,
    shared_breakers: Option<&Engine>,
) -> anyhow::Result<Arc<Engine>> {
    engine_with(config, store, (sdk, Outside::default()), shared_breakers)
}

/// [`engine`] with the given name resolution and clock (`serve --backend
/// aws` in tests).
pub fn engine_with(
    mut config: Config,
    store: &AwsStore,
    (sdk, outside): (&aws_config::SdkConfig, Outside),
    shared_breakers: Option<&Engine>,
) -> anyhow::Result<Arc<Engine>> {
    // Every pool and the API take leases against the same bound.
    config.tenant_max_in_flight = config.share_of_pool(config.delivery_max_concurrency);
    let ports = Ports::build(
        store.clone(),
        &config,
        outside,
        Arc::new(NoWakeup),
        notifier(sdk, store.settings().operator_topic_arn.as_ref()),
    )?;
    let engine = match shared_breakers {
        Some(other) => Engine::sharing_breakers(ports, config, other),
        None => Engine::new(ports, config),
    };
    if store.settings().metrics_namespace.is_some() {
        engine.metrics.keep_samples();
    }
    if store.settings().count_calls {
        engine.metrics.register(crate::call_metrics::register);
    }
    Ok(engine)
}

/// What every Lambda function builds once per cold start: configuration
/// from `HOOKLANE_*` (the engine's, and `env`, the AWS side's, which the
/// function read), the SDK clients, the adapter and the engine.
pub async fn from_env(env: &AwsEnv) -> anyhow::Result<(AwsStore, Arc<Engine>)> {
    let config = Config::from_env()?;
    let sdk = crate::sdk_config().await;
    let store = AwsStore::new(&sdk, env.settings()?);
    let engine = engine(config, &store, &sdk, None)?;
    engine.ensure_operator_subscription().await?;
    Ok((store, engine))
}

/// What the delivery function builds once per cold start: as
/// [`from_env`], for the pool `HOOKLANE_POOL` names (`main`, the default,
/// or `slow`), with that pool's attempt timeout ([`pool_config`]).
pub async fn delivery_from_env(env: &AwsEnv) -> anyhow::Result<(AwsStore, Arc<Engine>)> {
    let config = Config::from_env()?;
    let sdk = crate::sdk_config().await;
    let store = AwsStore::new(&sdk, env.settings()?);
    let store = match env.pool {
        Pool::Main => store,
        Pool::Slow => store.in_slow_pool(),
    };
    let engine = engine(pool_config(config, &store), &store, &sdk, None)?;
    engine.ensure_operator_subscription().await?;
    Ok((store, engine))
}

/// What a Lambda function does after each batch: prints the EMF line of
/// what `engine` counted since the last one (CloudWatch reads it from the
/// function's log), when `HOOKLANE_METRICS_NAMESPACE` is set (none for a
/// batch that counted nothing), and sends the batch's spans, when traces
/// are on.
pub async fn batch_done(engine: &Engine, store: &AwsStore, function: &str) {
    if let Some(namespace) = &store.settings().metrics_namespace {
        let now = time::OffsetDateTime::now_utc();
        if let Some(line) = engine.metrics.emf_line(namespace, function, now) {
            println!("{line}");
        }
    }
    hooklane_core::trace::flush_done().await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Settings;
    use std::time::Duration;

    /// An adapter over made-up resources (nothing is called), with a slow
    /// pool or without.
    fn store(slow_pool: bool) -> AwsStore {
        let sdk = aws_config::SdkConfig::builder()
            .behavior_version(aws_config::BehaviorVersion::latest())
            .build();
        AwsStore::new(
            &sdk,
            Settings {
                table: "t".into(),
                ingest_queue_url: "i".into(),
                delivery_queue_url: "d".into(),
                dlq_url: "q".into(),
                slow_queue_url: slow_pool.then(|| "s".into()),
                fan_out_in_api: true,
                type_index_settle: Duration::ZERO,
                ..Settings::default()
            },
        )
    }

    #[test]
    fn only_the_main_pool_beside_a_slow_pool_cuts_new_endpoints_short() {
        let config = Config::default();
        let main = pool_config(config.clone(), &store(true));
        assert_eq!(main.attempt_timeout, Duration::from_secs(5));
        assert_eq!(main.unproven_cut_off, Some(Duration::from_secs(1)));
        let slow = pool_config(config.clone(), &store(true).in_slow_pool());
        assert_eq!(slow.attempt_timeout, Duration::from_secs(15));
        assert_eq!(slow.unproven_cut_off, None);
        assert_eq!(
            pool_config(config.clone(), &store(false)).unproven_cut_off,
            None
        );
        // Never longer than the main pool's own cut-off.
        let long = Config {
            first_cut_off: Duration::from_secs(30),
            ..config
        };
        assert_eq!(
            pool_config(long, &store(true)).unproven_cut_off,
            Some(Duration::from_secs(5))
        );
    }
}
