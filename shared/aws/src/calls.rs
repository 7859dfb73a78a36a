//! Counts the AWS API calls hooklane makes, by service and operation (an
//! SDK interceptor), when `HOOKLANE_COUNT_AWS_CALLS=1`. The counts are
//! served by `GET /metrics` ([`crate::call_metrics`]) as `hooklane_aws_calls_total`, with what AWS
//! bills for them ([`crate::capacity`]) as `hooklane_aws_billed_total`
//! (DynamoDB write and read units, SQS requests by 64 KiB chunk); the
//! benchmark turns them into dollars per delivery. The event source
//! stand-in of `serve --backend aws` adds what Lambda bills for the
//! invocations it makes ([`invoked`]): their count as calls of service
//! `Lambda`, and their billed milliseconds (unit `ms`).
//!
//! To see the size of the items it writes, a counting client asks
//! DynamoDB for them (`ReturnValues`: the item before a put or delete,
//! after an update) where the caller did not ask for anything; counting
//! is for measurement, not for serving.

use std::collections::BTreeMap;
use std::sync::Mutex;

mod overview_reads;

use aws_sdk_dynamodb::operation as ddb;
use aws_sdk_dynamodb::types::ReturnValue;
use aws_sdk_sqs::operation as sqs;
use aws_smithy_runtime_api::box_error::BoxError;
use aws_smithy_runtime_api::client::interceptors::context::{
    AfterDeserializationInterceptorContextRef, BeforeSerializationInterceptorContextMut,
    BeforeSerializationInterceptorContextRef,
};
use aws_smithy_runtime_api::client::interceptors::Intercept;
use aws_smithy_runtime_api::client::orchestrator::Metadata;
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use aws_smithy_types::config_bag::{ConfigBag, Storable, StoreReplace};
use overview_reads::is_backlog_read;

use crate::capacity::{self, item_size, item_write_units, read_units, sqs_requests};

/// Calls by (service, operation).
pub(crate) type Counts = BTreeMap<(String, String), u64>;

/// Billed units by (service, operation), in the order of [`UNITS`].
pub(crate) type Billed = BTreeMap<(String, String), [f64; 4]>;

static CALLS: Mutex<Counts> = Mutex::new(BTreeMap::new());

/// Billed units by (service, operation): write units, read units, SQS
/// requests.
static BILLED: Mutex<Billed> = Mutex::new(BTreeMap::new());

/// The units of [`BILLED`]'s slots, as served.
pub(crate) const UNITS: [&str; 4] = ["wru", "rru", "requests", "ms"];

/// Counts one invocation of `function` that took `took` (Lambda bills
/// each invocation's duration rounded up to the millisecond), when
/// counting is on.
pub fn invoked(function: &str, took: std::time::Duration) {
    if !enabled() {
        return;
    }
    let key = ("Lambda".to_owned(), function.to_owned());
    if let Ok(mut calls) = CALLS.lock() {
        *calls.entry(key.clone()).or_default() += 1;
    }
    if let Ok(mut billed) = BILLED.lock() {
        billed.entry(key).or_default()[3] += (took.as_secs_f64() * 1000.0).ceil();
    }
}

/// What a call's input says it costs, and what is left to read from its
/// output.
#[derive(Debug, Clone, Default)]
struct Pending {
    wru: f64,
    sqs: f64,
    /// The size of the item a put writes (the output has the one before).
    put_size: Option<(usize, f64)>,
    /// A read, and whether strongly consistent.
    read: Option<bool>,
    /// A single-item write (put, update, delete): at least one unit, even
    /// refused by its condition.
    write: bool,
    /// The keys a `BatchGetItem` asks for (one not found still costs the
    /// least a read costs).
    keys: usize,
}

impl Storable for Pending {
    type Storer = StoreReplace<Self>;
}

/// Where an empty receive is billed: apart from the receives that brought
/// work, since a poller makes them at its own pace whatever the load.
pub const EMPTY_RECEIVE: &str = "ReceiveMessage (empty)";

fn bill(cfg: &ConfigBag, units: [f64; 3], empty_receive: bool) {
    let Some(meta) = cfg.load::<Metadata>() else {
        return;
    };
    let op = if empty_receive {
        EMPTY_RECEIVE
    } else {
        meta.name()
    };
    if let Ok(mut billed) = BILLED.lock() {
        let entry = billed
            .entry((meta.service().to_owned(), op.to_owned()))
            .or_default();
        for (total, add) in entry.iter_mut().zip(units) {
            *total += add;
        }
    }
}

/// Reads what an input costs, and asks for the item sizes its output is to
/// show (module doc).
fn pending_of(input: &mut Input) -> Pending {
    let mut p = Pending::default();
    if !item_call(input, &mut p) && !many_items_call(input, &mut p) {
        sqs_call(input, &mut p);
    }
    p
}

type Input = aws_smithy_runtime_api::client::interceptors::context::Input;

