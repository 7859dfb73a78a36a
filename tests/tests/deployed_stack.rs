//! The AWS backend on what `infra/template.yaml` creates, deployed to the
//! local stand-in's CloudFormation (`tests/deploy/stack.py`): each
//! function reads its environment as deployed, in every mode the template
//! offers; `serve --backend aws` runs on a stack's resources without
//! creating any, named only by a deployed function's environment, and
//! delivers; and what `serve --backend aws --create-resources` creates
//! matches what the template declares: queue by queue and the table, on
//! moto beside a stack, and the dead-letter queues' allow-lists and the
//! queues' encryption on the fast pair (moto keeps neither).

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use aws_sdk_sqs::types::QueueAttributeName;
use hooklane_aws::{AwsEnv, Pool};
use hooklane_core::config::Config;
use hooklane_core::domain::{EventId, TenantId};
use hooklane_core::ports::EventArchive;
use hooklane_tests::aws::{sdk_on, unique_prefix, Standin};
use hooklane_tests::child::{self, free_port, hooklane_binary, Killed, State};
use hooklane_tests::stack::{deploy, Deployed};
use hooklane_tests::{eventually, Receiver, Reply, Server, TOKEN};
use serde_json::json;

const FUNCTIONS: [&str; 4] = [
    "ApiFunction",
    "FanoutFunction",
    "DeliveryFunction",
    "SlowDeliveryFunction",
];

async fn deployed(params: &'static [(&'static str, &'static str)]) -> Deployed {
    tokio::task::spawn_blocking(move || deploy(params))
        .await
        .expect("creating the stack")
}

