//! The AWS backend in tests: the official SDK clients talking the real wire
//! protocol to a local AWS-compatible server (moto in server mode on
//! 127.0.0.1), which `tests/run.sh` starts and names in
//! `HOOKLANE_TEST_AWS_ENDPOINT`. Every test creates its own table and
//! queues under a unique prefix.

use aws_config::{BehaviorVersion, Region, SdkConfig};
use aws_credential_types::Credentials;

/// The endpoint of the local AWS-compatible server.
pub fn endpoint() -> String {
    std::env::var("HOOKLANE_TEST_AWS_ENDPOINT").unwrap_or_else(|_| {
        panic!(
            "HOOKLANE_TEST_AWS_ENDPOINT is not set: the AWS tests need moto in server mode; \
             run them through tests/run.sh, which installs and starts it"
        )
    })
}

/// The environment a child process needs to reach the local server.
pub fn child_env() -> Vec<(String, String)> {
    [
        ("AWS_ENDPOINT_URL", endpoint()),
        ("AWS_REGION", "us-east-1".to_owned()),
        ("AWS_ACCESS_KEY_ID", "test".to_owned()),
        ("AWS_SECRET_ACCESS_KEY", "test".to_owned()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect()
}

/// The AWS side's settings of a server a test starts in this process: the
/// test's own variables first, then the process's (`HOOKLANE_COUNT_AWS_CALLS`
/// for a figure, say).
pub fn env_of(env: &std::collections::HashMap<String, String>) -> hooklane_aws::AwsEnv {
    hooklane_aws::AwsEnv::from_lookup(|k| env.get(k).cloned().or_else(|| std::env::var(k).ok()))
        .expect("the test's AWS settings")
}

/// SDK configuration for the local server.
pub async fn sdk() -> SdkConfig {
    sdk_at(&endpoint()).await
}

/// SDK configuration for an endpoint in front of the local server (a
/// fault-injecting proxy).
pub async fn sdk_at(endpoint: &str) -> SdkConfig {
    aws_config::defaults(BehaviorVersion::latest())
        .endpoint_url(endpoint)
        .region(Region::new("us-east-1"))
        .credentials_provider(Credentials::new(
            "test",
            "test",
            None,
            None,
            "hooklane-tests",
        ))
        .load()
        .await
}

/// A prefix no other test uses.
pub fn unique_prefix() -> String {
    let id = hooklane_core::domain::SubscriptionId::generate();
    format!("t{}", &id.as_str()[4..])
}

/// Creates a fresh set of resources (its queues' visibility timeout
/// `visibility_secs`); returns their settings.
pub async fn fresh_resources(visibility_secs: u64) -> hooklane_aws::Settings {
    hooklane_aws::Resources {
        prefix: unique_prefix(),
        visibility: std::time::Duration::from_secs(visibility_secs),
    }
    .create(&sdk().await)
    .await
    .expect("creating resources on the local AWS server")
}

/// Creates a fresh set of resources; returns the adapter over them.
pub async fn fresh_store(visibility_secs: u64) -> hooklane_aws::AwsStore {
    let settings = fresh_resources(visibility_secs).await;
    hooklane_aws::AwsStore::new(&sdk().await, settings)
}
