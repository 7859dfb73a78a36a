//! Stacks of `infra/template.yaml` on the local AWS-compatible server, for
//! the AWS tests that run on what the template creates rather than on
//! resources they make themselves: `tests/run.sh` packages the functions
//! (`sam build`, `sam package`), and `tests/deploy/stack.py create` puts
//! the template through the SAM transform and creates the stack on the
//! stand-in's CloudFormation. A test then reads its table and queue names
//! the way a deployed function does, from a function's environment
//! ([`hooklane_aws::AwsEnv`]), so a drift between the template and the
//! code fails it.

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Command;

use serde_json::Value;

/// A stack created from the template: each function's environment as
/// deployed, by logical id, and the stack's outputs.
#[derive(Debug, Clone)]
pub struct Deployed {
    /// `ApiFunction`, `FanoutFunction`, `DeliveryFunction`,
    /// `SlowDeliveryFunction`: their environment variables.
    pub functions: HashMap<String, HashMap<String, String>>,
    /// The stack's outputs (`TableName`, `DeliveryQueueUrl`, ...).
    pub outputs: HashMap<String, String>,
}

fn root() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
}

/// One stack created at a time: moto's CloudFormation is not safe for
/// stacks created at once (a `CreateStack` beside another answered 500).
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Creates a stack of the template with these parameters (the template's
/// defaults for the rest) under a name no other test uses.
pub fn deploy(params: &[(&str, &str)]) -> Deployed {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let root = root();
    let packaged = root.join("target/deploy/packaged.yaml");
    assert!(
        packaged.exists(),
        "{} is missing: the stack tests need the packaged template; run them \
         through tests/run.sh, which builds and packages it",
        packaged.display()
    );
    let name = format!("hl-{}", crate::aws::unique_prefix());
    let mut cmd = Command::new(root.join(".venv/bin/python"));
    cmd.arg(root.join("tests/deploy/stack.py")).args([
        "create",
        "--endpoint",
        &crate::aws::endpoint(),
        "--name",
        &name,
    ]);
    for (k, v) in params {
        cmd.args(["--param", &format!("{k}={v}")]);
    }
    let out = cmd.output().expect("tests/deploy/stack.py runs");
    assert!(
        out.status.success(),
        "creating stack {name} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).expect("stack.py prints JSON");
    let strings = |v: &Value| -> HashMap<String, String> {
        v.as_object()
            .into_iter()
            .flatten()
            .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_owned()))
            .collect()
    };
    Deployed {
        functions: v["functions"]
            .as_object()
            .into_iter()
            .flatten()
            .map(|(k, env)| (k.clone(), strings(env)))
            .collect(),
        outputs: strings(&v["outputs"]),
    }
}

impl Deployed {
    /// Function `logical`'s environment.
    pub fn env(&self, logical: &str) -> &HashMap<String, String> {
        self.functions
            .get(logical)
            .unwrap_or_else(|| panic!("the stack has no function {logical}"))
    }

    /// The AWS settings function `logical` reads at its cold start.
    pub fn settings(&self, logical: &str) -> hooklane_aws::Settings {
        let env = self.env(logical);
        hooklane_aws::AwsEnv::from_lookup(|k| env.get(k).cloned())
            .and_then(|e| e.settings())
            .unwrap_or_else(|e| panic!("{logical}'s environment as deployed: {e}"))
    }

    /// The store the delivery function works on.
    pub async fn store(&self) -> hooklane_aws::AwsStore {
        let sdk = crate::aws::sdk_on(crate::aws::Standin::Moto).await;
        hooklane_aws::AwsStore::new(&sdk, self.settings("DeliveryFunction"))
    }
}

/// A store over a new stack of the template at its defaults: the table and
/// queues a deployed delivery function works on.
pub async fn deployed_store() -> hooklane_aws::AwsStore {
    let stack = tokio::task::spawn_blocking(|| deploy(&[]))
        .await
        .expect("creating the stack");
    stack.store().await
}