/// Every attribute of a queue, by name, as the SDK reads it.
async fn attributes(sqs: &aws_sdk_sqs::Client, url: &str) -> BTreeMap<String, String> {
    sqs.get_queue_attributes()
        .queue_url(url)
        .attribute_names(QueueAttributeName::All)
        .send()
        .await
        .unwrap_or_else(|e| panic!("reading {url}: {e:?}"))
        .attributes
        .unwrap_or_default()
        .into_iter()
        .map(|(k, v)| (k.as_str().to_owned(), v))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_function_reads_its_environment_as_deployed_in_every_mode() {
    let modes: [&'static [(&str, &str)]; 5] = [
        &[],
        &[
            ("AuthMode", "JWT"),
            ("JwtIssuer", "https://issuer.example.com/"),
            ("JwtAudience", "hooklane-api"),
        ],
        &[("TableBillingMode", "PROVISIONED")],
        &[("FanOutInApi", "false")],
        &[
            ("ApiReservedConcurrency", "5"),
            ("DeliveryReservedConcurrency", "50"),
        ],
    ];
    let sqs = aws_sdk_sqs::Client::new(&sdk_on(Standin::Moto).await);
    let ddb = aws_sdk_dynamodb::Client::new(&sdk_on(Standin::Moto).await);
    for params in modes {
        let stack = deployed(params).await;
        for function in FUNCTIONS {
            let env = stack.env(function);
            Config::from_lookup(|k| env.get(k).cloned())
                .unwrap_or_else(|e| panic!("{params:?} {function}: {e}"));
            let aws = AwsEnv::from_lookup(|k| env.get(k).cloned()).unwrap();
            let settings = stack.settings(function);
            let slow = function == "SlowDeliveryFunction";
            assert_eq!(aws.pool, if slow { Pool::Slow } else { Pool::Main });
            assert_eq!(
                aws.auth_mode == hooklane_aws::AuthMode::Jwt,
                params.contains(&("AuthMode", "JWT"))
            );
            assert_eq!(
                aws.fan_out_in_api,
                !params.contains(&("FanOutInApi", "false"))
            );
            assert!(aws.operator_topic_arn.is_some() && aws.metrics_namespace.is_some());
            let queues = [
                Some(&settings.ingest_queue_url),
                Some(&settings.delivery_queue_url),
                Some(&settings.dlq_url),
                settings.ingest_dlq_url.as_ref(),
                settings.slow_queue_url.as_ref(),
            ];
            for url in queues {
                let url = url.unwrap_or_else(|| panic!("{function}: a queue unnamed"));
                attributes(&sqs, url).await;
            }
            ddb.describe_table()
                .table_name(&settings.table)
                .send()
                .await
                .unwrap_or_else(|e| panic!("{function}'s table: {e:?}"));
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_on_a_stack_finds_it_by_a_deployed_functions_environment_and_delivers() {
    let stack = deployed(&[]).await;
    let rx = Receiver::start().await;
    rx.set_default("r", Reply::Status(204));
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("serve.log");
    let port = free_port();
    let mut env: HashMap<String, String> = stack.env("ApiFunction").clone();
    for (k, v) in [
        ("HOOKLANE_API_TOKEN", TOKEN),
        ("HOOKLANE_ALLOW_HTTP", "true"),
        ("HOOKLANE_ALLOW_PRIVATE_TARGETS", "true"),
        ("HOOKLANE_LOG_FORMAT", "text"),
    ] {
        env.insert(k.to_owned(), v.to_owned());
    }
    let bin = hooklane_binary();
    let state = State::Deployed(env);
    let _serving = Killed(child::spawn(&bin, port, &state, &log, &HashMap::new()));
    let server = Server::connect(&format!("http://127.0.0.1:{port}")).await;
    server.subscribe("acme", &rx.url("r"), &["*"]).await;
    let event = server
        .publish("acme", "deploy.check", json!({"n": 1}))
        .await;
    assert!(
        eventually(Duration::from_secs(30), || rx.count("r") == 1).await,
        "the event reached the receiver; serve's log:\n{}",
        child::tail(&log, 40)
    );
    let (status, body) = server
        .call("GET", &format!("/v1/tenants/acme/events/{event}"), None)
        .await;
    assert_eq!(status, 200, "{body}");
    // serve archived the event in the stack's own table, read here through
    // the delivery function's names.
    let archived = stack
        .store()
        .await
        .archive()
        .get(
            &TenantId::parse("acme").unwrap(),
            &EventId::parse(&event).unwrap(),
        )
        .await
        .expect("reading the stack's table");
    assert!(archived.is_some(), "the event is in the stack's table");
}

async fn sqs_client() -> aws_sdk_sqs::Client {
    aws_sdk_sqs::Client::new(&sdk_on(Standin::Moto).await)
}

/// A queue's attributes that say what it is (not its name, counts or
/// times), with its redrive target by role rather than by name.
fn shape(attrs: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    let mut out: BTreeMap<String, String> = attrs
        .iter()
        .filter(|(k, _)| !k.starts_with("Approximate") && !k.ends_with("Timestamp"))
        .filter(|(k, _)| {
            !matches!(
                k.as_str(),
                "QueueArn" | "VisibilityTimeout" | "RedrivePolicy"
            )
        })
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    if let Some(policy) = attrs.get("RedrivePolicy") {
        let p: serde_json::Value = serde_json::from_str(policy).unwrap();
        let target = p["deadLetterTargetArn"].as_str().unwrap_or_default();
        let role = target.rsplit_once('-').map_or(target, |(_, r)| r);
        let role = if target.ends_with("ingest-dead-letters.fifo") {
            "ingest-dead-letters.fifo"
        } else {
            role
        };
        out.insert(
            "RedrivePolicy".into(),
            format!("{role} after {}", p["maxReceiveCount"]),
        );
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_creates_the_queues_and_table_the_template_declares() {
    let stack = deployed(&[]).await;
    let declared = stack.settings("DeliveryFunction");
    let created = hooklane_aws::Resources {
        prefix: unique_prefix(),
        visibility: Duration::from_secs(90),
    }
    .create(&sdk_on(Standin::Moto).await)
    .await
    .unwrap();
    let sqs = sqs_client().await;
    let pairs = [
        (&declared.ingest_queue_url, &created.ingest_queue_url),
        (&declared.delivery_queue_url, &created.delivery_queue_url),
        (&declared.dlq_url, &created.dlq_url),
        (
            declared.ingest_dlq_url.as_ref().unwrap(),
            created.ingest_dlq_url.as_ref().unwrap(),
        ),
        (
            declared.slow_queue_url.as_ref().unwrap(),
            created.slow_queue_url.as_ref().unwrap(),
        ),
    ];
    for (d, c) in pairs {
        let (d, c) = (attributes(&sqs, d).await, attributes(&sqs, c).await);
        assert_eq!(
            shape(&c),
            shape(&d),
            "{} against {}",
            c["QueueArn"],
            d["QueueArn"]
        );
    }
    let ddb = aws_sdk_dynamodb::Client::new(&sdk_on(Standin::Moto).await);
    let table = |name: String| {
        let ddb = ddb.clone();
        async move {
            let t = ddb.describe_table().table_name(name).send().await.unwrap();
            let t = t.table.unwrap();
            let index = |g: &aws_sdk_dynamodb::types::GlobalSecondaryIndexDescription| {
                format!("{:?} {:?} {:?}", g.index_name, g.key_schema, g.projection)
            };
            (
                format!("{:?}", t.key_schema),
                format!("{:?}", t.attribute_definitions),
                t.global_secondary_indexes()
                    .iter()
                    .map(index)
                    .collect::<Vec<_>>(),
                t.billing_mode_summary.and_then(|b| b.billing_mode),
            )
        }
    };
    assert_eq!(table(created.table).await, table(declared.table).await);
}

/// What moto does not keep, read back from the fast pair (ministack keeps
/// it): every queue `serve --create-resources` makes is encrypted, and each
/// dead-letter queue's allow-list names exactly the queues that redrive
/// into it, as the template's do.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serves_dead_letter_queues_take_exactly_the_queues_redriving_into_them() {
    let sdk = sdk_on(Standin::Fast).await;
    let created = hooklane_aws::Resources {
        prefix: unique_prefix(),
        visibility: Duration::from_secs(90),
    }
    .create(&sdk)
    .await
    .unwrap();
    let sqs = aws_sdk_sqs::Client::new(&sdk);
    let urls = [
        created.ingest_queue_url.clone(),
        created.delivery_queue_url.clone(),
        created.dlq_url.clone(),
        created.ingest_dlq_url.clone().unwrap(),
        created.slow_queue_url.clone().unwrap(),
    ];
    let mut queues = Vec::new();
    for url in &urls {
        queues.push(attributes(&sqs, url).await);
    }
    let mut redriving: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for q in &queues {
        assert_eq!(
            q.get("SqsManagedSseEnabled").map(String::as_str),
            Some("true"),
            "{q:?}"
        );
        if let Some(policy) = q.get("RedrivePolicy") {
            let p: serde_json::Value = serde_json::from_str(policy).unwrap();
            let target = p["deadLetterTargetArn"].as_str().unwrap().to_owned();
            redriving
                .entry(target)
                .or_default()
                .push(q["QueueArn"].clone());
        }
    }
    assert_eq!(redriving.len(), 2, "two dead-letter queues: {redriving:?}");
    for q in &queues {
        let Some(sources) = redriving.get_mut(&q["QueueArn"]) else {
            assert!(!q.contains_key("RedriveAllowPolicy"), "{q:?}");
            continue;
        };
        let allow: serde_json::Value =
            serde_json::from_str(q.get("RedriveAllowPolicy").expect("an allow-list")).unwrap();
        assert_eq!(allow["redrivePermission"], "byQueue");
        let mut listed: Vec<String> = allow["sourceQueueArns"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap().to_owned())
            .collect();
        listed.sort();
        sources.sort();
        assert_eq!(&listed, sources, "{}", q["QueueArn"]);
    }
}
