//! The read every attempt starts with, observed on the wire: the AWS
//! delivery handler reads the subscription (its tombstone, G4) with a
//! strongly consistent `GetItem`. The local AWS-compatible server answers
//! consistent and eventual reads alike, so the test records each request
//! the adapter sends through an interceptor and checks the flag on it.

use std::sync::{Arc, Mutex};

use aws_sdk_dynamodb::operation::get_item::GetItemInput;
use aws_sdk_dynamodb::types::AttributeValue;
use aws_sdk_sqs::types::MessageSystemAttributeName;
use aws_smithy_runtime_api::box_error::BoxError;
use aws_smithy_runtime_api::client::interceptors::context::BeforeSerializationInterceptorContextRef;
use aws_smithy_runtime_api::client::interceptors::Intercept;
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use aws_smithy_types::config_bag::ConfigBag;
use hooklane_aws::handlers::delivery::{handle, Deliver};
use hooklane_core::config::Config;
use hooklane_core::contract;
use hooklane_core::domain::{Event, EventId, EventType, TenantId};
use hooklane_core::ports::{EventArchive, LaneQueue, NewDelivery, SubscriptionStore};
use hooklane_tests::aws::{fresh_store, sdk};
use hooklane_tests::{eventually, test_env, Receiver};

/// One `GetItem` sent: its sort key and its `ConsistentRead`.
type Sent = (String, Option<bool>);

/// Each `GetItem` sent.
#[derive(Debug, Default, Clone)]
struct GetItems(Arc<Mutex<Vec<Sent>>>);

impl Intercept for GetItems {
    fn name(&self) -> &'static str {
        "test-get-items"
    }

    fn read_before_serialization(
        &self,
        context: &BeforeSerializationInterceptorContextRef<'_>,
        _components: &RuntimeComponents,
        _cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        if let Some(input) = context.input().downcast_ref::<GetItemInput>() {
            let sk = match input.key().and_then(|k| k.get("sk")) {
                Some(AttributeValue::S(sk)) => sk.clone(),
                _ => String::new(),
            };
            if let Ok(mut seen) = self.0.lock() {
                seen.push((sk, input.consistent_read()));
            }
        }
        Ok(())
    }
}

#[tokio::test]
async fn every_attempt_reads_its_subscription_with_a_strongly_consistent_get_item() {
    let sdk = sdk().await;
    let seen = GetItems::default();
    let ddb = aws_sdk_dynamodb::Client::from_conf(
        aws_sdk_dynamodb::config::Builder::from(&sdk)
            .interceptor(seen.clone())
            .build(),
    );
    let store = fresh_store(30).await.with_dynamodb(ddb);
    let env = test_env(&[]);
    let config = Config::from_lookup(|k| env.get(k).cloned()).unwrap();
    let engine = hooklane_aws::wiring::engine(config, &store, &sdk, None).unwrap();
    let rx = Receiver::start().await;
    let tenant = TenantId::parse("acme").unwrap();
    let mut sub = contract::subscription(&tenant, &["*"]);
    sub.url = url::Url::parse(&rx.url("a")).unwrap();
    store.insert(&sub).await.unwrap();

    let event = Event {
        id: EventId::generate(),
        tenant: tenant.clone(),
        event_type: EventType::parse("a.b").unwrap(),
        created_at: time::OffsetDateTime::now_utc(),
        payload: bytes::Bytes::from_static(br#"{"type":"a.b","data":{}}"#),
        ordering_key: None,
    };
    store.accept(event.clone()).await.unwrap();
    store
        .enqueue(&[NewDelivery::of(&event, &sub)])
        .await
        .unwrap();
    seen.0.lock().unwrap().clear();

    let received = store
        .sqs()
        .receive_message()
        .queue_url(&store.settings().delivery_queue_url)
        .max_number_of_messages(10)
        .wait_time_seconds(2)
        .message_system_attribute_names(MessageSystemAttributeName::All)
        .send()
        .await
        .unwrap()
        .messages
        .unwrap_or_default();
    assert_eq!(received.len(), 1, "the delivery was queued");
    let ctx = Deliver {
        engine,
        store: store.clone(),
    };
    let resp = handle(&ctx, hooklane_aws::queue_poller::to_event(&received)).await;
    assert!(resp.batch_item_failures.is_empty());
    assert!(eventually(std::time::Duration::from_secs(10), || rx.count("a") == 1).await);

    let sub_key = format!("S#{}", sub.id.as_str());
    let reads: Vec<Option<bool>> = seen
        .0
        .lock()
        .unwrap()
        .iter()
        .filter(|(sk, _)| *sk == sub_key)
        .map(|(_, consistent)| *consistent)
        .collect();
    assert!(!reads.is_empty(), "the attempt read its subscription");
    assert!(
        reads.iter().all(|c| *c == Some(true)),
        "every read of the subscription before the attempt was consistent: {reads:?}"
    );
}