/// [`pending_of`] for a DynamoDB call on one item or a query; `false` when
/// it is none of those.
fn item_call(input: &mut Input, p: &mut Pending) -> bool {
    if let Some(i) = input.downcast_mut::<ddb::put_item::PutItemInput>() {
        if let Some(item) = &i.item {
            p.put_size = Some((item_size(item), capacity::indexes_of(item) as f64));
        }
        i.return_values.get_or_insert(ReturnValue::AllOld);
        p.write = true;
    } else if let Some(i) = input.downcast_mut::<ddb::update_item::UpdateItemInput>() {
        i.return_values.get_or_insert(ReturnValue::AllNew);
        p.write = true;
    } else if let Some(i) = input.downcast_mut::<ddb::delete_item::DeleteItemInput>() {
        i.return_values.get_or_insert(ReturnValue::AllOld);
        p.write = true;
    } else if let Some(i) = input.downcast_ref::<ddb::get_item::GetItemInput>() {
        p.read = Some(i.consistent_read == Some(true));
    } else if let Some(i) = input.downcast_ref::<ddb::query::QueryInput>() {
        p.read = Some(i.consistent_read == Some(true) && i.index_name.is_none());
    } else {
        return false;
    }
    true
}

/// [`pending_of`] for a DynamoDB call on many items (batches, a
/// transaction, a scan); `false` when it is none of those.
fn many_items_call(input: &Input, p: &mut Pending) -> bool {
    if let Some(i) = input.downcast_ref::<ddb::batch_get_item::BatchGetItemInput>() {
        let asked = || i.request_items.iter().flat_map(|m| m.values());
        p.read = Some(asked().any(|k| k.consistent_read == Some(true)));
        p.keys = asked().map(|k| k.keys.len()).sum();
    } else if let Some(i) =
        input.downcast_ref::<ddb::transact_write_items::TransactWriteItemsInput>()
    {
        // Twice each item's units; an update's item is not seen (1 unit).
        p.wru = i
            .transact_items
            .iter()
            .flatten()
            .map(|t| match t.put() {
                Some(put) => 2.0 * item_write_units(put.item(), item_size(put.item())),
                None => 2.0,
            })
            .sum();
    } else if let Some(i) = input.downcast_ref::<ddb::batch_write_item::BatchWriteItemInput>() {
        p.wru = i
            .request_items
            .iter()
            .flat_map(|m| m.values().flatten())
            .map(|w| match w.put_request() {
                Some(put) => item_write_units(put.item(), item_size(put.item())),
                None => 1.0,
            })
            .sum();
    } else if input
        .downcast_ref::<aws_sdk_dynamodb::operation::scan::ScanInput>()
        .is_some()
    {
        p.read = Some(false);
    } else {
        return false;
    }
    true
}

/// [`pending_of`] for an SQS call: sends by payload, receives by what
/// comes back (the output's bodies), the rest one request each.
fn sqs_call(input: &Input, p: &mut Pending) {
    if let Some(i) = input.downcast_ref::<sqs::send_message::SendMessageInput>() {
        p.sqs = sqs_requests(i.message_body.as_deref().map_or(0, str::len));
    } else if let Some(i) = input.downcast_ref::<sqs::send_message_batch::SendMessageBatchInput>() {
        let payload = i
            .entries
            .iter()
            .flatten()
            .map(|e| e.message_body().len())
            .sum();
        p.sqs = sqs_requests(payload);
    } else if input
        .downcast_ref::<sqs::receive_message::ReceiveMessageInput>()
        .is_some()
    {
        // Billed by what comes back.
    } else if is_sqs(input) {
        p.sqs = 1.0;
    }
}

/// Whether an input is of an SQS operation not billed by payload (deletes,
/// visibility changes, queue attributes): one request each.
fn is_sqs(input: &aws_smithy_runtime_api::client::interceptors::context::Input) -> bool {
    input.downcast_ref::<sqs::delete_message::DeleteMessageInput>().is_some()
        || input.downcast_ref::<sqs::delete_message_batch::DeleteMessageBatchInput>().is_some()
        || input
            .downcast_ref::<sqs::change_message_visibility::ChangeMessageVisibilityInput>()
            .is_some()
        || input
            .downcast_ref::<sqs::change_message_visibility_batch::ChangeMessageVisibilityBatchInput>()
            .is_some()
        || input.downcast_ref::<sqs::get_queue_attributes::GetQueueAttributesInput>().is_some()
}

