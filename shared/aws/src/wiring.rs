//! The production wiring of the AWS backend: what every Lambda function
//! (and `serve --backend aws`) builds once per cold start: configuration
//! from `HOOKLANE_*`, the SDK clients, the adapter, the SNS notifier and the
//! engine over them.

use std::sync::Arc;

use hooklane_core::config::Config;
use hooklane_core::engine::{Engine, Outside, Ports};
use hooklane_core::ports::{NoNotifier, NoWakeup, Notifier, StoreResult};

use crate::{AwsStore, Settings};

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
    let ports = Ports::build(
        store.clone(),
        &config,
        Outside::default(),
        Arc::new(NoWakeup),
        notifier(sdk),
    )?;
    let engine = Engine::new(ports, config);
    if crate::calls::enabled() {
        let _ = engine.metrics.extra.set(crate::calls::render);
    }
    Ok(engine)
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
