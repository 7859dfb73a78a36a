//! The AWS backend's own per-tenant backlog counts
//! (`HOOKLANE_TENANT_BACKLOG`), against the local AWS-compatible server,
//! where they could drift: the cases `status.rs` does not reach.
//!
//! - A duplicate publish fans its event out again (to finish a fan-out that
//!   stopped midway) and must count nothing twice, on both fan-out paths
//!   (in the API, and through the ingest queue and the fan-out function):
//!   the tenant's count reads each delivery once (an event named twice in
//!   a batch, or published five times at once, too), and falls to zero
//!   (its count items gone) once the receiver answers.
//! - Deleting a subscription drops its spilled deliveries (a failing
//!   lane's overflow kept in the table), and takes them off its tenant's
//!   count at once; the lane's head, met later by the delivery function,
//!   comes off then.
//! - Through the fault proxy, at the wire: a take-off written before its
//!   count (the count's call held until the delivery has ended and been
//!   taken off) leaves nothing once the count lands (a minute is removed
//!   at exactly zero, not below); take-offs that fail are written with the
//!   next batch's.

use std::time::Duration;

use aws_sdk_dynamodb::types::AttributeValue;
use hooklane_tests::faults::FaultProxy;
use hooklane_tests::{aws, eventually, test_env, Backend, Receiver, Reply, Server};
use serde_json::{json, Value};

const WAIT: Duration = Duration::from_secs(60);

async fn tenant_pending(server: &Server, tenant: &str) -> Option<u64> {
    let (code, doc) = server.call("GET", "/status", None).await;
    assert_eq!(code, 200, "{doc}");
    let rows = doc["backlog"]["tenants"].as_array()?.clone();
    Some(
        rows.iter()
            .find(|r| r["tenant"] == tenant)
            .map_or(0, |r| r["pending"].as_u64().unwrap_or(0)),
    )
}

