//! The overview's own AWS calls, told apart from the deliveries' so the
//! call counts ([`super`]) leave them out.

use aws_sdk_dynamodb::operation as ddb;
use aws_sdk_sqs::operation as sqs;
use aws_smithy_runtime_api::client::interceptors::context::Input;

// The store's bottom module, not the store itself, which counts its calls
// through `super` (naming the store here would close an import circle).
use crate::store::items::keys::{is_count_pk, SLOW_LANES_PK, SUSPENDED_PK};

/// Whether a call is one of the overview's reads for `GET /metrics` and
/// `/status` (the delivery queues' approximate counts, the index of
/// suspended subscriptions, the slow lanes' markers, the tenant backlog
/// counts): not counted, as the operator makes them, not
/// the deliveries, and a benchmark that reads `/metrics` until the counts
/// stop changing would otherwise never see them stop.
pub(super) fn is_backlog_read(input: &Input) -> bool {
    let queue_counts = input
        .downcast_ref::<sqs::get_queue_attributes::GetQueueAttributesInput>()
        .is_some_and(|i| {
            i.attribute_names()
                .contains(&aws_sdk_sqs::types::QueueAttributeName::ApproximateNumberOfMessages)
        });
    // A query of this index (none: the table) whose value `name` is one
    // `is` takes.
    let query = |index: Option<&str>, name: &str, is: &dyn Fn(&str) -> bool| {
        input
            .downcast_ref::<ddb::query::QueryInput>()
            .is_some_and(|q| {
                q.index_name() == index
                    && q.expression_attribute_values()
                        .and_then(|v| v.get(name))
                        .and_then(|p| p.as_s().ok())
                        .is_some_and(|p| is(p))
            })
    };
    queue_counts
        || query(Some("gsi2"), ":p", &|p| p == SUSPENDED_PK)
        || query(None, ":pk", &|p| p == SLOW_LANES_PK)
        || query(None, ":p", &is_count_pk)
}
