//! Per-entry faults for the fault proxy: a batch call that succeeds as a
//! whole but leaves some of its entries undone, as the services do under
//! partial throttling or an internal error.
//!
//! - `SendMessageBatch`: entries answered in `Failed` were not sent. When
//!   an entry fails, the later entries of its message group in the same
//!   call fail too: the proxy models a FIFO queue that keeps a group's
//!   order within a call (were a queue to take a later message of the
//!   group, the lane's order would break for that pair unless the sender
//!   put one message per group in a call, which hooklane does not: it logs
//!   that case as an error).
//! - `BatchGetItem`: keys held back come back in `UnprocessedKeys`, with
//!   the table's other request parameters, unread.
//! - `BatchWriteItem`: requests held back come back in `UnprocessedItems`,
//!   unwritten.
//! - `TransactWriteItems`: the whole transaction is cancelled with one
//!   item's reason `ThrottlingError` (nothing written).
//!
//! The proxy forwards the call without what it held back, then adds that
//! to the service's answer; when it holds back everything, it forwards
//! nothing and answers as the service would have.

use serde_json::{json, Map, Value};

/// What the proxy does with one call.
pub(super) enum Plan {
    /// Forward `body` (or nothing, when `None`: everything was held back),
    /// then add `held` to the answer.
    Forward { body: Option<Vec<u8>>, held: Held },
    /// Answer `TransactWriteItems` with this cancellation (400).
    Cancel(Vec<u8>),
}

/// The entries held back, by operation.
pub(super) enum Held {
    /// `SendMessageBatch` entry ids.
    Messages(Vec<String>),
    /// `BatchGetItem`: table → its `KeysAndAttributes` with the held keys.
    Keys(Map<String, Value>),
    /// `BatchWriteItem`: table → the held write requests.
    Writes(Map<String, Value>),
}

/// The plan for a call of `op` whose body is `body`, `fail()` deciding
/// each entry (or each transaction); `None` when nothing is held back.
pub(super) fn plan(op: &str, body: &[u8], mut fail: impl FnMut() -> bool) -> Option<Plan> {
    let mut request: Value = serde_json::from_slice(body).ok()?;
    let held = match op.rsplit('.').next()? {
        "SendMessageBatch" => hold_messages(&mut request, &mut fail)?,
        "BatchGetItem" => hold_keys(&mut request, &mut fail)?,
        "BatchWriteItem" => hold_writes(&mut request, &mut fail)?,
        "TransactWriteItems" => return cancel(&request, &mut fail),
        _ => return None,
    };
    let left = match &held {
        Held::Messages(_) => request["Entries"].as_array().is_some_and(|e| !e.is_empty()),
        Held::Keys(_) | Held::Writes(_) => request["RequestItems"]
            .as_object()
            .is_some_and(|t| !t.is_empty()),
    };
    let body = left.then(|| serde_json::to_vec(&request).expect("json"));
    Some(Plan::Forward { body, held })
}

fn hold_messages(request: &mut Value, fail: &mut impl FnMut() -> bool) -> Option<Held> {
    let entries = request.get_mut("Entries")?.as_array_mut()?;
    let mut failed_groups: Vec<String> = Vec::new();
    let mut held = Vec::new();
    entries.retain(|e| {
        let group = e["MessageGroupId"].as_str().unwrap_or_default().to_owned();
        let fails = failed_groups.contains(&group) || fail();
        if fails {
            failed_groups.push(group);
            held.push(e["Id"].as_str().unwrap_or_default().to_owned());
        }
        !fails
    });
    (!held.is_empty()).then_some(Held::Messages(held))
}

fn hold_keys(request: &mut Value, fail: &mut impl FnMut() -> bool) -> Option<Held> {
    let tables = request.get_mut("RequestItems")?.as_object_mut()?;
    let mut held = Map::new();
    for (table, ask) in tables.iter_mut() {
        let Some(keys) = ask.get_mut("Keys").and_then(Value::as_array_mut) else {
            continue;
        };
        let mut out = Vec::new();
        keys.retain(|k| {
            let f = fail();
            if f {
                out.push(k.clone());
            }
            !f
        });
        if !out.is_empty() {
            let mut unprocessed = ask.clone();
            unprocessed["Keys"] = Value::Array(out);
            held.insert(table.clone(), unprocessed);
        }
    }
    tables.retain(|_, ask| ask["Keys"].as_array().is_some_and(|k| !k.is_empty()));
    (!held.is_empty()).then_some(Held::Keys(held))
}

fn hold_writes(request: &mut Value, fail: &mut impl FnMut() -> bool) -> Option<Held> {
    let tables = request.get_mut("RequestItems")?.as_object_mut()?;
    let mut held = Map::new();
    for (table, writes) in tables.iter_mut() {
        let Some(writes) = writes.as_array_mut() else {
            continue;
        };
        let mut out = Vec::new();
        writes.retain(|w| {
            let f = fail();
            if f {
                out.push(w.clone());
            }
            !f
        });
        if !out.is_empty() {
            held.insert(table.clone(), Value::Array(out));
        }
    }
    tables.retain(|_, w| w.as_array().is_some_and(|w| !w.is_empty()));
    (!held.is_empty()).then_some(Held::Writes(held))
}