/// Polls the status until `tenant`'s pending reads `want`; the last read.
async fn pending_reaches(
    server: &Server,
    tenant: &str,
    want: u64,
    within: Duration,
) -> Option<u64> {
    let deadline = std::time::Instant::now() + within;
    loop {
        let now = tenant_pending(server, tenant).await;
        if now == Some(want) || std::time::Instant::now() >= deadline {
            return now;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

async fn counting_server(extra: &[(&str, &str)]) -> Server {
    let mut env = vec![("HOOKLANE_TENANT_BACKLOG", "true")];
    env.extend_from_slice(extra);
    Server::start_on(Backend::Aws, test_env(&env)).await
}

async fn publish_with_id(server: &Server, tenant: &str, id: &str) -> u16 {
    let body = json!({"type": "order.created", "data": {"id": id}, "id": id});
    let path = format!("/v1/tenants/{tenant}/events");
    server.call("POST", &path, Some(body)).await.0
}

async fn a_duplicate_publish_counts_nothing_twice(fan_out_in_api: &str) {
    let rx = Receiver::start().await;
    rx.set_default("down", Reply::Status(503));
    // Nothing parks while the test watches; the heads come back soon once
    // the receiver is up.
    let ladder = format!("0s,{}", ["2s"; 40].join(","));
    let server = counting_server(&[
        ("HOOKLANE_RETRY_SCHEDULE", &ladder),
        ("HOOKLANE_FAN_OUT_IN_API", fan_out_in_api),
    ])
    .await;
    for _ in 0..3 {
        server.subscribe("acme", &rx.url("down"), &["*"]).await;
    }
    let ids: Vec<String> = (0..5).map(|n| format!("evt_dup_{n}")).collect();
    for id in &ids {
        assert_eq!(publish_with_id(&server, "acme", id).await, 202);
    }
    // Each one again, once all were fanned out, and once more in a batch.
    assert_eq!(
        pending_reaches(&server, "acme", 15, WAIT).await,
        Some(15),
        "five events to three subscriptions"
    );
    for id in &ids {
        assert_eq!(publish_with_id(&server, "acme", id).await, 200, "{id}");
    }
    // A batch of the same again, with one new event named twice.
    let mut batch: Vec<Value> = ids
        .iter()
        .chain(["evt_twice".to_owned(), "evt_twice".to_owned()].iter())
        .map(|id| json!({"type": "order.created", "data": {"id": id}, "id": id}))
        .collect();
    batch.rotate_right(2);
    let (code, doc) = server
        .call(
            "POST",
            "/v1/tenants/acme/event-batches",
            Some(json!({ "events": batch })),
        )
        .await;
    assert_eq!(code, 200, "{doc}");
    // One new event published five times at once: one of them counts.
    let racing = (0..5).map(|_| publish_with_id(&server, "acme", "evt_race"));
    let codes = futures::future::join_all(racing).await;
    assert_eq!(codes.iter().filter(|c| **c == 202).count(), 1, "{codes:?}");
    // The new events' deliveries come after the duplicates' (a tenant's
    // events fan out in order): once they are counted, so are those.
    assert_eq!(
        pending_reaches(&server, "acme", 21, WAIT).await,
        Some(21),
        "the duplicates counted nothing, the new ones once"
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(tenant_pending(&server, "acme").await, Some(21));
    rx.set_default("down", Reply::Status(204));
    assert_eq!(
        pending_reaches(&server, "acme", 0, WAIT).await,
        Some(0),
        "every count taken off once delivered"
    );
    let (_, doc) = server.call("GET", "/status", None).await;
    assert_eq!(doc["backlog"]["tenants"], json!([]), "{doc}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_duplicate_publish_fanned_out_in_the_api_counts_nothing_twice() {
    a_duplicate_publish_counts_nothing_twice("true").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_duplicate_publish_fanned_out_by_the_fan_out_function_counts_nothing_twice() {
    a_duplicate_publish_counts_nothing_twice("false").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_subscriptions_spilled_deliveries_come_off_its_tenants_count() {
    let rx = Receiver::start().await;
    rx.set_default("down", Reply::Status(503));
    // The head fails, and its retry is 20 s off: the deliveries after it
    // spill meanwhile.
    let server = counting_server(&[("HOOKLANE_RETRY_SCHEDULE", "0s,20s,20s")]).await;
    let sub = server.subscribe("acme", &rx.url("down"), &["*"]).await;
    let sub = sub["id"].as_str().expect("an id").to_owned();
    assert_eq!(publish_with_id(&server, "acme", "evt_head").await, 202);
    assert!(eventually(WAIT, || rx.count("down") >= 1).await);
    // The failed attempt's outcome sets the lane spilling after it answers.
    tokio::time::sleep(Duration::from_secs(2)).await;
    for n in 0..20 {
        let id = format!("evt_spilled_{n}");
        assert_eq!(publish_with_id(&server, "acme", &id).await, 202);
    }
    assert_eq!(
        pending_reaches(&server, "acme", 21, WAIT).await,
        Some(21),
        "the head and twenty behind it"
    );
    let (code, _) = server
        .call(
            "DELETE",
            &format!("/v1/tenants/acme/subscriptions/{sub}"),
            None,
        )
        .await;
    assert_eq!(code, 204);
    // The spilled twenty come off with the delete, long before the head's
    // retry (20 s after its failure) could move anything.
    let left = pending_reaches(&server, "acme", 1, Duration::from_secs(5)).await;
    assert!(
        matches!(left, Some(0 | 1)),
        "the spilled deliveries were taken off: {left:?} left"
    );
    assert_eq!(
        pending_reaches(&server, "acme", 0, WAIT).await,
        Some(0),
        "the head, dropped when met, too"
    );
    assert_eq!(rx.count("down"), 1, "nothing sent after the delete");
}

/// A count's write of one delivery, and a take-off, as the store's
/// `UpdateItem` bodies spell them.
const COUNT_OF_ONE: [&str; 2] = [r##""#d":"deliveries""##, r#"":n":{"N":"1"}"#];
const TAKE_OFF: [&str; 2] = [r##""#d":"deliveries""##, r#"":n":{"N":"-"#];

/// A counting server whose SDK calls go through a fault proxy; its table.
async fn counting_server_through_proxy() -> (FaultProxy, Server, String) {
    let env = test_env(&[("HOOKLANE_TENANT_BACKLOG", "true")]);
    let settings = aws::fresh_resources(60).await;
    let table = settings.table.clone();
    let proxy = FaultProxy::start_on(aws::Standin::chosen().endpoints()).await;
    let server = Server::start_aws_with(env, aws::sdk_at(&proxy.endpoint).await, settings).await;
    (proxy, server, table)
}

/// The `deliveries` of a tenant's count items, read from the table
/// directly (not through the proxy).
async fn count_items(table: &str, tenant: &str) -> Vec<i64> {
    let ddb = aws_sdk_dynamodb::Client::new(&aws::sdk().await);
    let out = ddb
        .scan()
        .table_name(table)
        .filter_expression("begins_with(pk, :n) AND begins_with(sk, :t)")
        .expression_attribute_values(":n", AttributeValue::S("N#".into()))
        .expression_attribute_values(":t", AttributeValue::S(format!("{tenant}#")))
        .send()
        .await
        .expect("scanning the table");
    out.items()
        .iter()
        .filter_map(|item| item.get("deliveries")?.as_n().ok()?.parse().ok())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_take_off_written_before_its_count_leaves_nothing_once_the_count_lands() {
    let rx = Receiver::start().await;
    let (proxy, server, table) = counting_server_through_proxy().await;
    server.subscribe("acme", &rx.url("ok"), &["*"]).await;
    let count = proxy.hold_when(&COUNT_OF_ONE);
    let take_offs = proxy.watch(&TAKE_OFF);
    // The publish answers once its fan-out has queued and counted: it
    // waits with the count, beside the rest.
    let publish = publish_with_id(&server, "acme", "evt_early");
    let meanwhile = async {
        assert!(
            eventually(WAIT, || count.matched() == 1).await,
            "the count's call is held"
        );
        // The delivery ends, and is taken off, while its count's call
        // waits: the minute's item is below zero, and reads as none.
        assert!(eventually(WAIT, || rx.count("ok") == 1).await);
        assert!(eventually(WAIT, || take_offs.answered() >= 1).await);
        assert_eq!(count.answered(), 0);
        assert_eq!(count_items(&table, "acme").await, vec![-1]);
        let (_, doc) = server.call("GET", "/status", None).await;
        assert_eq!(doc["backlog"]["tenants"], json!([]), "{doc}");
        count.lift();
    };
    assert_eq!(tokio::join!(publish, meanwhile).0, 202);
    assert!(eventually(WAIT, || count.answered() == 1).await);
    // The count lands: the minute is at zero and its item gone (removed
    // below zero instead, the count would have come back as one pending).
    let mut left = count_items(&table, "acme").await;
    for _ in 0..100 {
        if left.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        left = count_items(&table, "acme").await;
    }
    assert_eq!(
        left,
        Vec::<i64>::new(),
        "the minute's item is removed at zero"
    );
    for _ in 0..3 {
        let (_, doc) = server.call("GET", "/status", None).await;
        assert_eq!(doc["backlog"]["tenants"], json!([]), "{doc}");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn take_offs_that_fail_are_written_with_the_next_batchs() {
    let rx = Receiver::start().await;
    let (proxy, server, _) = counting_server_through_proxy().await;
    server.subscribe("acme", &rx.url("ok"), &["*"]).await;
    let failing = proxy.fail_when(&TAKE_OFF);
    for n in 0..3 {
        let id = format!("evt_kept_{n}");
        assert_eq!(publish_with_id(&server, "acme", &id).await, 202);
    }
    assert!(eventually(WAIT, || rx.count("ok") == 3).await);
    // Every end's take-off fails (the SDK's own retries included) while
    // the rule stands: the three stay counted.
    assert!(eventually(WAIT, || failing.matched() >= 1).await);
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(tenant_pending(&server, "acme").await, Some(3));
    failing.lift();
    // The next batch's end writes its own take-off and the three kept.
    assert_eq!(publish_with_id(&server, "acme", "evt_next").await, 202);
    assert!(eventually(WAIT, || rx.count("ok") == 4).await);
    assert_eq!(
        pending_reaches(&server, "acme", 0, WAIT).await,
        Some(0),
        "the failed take-offs were written after all"
    );
    let (_, doc) = server.call("GET", "/status", None).await;
    assert_eq!(doc["backlog"]["tenants"], json!([]), "{doc}");
}
