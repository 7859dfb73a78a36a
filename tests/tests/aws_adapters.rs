//! The AWS adapters against the local AWS-compatible server (moto, real
//! wire protocol through the official SDK clients): the shared storage
//! contract, the delivery handler called directly with `SqsEvent`
//! batches, spill and refill, and the dead-letter operations. The storage
//! contract and the handler's tests (the dead-letter ones among them) run
//! on a stack of `infra/template.yaml` deployed to the stand-in, named by
//! the delivery function's environment as deployed (`tests/src/stack.rs`);
//! the tests that need a short visibility timeout make their own queues on
//! moto, and the one through `serve` runs on the stand-in
//! `HOOKLANE_TEST_STANDIN` chooses.
//! The one operation moto does not implement, `StartMessageMoveTask`, is
//! covered with `aws-smithy-mocks` at the end.

use std::time::Duration;

use aws_sdk_sqs::types::MessageSystemAttributeName;
use hooklane_aws::handlers::delivery::{handle, Deliver};
use hooklane_aws::AwsStore;
use hooklane_core::config::Config;
use hooklane_core::contract::{self, Harness};
use hooklane_core::domain::{
    Delivery, Event, EventId, EventType, Health, SubscriptionId, TenantId,
};
use hooklane_core::ports::{DeadLetters, EventArchive, LaneQueue, NewDelivery, SubscriptionStore};
use hooklane_tests::aws::{fresh_store_on, sdk_on, Standin};
use hooklane_tests::stack::deployed_store;
use hooklane_tests::{eventually, test_env, Receiver, Reply};

/// This file's stand-in: moto, where the template's stacks are deployed
/// (the storage contract runs on the fast pair too, below).
async fn sdk() -> aws_config::SdkConfig {
    sdk_on(Standin::Moto).await
}

/// A store over new resources on moto.
async fn fresh_store(visibility_secs: u64) -> AwsStore {
    fresh_store_on(Standin::Moto, visibility_secs).await
}

/// The contract's harness over a store, reading raw items through the
/// stand-in the store is on.
struct Aws(AwsStore, Standin);

#[async_trait::async_trait]
impl Harness for Aws {
    fn ports(&self) -> hooklane_core::engine::Ports {
        contract::ports_over(self.0.clone())
    }
    /// Receives (and deletes) the lane's next message, with its record.
    /// Messages another check left in the queue (a deleted subscription's,
    /// say) are deleted on the way.
    async fn next_delivery(&self, sub: &SubscriptionId) -> Option<Delivery> {
        let url = &self.0.settings().delivery_queue_url;
        let mut mine = None;
        for _ in 0..10 {
            for m in receive(&self.0, url).await {
                let body: serde_json::Value = serde_json::from_str(m.body()?).ok()?;
                let of_sub = body["subscription_id"] == sub.as_str();
                if of_sub && mine.is_some() {
                    continue;
                }
                delete(&self.0, url, &m).await;
                if of_sub {
                    mine = Some(body);
                }
            }
            if mine.is_some() {
                break;
            }
        }
        let body = mine?;
        let event = EventId::parse(body["event_id"].as_str()?).ok()?;
        let rec = self
            .0
            .records()
            .delivery_record(sub, &event)
            .await
            .ok()?
            .unwrap_or_else(hooklane_core::domain::DeliveryRecord::queued);
        Some(Delivery {
            seq: 0,
            tenant: TenantId::parse(body["tenant"].as_str()?).ok()?,
            subscription_id: sub.clone(),
            event_id: event,
            event_type: EventType::parse(body["event_type"].as_str()?).ok()?,
            lane: 0,
            attempts: rec.attempts,
            first_attempt_at: rec.first_attempt_at,
            next_attempt_at: time::OffsetDateTime::now_utc(),
        })
    }
    /// Every item of the table, scanned page by page.
    async fn raw_contents(&self) -> String {
        let ddb = aws_sdk_dynamodb::Client::new(&sdk_on(self.1).await);
        let pages = ddb
            .scan()
            .table_name(&self.0.settings().table)
            .into_paginator()
            .items()
            .send()
            .collect::<Vec<_>>()
            .await;
        let items: Vec<_> = pages.into_iter().map(|i| i.expect("scan")).collect();
        format!("{items:?}")
    }
}

async fn receive(store: &AwsStore, url: &str) -> Vec<aws_sdk_sqs::types::Message> {
    store
        .sqs()
        .receive_message()
        .queue_url(url)
        .max_number_of_messages(10)
        .message_system_attribute_names(MessageSystemAttributeName::All)
        .message_attribute_names("All")
        .send()
        .await
        .expect("receive")
        .messages
        .unwrap_or_default()
}