/// Completes a call's bill from its output.
fn settle(
    p: &Pending,
    output: &aws_smithy_runtime_api::client::interceptors::context::Output,
) -> [f64; 3] {
    let [mut wru, mut rru, mut sqs] = [p.wru, 0.0, p.sqs];
    if let Some(o) = output.downcast_ref::<ddb::put_item::PutItemOutput>() {
        let before = o.attributes.as_ref().map_or(0, item_size);
        if let Some((after, index_writes)) = p.put_size {
            let size = after.max(before);
            wru += capacity::write_units(size) * (1.0 + index_writes);
        }
    } else if let Some(o) = output.downcast_ref::<ddb::update_item::UpdateItemOutput>() {
        let item = o.attributes.clone().unwrap_or_default();
        wru += item_write_units(&item, item_size(&item));
    } else if let Some(o) = output.downcast_ref::<ddb::delete_item::DeleteItemOutput>() {
        let item = o.attributes.clone().unwrap_or_default();
        wru += item_write_units(&item, item_size(&item));
    } else if let Some(o) = output.downcast_ref::<ddb::get_item::GetItemOutput>() {
        rru += read_units(o.item.as_ref().map_or(0, item_size), p.read == Some(true));
    } else if let Some(o) = output.downcast_ref::<ddb::batch_get_item::BatchGetItemOutput>() {
        // Per item, as `GetItem`; a key not found (nor left unprocessed)
        // costs the least a read costs.
        let consistent = p.read == Some(true);
        let found: Vec<&capacity::Item> = o
            .responses
            .iter()
            .flat_map(|m| m.values().flatten())
            .collect();
        let unprocessed: usize = o
            .unprocessed_keys
            .iter()
            .flat_map(|m| m.values())
            .map(|k| k.keys.len())
            .sum();
        let missing = p.keys.saturating_sub(found.len() + unprocessed);
        rru += found
            .iter()
            .map(|item| read_units(item_size(item), consistent))
            .sum::<f64>()
            + missing as f64 * read_units(0, consistent);
    } else if let Some(o) = output.downcast_ref::<ddb::query::QueryOutput>() {
        let size = o.items.iter().flatten().map(item_size).sum();
        rru += read_units(size, p.read == Some(true));
    } else if let Some(o) = output.downcast_ref::<ddb::scan::ScanOutput>() {
        let size = o.items.iter().flatten().map(item_size).sum();
        rru += read_units(size, false);
    } else if let Some(o) = output.downcast_ref::<sqs::receive_message::ReceiveMessageOutput>() {
        let payload = o
            .messages
            .iter()
            .flatten()
            .map(|m| m.body().map_or(0, str::len))
            .sum();
        sqs += sqs_requests(payload);
    }
    [wru, rru, sqs]
}

/// Set once an adapter that counts its calls is built in this process.
static ON: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Whether counting is on: an adapter that counts was built
/// ([`crate::Settings::count_calls`], `HOOKLANE_COUNT_AWS_CALLS`).
pub fn enabled() -> bool {
    ON.load(std::sync::atomic::Ordering::Relaxed)
}

/// Turns counting on for this process.
pub(crate) fn switch_on() {
    ON.store(true, std::sync::atomic::Ordering::Relaxed);
}

/// The interceptor that counts each call once, before it is sent (retries
/// of the same call are not counted again).
#[derive(Debug, Default, Clone, Copy)]
pub struct CountCalls;

impl Intercept for CountCalls {
    fn name(&self) -> &'static str {
        "hooklane-count-calls"
    }

    fn modify_before_serialization(
        &self,
        context: &mut BeforeSerializationInterceptorContextMut<'_>,
        _components: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        if is_backlog_read(context.input()) {
            return Ok(());
        }
        let pending = pending_of(context.input_mut());
        cfg.interceptor_state().store_put(pending);
        Ok(())
    }

    fn read_after_deserialization(
        &self,
        context: &AfterDeserializationInterceptorContextRef<'_>,
        _components: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let Some(pending) = cfg.load::<Pending>().cloned() else {
            return Ok(());
        };
        let empty_receive = context.output_or_error().is_ok_and(|o| {
            o.downcast_ref::<sqs::receive_message::ReceiveMessageOutput>()
                .is_some_and(|r| r.messages().is_empty())
        });
        let units = match context.output_or_error() {
            Ok(output) => settle(&pending, output),
            // A refused write (its condition) still costs its units; a
            // failed read or request counts as its minimum.
            Err(_) => [
                pending.wru.max(f64::from(u8::from(pending.write))),
                if pending.read.is_some() { 0.5 } else { 0.0 },
                pending.sqs,
            ],
        };
        bill(cfg, units, empty_receive);
        Ok(())
    }

    fn read_before_serialization(
        &self,
        context: &BeforeSerializationInterceptorContextRef<'_>,
        _components: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        if is_backlog_read(context.input()) {
            return Ok(());
        }
        if let Some(meta) = cfg.load::<Metadata>() {
            if let Ok(mut calls) = CALLS.lock() {
                *calls
                    .entry((meta.service().to_owned(), meta.name().to_owned()))
                    .or_default() += 1;
            }
        }
        Ok(())
    }
}

/// The counts so far: calls, and billed units ([`UNITS`]), by (service,
/// operation).
pub(crate) fn snapshot() -> (Counts, Billed) {
    let calls = CALLS.lock().map(|c| c.clone()).unwrap_or_default();
    let billed = BILLED.lock().map(|b| b.clone()).unwrap_or_default();
    (calls, billed)
}
