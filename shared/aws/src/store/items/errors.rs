//! What an AWS call's failure means to the store's callers: throttled
//! (unavailable: nothing was applied and the same call can succeed later;
//! the API answers 503 with `Retry-After` and a delivery step is put off)
//! or a backend failure (a timeout, a lost connection or a service's own
//! 500 may come after the write took effect: the caller's retry, with the
//! same ids, finds it), and the two conditional-write outcomes read from
//! DynamoDB's errors.

use hooklane_core::ports::StoreError;

/// Maps an SDK error to a storage error, keeping the whole cause chain:
/// unavailable when the service throttled the call, a backend failure
/// otherwise.
pub(crate) fn backend<E>(e: E) -> StoreError
where
    E: std::error::Error + Send + Sync + 'static,
{
    match throttled(&e) {
        true => StoreError::unavailable_from("an AWS call was throttled", e),
        false => StoreError::backend_from("an AWS call failed", e),
    }
}

/// The error codes by which DynamoDB and SQS throttle a call, which they
/// refuse whole: a transaction cancelled for throttling names
/// `ThrottlingError` or `ProvisionedThroughputExceeded` among its reasons
/// (and in its message).
pub(crate) const THROTTLED: [&str; 6] = [
    "ThrottlingException",
    "ProvisionedThroughputExceeded",
    "RequestLimitExceeded",
    "RequestThrottled",
    "ThrottlingError",
    "KmsThrottled",
];

/// Whether an SDK error is a service's throttling (a code of
/// [`THROTTLED`]). The SDK has already retried it (its standard mode)
/// before it reaches here. Read from the error's text, the one thing every
/// operation's error type shares: `SdkError` displays "service error" for
/// an answer from the service, whose source's text names the code (and,
/// for a cancelled transaction, its reasons).
fn throttled(e: &(dyn std::error::Error + 'static)) -> bool {
    e.to_string() == "service error"
        && e.source().is_some_and(|inner| {
            let text = inner.to_string();
            THROTTLED.iter().any(|code| text.contains(code))
        })
}

/// Whether a transaction was cancelled because an item's
/// `ConditionExpression` did not hold.
pub(crate) fn cancelled_by_condition<R>(
    e: &aws_sdk_dynamodb::error::SdkError<
        aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError,
        R,
    >,
) -> bool {
    use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError as E;
    match e.as_service_error() {
        Some(E::TransactionCanceledException(c)) => c
            .cancellation_reasons()
            .iter()
            .any(|r| r.code() == Some("ConditionalCheckFailed")),
        _ => false,
    }
}

/// Whether an SDK error is a failed `ConditionExpression`.
pub(crate) fn is_condition_failed<E, R>(e: &aws_sdk_dynamodb::error::SdkError<E, R>) -> bool
where
    E: aws_sdk_dynamodb::error::ProvideErrorMetadata,
{
    e.as_service_error()
        .and_then(|s| s.code())
        .is_some_and(|c| c == "ConditionalCheckFailedException")
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_sdk_dynamodb::error::SdkError;
    use aws_sdk_dynamodb::operation::put_item::PutItemError;
    use aws_sdk_dynamodb::types::error::{
        ConditionalCheckFailedException, ProvisionedThroughputExceededException,
    };
    use aws_smithy_runtime_api::http::{Response, StatusCode};
    use aws_smithy_types::body::SdkBody;

    fn answered(e: PutItemError) -> SdkError<PutItemError, Response> {
        let raw = Response::new(StatusCode::try_from(400).unwrap(), SdkBody::empty());
        SdkError::service_error(e, raw)
    }

    #[test]
    fn throttling_is_unavailable_and_a_timeout_or_a_failed_condition_is_not() {
        let throttled = answered(PutItemError::ProvisionedThroughputExceededException(
            ProvisionedThroughputExceededException::builder()
                .message("slow down")
                .build(),
        ));
        assert!(matches!(backend(throttled), StoreError::Unavailable(..)));
        let timed_out: SdkError<PutItemError, Response> =
            SdkError::timeout_error("the call took too long");
        assert!(matches!(backend(timed_out), StoreError::Backend(..)));
        let condition = answered(PutItemError::ConditionalCheckFailedException(
            ConditionalCheckFailedException::builder().build(),
        ));
        assert!(matches!(backend(condition), StoreError::Backend(..)));
    }
}