/// Receives until a batch comes, for at most ten seconds (empty then).
async fn receive_within_10s(store: &AwsStore, url: &str) -> Vec<aws_sdk_sqs::types::Message> {
    for _ in 0..20 {
        let msgs = receive(store, url).await;
        if !msgs.is_empty() {
            return msgs;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    Vec::new()
}

async fn delete(store: &AwsStore, url: &str, m: &aws_sdk_sqs::types::Message) {
    store
        .sqs()
        .delete_message()
        .queue_url(url)
        .receipt_handle(m.receipt_handle().unwrap_or_default())
        .send()
        .await
        .expect("delete");
}

/// The local server keeps a FIFO group's order as SQS does when received
/// messages time out: the group is handed out again from its first
/// message, never a later one first (the tests of lane order rely on it;
/// `tests/moto_server.py` mends moto there).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_local_server_hands_a_timed_out_group_out_again_from_its_first_message() {
    let store = fresh_store(30).await;
    let url = store.settings().delivery_queue_url.clone();
    for n in 0..4 {
        store
            .sqs()
            .send_message()
            .queue_url(&url)
            .message_group_id("g")
            .message_deduplication_id(format!("m{n}"))
            .message_body(format!("m{n}"))
            .send()
            .await
            .expect("send");
    }
    let bodies = |msgs: &[aws_sdk_sqs::types::Message]| -> Vec<String> {
        msgs.iter()
            .map(|m| m.body().unwrap_or_default().to_owned())
            .collect()
    };
    let first = store
        .sqs()
        .receive_message()
        .queue_url(&url)
        .max_number_of_messages(3)
        .visibility_timeout(1)
        .send()
        .await
        .expect("receive")
        .messages
        .unwrap_or_default();
    assert_eq!(bodies(&first), ["m0", "m1", "m2"]);
    tokio::time::sleep(Duration::from_millis(2200)).await;
    let again = receive(&store, &url).await;
    assert_eq!(
        bodies(&again).first().map(String::as_str),
        Some("m0"),
        "{:?}",
        bodies(&again)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_aws_adapters_pass_the_storage_contract() {
    // On a stack of the template, named by the delivery function's
    // environment as deployed.
    contract::run_all(&Aws(deployed_store().await, Standin::Moto)).await;
}

/// The same contract on the fast pair (dynoxide, ministack), over resources
/// `serve --backend aws --create-resources` would make.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_aws_adapters_pass_the_storage_contract_on_the_fast_pair() {
    let store = fresh_store_on(Standin::Fast, 30).await;
    contract::run_all(&Aws(store, Standin::Fast)).await;
}

/// A delivery handler over a new stack of the template (its queues and
/// table named by the delivery function's environment as deployed), with
/// one subscription per receiver endpoint name.
async fn handler_with(
    schedule: &str,
    names: &[&str],
    rx: &Receiver,
) -> (Deliver, Vec<(SubscriptionId, TenantId)>) {
    // Attempts may take a minute: a hung receiver holds its group that long.
    handler_over(deployed_store().await, (schedule, "60s"), names, rx).await
}

/// [`handler_with`] over `store`, with this retry schedule and attempt
/// timeout.
async fn handler_over(
    store: AwsStore,
    (schedule, timeout): (&str, &str),
    names: &[&str],
    rx: &Receiver,
) -> (Deliver, Vec<(SubscriptionId, TenantId)>) {
    let env = test_env(&[
        ("HOOKLANE_RETRY_SCHEDULE", schedule),
        ("HOOKLANE_ATTEMPT_TIMEOUT", timeout),
    ]);
    let config = Config::from_lookup(|k| env.get(k).cloned()).unwrap();
    let engine = hooklane_aws::wiring::engine(config, &store, &sdk().await, None).unwrap();
    let tenant = TenantId::parse("acme").unwrap();
    let mut subs = Vec::new();
    for name in names {
        let mut sub = contract::subscription(&tenant, &["*"]);
        sub.url = url::Url::parse(&rx.url(name)).unwrap();
        store.subscriptions().insert(&sub).await.unwrap();
        subs.push((sub.id, tenant.clone()));
    }
    (Deliver { engine, store }, subs)
}

/// A new `a.b` event of `tenant`.
fn an_event(tenant: &TenantId) -> Event {
    Event {
        id: EventId::generate(),
        tenant: tenant.clone(),
        event_type: EventType::parse("a.b").unwrap(),
        created_at: time::OffsetDateTime::now_utc(),
        payload: bytes::Bytes::from_static(br#"{"type":"a.b","data":{}}"#),
        ordering_key: None,
        traceparent: None,
        only_for: None,
    }
}

/// Archives one event and enqueues it to the subscriptions.
async fn publish_to(ctx: &Deliver, subs: &[(SubscriptionId, TenantId)]) -> EventId {
    let tenant = subs[0].1.clone();
    let event = an_event(&tenant);
    ctx.store.archive().accept(event.clone()).await.unwrap();
    let carried = std::sync::Arc::new(event.clone());
    let batch: Vec<NewDelivery> = subs
        .iter()
        .map(|(s, t)| NewDelivery {
            tenant: t.clone(),
            subscription_id: s.clone(),
            event: Some(carried.clone()),
            ..NewDelivery::to(
                &hooklane_core::contract::subscription(t, &["*"]),
                &event.id,
                &event.event_type,
                None,
            )
        })
        .collect();
    ctx.store.enqueue(&batch).await.unwrap();
    event.id
}

/// Runs the handler on a batch and deletes what it did not report failed,
/// as Lambda's event source mapping does.
async fn run_batch(
    ctx: &Deliver,
    msgs: &[aws_sdk_sqs::types::Message],
) -> aws_lambda_events::event::sqs::SqsBatchResponse {
    let resp = handle(ctx, hooklane_aws::queue_poller::to_event(msgs)).await;
    let failed = failed_ids(&resp);
    for m in msgs {
        if !failed.iter().any(|f| Some(f.as_str()) == m.message_id()) {
            delete(&ctx.store, &ctx.store.settings().delivery_queue_url, m).await;
        }
    }
    resp
}

fn failed_ids(resp: &aws_lambda_events::event::sqs::SqsBatchResponse) -> Vec<String> {
    let mut ids: Vec<String> = resp
        .batch_item_failures
        .iter()
        .map(|f| f.item_identifier.clone())
        .collect();
    ids.sort();
    ids
}

fn ids_of_group(msgs: &[aws_sdk_sqs::types::Message], sub: &SubscriptionId) -> Vec<String> {
    let mut ids: Vec<String> = msgs
        .iter()
        .filter(|m| m.body().unwrap_or("").contains(sub.as_str()))
        .filter_map(|m| m.message_id().map(str::to_owned))
        .collect();
    ids.sort();
    ids
}

/// A message received again while an earlier receive of it still runs its
/// step (its visibility ran out: `serve`'s stand-in mappings bound no
/// batch's time): both read the record, one starts the attempt and the
/// other is refused. The refused one used to delete the message, which
/// lost the delivery when the attempt then went into retry (its message
/// gone, the retry's hide failed on it); it now hides the message for the
/// attempt's lease, and the retry is attempted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_received_twice_at_once_goes_on_to_its_retry() {
    let rx = Receiver::start().await;
    rx.script("r", vec![Reply::Status(503)]);
    rx.set_default("r", Reply::Status(204));
    // Visible again a second after each receive; a lease of 3 s + 5 s.
    let store = fresh_store(1).await;
    let (ctx, subs) = handler_over(store, ("0s,1s", "3s"), &["r"], &rx).await;
    publish_to(&ctx, &subs).await;
    let url = ctx.store.settings().delivery_queue_url.clone();
    // Three receives of the one message, each after the last one's
    // visibility ran out: the later two both read the record.
    let mut copies = Vec::new();
    for _ in 0..3 {
        let got = receive_within_10s(&ctx.store, &url).await;
        assert_eq!(got.len(), 1, "the one message");
        copies.push(got);
        tokio::time::sleep(Duration::from_millis(1100)).await;
    }
    // Each as the event source mapping runs it: what the handler does not
    // report failed is deleted, with that receive's handle.
    // Polled together in one task, both records' reads are sent before
    // either receive can have started the attempt (three calls on).
    let (a, b) = (copies.remove(1), copies.remove(1));
    tokio::join!(run_batch(&ctx, &a), run_batch(&ctx, &b));
    assert_eq!(rx.count("r"), 1, "one of the two attempted, once");
    // The message is still there: its retry is attempted (it comes back
    // within the lease, 8 s).
    let delivered = async {
        for _ in 0..20 {
            let msgs = receive_within_10s(&ctx.store, &url).await;
            if !msgs.is_empty() {
                run_batch(&ctx, &msgs).await;
            }
            if rx.count("r") >= 2 {
                return true;
            }
        }
        false
    };
    assert!(
        tokio::time::timeout(Duration::from_secs(40), delivered)
            .await
            .unwrap_or(false),
        "the retry was attempted: {} requests",
        rx.count("r")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_a_mixed_batch_only_the_failing_groups_remainder_is_reported() {
    let rx = Receiver::start().await;
    rx.set_default("bad", Reply::Status(500));
    let (ctx, subs) = handler_with("0s,30s", &["bad", "good"], &rx).await;
    publish_to(&ctx, &subs).await;
    publish_to(&ctx, &subs).await;
    let msgs = receive(&ctx.store, &ctx.store.settings().delivery_queue_url).await;
    assert_eq!(msgs.len(), 4, "two groups of two in one batch");
    let resp = handle(&ctx, hooklane_aws::queue_poller::to_event(&msgs)).await;
    assert_eq!(
        failed_ids(&resp),
        ids_of_group(&msgs, &subs[0].0),
        "the failing group only"
    );
    assert_eq!(
        rx.count("bad"),
        1,
        "the failing group stopped at its first message"
    );
    assert_eq!(rx.count("good"), 2, "the healthy group ran both");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_finished_groups_messages_are_deleted_while_another_group_of_its_batch_hangs() {
    let rx = Receiver::start().await;
    rx.set_default("hung", Reply::Hang);
    let (ctx, subs) = handler_with("0s,30s", &["hung", "good"], &rx).await;
    publish_to(&ctx, &subs).await;
    let url = ctx.store.settings().delivery_queue_url.clone();
    let msgs = receive(&ctx.store, &url).await;
    assert_eq!(msgs.len(), 2, "both groups in one batch");
    let batch = {
        let ctx = ctx.clone();
        tokio::spawn(async move { handle(&ctx, hooklane_aws::queue_poller::to_event(&msgs)).await })
    };
    // Both attempts run at once: either request may reach the receiver first.
    assert!(
        eventually(Duration::from_secs(20), || rx.count("good") == 1
            && rx.hanging() == 1)
        .await,
        "the good group delivered while the other group is still running"
    );

    // The good group's next message is handed out while the batch is still
    // running: FIFO would hold it back behind an undeleted earlier one.
    publish_to(&ctx, &subs[1..]).await;
    let next = receive_within_10s(&ctx.store, &url).await;
    assert_eq!(
        ids_of_group(&next, &subs[1].0).len(),
        1,
        "the good group's next message"
    );
    assert!(!batch.is_finished(), "the hung group still holds its batch");
    assert_eq!(rx.hanging(), 1);
    batch.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redelivery_that_claims_to_be_a_first_receive_still_gets_its_exact_attempt() {
    let rx = Receiver::start().await;
    rx.set_default("flaky", Reply::Status(500));
    let (ctx, subs) = handler_with("0s,1s,1s", &["flaky"], &rx).await;
    publish_to(&ctx, &subs).await;
    let url = ctx.store.settings().delivery_queue_url.clone();
    let first = receive(&ctx.store, &url).await;
    assert_eq!(
        failed_ids(&run_batch(&ctx, &first).await).len(),
        1,
        "attempt 1 failed"
    );
    rx.set_default("flaky", Reply::Status(204));

    // The same message again, after its backoff, but reporting a receive
    // count of 1 (the count is only approximate).
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let again = receive_within_10s(&ctx.store, &url).await;
    assert_eq!(again.len(), 1, "the message came back");
    let mut event = hooklane_aws::queue_poller::to_event(&again);
    event.records[0]
        .attributes
        .insert("ApproximateReceiveCount".into(), "1".into());
    let resp = handle(&ctx, event).await;
    assert!(failed_ids(&resp).is_empty());
    let attempts: Vec<String> = rx
        .requests("flaky")
        .iter()
        .map(|r| r.header("webhook-attempt"))
        .collect();
    assert_eq!(attempts, ["1", "2"], "attempted again, as attempt 2");
}

/// A delivery of `event` (type `a.b`) to `sub` on lane 0, as a message
/// read as a first receive carries it: no attempt yet.
fn unattempted(tenant: &TenantId, sub: &SubscriptionId, event: &EventId) -> Delivery {
    Delivery {
        seq: 0,
        tenant: tenant.clone(),
        subscription_id: sub.clone(),
        event_id: event.clone(),
        event_type: EventType::parse("a.b").unwrap(),
        lane: 0,
        attempts: 0,
        first_attempt_at: None,
        next_attempt_at: time::OffsetDateTime::now_utc(),
    }
}

/// A message back while its first attempt still runs elsewhere, with a
/// receive count of 1 and its subscription suspended meanwhile: the hold
/// waits for that attempt (the message goes back), and the delivery is
/// not left pending with no message.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hold_beside_a_running_first_attempt_sends_its_message_back() {
    use hooklane_core::domain::DeliveryState;
    use hooklane_core::ports::Suspensions;
    let rx = Receiver::start().await;
    let (ctx, subs) = handler_with("0s,1s,1s", &["held"], &rx).await;
    let event = publish_to(&ctx, &subs).await;
    let (sub, tenant) = subs[0].clone();
    let url = ctx.store.settings().delivery_queue_url.clone();
    let msgs = receive(&ctx.store, &url).await;
    assert_eq!(msgs.len(), 1);
    // Attempt 1 begun by another invocation, its lease a minute long.
    let now = time::OffsetDateTime::now_utc();
    let d = unattempted(&tenant, &sub, &event);
    assert!(ctx
        .store
        .begin(&d, now, now + Duration::from_secs(60))
        .await
        .unwrap());
    assert!(ctx
        .store
        .suspensions()
        .suspend(&tenant, &sub, now, "dead", &Health::default())
        .await
        .unwrap());
    let mut batch = hooklane_aws::queue_poller::to_event(&msgs);
    batch.records[0]
        .attributes
        .insert("ApproximateReceiveCount".into(), "1".into());
    let resp = handle(&ctx, batch).await;
    assert_eq!(
        failed_ids(&resp).len(),
        1,
        "the message goes back, not deleted"
    );
    let rec = record(&ctx.store, &sub, &event).await;
    assert_eq!((rec.state, rec.attempts), (DeliveryState::Pending, 1));
    assert!(rx.requests("held").is_empty());
}

/// The dead-letter queue's messages parked as unreadable: body and reason.
async fn parked_unreadable(store: &AwsStore) -> Vec<(String, String)> {
    receive_within_10s(store, &store.settings().dlq_url)
        .await
        .iter()
        .filter(|m| {
            m.message_attributes()
                .is_some_and(|a| a.contains_key("unreadable"))
        })
        .map(|m| {
            let reason = m.message_attributes().and_then(|a| a.get("reason"));
            (
                m.body().unwrap_or_default().to_owned(),
                reason
                    .and_then(|r| r.string_value())
                    .unwrap_or_default()
                    .to_owned(),
            )
        })
        .collect()
}

fn unreadable_count() -> u64 {
    hooklane_core::record::UNREADABLE.get()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreadable_message_is_parked_with_the_reason_and_its_group_goes_on() {
    let rx = Receiver::start().await;
    let (ctx, subs) = handler_with("0s", &["good"], &rx).await;
    publish_to(&ctx, &subs).await;
    let mut msgs = receive(&ctx.store, &ctx.store.settings().delivery_queue_url).await;
    let mut poison = msgs[0].clone();
    poison.message_id = Some("poison-1".into());
    poison.body = Some("{not json".into());
    msgs.insert(0, poison);
    let before = unreadable_count();
    let resp = handle(&ctx, hooklane_aws::queue_poller::to_event(&msgs)).await;
    assert!(failed_ids(&resp).is_empty(), "parked, so not sent back");
    assert_eq!(
        rx.count("good"),
        1,
        "the same group's next message still ran"
    );
    let parked = parked_unreadable(&ctx.store).await;
    assert_eq!(parked.len(), 1, "{parked:?}");
    assert_eq!(parked[0].0, "{not json", "kept as it was");
    assert!(parked[0].1.contains("does not parse"), "{parked:?}");
    assert!(unreadable_count() > before, "counted");
}

/// An ingest message that does not parse fails alone: it is sent back at
/// its first two receives, then moved as it is, with the reason, to the
/// ingest queue's dead-letter queue (not after the redrive's ten
/// receives), and the events around it, of the same tenant's group, still
/// fan out (twice here: fanning out again queues nothing twice).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreadable_ingest_message_goes_to_its_dead_letter_queue_with_the_reason_and_the_batch_goes_on(
) {
    let (store, fan, subs, ids) = accepted_for_fan_out(1, 2).await;
    let ingest = store.settings().ingest_queue_url.clone();
    let mut msgs = Vec::new();
    for _ in 0..5 {
        msgs.extend(receive_within_10s(&store, &ingest).await);
        if msgs.len() >= 2 {
            break;
        }
    }
    assert_eq!(msgs.len(), 2, "both events' ingest messages");
    let mut poison = msgs[0].clone();
    poison.message_id = Some("poison-ingest".into());
    poison.body = Some("{not json".into());
    msgs.insert(1, poison);
    let before = unreadable_count();
    // At its first receives it is sent back (a newer version's message
    // would be read by the newer function); at its third, moved.
    let mut event = hooklane_aws::queue_poller::to_event(&msgs);
    event.records[1]
        .attributes
        .insert("ApproximateReceiveCount".into(), "2".into());
    let resp = hooklane_aws::handlers::fanout::handle(&fan, event.clone()).await;
    assert_eq!(failed_ids(&resp), ["poison-ingest"], "sent back at first");
    event.records[1]
        .attributes
        .insert("ApproximateReceiveCount".into(), "3".into());
    let resp = hooklane_aws::handlers::fanout::handle(&fan, event).await;
    assert!(failed_ids(&resp).is_empty(), "moved, so not sent back");
    let queued = queued_event_ids(&store).await;
    assert_eq!(queued.get(&subs[0]), Some(&ids), "both events fanned out");
    let dlq = store
        .settings()
        .ingest_dlq_url
        .clone()
        .expect("an ingest DLQ");
    let moved = receive_within_10s(&store, &dlq).await;
    assert_eq!(moved.len(), 1, "{moved:?}");
    assert_eq!(moved[0].body(), Some("{not json"), "kept as it was");
    let attr = |name: &str| {
        moved[0]
            .message_attributes()
            .and_then(|a| a.get(name))
            .and_then(|v| v.string_value())
            .unwrap_or_default()
            .to_owned()
    };
    assert_eq!(attr("unreadable"), "message poison-ingest");
    assert!(!attr("reason").is_empty(), "a reason is attached");
    assert!(unreadable_count() > before, "counted");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delivery_record_that_does_not_parse_parks_its_delivery_never_read_as_pending() {
    use aws_sdk_dynamodb::types::AttributeValue;
    let rx = Receiver::start().await;
    let (ctx, subs) = handler_with("0s", &["lane"], &rx).await;
    let event = publish_to(&ctx, &subs).await;
    let ddb = aws_sdk_dynamodb::Client::new(&sdk().await);
    ddb.put_item()
        .table_name(&ctx.store.settings().table)
        .item("pk", AttributeValue::S(format!("D#{}", subs[0].0)))
        .item("sk", AttributeValue::S(format!("E#{event}")))
        .item("state", AttributeValue::S("pendnig".into()))
        .item("attempts", AttributeValue::N("0".into()))
        .send()
        .await
        .expect("put a corrupt record");
    let before = unreadable_count();
    let msgs = receive(&ctx.store, &ctx.store.settings().delivery_queue_url).await;
    let resp = run_batch(&ctx, &msgs).await;
    assert!(failed_ids(&resp).is_empty());
    assert_eq!(rx.count("lane"), 0, "not attempted");
    let parked = parked_unreadable(&ctx.store).await;
    assert_eq!(parked.len(), 1, "{parked:?}");
    assert!(
        parked[0].0.contains(event.as_str()),
        "the message as it was"
    );
    assert!(
        parked[0].1.contains("delivery record does not parse"),
        "{parked:?}"
    );
    assert!(unreadable_count() > before, "counted");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tombstoned_subscriptions_delivery_is_dropped_not_parked() {
    let rx = Receiver::start().await;
    let (ctx, subs) = handler_with("0s", &["gone"], &rx).await;
    let event = publish_to(&ctx, &subs).await;
    ctx.store
        .subscriptions()
        .delete(&subs[0].1, &subs[0].0)
        .await
        .unwrap();
    let msgs = receive(&ctx.store, &ctx.store.settings().delivery_queue_url).await;
    let resp = handle(&ctx, hooklane_aws::queue_poller::to_event(&msgs)).await;
    assert!(
        resp.batch_item_failures.is_empty(),
        "done: deleted from the queue"
    );
    assert_eq!(rx.count("gone"), 0);
    assert_eq!(ctx.engine.metrics.dropped.get(), 1);
    assert!(
        DeadLetters::list(&ctx.store.dead_letters(), &subs[0].1, None, None, 10)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(
        receive(&ctx.store, &ctx.store.settings().dlq_url)
            .await
            .is_empty(),
        "nothing dead-lettered"
    );
    let _ = event;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exhaustion_parks_to_the_dead_letter_queue_with_attributes_saying_why() {
    let rx = Receiver::start().await;
    rx.set_default("down", Reply::Status(503));
    let (ctx, subs) = handler_with("0s", &["down"], &rx).await;
    let event = publish_to(&ctx, &subs).await;
    let msgs = receive(&ctx.store, &ctx.store.settings().delivery_queue_url).await;
    let resp = handle(&ctx, hooklane_aws::queue_poller::to_event(&msgs)).await;
    assert!(resp.batch_item_failures.is_empty());
    let parked = ctx.store.dlq_peek(&Default::default(), 10).await.unwrap();
    assert_eq!(parked.len(), 1);
    let a = &parked[0].attributes;
    assert_eq!(a["tenant"], "acme");
    assert_eq!(a["subscription_id"], subs[0].0.as_str());
    assert_eq!(a["event_id"], event.as_str());
    assert_eq!(a["event_type"], "a.b");
    assert_eq!(a["attempts"], "1");
    assert_eq!(a["last_status"], "503");
    assert!(a["reason"].contains("1 attempts"), "{}", a["reason"]);
    assert!(a.contains_key("first_attempt_at") && a.contains_key("last_attempt_at"));
    // Peeking consumed nothing.
    assert_eq!(
        ctx.store
            .dlq_peek(&Default::default(), 10)
            .await
            .unwrap()
            .len(),
        1
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn selective_replay_from_the_dead_letter_queue_delivers_with_a_fresh_ladder() {
    let rx = Receiver::start().await;
    rx.script("flaky", vec![Reply::Status(503)]);
    let (ctx, subs) = handler_with("0s", &["flaky"], &rx).await;
    let event = publish_to(&ctx, &subs).await;
    let msgs = receive(&ctx.store, &ctx.store.settings().delivery_queue_url).await;
    run_batch(&ctx, &msgs).await;
    let filter = hooklane_aws::dlq::Filter {
        events: Some(vec![event.as_str().to_owned()]),
        ..Default::default()
    };
    assert_eq!(
        ctx.store.dlq_replay(&filter, 100, &|_| {}).await.unwrap(),
        1
    );
    assert!(
        ctx.store
            .dlq_peek(&Default::default(), 10)
            .await
            .unwrap()
            .is_empty(),
        "deleted from the DLQ"
    );
    let msgs = receive(&ctx.store, &ctx.store.settings().delivery_queue_url).await;
    assert_eq!(msgs.len(), 1, "back on the delivery queue");
    run_batch(&ctx, &msgs).await;
    let reqs = rx.requests("flaky");
    assert_eq!(reqs.len(), 2);
    assert_eq!(reqs[1].header("webhook-attempt"), "1", "a fresh ladder");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn through_serve_a_failing_lanes_later_events_all_arrive_in_order_after_it_recovers() {
    let server = hooklane_tests::Server::start_on(
        hooklane_tests::Backend::Aws,
        test_env(&[("HOOKLANE_RETRY_SCHEDULE", "0s,2s,2s,2s")]),
    )
    .await;
    let rx = Receiver::start().await;
    rx.script("lane", vec![Reply::Status(500), Reply::Status(500)]);
    server.subscribe("acme", &rx.url("lane"), &["*"]).await;
    let first = server
        .publish("acme", "a.b", serde_json::json!({"n": 0}))
        .await;
    assert!(eventually(Duration::from_secs(20), || rx.count("lane") >= 1).await);
    // The lane is now failing: wait until the flag is visible to fan-out.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut ids = vec![first];
    for n in 1..6 {
        ids.push(
            server
                .publish("acme", "a.b", serde_json::json!({ "n": n }))
                .await,
        );
    }
    assert!(
        eventually(Duration::from_secs(60), || {
            let mut seen: Vec<String> = rx
                .requests("lane")
                .iter()
                .map(|r| r.header("webhook-id"))
                .collect();
            seen.dedup();
            seen == ids
        })
        .await,
        "every event arrived once the lane recovered, in order: {:?}",
        rx.requests("lane")
            .iter()
            .map(|r| r.header("webhook-id"))
            .collect::<Vec<_>>()
    );
}

#[tokio::test]
async fn full_redrive_starts_a_message_move_task_from_the_dead_letter_queue_to_the_delivery_queue()
{
    use aws_sdk_sqs::operation::get_queue_attributes::GetQueueAttributesOutput;
    use aws_sdk_sqs::operation::start_message_move_task::StartMessageMoveTaskOutput;
    use aws_sdk_sqs::types::QueueAttributeName;
    use aws_smithy_mocks::{mock, mock_client, RuleMode};
    // moto does not implement StartMessageMoveTask: mock the SQS client.
    let arn_rule = mock!(aws_sdk_sqs::Client::get_queue_attributes).then_output(|| {
        GetQueueAttributesOutput::builder()
            .attributes(
                QueueAttributeName::QueueArn,
                "arn:aws:sqs:us-east-1:1:q.fifo",
            )
            .build()
    });
    let move_rule = mock!(aws_sdk_sqs::Client::start_message_move_task)
        .match_requests(|r| r.source_arn().is_some() && r.destination_arn().is_some())
        .then_output(|| {
            StartMessageMoveTaskOutput::builder()
                .task_handle("task-1")
                .build()
        });
    let sqs = mock_client!(aws_sdk_sqs, RuleMode::MatchAny, [&arn_rule, &move_rule]);
    let store = AwsStore::with_clients(
        sdk().await,
        sqs,
        hooklane_aws::Settings {
            dlq_url: "https://sqs.local/1/dlq.fifo".into(),
            delivery_queue_url: "https://sqs.local/1/deliveries.fifo".into(),
            ..Default::default()
        },
    );
    assert_eq!(store.dlq_redrive_all().await.unwrap(), "task-1");
    assert_eq!(move_rule.num_calls(), 1);
    assert_eq!(
        arn_rule.num_calls(),
        2,
        "source and destination ARNs looked up"
    );
}

/// Counts a subscription's spilled deliveries in the table.
async fn spilled(store: &AwsStore, sub: &SubscriptionId) -> usize {
    let ddb = aws_sdk_dynamodb::Client::new(&sdk().await);
    ddb.query()
        .table_name(&store.settings().table)
        .key_condition_expression("pk = :pk")
        .expression_attribute_values(
            ":pk",
            aws_sdk_dynamodb::types::AttributeValue::S(format!("L#{}", sub.as_str())),
        )
        .send()
        .await
        .expect("query")
        .count as usize
}

/// The lane's spill flag, as stored on the subscription's item.
async fn spilling(store: &AwsStore, tenant: &TenantId, sub: &SubscriptionId) -> bool {
    use aws_sdk_dynamodb::types::AttributeValue;
    let ddb = aws_sdk_dynamodb::Client::new(&sdk().await);
    let item = ddb
        .get_item()
        .table_name(&store.settings().table)
        .key("pk", AttributeValue::S(format!("T#{}", tenant.as_str())))
        .key("sk", AttributeValue::S(format!("S#{}", sub.as_str())))
        .consistent_read(true)
        .send()
        .await
        .expect("get item")
        .item
        .expect("the subscription's item");
    matches!(item.get("spilling"), Some(AttributeValue::Bool(true)))
}

/// The subscription's count of spilled deliveries, as stored.
async fn spill_count(store: &AwsStore, tenant: &TenantId, sub: &SubscriptionId) -> i64 {
    use aws_sdk_dynamodb::types::AttributeValue;
    let ddb = aws_sdk_dynamodb::Client::new(&sdk().await);
    let item = ddb
        .get_item()
        .table_name(&store.settings().table)
        .key("pk", AttributeValue::S(format!("T#{}", tenant.as_str())))
        .key("sk", AttributeValue::S(format!("S#{}", sub.as_str())))
        .consistent_read(true)
        .send()
        .await
        .expect("get item")
        .item
        .expect("the subscription's item");
    match item.get("spilled") {
        Some(AttributeValue::N(n)) => n.parse().expect("a number"),
        _ => 0,
    }
}

/// A lane whose first delivery failed and waits for its retry (due 1 s
/// later): its later deliveries spill. The receiver answers `replies` in
/// turn, then 204.
struct FailingLane {
    rx: Receiver,
    ctx: Deliver,
    sub: SubscriptionId,
    tenant: TenantId,
    url: String,
    first_event: EventId,
}

async fn failing_lane(replies: Vec<Reply>) -> FailingLane {
    let rx = Receiver::start().await;
    rx.script("lane", replies);
    let (ctx, subs) = handler_with("0s,1s", &["lane"], &rx).await;
    let (sub, tenant) = subs[0].clone();
    let first_event = publish_to(&ctx, &subs).await;
    let url = ctx.store.settings().delivery_queue_url.clone();
    let first = receive(&ctx.store, &url).await;
    assert_eq!(
        run_batch(&ctx, &first).await.batch_item_failures.len(),
        1,
        "the first delivery is retrying"
    );
    FailingLane {
        rx,
        ctx,
        sub,
        tenant,
        url,
        first_event,
    }
}

/// Accepts and fans out `n` new events of `tenant`, one after another;
/// their ids in order.
async fn fan_out_new(ctx: &Deliver, tenant: &TenantId, n: usize) -> Vec<String> {
    let mut ids = Vec::new();
    for _ in 0..n {
        let event = an_event(tenant);
        ctx.store.archive().accept(event.clone()).await.unwrap();
        ctx.engine.fan_out(&event).await.unwrap();
        ids.push(event.id.as_str().to_owned());
    }
    ids
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spills_are_each_counted_with_their_item_and_the_refill_clears_the_flag() {
    let FailingLane {
        ctx,
        sub,
        tenant,
        url,
        ..
    } = failing_lane(vec![Reply::Status(500)]).await;

    let events: Vec<Event> = (0..12).map(|_| an_event(&tenant)).collect();
    for event in &events {
        ctx.store.archive().accept(event.clone()).await.unwrap();
    }
    // One after another: moto does not apply concurrent `TransactWriteItems`
    // `ADD`s atomically (DynamoDB does), so a concurrent run here tests moto.
    for event in &events {
        ctx.engine.fan_out(event).await.unwrap();
    }
    assert_eq!(spilled(&ctx.store, &sub).await, 12, "every delivery kept");
    assert_eq!(
        spill_count(&ctx.store, &tenant, &sub).await,
        12,
        "each counted once"
    );

    tokio::time::sleep(Duration::from_millis(1600)).await;
    let again = receive_within_10s(&ctx.store, &url).await;
    assert_eq!(again.len(), 1);
    assert!(failed_ids(&run_batch(&ctx, &again).await).is_empty());
    assert_eq!(spilled(&ctx.store, &sub).await, 0, "refilled");
    assert_eq!(spill_count(&ctx.store, &tenant, &sub).await, 0, "uncounted");
    assert!(
        !spilling(&ctx.store, &tenant, &sub).await,
        "the flag is clear"
    );
    let mut queued = 0;
    for _ in 0..5 {
        let batch = receive_within_10s(&ctx.store, &url).await;
        if batch.is_empty() {
            break;
        }
        queued += batch.len();
        run_batch(&ctx, &batch).await;
        if queued >= 12 {
            break;
        }
    }
    assert_eq!(queued, 12, "every spilled delivery is back in the queue");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refill_cut_short_by_a_crash_after_the_outcome_write_resumes_when_the_message_returns() {
    let FailingLane {
        rx,
        ctx,
        sub,
        tenant,
        url,
        first_event,
    } = failing_lane(vec![Reply::Status(500)]).await;
    fan_out_new(&ctx, &tenant, 3).await;
    assert_eq!(spilled(&ctx.store, &sub).await, 3);

    // The process that delivered the first event wrote the outcome and
    // stopped before refilling (and before its message was deleted).
    use aws_sdk_dynamodb::types::AttributeValue;
    let ddb = aws_sdk_dynamodb::Client::new(&sdk().await);
    ddb.update_item()
        .table_name(&ctx.store.settings().table)
        .key("pk", AttributeValue::S(format!("D#{}", sub.as_str())))
        .key(
            "sk",
            AttributeValue::S(format!("E#{}", first_event.as_str())),
        )
        .update_expression("SET #state = :delivered")
        .expression_attribute_names("#state", "state")
        .expression_attribute_values(":delivered", AttributeValue::S("delivered".into()))
        .send()
        .await
        .expect("the outcome write");
    assert_eq!(spilled(&ctx.store, &sub).await, 3, "nothing refilled yet");

    // Its message comes back: the handler finds the delivery finished and
    // moves the spilled deliveries back to the queue.
    tokio::time::sleep(Duration::from_millis(1600)).await;
    let again = receive_within_10s(&ctx.store, &url).await;
    assert_eq!(again.len(), 1);
    assert!(failed_ids(&run_batch(&ctx, &again).await).is_empty());
    assert_eq!(spilled(&ctx.store, &sub).await, 0, "refilled");
    assert_eq!(receive_within_10s(&ctx.store, &url).await.len(), 3);
    assert_eq!(
        rx.count("lane"),
        1,
        "the finished delivery was not sent again"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn while_a_lane_fails_new_deliveries_wait_in_the_spill_store_not_the_queue() {
    let FailingLane {
        rx,
        ctx,
        sub,
        tenant,
        url,
        ..
    } = failing_lane(vec![Reply::Status(500)]).await;
    assert!(
        spilling(&ctx.store, &tenant, &sub).await,
        "the lane is failing"
    );

    let later = fan_out_new(&ctx, &tenant, 3).await;
    assert_eq!(spilled(&ctx.store, &sub).await, 3, "spilled, in the table");
    // Only the retrying delivery is in the queue; it is due again in 1 s.
    tokio::time::sleep(Duration::from_millis(1600)).await;
    let again = receive(&ctx.store, &url).await;
    assert_eq!(
        again.len(),
        1,
        "the queue holds the failing lane's one message"
    );
    run_batch(&ctx, &again).await;
    assert_eq!(
        spilled(&ctx.store, &sub).await,
        0,
        "refilled after the success"
    );
    assert!(!spilling(&ctx.store, &tenant, &sub).await);
    let refilled = receive(&ctx.store, &url).await;
    run_batch(&ctx, &refilled).await;
    let seen: Vec<String> = rx
        .requests("lane")
        .iter()
        .skip(2)
        .map(|r| r.header("webhook-id"))
        .collect();
    assert_eq!(seen, later, "refilled in order");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn when_a_failing_lanes_delivery_is_parked_its_spilled_deliveries_are_refilled() {
    let FailingLane {
        rx,
        ctx,
        sub,
        tenant,
        url,
        ..
    } = failing_lane(vec![Reply::Status(500), Reply::Status(500)]).await;
    let spilled_id = fan_out_new(&ctx, &tenant, 1).await.remove(0);
    assert_eq!(spilled(&ctx.store, &sub).await, 1);
    tokio::time::sleep(Duration::from_millis(1600)).await;
    // The second attempt fails too: the ladder is spent and it is parked.
    run_batch(&ctx, &receive(&ctx.store, &url).await).await;
    assert_eq!(
        DeadLetters::list(&ctx.store.dead_letters(), &tenant, None, None, 10)
            .await
            .unwrap()
            .len(),
        1
    );
    assert_eq!(
        spilled(&ctx.store, &sub).await,
        0,
        "refilled after the park"
    );
    run_batch(&ctx, &receive(&ctx.store, &url).await).await;
    let last = rx.requests("lane").last().map(|r| r.header("webhook-id"));
    assert_eq!(
        last.as_deref(),
        Some(spilled_id.as_str()),
        "the spilled event was delivered"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spilled_delivery_that_does_not_parse_is_parked_not_dropped_by_the_refill() {
    use aws_sdk_dynamodb::types::AttributeValue;
    let FailingLane {
        rx,
        ctx,
        sub,
        tenant,
        url,
        ..
    } = failing_lane(vec![Reply::Status(500)]).await;
    let later = fan_out_new(&ctx, &tenant, 2).await;
    // A third spilled item, counted like the others, whose message is
    // corrupt.
    let ddb = aws_sdk_dynamodb::Client::new(&sdk().await);
    ddb.put_item()
        .table_name(&ctx.store.settings().table)
        .item("pk", AttributeValue::S(format!("L#{sub}")))
        .item(
            "sk",
            AttributeValue::S("00000000000000000001#corrupt".into()),
        )
        .item("message", AttributeValue::S("{\"tenant\": 7".into()))
        .send()
        .await
        .expect("put a corrupt spilled item");
    ddb.update_item()
        .table_name(&ctx.store.settings().table)
        .key("pk", AttributeValue::S(format!("T#{}", tenant.as_str())))
        .key("sk", AttributeValue::S(format!("S#{sub}")))
        .update_expression("ADD spilled :one")
        .expression_attribute_values(":one", AttributeValue::N("1".into()))
        .send()
        .await
        .expect("count it");
    let before = unreadable_count();

    tokio::time::sleep(Duration::from_millis(1600)).await;
    run_batch(&ctx, &receive_within_10s(&ctx.store, &url).await).await;
    assert_eq!(spilled(&ctx.store, &sub).await, 0, "every item moved");
    assert_eq!(spill_count(&ctx.store, &tenant, &sub).await, 0);
    let parked = parked_unreadable(&ctx.store).await;
    assert_eq!(parked.len(), 1, "{parked:?}");
    assert_eq!(parked[0].0, "{\"tenant\": 7", "kept as it was");
    assert!(parked[0].1.contains("spilled delivery does not parse"));
    assert!(unreadable_count() > before, "counted");
    run_batch(&ctx, &receive_within_10s(&ctx.store, &url).await).await;
    let seen: Vec<String> = rx
        .requests("lane")
        .iter()
        .skip(2)
        .map(|r| r.header("webhook-id"))
        .collect();
    assert_eq!(seen, later, "the readable ones refilled in order");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_counting_store_counts_each_aws_call_by_service_and_operation() {
    let plain = fresh_store(30).await;
    let store = AwsStore::counting(&sdk().await, plain.settings().clone());
    let tenant = TenantId::parse("counted").unwrap();
    let count = |op: &str| {
        hooklane_aws::call_metrics::render()
            .lines()
            .find(|l| l.contains(&format!("operation=\"{op}\"")))
            .and_then(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
            .unwrap_or(0)
    };
    let before = count("GetItem");
    SubscriptionStore::get(store.subscriptions(), &tenant, &SubscriptionId::generate())
        .await
        .unwrap();
    SubscriptionStore::get(store.subscriptions(), &tenant, &SubscriptionId::generate())
        .await
        .unwrap();
    assert_eq!(count("GetItem") - before, 2);
    assert!(hooklane_aws::call_metrics::render().contains("service=\"DynamoDB\""));
    // The overview's reads (for `/metrics` and `/status`: the queues'
    // counts, the index of suspended subscriptions) are not counted: the
    // operator makes them, not the deliveries.
    let (attrs, queries) = (count("GetQueueAttributes"), count("Query"));
    let overview = hooklane_core::ports::DeliveryViews::overview(&store.views(), false)
        .await
        .unwrap();
    assert_eq!(overview.pending_total, Some(0));
    assert_eq!(overview.suspended_total, Some(0));
    assert_eq!(count("GetQueueAttributes"), attrs);
    assert_eq!(count("Query"), queries);
}

/// A tenant's lane counter (`Q#lanes`), as stored.
async fn lane_counter(store: &AwsStore, tenant: &TenantId) -> i64 {
    use aws_sdk_dynamodb::types::AttributeValue;
    let ddb = aws_sdk_dynamodb::Client::new(&sdk().await);
    let item = ddb
        .get_item()
        .table_name(&store.settings().table)
        .key("pk", AttributeValue::S(format!("T#{}", tenant.as_str())))
        .key("sk", AttributeValue::S("Q#lanes".into()))
        .consistent_read(true)
        .send()
        .await
        .expect("get item")
        .item
        .unwrap_or_default();
    match item.get("lanes") {
        Some(AttributeValue::N(n)) => n.parse().expect("a number"),
        _ => 0,
    }
}

/// The lane counter that decides whether a tenant takes attempt slots
/// (G3 on AWS) errs high, never low: register counts, a lane increase
/// counts, a decrease never uncounts, a deletion uncounts once the counter
/// was counted whole (at a tenant's first delivery: before, the count
/// leaves the deleted one out).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenants_lane_counter_errs_high_never_low() {
    use hooklane_core::domain::LaneCount;
    let store = fresh_store(30).await;
    let (acme, other) = (
        TenantId::parse("acme").unwrap(),
        TenantId::parse("other").unwrap(),
    );
    let mut wide = contract::subscription(&acme, &["*"]);
    wide.lanes = LaneCount::parse(8).unwrap();
    let one = contract::subscription(&acme, &["*"]);
    store.subscriptions().insert(&wide).await.expect("insert");
    store.subscriptions().insert(&one).await.expect("insert");
    assert_eq!(lane_counter(&store, &acme).await, 9, "8 + 1 lanes");
    assert_eq!(
        store
            .subscriptions()
            .tenant_lane_count(&acme)
            .await
            .unwrap(),
        9,
        "counted whole"
    );
    wide.lanes = LaneCount::parse(3).unwrap();
    assert!(store.subscriptions().update(&wide).await.expect("update"));
    assert_eq!(
        lane_counter(&store, &acme).await,
        9,
        "a decrease is not uncounted"
    );
    wide.lanes = LaneCount::parse(5).unwrap();
    assert!(store.subscriptions().update(&wide).await.expect("update"));
    assert_eq!(
        lane_counter(&store, &acme).await,
        11,
        "3 lanes became 5: +2"
    );
    store
        .subscriptions()
        .delete(&acme, &wide.id)
        .await
        .expect("delete");
    assert_eq!(
        lane_counter(&store, &acme).await,
        6,
        "the deleted one's 5 uncounted"
    );
    assert!(!store.subscriptions().update(&wide).await.expect("update"));
    assert_eq!(
        lane_counter(&store, &acme).await,
        6,
        "nothing counted for it"
    );

    // Another tenant, never counted whole: a deletion before the count is
    // not uncounted (the count leaves it out), and the count is exact.
    let mut gone = contract::subscription(&other, &["*"]);
    gone.lanes = LaneCount::parse(4).unwrap();
    store.subscriptions().insert(&gone).await.expect("insert");
    store
        .subscriptions()
        .delete(&other, &gone.id)
        .await
        .expect("delete");
    assert_eq!(
        lane_counter(&store, &other).await,
        4,
        "not uncounted before the count"
    );
    let mut kept = contract::subscription(&other, &["*"]);
    kept.lanes = LaneCount::parse(2).unwrap();
    store.subscriptions().insert(&kept).await.expect("insert");
    assert_eq!(
        store
            .subscriptions()
            .tenant_lane_count(&other)
            .await
            .unwrap(),
        2,
        "counted whole: 2"
    );
    assert_eq!(lane_counter(&store, &other).await, 2);
}

/// `n` subscriptions of `tenant` to every event type; their ids.
async fn subscribed(store: &AwsStore, tenant: &TenantId, n: usize) -> Vec<String> {
    let mut subs = Vec::new();
    for _ in 0..n {
        let sub = contract::subscription(tenant, &["*"]);
        store.subscriptions().insert(&sub).await.unwrap();
        subs.push(sub.id.as_str().to_owned());
    }
    subs
}

/// The fan-out function over `engine` and `store`.
fn fan_out_function(
    engine: std::sync::Arc<hooklane_core::engine::Engine>,
    store: &AwsStore,
) -> hooklane_aws::handlers::fanout::FanOut {
    hooklane_aws::handlers::fanout::FanOut {
        engine,
        store: store.clone(),
        budget: Duration::from_secs(60),
    }
}

/// A fresh store with `subs` subscriptions of tenant `acme` and `events`
/// events accepted for it (on the ingest queue), and the fan-out function
/// over it; the subscription ids and the event ids in acceptance order.
async fn accepted_for_fan_out(
    subs: usize,
    events: usize,
) -> (
    AwsStore,
    hooklane_aws::handlers::fanout::FanOut,
    Vec<String>,
    Vec<String>,
) {
    let store = fresh_store(30).await;
    let env = test_env(&[]);
    let config = Config::from_lookup(|k| env.get(k).cloned()).unwrap();
    let engine = hooklane_aws::wiring::engine(config, &store, &sdk().await, None).unwrap();
    let fan = fan_out_function(engine, &store);
    let tenant = TenantId::parse("acme").unwrap();
    let subs = subscribed(&store, &tenant, subs).await;
    let mut ids = Vec::new();
    for _ in 0..events {
        let event = an_event(&tenant);
        ids.push(event.id.as_str().to_owned());
        store.archive().accept(event).await.unwrap();
    }
    (store, fan, subs, ids)
}

/// The event ids of the delivery messages in the delivery queue, by
/// subscription, in the order received (each received batch deleted, so
/// a lane's next messages come).
async fn queued_event_ids(store: &AwsStore) -> std::collections::HashMap<String, Vec<String>> {
    let url = &store.settings().delivery_queue_url;
    let mut by_sub: std::collections::HashMap<String, Vec<String>> = Default::default();
    for _ in 0..40 {
        let msgs = receive(store, url).await;
        if msgs.is_empty() {
            break;
        }
        for m in &msgs {
            let body: serde_json::Value = serde_json::from_str(m.body().unwrap()).unwrap();
            by_sub
                .entry(body["subscription_id"].as_str().unwrap().to_owned())
                .or_default()
                .push(body["event_id"].as_str().unwrap().to_owned());
            delete(store, url, m).await;
        }
    }
    by_sub
}

/// A receive of several events of one tenant fans them out together (one
/// enqueue for the run); every subscription's lane still gets each event
/// once, in acceptance order, as one by one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_receive_of_a_tenants_events_fans_out_together_in_acceptance_order() {
    let (store, fan, subs, ids) = accepted_for_fan_out(3, 8).await;
    // The first receive holds several of them: they fan out together.
    let ingest = store.settings().ingest_queue_url.clone();
    let first = receive_within_10s(&store, &ingest).await;
    assert!(first.len() > 1, "a receive held several events");
    let together = hooklane_aws::handlers::fanout::fan_out_together(
        &fan,
        &hooklane_aws::queue_poller::to_event(&first).records,
    )
    .await;
    assert_eq!(together.len(), first.len(), "the run fanned out together");
    for m in &first {
        delete(&store, &ingest, m).await;
    }
    // The rest as the mapping does, until the eight are fanned out.
    let mut handled = first.len();
    for _ in 0..10 {
        if handled == ids.len() {
            break;
        }
        let msgs = receive_within_10s(&store, &ingest).await;
        let resp = hooklane_aws::handlers::fanout::handle(
            &fan,
            hooklane_aws::queue_poller::to_event(&msgs),
        )
        .await;
        assert!(failed_ids(&resp).is_empty(), "no fan-out failed");
        for m in &msgs {
            delete(&store, &ingest, m).await;
        }
        handled += msgs.len();
    }
    assert_eq!(handled, ids.len());
    let queued = queued_event_ids(&store).await;
    for sub in &subs {
        assert_eq!(queued.get(sub), Some(&ids), "subscription {sub}'s lane");
    }
}

/// Whether a delivery record is in the `gsi1` (by event) index.
async fn indexed(store: &AwsStore, sub: &SubscriptionId, event: &EventId) -> bool {
    let item = aws_sdk_dynamodb::Client::new(&sdk().await)
        .get_item()
        .table_name(&store.settings().table)
        .key(
            "pk",
            aws_sdk_dynamodb::types::AttributeValue::S(format!("D#{}", sub.as_str())),
        )
        .key(
            "sk",
            aws_sdk_dynamodb::types::AttributeValue::S(format!("E#{}", event.as_str())),
        )
        .consistent_read(true)
        .send()
        .await
        .unwrap()
        .item
        .expect("a delivery record");
    item.contains_key("gsi1pk")
}

/// A delivery delivered at its first attempt never enters the by-event
/// index (one write less on the delivery path); one that was retried
/// does. `GET /events/{id}` shows both (read by key and by index).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_a_delivery_not_delivered_at_once_enters_the_by_event_index() {
    let rx = Receiver::start().await;
    rx.script("flaky", vec![Reply::Status(500)]);
    let (ctx, subs) = handler_with("0s,1s", &["ok", "flaky"], &rx).await;
    let event = publish_to(&ctx, &subs).await;
    let url = ctx.store.settings().delivery_queue_url.clone();
    for _ in 0..10 {
        if rx.count("ok") >= 1 && rx.count("flaky") >= 2 {
            break;
        }
        let msgs = receive_within_10s(&ctx.store, &url).await;
        run_batch(&ctx, &msgs).await;
    }
    assert_eq!((rx.count("ok"), rx.count("flaky")), (1, 2));
    assert!(!indexed(&ctx.store, &subs[0].0, &event).await);
    assert!(indexed(&ctx.store, &subs[1].0, &event).await);
    let views =
        hooklane_core::ports::DeliveryViews::of_event(&ctx.store.views(), &subs[0].1, &event)
            .await
            .unwrap();
    let mut shown: Vec<(String, &str, u32)> = views
        .iter()
        .map(|(s, r)| (s.as_str().to_owned(), r.shown_state(), r.attempts))
        .collect();
    shown.sort();
    let mut want = vec![
        (subs[0].0.as_str().to_owned(), "delivered", 1),
        (subs[1].0.as_str().to_owned(), "delivered", 2),
    ];
    want.sort();
    assert_eq!(shown, want);
    // Suspended, and its filters changed: its delivery still shows.
    let (sub, tenant) = &subs[0];
    assert!(hooklane_core::ports::Suspensions::suspend(
        &ctx.store.suspensions(),
        tenant,
        sub,
        time::OffsetDateTime::now_utc(),
        "test",
        &Health::default(),
    )
    .await
    .unwrap());
    let mut changed = SubscriptionStore::get(ctx.store.subscriptions(), tenant, sub)
        .await
        .unwrap()
        .unwrap();
    changed.filters = contract::subscription(tenant, &["other.*"]).filters;
    assert!(
        SubscriptionStore::update(ctx.store.subscriptions(), &changed)
            .await
            .unwrap()
    );
    let views = hooklane_core::ports::DeliveryViews::of_event(&ctx.store.views(), tenant, &event)
        .await
        .unwrap();
    assert!(
        views
            .iter()
            .any(|(s, r)| s == sub && r.shown_state() == "delivered" && r.attempts == 1),
        "{views:?}"
    );
}

/// The raw delivery record of a pair (strongly consistent).
async fn raw_record(
    store: &AwsStore,
    sub: &SubscriptionId,
    event: &EventId,
) -> std::collections::HashMap<String, aws_sdk_dynamodb::types::AttributeValue> {
    use aws_sdk_dynamodb::types::AttributeValue;
    aws_sdk_dynamodb::Client::new(&sdk().await)
        .get_item()
        .table_name(&store.settings().table)
        .key("pk", AttributeValue::S(format!("D#{}", sub.as_str())))
        .key("sk", AttributeValue::S(format!("E#{}", event.as_str())))
        .consistent_read(true)
        .send()
        .await
        .unwrap()
        .item
        .expect("a delivery record")
}

/// A delivered first attempt's outcome is its attempt-log entry alone (the
/// record is not written again: one write unit less per delivery), and
/// every reader takes it as delivered: the message back, as a redelivery
/// or claiming to be a first receive, is not sent again (G1); the event's
/// view shows it delivered; a hold read with the message's own attempt
/// count does not end it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delivered_first_attempts_outcome_is_its_log_entry_and_its_message_back_is_not_sent() {
    use hooklane_core::domain::DeliveryState;
    use hooklane_core::ports::{AttemptLog, DeliveryViews, End, Finish};
    let rx = Receiver::start().await;
    let (ctx, subs) = handler_with("0s,1s", &["ok"], &rx).await;
    let (sub, tenant) = &subs[0];
    let event = publish_to(&ctx, &subs).await;
    let url = ctx.store.settings().delivery_queue_url.clone();
    let msgs = receive_within_10s(&ctx.store, &url).await;
    assert!(failed_ids(&run_batch(&ctx, &msgs).await).is_empty());
    assert_eq!(rx.count("ok"), 1);

    let raw = raw_record(&ctx.store, sub, &event).await;
    assert!(
        !raw.contains_key("updated_at") && raw["state"].as_s().unwrap() == "pending",
        "the outcome was not written to the record: {raw:?}"
    );
    let rec = record(&ctx.store, sub, &event).await;
    assert_eq!((rec.state, rec.attempts), (DeliveryState::Delivered, 1));
    let views = DeliveryViews::of_event(&ctx.store.views(), tenant, &event)
        .await
        .unwrap();
    assert_eq!(views.len(), 1);
    assert_eq!(views[0].1.shown_state(), "delivered");
    let log = AttemptLog::list(&ctx.store.attempt_log(), tenant, sub, None, 10)
        .await
        .unwrap();
    assert_eq!(log.len(), 1);
    assert_eq!(
        (log[0].1.attempt, log[0].1.outcome.as_str()),
        (1, "delivered")
    );

    // The message back, as a redelivery and as a first receive.
    for receives in ["2", "1"] {
        let mut back = hooklane_aws::queue_poller::to_event(&msgs);
        back.records[0]
            .attributes
            .insert("ApproximateReceiveCount".into(), receives.into());
        assert!(failed_ids(&handle(&ctx, back).await).is_empty());
        assert_eq!(
            rx.count("ok"),
            1,
            "not sent again (receive count {receives})"
        );
    }
    // A hold of the delivery as a first receive reads it (no attempt yet)
    // leaves it delivered: a backfill would take a held one again.
    let stale = unattempted(tenant, sub, &event);
    ctx.store
        .finish(&stale, &Finish::without_attempt(End::Held))
        .await
        .unwrap();
    let rec = record(&ctx.store, sub, &event).await;
    assert_eq!(rec.state, DeliveryState::Delivered);
}

/// A delivery's record as the delivery function reads it before an
/// attempt now.
/// A delivery's record, settled (it must exist).
async fn record(
    store: &AwsStore,
    sub: &SubscriptionId,
    event: &EventId,
) -> hooklane_core::domain::DeliveryRecord {
    store
        .records()
        .delivery_record(sub, event)
        .await
        .unwrap()
        .expect("a record")
}

async fn to_attempt(
    store: &AwsStore,
    sub: &SubscriptionId,
    event: &EventId,
) -> hooklane_core::domain::DeliveryRecord {
    let now = time::OffsetDateTime::now_utc();
    store
        .records()
        .record_to_attempt(sub, event, now)
        .await
        .unwrap()
        .expect("a record")
}

/// An attempt-log entry of `d`'s next attempt, started at `at`.
fn attempt_of(
    d: &Delivery,
    at: time::OffsetDateTime,
    outcome: &str,
) -> hooklane_core::domain::Attempt {
    hooklane_core::domain::Attempt {
        id: hooklane_core::domain::AttemptId::generate(),
        tenant: d.tenant.clone(),
        subscription_id: d.subscription_id.clone(),
        event_id: d.event_id.clone(),
        event_type: None,
        attempt: d.attempts + 1,
        started_at: at,
        duration_ms: 3,
        status_code: Some(204),
        outcome: outcome.to_owned(),
        error: None,
        response_excerpt: None,
        response_headers: None,
    }
}

/// A first attempt whose outcome comes after its lease: the delivery
/// function that reads the record then claims the attempt's log key, so
/// of the late outcome and the second attempt only one stands. Late
/// before the second attempt starts, the outcome is written to the record
/// and the second attempt is refused (without the claim it would go out:
/// a second request after a delivery, G1); late after it starts, the
/// outcome is logged and the record stays with the second attempt (G7).
/// While the lease runs, nothing is claimed and the outcome is the log
/// entry.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_first_attempts_late_outcome_and_the_next_attempt_do_not_both_stand() {
    use hooklane_core::domain::DeliveryState;
    use hooklane_core::ports::{AttemptLog, End, Finish};
    let store = fresh_store(30).await;
    let tenant = TenantId::parse("acme").unwrap();
    let sub = contract::subscription(&tenant, &["*"]);
    store.subscriptions().insert(&sub).await.unwrap();
    let delivery = |attempts: u32, event: &EventId| Delivery {
        seq: 0,
        tenant: tenant.clone(),
        subscription_id: sub.id.clone(),
        event_id: event.clone(),
        event_type: EventType::parse("a.b").unwrap(),
        lane: 0,
        attempts,
        first_attempt_at: None,
        next_attempt_at: time::OffsetDateTime::now_utc(),
    };
    let delivered = |d: &Delivery, at| Finish {
        end: End::Delivered,
        attempt: Some(attempt_of(d, at, "delivered")),
        health: None,
        timed_out: false,
    };
    let now = time::OffsetDateTime::now_utc;
    let minute = Duration::from_secs(60);

    // The lease runs: no claim, and the outcome is the log entry.
    let e1 = EventId::generate();
    let (d, t) = (delivery(0, &e1), now());
    assert!(store.begin(&d, t, t + minute).await.unwrap());
    let rec = to_attempt(&store, &sub.id, &e1).await;
    assert_eq!((rec.state, rec.attempts), (DeliveryState::Pending, 1));
    store.finish(&d, &delivered(&d, t)).await.unwrap();
    assert!(!raw_record(&store, &sub.id, &e1)
        .await
        .contains_key("updated_at"));
    let rec = to_attempt(&store, &sub.id, &e1).await;
    assert_eq!(rec.state, DeliveryState::Delivered);

    // The lease ended: claimed; the late outcome lands before the second
    // attempt starts, which is then refused.
    let e2 = EventId::generate();
    let (d, t) = (delivery(0, &e2), now() - minute * 2);
    assert!(store.begin(&d, t, t + minute).await.unwrap());
    let rec = to_attempt(&store, &sub.id, &e2).await;
    assert_eq!((rec.state, rec.attempts), (DeliveryState::Pending, 1));
    store.finish(&d, &delivered(&d, t)).await.unwrap();
    let rec = record(&store, &sub.id, &e2).await;
    assert_eq!((rec.state, rec.attempts), (DeliveryState::Delivered, 1));
    assert!(
        !store
            .begin(&delivery(1, &e2), now(), now() + minute)
            .await
            .unwrap(),
        "no second attempt after the delivery"
    );

    // The lease ended: claimed; the second attempt starts, then the late
    // outcome lands: logged, the record left to the second attempt.
    let e3 = EventId::generate();
    let (d, t) = (delivery(0, &e3), now() - minute * 2);
    assert!(store.begin(&d, t, t + minute).await.unwrap());
    to_attempt(&store, &sub.id, &e3).await;
    let second = delivery(1, &e3);
    let t2 = now();
    assert!(store.begin(&second, t2, t2 + minute).await.unwrap());
    store.finish(&d, &delivered(&d, t)).await.unwrap();
    let rec = record(&store, &sub.id, &e3).await;
    assert_eq!((rec.state, rec.attempts), (DeliveryState::Pending, 2));
    store
        .finish(&second, &delivered(&second, t2))
        .await
        .unwrap();
    let rec = record(&store, &sub.id, &e3).await;
    assert_eq!((rec.state, rec.attempts), (DeliveryState::Delivered, 2));

    // The lease ended, and the outcome came in time: delivered, nothing
    // claimed.
    let e4 = EventId::generate();
    let (d, t) = (delivery(0, &e4), now() - minute * 2);
    assert!(store.begin(&d, t, t + minute).await.unwrap());
    store.finish(&d, &delivered(&d, t)).await.unwrap();
    assert_eq!(
        to_attempt(&store, &sub.id, &e4).await.state,
        DeliveryState::Delivered
    );

    // The attempt's own start is the one its begin wrote, whatever the
    // outcome's attempt says; and an outcome this process did not begin (a
    // process of its own over the same table) is written to the record.
    let e5 = EventId::generate();
    let (d, t) = (delivery(0, &e5), now());
    assert!(store.begin(&d, t, t + minute).await.unwrap());
    store
        .finish(&d, &delivered(&d, t - Duration::from_secs(1)))
        .await
        .unwrap();
    assert_eq!(
        to_attempt(&store, &sub.id, &e5).await.state,
        DeliveryState::Delivered
    );
    let e6 = EventId::generate();
    let (d, t) = (delivery(0, &e6), now());
    assert!(store.begin(&d, t, t + minute).await.unwrap());
    let other = AwsStore::new(&sdk().await, store.settings().clone());
    other.finish(&d, &delivered(&d, t)).await.unwrap();
    assert!(raw_record(&store, &sub.id, &e6)
        .await
        .contains_key("updated_at"));
    assert_eq!(
        to_attempt(&store, &sub.id, &e6).await.state,
        DeliveryState::Delivered
    );

    // The log lists every attempt once, and no claim, however it is paged
    // (the claims of e2 and e3 are among its items).
    let mut want = vec![
        (e1.as_str().to_owned(), 1),
        (e2.as_str().to_owned(), 1),
        (e3.as_str().to_owned(), 1),
        (e3.as_str().to_owned(), 2),
        (e4.as_str().to_owned(), 1),
        (e5.as_str().to_owned(), 1),
        (e6.as_str().to_owned(), 1),
    ];
    want.sort();
    for limit in [want.len(), 2] {
        let mut listed: Vec<(String, u32)> = Vec::new();
        let mut before = None;
        for _ in 0..10 {
            let page = AttemptLog::list(&store.attempt_log(), &tenant, &sub.id, before, limit)
                .await
                .unwrap();
            assert!(page.len() <= limit);
            let full = page.len() == limit;
            before = page.last().map(|(seq, _)| *seq);
            listed.extend(
                page.iter()
                    .map(|(_, a)| (a.event_id.as_str().to_owned(), a.attempt)),
            );
            if !full {
                break;
            }
        }
        listed.sort();
        assert_eq!(listed, want, "pages of {limit}");
    }
}

/// A message back that looks like a first receive (read without its
/// record), whose subscription is now suspended: the hold is refused at
/// the attempts it was read with, so the record is read and the delivery
/// held at its own (a backfill after re-enabling takes it), when it is in
/// retry or its first attempt's lease has ended; while an attempt runs,
/// it is left to that attempt's outcome. (One delivered at its first
/// attempt is left delivered: the test of that outcome.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hold_read_without_the_record_ends_a_delivery_at_its_own_attempts_unless_one_runs() {
    use hooklane_core::domain::DeliveryState;
    use hooklane_core::ports::{End, Finish};
    let store = fresh_store(30).await;
    let tenant = TenantId::parse("acme").unwrap();
    let sub = contract::subscription(&tenant, &["*"]);
    store.subscriptions().insert(&sub).await.unwrap();
    let event = EventId::generate();
    let d = unattempted(&tenant, &sub.id, &event);
    let t = time::OffsetDateTime::now_utc();
    assert!(store
        .begin(&d, t, t + Duration::from_secs(60))
        .await
        .unwrap());
    let mut failed = attempt_of(&d, t, "retrying");
    failed.status_code = Some(500);
    let retry = Finish {
        end: End::Retry(t + Duration::from_secs(3600)),
        attempt: Some(failed),
        health: None,
        timed_out: false,
    };
    store.finish(&d, &retry).await.unwrap();
    store
        .finish(&d, &Finish::without_attempt(End::Held))
        .await
        .unwrap();
    let rec = record(&store, &sub.id, &event).await;
    assert_eq!((rec.state, rec.attempts), (DeliveryState::Held, 1));

    // A first attempt still running: not held (the message comes back
    // later, so the delivery is not left pending); its outcome stands.
    let running = Delivery {
        event_id: EventId::generate(),
        ..d.clone()
    };
    let t = time::OffsetDateTime::now_utc();
    let minute = Duration::from_secs(60);
    assert!(store.begin(&running, t, t + minute).await.unwrap());
    let refused = store
        .finish(&running, &Finish::without_attempt(End::Held))
        .await;
    assert!(
        matches!(
            refused,
            Err(hooklane_core::ports::StoreError::Unavailable(..))
        ),
        "a hold beside a running attempt must send its message back: {refused:?}"
    );
    let outcome = Finish {
        end: End::Delivered,
        attempt: Some(attempt_of(&running, t, "delivered")),
        health: None,
        timed_out: false,
    };
    store.finish(&running, &outcome).await.unwrap();
    let rec = record(&store, &sub.id, &running.event_id).await;
    assert_eq!(rec.state, DeliveryState::Delivered);

    // A first attempt whose lease has ended with no outcome: held.
    let lost = Delivery {
        event_id: EventId::generate(),
        ..d.clone()
    };
    let t = time::OffsetDateTime::now_utc() - minute * 2;
    assert!(store.begin(&lost, t, t + minute).await.unwrap());
    store
        .finish(&lost, &Finish::without_attempt(End::Held))
        .await
        .unwrap();
    let rec = record(&store, &sub.id, &lost.event_id).await;
    assert_eq!((rec.state, rec.attempts), (DeliveryState::Held, 1));

    // A first attempt put off before its request (no outcome ever): the
    // hold waits while its lease runs, then lands at its attempts.
    let put_off = Delivery {
        event_id: EventId::generate(),
        ..d.clone()
    };
    let t = time::OffsetDateTime::now_utc();
    let lease = Duration::from_secs(3);
    assert!(store.begin(&put_off, t, t + lease).await.unwrap());
    let held = Finish::without_attempt(End::Held);
    assert!(store.finish(&put_off, &held).await.is_err());
    let rec = record(&store, &sub.id, &put_off.event_id).await;
    assert_eq!((rec.state, rec.attempts), (DeliveryState::Pending, 1));
    tokio::time::sleep(lease + Duration::from_millis(500)).await;
    store.finish(&put_off, &held).await.unwrap();
    let rec = record(&store, &sub.id, &put_off.event_id).await;
    assert_eq!((rec.state, rec.attempts), (DeliveryState::Held, 1));
}

/// A store over `store`'s resources with the API path on or off, in a
/// process of its own (nothing remembered of moved tenants), and an
/// engine over it.
async fn api_path(
    store: &AwsStore,
    on: bool,
    tweak: impl FnOnce(&mut hooklane_aws::Settings),
) -> (AwsStore, std::sync::Arc<hooklane_core::engine::Engine>) {
    let sdk = sdk().await;
    let mut settings = store.settings().clone();
    settings.fan_out_in_api = on;
    tweak(&mut settings);
    let store = AwsStore::new(&sdk, settings);
    let env = test_env(&[]);
    let config = Config::from_lookup(|k| env.get(k).cloned()).unwrap();
    let engine = hooklane_aws::wiring::engine(config, &store, &sdk, None).unwrap();
    (store, engine)
}

/// The ingest queue's messages' event ids, in order (each batch deleted).
async fn ingest_event_ids(store: &AwsStore) -> Vec<String> {
    let url = &store.settings().ingest_queue_url;
    let mut ids = Vec::new();
    for _ in 0..20 {
        let msgs = receive(store, url).await;
        if msgs.is_empty() {
            break;
        }
        for m in &msgs {
            let body: serde_json::Value = serde_json::from_str(m.body().unwrap()).unwrap();
            ids.push(body["event_id"].as_str().unwrap().to_owned());
            delete(store, url, m).await;
        }
    }
    ids
}

/// On the API path a publish fans its event out before it answers: the
/// deliveries are queued, each lane in publish order, and the ingest queue
/// is not used.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_the_api_path_a_publish_queues_its_deliveries_before_answering_in_order() {
    let (store, engine) = api_path(&fresh_store(30).await, true, |_| {}).await;
    let tenant = TenantId::parse("acme").unwrap();
    let subs = subscribed(&store, &tenant, 3).await;
    let mut ids = Vec::new();
    for _ in 0..6 {
        let event = an_event(&tenant);
        ids.push(event.id.as_str().to_owned());
        engine.publish(event).await.unwrap();
    }
    let queued = queued_event_ids(&store).await;
    for sub in &subs {
        assert_eq!(queued.get(sub), Some(&ids), "subscription {sub}'s lane");
    }
    assert!(
        ingest_event_ids(&store).await.is_empty(),
        "nothing went through the ingest queue"
    );
}

/// A fan-out that fails before the answer is scheduled on the ingest queue
/// instead (the publish still answers), and its tenant moves there for
/// good: another process's next publish of it goes there too, behind it,
/// and the fan-out function queues both in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fan_out_that_fails_before_the_answer_moves_its_tenant_to_the_ingest_queue_for_good() {
    let base = fresh_store(30).await;
    // This process's delivery queue does not exist: its fan-out fails.
    let (broken, broken_engine) = api_path(&base, true, |s| {
        s.delivery_queue_url.push_str("-missing");
    })
    .await;
    let tenant = TenantId::parse("acme").unwrap();
    let sub = contract::subscription(&tenant, &["*"]);
    broken.subscriptions().insert(&sub).await.unwrap();
    let first = an_event(&tenant);
    let accepted = broken_engine.publish(first.clone()).await;
    assert!(
        matches!(accepted, Ok(hooklane_core::ports::Accepted::New(_))),
        "accepted, its fan-out scheduled: {accepted:?}"
    );
    // Another process, with the API path on and a working queue.
    let (store, engine) = api_path(&base, true, |_| {}).await;
    let second = an_event(&tenant);
    engine.publish(second.clone()).await.unwrap();
    // An untouched tenant still fans out in the API.
    let other = TenantId::parse("other").unwrap();
    let other_sub = contract::subscription(&other, &["*"]);
    store.subscriptions().insert(&other_sub).await.unwrap();
    let third = an_event(&other);
    engine.publish(third.clone()).await.unwrap();

    let url = store.settings().ingest_queue_url.clone();
    let msgs = receive_within_10s(&store, &url).await;
    let ids: Vec<String> = msgs
        .iter()
        .map(|m| {
            let body: serde_json::Value = serde_json::from_str(m.body().unwrap()).unwrap();
            body["event_id"].as_str().unwrap().to_owned()
        })
        .collect();
    assert_eq!(
        ids,
        vec![first.id.as_str().to_owned(), second.id.as_str().to_owned()],
        "the moved tenant's events, in order, and no other"
    );
    let queued = queued_event_ids(&store).await;
    assert_eq!(
        queued.get(other_sub.id.as_str()),
        Some(&vec![third.id.as_str().to_owned()])
    );
    assert!(!queued.contains_key(sub.id.as_str()), "not fanned out yet");

    // The fan-out function takes them from the ingest queue, in order.
    let fan = fan_out_function(engine, &store);
    let resp =
        hooklane_aws::handlers::fanout::handle(&fan, hooklane_aws::queue_poller::to_event(&msgs))
            .await;
    assert!(failed_ids(&resp).is_empty(), "no fan-out failed");
    for m in &msgs {
        delete(&store, &url, m).await;
    }
    let queued = queued_event_ids(&store).await;
    assert_eq!(
        queued.get(sub.id.as_str()),
        Some(&vec![
            first.id.as_str().to_owned(),
            second.id.as_str().to_owned()
        ])
    );
}

/// A crash between the archive write and the fan-out (the publish never
/// answered) loses nothing: the publisher's retry is a duplicate, and it
/// fans the event out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_between_the_archive_write_and_the_fan_out_is_fanned_out_by_the_retry() {
    let (store, engine) = api_path(&fresh_store(30).await, true, |_| {}).await;
    let tenant = TenantId::parse("acme").unwrap();
    let sub = contract::subscription(&tenant, &["*"]);
    store.subscriptions().insert(&sub).await.unwrap();
    let event = an_event(&tenant);
    // The archive write, then the crash: the caller never fans out.
    let (accepted, by) = store
        .archive()
        .accept_routed(event.clone(), None)
        .await
        .unwrap();
    assert!(matches!(accepted, hooklane_core::ports::Accepted::New(_)));
    assert_eq!(by, hooklane_core::ports::FanOutBy::Caller);
    assert!(queued_event_ids(&store).await.is_empty(), "nothing queued");

    let retried = engine.publish(event.clone()).await.unwrap();
    assert!(matches!(
        retried,
        hooklane_core::ports::Accepted::Duplicate(_)
    ));
    let queued = queued_event_ids(&store).await;
    assert_eq!(
        queued.get(sub.id.as_str()),
        Some(&vec![event.id.as_str().to_owned()]),
        "the retry fanned it out"
    );
    assert!(ingest_event_ids(&store).await.is_empty());
}

/// A batch on the API path is fanned out together before the answer: each
/// lane gets the batch's events in order, nothing through the ingest
/// queue.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_the_api_path_a_batch_is_fanned_out_together_in_order() {
    let (store, engine) = api_path(&fresh_store(30).await, true, |_| {}).await;
    let tenant = TenantId::parse("acme").unwrap();
    let subs = subscribed(&store, &tenant, 2).await;
    let events: Vec<Event> = (0..12).map(|_| an_event(&tenant)).collect();
    let ids: Vec<String> = events.iter().map(|e| e.id.as_str().to_owned()).collect();
    let answers = engine.publish_all(events).await;
    assert_eq!(answers.len(), 12);
    assert!(answers
        .iter()
        .all(|a| matches!(a, Ok(hooklane_core::ports::Accepted::New(_)))));
    let queued = queued_event_ids(&store).await;
    for sub in &subs {
        assert_eq!(queued.get(sub), Some(&ids), "subscription {sub}'s lane");
    }
    assert!(ingest_event_ids(&store).await.is_empty());
}

/// The subscriptions that take `ty`, by id, in one page as the fan-out
/// reads them.
async fn fan_out_page(store: &AwsStore, tenant: &TenantId, ty: &str) -> Vec<String> {
    let ty = EventType::parse(ty).unwrap();
    let page = store
        .subscriptions()
        .matching(tenant, &ty, None, 500)
        .await
        .unwrap();
    page.iter().map(|s| s.id.as_str().to_owned()).collect()
}

/// The subscriptions that take `ty`, by id, as `matching` pages them two
/// at a time.
async fn matching_ids(store: &AwsStore, tenant: &TenantId, ty: &str) -> Vec<String> {
    let ty = EventType::parse(ty).unwrap();
    let mut out = Vec::new();
    let mut after: Option<SubscriptionId> = None;
    loop {
        let page = store
            .subscriptions()
            .matching(tenant, &ty, after.as_ref(), 2)
            .await
            .unwrap();
        out.extend(page.iter().map(|s| s.id.as_str().to_owned()));
        match page.last() {
            Some(last) if page.len() == 2 => after = Some(last.id.clone()),
            _ => return out,
        }
    }
}

/// A PATCH removes the type index entries of the filters it took off, but
/// not one written within the last ten minutes: that may be another
/// PATCH's, whose update has not landed yet.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_patch_removes_the_type_index_entries_of_filters_it_took_off_unless_just_written() {
    use aws_sdk_dynamodb::types::AttributeValue;
    use hooklane_core::domain::EventFilter;
    let store = fresh_store(30).await;
    let tenant = TenantId::parse("trim").unwrap();
    let sub = contract::subscription(&tenant, &["a.x", "b.*", "c.y"]);
    store.subscriptions().insert(&sub).await.unwrap();
    let ddb = aws_sdk_dynamodb::Client::new(&sdk().await);
    let table = store.settings().table.clone();
    let entry_key = |filter: &str| {
        std::collections::HashMap::from([
            (
                "pk".to_owned(),
                AttributeValue::S(format!("F#trim#{filter}")),
            ),
            (
                "sk".to_owned(),
                AttributeValue::S(format!("S#{}", sub.id.as_str())),
            ),
        ])
    };
    let has_entry = |filter: &'static str| {
        let (ddb, table, key) = (ddb.clone(), table.clone(), entry_key(filter));
        async move {
            ddb.get_item()
                .table_name(table)
                .set_key(Some(key))
                .consistent_read(true)
                .send()
                .await
                .unwrap()
                .item
                .is_some()
        }
    };
    for filter in ["a.x", "b.*", "c.y"] {
        assert!(has_entry(filter).await, "{filter} indexed at registration");
    }
    // `a.x`'s entry was written eleven minutes ago; `b.*`'s just now.
    let long_ago = time::OffsetDateTime::now_utc() - Duration::from_secs(660);
    ddb.update_item()
        .table_name(&table)
        .set_key(Some(entry_key("a.x")))
        .update_expression("SET written_at = :at")
        .expression_attribute_values(
            ":at",
            AttributeValue::N(hooklane_core::record::ms(long_ago).to_string()),
        )
        .send()
        .await
        .unwrap();
    let mut patched = sub.clone();
    patched.filters = ["c.y", "e.w"]
        .iter()
        .map(|f| EventFilter::parse(f).unwrap())
        .collect();
    assert!(store.subscriptions().update(&patched).await.unwrap());
    assert!(
        !has_entry("a.x").await,
        "the old entry of a filter taken off goes"
    );
    assert!(has_entry("b.*").await, "a just-written entry stays");
    assert!(has_entry("c.y").await && has_entry("e.w").await);
}

/// A wide tenant's fan-out reads the subscriptions that take the event,
/// not the tenant: the first read of the tenant writes its type index,
/// and the reads after it find the same subscriptions through it, as
/// registrations, filter changes and deletes go on, in another process
/// too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wide_tenants_fan_out_reads_only_the_subscriptions_that_match() {
    use hooklane_core::contract::subscription;
    let store = fresh_store(30).await;
    let tenant = TenantId::parse("wide").unwrap();
    let mut noise = Vec::new();
    for _ in 0..60 {
        let s = subscription(&tenant, &["noise.x"]);
        store.subscriptions().insert(&s).await.unwrap();
        noise.push(s);
    }
    let exact = subscription(&tenant, &["invoice.paid"]);
    let prefix = subscription(&tenant, &["invoice.*", "noise.y"]);
    let gone = subscription(&tenant, &["invoice.paid"]);
    for s in [&exact, &prefix, &gone] {
        store.subscriptions().insert(s).await.unwrap();
    }
    store
        .subscriptions()
        .delete(&tenant, &gone.id)
        .await
        .unwrap()
        .unwrap();
    // One registered before the index existed: no entries.
    let legacy = subscription(&tenant, &["invoice.paid"]);
    store.subscriptions().insert(&legacy).await.unwrap();
    let ddb = aws_sdk_dynamodb::Client::new(&sdk().await);
    ddb.delete_item()
        .table_name(&store.settings().table)
        .key(
            "pk",
            aws_sdk_dynamodb::types::AttributeValue::S("F#wide#invoice.paid".into()),
        )
        .key(
            "sk",
            aws_sdk_dynamodb::types::AttributeValue::S(format!("S#{}", legacy.id.as_str())),
        )
        .return_values(aws_sdk_dynamodb::types::ReturnValue::AllOld)
        .send()
        .await
        .unwrap()
        .attributes
        .expect("its entry was there");
    let mut want: Vec<String> = [&exact, &prefix, &legacy]
        .iter()
        .map(|s| s.id.as_str().to_owned())
        .collect();
    want.sort();

    // The first fan-out reads the tenant and indexes it.
    let before = store.subscriptions().fan_out_subscriptions_read();
    assert_eq!(fan_out_page(&store, &tenant, "invoice.paid").await, want);
    assert!(
        store.subscriptions().fan_out_subscriptions_read() - before >= 62,
        "read the tenant"
    );

    // Then only the ones that match are read.
    let before = store.subscriptions().fan_out_subscriptions_read();
    assert_eq!(matching_ids(&store, &tenant, "invoice.paid").await, want);
    let read = store.subscriptions().fan_out_subscriptions_read() - before;
    // Paged two at a time: each page reads the candidates after its
    // cursor (3, then 1).
    assert!(read <= 4, "read {read} subscriptions for invoice.paid");
    // A type most of the tenant takes reads the tenant (cheaper), rightly.
    assert_eq!(matching_ids(&store, &tenant, "noise.x").await.len(), 60);
    let before = store.subscriptions().fan_out_subscriptions_read();
    assert!(matching_ids(&store, &tenant, "refund.made")
        .await
        .is_empty());
    assert_eq!(
        store.subscriptions().fan_out_subscriptions_read(),
        before,
        "nothing read"
    );

    // Registrations, filter changes and deletes keep it right.
    let late = subscription(&tenant, &["invoice.paid"]);
    store.subscriptions().insert(&late).await.unwrap();
    let mut moved = noise[0].clone();
    moved.filters = vec![hooklane_core::domain::EventFilter::parse("invoice.*").unwrap()];
    assert!(store.subscriptions().update(&moved).await.unwrap());
    let mut away = prefix.clone();
    away.filters = vec![hooklane_core::domain::EventFilter::parse("noise.y").unwrap()];
    assert!(store.subscriptions().update(&away).await.unwrap());
    store
        .subscriptions()
        .delete(&tenant, &exact.id)
        .await
        .unwrap()
        .unwrap();
    let mut want: Vec<String> = [&late, &moved, &legacy]
        .iter()
        .map(|s| s.id.as_str().to_owned())
        .collect();
    want.sort();
    assert_eq!(matching_ids(&store, &tenant, "invoice.paid").await, want);

    // Another wide tenant's index names only its own (G10).
    let neighbour = TenantId::parse("wide-too").unwrap();
    let mut theirs = Vec::new();
    for filter in std::iter::repeat_n("noise.x", 50).chain(["invoice.paid"]) {
        let s = subscription(&neighbour, &[filter]);
        store.subscriptions().insert(&s).await.unwrap();
        theirs.push(s);
    }
    let their_id = vec![theirs[50].id.as_str().to_owned()];
    assert_eq!(
        fan_out_page(&store, &neighbour, "invoice.paid").await,
        their_id
    );
    assert_eq!(
        matching_ids(&store, &neighbour, "invoice.paid").await,
        their_id
    );
    assert_eq!(matching_ids(&store, &tenant, "invoice.paid").await, want);

    // Another process reads the tenant once, finds the index complete, and
    // reads through it from then on.
    let other = AwsStore::new(&sdk().await, store.settings().clone());
    assert_eq!(fan_out_page(&other, &tenant, "invoice.paid").await, want);
    let before = other.subscriptions().fan_out_subscriptions_read();
    assert_eq!(matching_ids(&other, &tenant, "invoice.paid").await, want);
    assert!(other.subscriptions().fan_out_subscriptions_read() - before <= 5);
}
