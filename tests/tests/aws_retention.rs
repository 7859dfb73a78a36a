//! The 14-day retention on the AWS path, over DynamoDB's late TTL: DynamoDB
//! deletes an item some time (up to days) after its `expires_at` passed,
//! so every read that serves such an item must hide it meanwhile. The test
//! ages one parked event's items (the event, its delivery record, its
//! attempt-log entries) as TTL leaves them, `expires_at` in the past and
//! the items still there, and checks that no read of the API shows them
//! and a replay cannot take them back; the other parked event, not aged,
//! shows everywhere and replays.

use std::time::Duration;

use aws_sdk_dynamodb::types::AttributeValue;
use hooklane_tests::{aws, test_env, Receiver, Reply, Server};
use serde_json::{json, Value};

/// Sets `expires_at` a minute in the past on every item of `table` that
/// names `event` and has one, as DynamoDB's TTL leaves them until it
/// deletes them. Returns how many it aged.
async fn age(table: &str, event: &str) -> usize {
    let ddb = aws_sdk_dynamodb::Client::new(&aws::sdk().await);
    let past = time::OffsetDateTime::now_utc().unix_timestamp() - 60;
    let mut aged = 0;
    let mut start = None;
    loop {
        let page = ddb
            .scan()
            .table_name(table)
            .set_exclusive_start_key(start)
            .send()
            .await
            .expect("scan");
        for item in page.items.unwrap_or_default() {
            if !item.contains_key("expires_at") || !format!("{item:?}").contains(event) {
                continue;
            }
            ddb.update_item()
                .table_name(table)
                .key("pk", item["pk"].clone())
                .key("sk", item["sk"].clone())
                .update_expression("SET expires_at = :past")
                .expression_attribute_values(":past", AttributeValue::N(past.to_string()))
                .send()
                .await
                .expect("age an item");
            aged += 1;
        }
        start = page.last_evaluated_key;
        if start.is_none() {
            return aged;
        }
    }
}

/// The `field` of every item a list answers.
async fn listed(server: &Server, path: &str, field: &str) -> Vec<String> {
    let (code, body) = server.call("GET", path, None).await;
    assert_eq!(code, 200, "{path}: {body}");
    body["items"]
        .as_array()
        .expect("items")
        .iter()
        .filter_map(|i| i[field].as_str().map(str::to_owned))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_item_the_ttl_has_not_deleted_yet_is_hidden_from_every_read() {
    let rx = Receiver::start().await;
    rx.set_default("gone", Reply::Status(410));
    let sdk = aws::sdk().await;
    let settings = aws::fresh_resources(60).await;
    let table = settings.table.clone();
    let server = Server::start_aws_with(test_env(&[]), sdk, settings).await;
    let sub = server.subscribe("acme", &rx.url("gone"), &["*"]).await;
    let sub_id = sub["id"].as_str().expect("id").to_owned();
    let old = server.publish("acme", "order.old", json!({})).await;
    let kept = server.publish("acme", "order.kept", json!({})).await;
    let dead = "/v1/tenants/acme/dead-letters";
    let mut parked = Vec::new();
    for _ in 0..300 {
        parked = listed(&server, dead, "event_id").await;
        if parked.len() == 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(parked.len(), 2, "both events parked: {parked:?}");

    let aged = age(&table, &old).await;
    // The event, its delivery record and its attempt-log entry at least.
    assert!(aged >= 3, "aged {aged} items");

    let (code, _) = server
        .call("GET", &format!("/v1/tenants/acme/events/{old}"), None)
        .await;
    assert_eq!(code, 404, "the expired event");
    let (code, _) = server
        .call("GET", &format!("/v1/tenants/acme/events/{kept}"), None)
        .await;
    assert_eq!(code, 200, "the kept event");
    let events = listed(&server, "/v1/tenants/acme/events", "id").await;
    assert_eq!(events, std::slice::from_ref(&kept), "the event list");
    let attempts = format!("/v1/tenants/acme/subscriptions/{sub_id}/attempts");
    let logged = listed(&server, &attempts, "event_id").await;
    assert_eq!(logged, std::slice::from_ref(&kept), "the attempt log");
    assert_eq!(
        listed(&server, dead, "event_id").await,
        std::slice::from_ref(&kept),
        "the dead letters"
    );
    let replay = |ids: Vec<String>| {
        let body = json!({ "subscription_id": sub_id, "event_ids": ids });
        server.call("POST", "/v1/tenants/acme/dead-letters/replay", Some(body))
    };
    let (code, body) = replay(vec![old.clone()]).await;
    assert_eq!(
        (code, body["replayed"].clone()),
        (202, Value::from(0)),
        "{body}"
    );
    let (code, body) = replay(vec![kept.clone()]).await;
    assert_eq!(
        (code, body["replayed"].clone()),
        (202, Value::from(1)),
        "{body}"
    );
}
