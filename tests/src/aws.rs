//! The AWS backend in tests: the official SDK clients talking the real wire
//! protocol to local AWS-compatible servers that `tests/run.sh` installs
//! and starts on loopback:
//! - moto in server mode (`HOOKLANE_TEST_AWS_ENDPOINT`), DynamoDB, SQS,
//!   SNS and CloudFormation in one process that answers one call at a
//!   time; the template's stacks are deployed there ([`crate::stack`]);
//! - the fast pair: dynoxide for DynamoDB (`HOOKLANE_TEST_DYNAMODB_ENDPOINT`,
//!   one call at a time but in microseconds) and ministack for SQS and SNS
//!   (`HOOKLANE_TEST_SQS_ENDPOINT`, in parallel), two processes where a
//!   burst's calls do not wait in one queue, as on AWS.
//!
//! A test runs on the stand-in [`Standin::chosen`] names unless it names
//! one itself (the stacks need moto's CloudFormation; the burst promise
//! needs calls answered in parallel). Every test creates its own table and
//! queues under a unique prefix.

use aws_config::{BehaviorVersion, Region, SdkConfig};
use aws_credential_types::Credentials;
use aws_types::service_config::{LoadServiceConfig, ServiceConfigKey};

/// A local AWS-compatible server (or pair of them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Standin {
    /// moto: every service in one process, one call at a time.
    Moto,
    /// dynoxide (DynamoDB) and ministack (SQS, SNS): no queue of calls.
    Fast,
}

impl Standin {
    /// The stand-in of the tests that name none: `HOOKLANE_TEST_STANDIN`
    /// (`moto`, the default, or `fast`; the test command runs the AWS tests
    /// once on each).
    pub fn chosen() -> Self {
        match std::env::var("HOOKLANE_TEST_STANDIN").as_deref() {
            Ok("moto") | Err(_) => Self::Moto,
            Ok("fast") => Self::Fast,
            Ok(other) => panic!("HOOKLANE_TEST_STANDIN={other}: moto or fast"),
        }
    }

    /// Where its services answer.
    pub fn endpoints(self) -> Endpoints {
        match self {
            Self::Moto => Endpoints::both(&endpoint()),
            Self::Fast => {
                let get = |var: &str| {
                    std::env::var(var).unwrap_or_else(|_| {
                        panic!(
                            "{var} is not set: the fast pair (dynoxide, ministack) is \
                             installed and started by tests/run.sh"
                        )
                    })
                };
                Endpoints {
                    dynamodb: get("HOOKLANE_TEST_DYNAMODB_ENDPOINT"),
                    sqs: get("HOOKLANE_TEST_SQS_ENDPOINT"),
                }
            }
        }
    }
}

/// Where DynamoDB answers, and where SQS and SNS do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoints {
    /// DynamoDB's endpoint.
    pub dynamodb: String,
    /// SQS's and SNS's endpoint.
    pub sqs: String,
}

impl Endpoints {
    /// One endpoint for every service.
    pub fn both(endpoint: &str) -> Self {
        Self {
            dynamodb: endpoint.to_owned(),
            sqs: endpoint.to_owned(),
        }
    }
}

impl LoadServiceConfig for Endpoints {
    fn load_config(&self, key: ServiceConfigKey<'_>) -> Option<String> {
        if key.env() != "AWS_ENDPOINT_URL" {
            return None;
        }
        match key.service_id() {
            "DynamoDB" => Some(self.dynamodb.clone()),
            _ => Some(self.sqs.clone()),
        }
    }
}

/// moto's endpoint.
pub fn endpoint() -> String {
    std::env::var("HOOKLANE_TEST_AWS_ENDPOINT").unwrap_or_else(|_| {
        panic!(
            "HOOKLANE_TEST_AWS_ENDPOINT is not set: the AWS tests need moto in server mode; \
             run them through tests/run.sh, which installs and starts it"
        )
    })
}

/// The environment a child process needs to reach the chosen stand-in.
pub fn child_env() -> Vec<(String, String)> {
    child_env_on(Standin::chosen())
}

/// The environment a child process needs to reach `standin`: one endpoint
/// for every service, or one per service (`AWS_ENDPOINT_URL_DYNAMODB`,
/// `AWS_ENDPOINT_URL_SQS`, `AWS_ENDPOINT_URL_SNS`), as the SDKs read them.
pub fn child_env_on(standin: Standin) -> Vec<(String, String)> {
    let e = standin.endpoints();
    let mut env = vec![
        ("AWS_REGION", "us-east-1".to_owned()),
        ("AWS_ACCESS_KEY_ID", "test".to_owned()),
        ("AWS_SECRET_ACCESS_KEY", "test".to_owned()),
    ];
    if e.dynamodb == e.sqs {
        env.push(("AWS_ENDPOINT_URL", e.sqs));
    } else {
        env.push(("AWS_ENDPOINT_URL_DYNAMODB", e.dynamodb));
        env.push(("AWS_ENDPOINT_URL_SQS", e.sqs.clone()));
        env.push(("AWS_ENDPOINT_URL_SNS", e.sqs));
    }
    env.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()
}

/// The AWS side's settings of a server a test starts in this process: the
/// test's own variables first, then the process's (`HOOKLANE_COUNT_AWS_CALLS`
/// for a figure, say).
pub fn env_of(env: &std::collections::HashMap<String, String>) -> hooklane_aws::AwsEnv {
    hooklane_aws::AwsEnv::from_lookup(|k| env.get(k).cloned().or_else(|| std::env::var(k).ok()))
        .expect("the test's AWS settings")
}

/// SDK configuration for the chosen stand-in.
pub async fn sdk() -> SdkConfig {
    sdk_on(Standin::chosen()).await
}

/// SDK configuration for `standin`.
pub async fn sdk_on(standin: Standin) -> SdkConfig {
    sdk_with(standin.endpoints()).await
}

/// SDK configuration for an endpoint in front of a stand-in (a
/// fault-injecting proxy), every service through it.
pub async fn sdk_at(endpoint: &str) -> SdkConfig {
    sdk_with(Endpoints::both(endpoint)).await
}

/// SDK configuration for these endpoints: one for every service, or each
/// service's own (as `AWS_ENDPOINT_URL_<SERVICE>` gives them).
pub async fn sdk_with(endpoints: Endpoints) -> SdkConfig {
    let loader = aws_config::defaults(BehaviorVersion::latest())
        .region(Region::new("us-east-1"))
        .credentials_provider(Credentials::new(
            "test",
            "test",
            None,
            None,
            "hooklane-tests",
        ));
    if endpoints.dynamodb == endpoints.sqs {
        return loader.endpoint_url(&endpoints.sqs).load().await;
    }
    loader
        .load()
        .await
        .into_builder()
        .service_config(endpoints)
        .build()
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

/// Creates a fresh set of resources on `standin`; returns the adapter
/// over them.
pub async fn fresh_store_on(standin: Standin, visibility_secs: u64) -> hooklane_aws::AwsStore {
    let sdk = sdk_on(standin).await;
    let settings = hooklane_aws::Resources {
        prefix: unique_prefix(),
        visibility: std::time::Duration::from_secs(visibility_secs),
    }
    .create(&sdk)
    .await
    .expect("creating resources on the local AWS server");
    hooklane_aws::AwsStore::new(&sdk, settings)
}

/// Creates a fresh set of resources on the chosen stand-in; returns the
/// adapter over them.
pub async fn fresh_store(visibility_secs: u64) -> hooklane_aws::AwsStore {
    fresh_store_on(Standin::chosen(), visibility_secs).await
}
