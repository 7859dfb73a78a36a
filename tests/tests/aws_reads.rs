//! The read every attempt starts with, observed on the wire: the AWS
//! delivery handler reads the subscription (its tombstone, G4) with a
//! strongly consistent `GetItem`. The local AWS-compatible server answers
//! consistent and eventual reads alike, so the test records each request
//! the adapter sends through an interceptor and checks the flag on it.
//! And the read a handed-over retry does without: the slow pool hides it
//! until the time its `due` attribute carries, reading nothing.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use aws_sdk_dynamodb::operation::get_item::GetItemInput;
use aws_sdk_dynamodb::types::AttributeValue;
use aws_sdk_sqs::types::{Message, MessageSystemAttributeName};
use aws_smithy_runtime_api::box_error::BoxError;
use aws_smithy_runtime_api::client::interceptors::context::BeforeSerializationInterceptorContextRef;
use aws_smithy_runtime_api::client::interceptors::Intercept;
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use aws_smithy_types::config_bag::ConfigBag;
use hooklane_aws::handlers::delivery::{handle, Deliver};
use hooklane_aws::DUE;
use hooklane_core::config::Config;
use hooklane_core::contract;
use hooklane_core::domain::{Event, EventId, EventType, SubscriptionId, TenantId};
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

/// A store and engine over fresh resources, its `GetItem`s recorded, with
/// a subscription to `rx`'s path `a` and one delivery of it queued.
async fn one_queued_delivery(
    rx: &Receiver,
) -> (hooklane_aws::AwsStore, Deliver, GetItems, SubscriptionId) {
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
    let tenant = TenantId::parse("acme").unwrap();
    let mut sub = contract::subscription(&tenant, &["*"]);
    sub.url = url::Url::parse(&rx.url("a")).unwrap();
    store.subscriptions().insert(&sub).await.unwrap();
    let event = Event {
        id: EventId::generate(),
        tenant: tenant.clone(),
        event_type: EventType::parse("a.b").unwrap(),
        created_at: time::OffsetDateTime::now_utc(),
        payload: bytes::Bytes::from_static(br#"{"type":"a.b","data":{}}"#),
        ordering_key: None,
        traceparent: None,
        only_for: None,
    };
    store.archive().accept(event.clone()).await.unwrap();
    store
        .enqueue(&[NewDelivery::of(&std::sync::Arc::new(event.clone()), &sub)])
        .await
        .unwrap();
    let ctx = Deliver {
        engine,
        store: store.clone(),
    };
    (store, ctx, seen, sub.id)
}

/// Up to ten messages of `queue`, with their attributes.
async fn receive(store: &hooklane_aws::AwsStore, queue: &str, wait: i32) -> Vec<Message> {
    store
        .sqs()
        .receive_message()
        .queue_url(queue)
        .max_number_of_messages(10)
        .wait_time_seconds(wait)
        .message_system_attribute_names(MessageSystemAttributeName::All)
        .message_attribute_names("All")
        .send()
        .await
        .unwrap()
        .messages
        .unwrap_or_default()
}

/// The main pool hands a timed-out lane's retry over with its time in the
/// `due` attribute; at its first receive the slow pool hides it until then
/// and reads nothing (no record, no subscription). Without the attribute,
/// the same message is read and attempted.
#[tokio::test]
async fn a_handed_over_retry_waits_in_the_slow_pool_until_due_without_a_read() {
    let rx = Receiver::start().await;
    let (store, ctx, seen, _) = one_queued_delivery(&rx).await;
    let queued = receive(&store, &store.settings().delivery_queue_url, 2).await;
    assert_eq!(queued.len(), 1, "the delivery was queued");
    let body = queued[0].body().unwrap().to_owned();
    let group = queued[0]
        .attributes()
        .and_then(|a| a.get(&MessageSystemAttributeName::MessageGroupId))
        .cloned()
        .unwrap();
    let slow_url = store.settings().slow_queue_url.clone().unwrap();
    let due = time::OffsetDateTime::now_utc() + time::Duration::seconds(4);
    let send = |dedup: &'static str, due: Option<time::OffsetDateTime>| {
        let attr = due.map(|t| {
            aws_sdk_sqs::types::MessageAttributeValue::builder()
                .data_type("Number")
                .string_value(hooklane_core::record::ms(t).to_string())
                .build()
                .unwrap()
        });
        store
            .sqs()
            .send_message()
            .queue_url(&slow_url)
            .message_body(&body)
            .message_group_id(&group)
            .message_deduplication_id(dedup)
            .set_message_attributes(attr.map(|a| HashMap::from([(DUE.to_owned(), a)])))
            .send()
    };
    send("due-later", Some(due)).await.unwrap();
    let slow = Deliver {
        store: store.clone().in_slow_pool(),
        ..ctx.clone()
    };
    seen.0.lock().unwrap().clear();
    let handed = receive(&store, &slow_url, 2).await;
    assert_eq!(handed.len(), 1);
    let resp = handle(&slow, hooklane_aws::queue_poller::to_event(&handed)).await;
    assert_eq!(resp.batch_item_failures.len(), 1, "it comes back later");
    assert!(seen.0.lock().unwrap().is_empty(), "nothing was read");
    assert_eq!(rx.count("a"), 0, "not attempted");
    // Hidden until it is due (SQS counts whole seconds), not for the
    // queue's 30 s visibility timeout.
    let mut back = Vec::new();
    for _ in 0..5 {
        back = receive(&store, &slow_url, 2).await;
        if !back.is_empty() {
            break;
        }
    }
    let back_at = time::OffsetDateTime::now_utc();
    assert_eq!(back.len(), 1, "back when due");
    assert!(
        back_at >= due - time::Duration::seconds(1),
        "not before it is due"
    );

    // The same body without the attribute (its group is free once the
    // first message is deleted) is read and attempted at once.
    let receipt = back[0].receipt_handle().unwrap();
    let delete = store.sqs().delete_message().queue_url(&slow_url);
    delete.receipt_handle(receipt).send().await.unwrap();
    send("due-unknown", None).await.unwrap();
    let plain = receive(&store, &slow_url, 2).await;
    assert_eq!(plain.len(), 1);
    handle(&slow, hooklane_aws::queue_poller::to_event(&plain)).await;
    assert!(eventually(std::time::Duration::from_secs(10), || rx.count("a") == 1).await);
    assert!(
        !seen.0.lock().unwrap().is_empty(),
        "read before its attempt"
    );
}

#[tokio::test]
async fn every_attempt_reads_its_subscription_with_a_strongly_consistent_get_item() {
    let rx = Receiver::start().await;
    let (store, ctx, seen, sub_id) = one_queued_delivery(&rx).await;
    seen.0.lock().unwrap().clear();
    let received = receive(&store, &store.settings().delivery_queue_url, 2).await;
    assert_eq!(received.len(), 1, "the delivery was queued");
    let resp = handle(&ctx, hooklane_aws::queue_poller::to_event(&received)).await;
    assert!(resp.batch_item_failures.is_empty());
    assert!(eventually(std::time::Duration::from_secs(10), || rx.count("a") == 1).await);

    let sub_key = format!("S#{}", sub_id.as_str());
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