/// DynamoDB's answer to a transaction cancelled because one of its items
/// was throttled.
fn cancel(request: &Value, fail: &mut impl FnMut() -> bool) -> Option<Plan> {
    let n = request["TransactItems"].as_array()?.len();
    if n == 0 || !fail() {
        return None;
    }
    let throttled = n - 1;
    let reasons: Vec<Value> = (0..n)
        .map(|i| match i == throttled {
            true => json!({"Code": "ThrottlingError", "Message": "Throughput exceeds the current capacity of your table or index."}),
            false => json!({"Code": "None"}),
        })
        .collect();
    let codes: Vec<&str> = (0..n)
        .map(|i| {
            if i == throttled {
                "ThrottlingError"
            } else {
                "None"
            }
        })
        .collect();
    let body = json!({
        "__type": "com.amazonaws.dynamodb.v20120810#TransactionCanceledException",
        "Message": format!("Transaction cancelled, please refer cancellation reasons for specific reasons [{}]", codes.join(", ")),
        "CancellationReasons": reasons,
    });
    Some(Plan::Cancel(serde_json::to_vec(&body).expect("json")))
}

/// The service's answer (`upstream`, or none when nothing was forwarded)
/// with the held-back entries added as the service reports them.
pub(super) fn answer(upstream: Option<&[u8]>, held: Held) -> Vec<u8> {
    let mut out: Value = upstream
        .and_then(|b| serde_json::from_slice(b).ok())
        .unwrap_or_else(|| json!({}));
    match held {
        Held::Messages(ids) => {
            if out.get("Successful").is_none() {
                out["Successful"] = json!([]);
            }
            let failed = out
                .as_object_mut()
                .expect("an object")
                .entry("Failed")
                .or_insert_with(|| json!([]));
            for id in ids {
                if let Some(f) = failed.as_array_mut() {
                    f.push(json!({
                        "Id": id,
                        "SenderFault": false,
                        "Code": "InternalError",
                        "Message": "injected by the test's fault proxy",
                    }));
                }
            }
        }
        Held::Keys(tables) => {
            if out.get("Responses").is_none() {
                out["Responses"] = json!({});
            }
            merge(&mut out, "UnprocessedKeys", tables, |old, new| {
                let keys = old["Keys"].as_array().cloned().unwrap_or_default();
                let mut merged = new;
                if let Some(k) = merged["Keys"].as_array_mut() {
                    k.extend(keys);
                }
                merged
            });
        }
        Held::Writes(tables) => merge(&mut out, "UnprocessedItems", tables, |old, new| {
            let mut all = old.as_array().cloned().unwrap_or_default();
            all.extend(new.as_array().cloned().unwrap_or_default());
            Value::Array(all)
        }),
    }
    serde_json::to_vec(&out).expect("json")
}

/// Adds `tables` under `field`, combining with what the service already
/// left there.
fn merge(
    out: &mut Value,
    field: &str,
    tables: Map<String, Value>,
    combine: impl Fn(&Value, Value) -> Value,
) {
    let map = out
        .as_object_mut()
        .expect("an object")
        .entry(field)
        .or_insert_with(|| json!({}));
    let Some(map) = map.as_object_mut() else {
        return;
    };
    for (table, held) in tables {
        let merged = match map.get(&table) {
            Some(old) => combine(old, held),
            None => held,
        };
        map.insert(table, merged);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_message_takes_the_rest_of_its_group_in_the_call_with_it() {
        let body = serde_json::to_vec(&json!({"QueueUrl": "q", "Entries": [
            {"Id": "0", "MessageGroupId": "a"},
            {"Id": "1", "MessageGroupId": "b"},
            {"Id": "2", "MessageGroupId": "a"},
        ]}))
        .unwrap();
        let mut rolls = [true, false].into_iter();
        let Some(Plan::Forward {
            body: Some(sent),
            held,
        }) = plan("AmazonSQS.SendMessageBatch", &body, || {
            rolls.next().unwrap_or(false)
        })
        else {
            panic!("a plan that forwards")
        };
        let sent: Value = serde_json::from_slice(&sent).unwrap();
        assert_eq!(sent["Entries"].as_array().unwrap().len(), 1);
        assert_eq!(sent["Entries"][0]["Id"], "1");
        let answer: Value =
            serde_json::from_slice(&answer(Some(br#"{"Successful":[{"Id":"1"}]}"#), held)).unwrap();
        let failed: Vec<&str> = answer["Failed"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["Id"].as_str().unwrap())
            .collect();
        assert_eq!(failed, ["0", "2"]);
    }

    #[test]
    fn held_keys_come_back_unprocessed_with_their_parameters() {
        let body = serde_json::to_vec(&json!({"RequestItems": {"t": {
            "Keys": [{"pk": {"S": "1"}}, {"pk": {"S": "2"}}],
            "ConsistentRead": true,
        }}}))
        .unwrap();
        let Some(Plan::Forward { body: None, held }) =
            plan("DynamoDB_20120810.BatchGetItem", &body, || true)
        else {
            panic!("everything held back")
        };
        let answer: Value = serde_json::from_slice(&answer(None, held)).unwrap();
        assert_eq!(answer["UnprocessedKeys"]["t"]["ConsistentRead"], true);
        assert_eq!(
            answer["UnprocessedKeys"]["t"]["Keys"]
                .as_array()
                .unwrap()
                .len(),
            2
        );
        assert!(answer["Responses"].is_object());
    }
}
