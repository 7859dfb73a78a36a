//! What an AWS call's failure means to the store's callers: "not now"
//! (unavailable: throttling, a service's own trouble, a timeout; the API
//! answers 503 with `Retry-After` and a delivery step is put off) or a
//! backend failure, and the two conditional-write outcomes read from
//! DynamoDB's errors.

use hooklane_core::ports::StoreError;

/// Maps an SDK error to a storage error, keeping the whole cause chain:
/// unavailable (nothing changed, the same call can succeed later; the API
/// answers 503 with `Retry-After`) when the service said "not now", a
/// backend failure otherwise.
pub(crate) fn backend<E>(e: E) -> StoreError
where
    E: std::error::Error + Send + Sync + 'static,
{
    match not_now(&e) {
        true => StoreError::unavailable_from("an AWS call was refused for now", e),
        false => StoreError::backend_from("an AWS call failed", e),
    }
}

/// The error codes by which DynamoDB and SQS say "not now": throttling,
/// and their own internal errors or unavailability (a transaction
/// cancelled for throttling names `ThrottlingError` among its reasons).
const NOT_NOW: [&str; 11] = [
    "ThrottlingException",
    "ProvisionedThroughputExceededException",
    "RequestLimitExceeded",
    "RequestThrottled",
    "ThrottlingError",
    "KmsThrottled",
    "InternalServerError",
    "InternalFailure",
    "InternalError",
    "ServiceUnavailable",
    "TransactionInProgressException",
];

/// Whether an SDK error says "not now" rather than "wrong": a code of
/// [`NOT_NOW`], a timeout, a call that could not be sent or whose answer
/// did not arrive whole. The SDK has already retried these (its standard
/// mode) before one reaches here. Read from the error's text, the one
/// thing every operation's error type shares (`SdkError`'s kinds display
/// fixed phrases; a service error's source begins with its code).
fn not_now(e: &(dyn std::error::Error + 'static)) -> bool {
    match e.to_string().as_str() {
        "request has timed out" | "dispatch failure" | "response error" => true,
        "service error" => e.source().is_some_and(|inner| {
            let text = inner.to_string();
            NOT_NOW.iter().any(|code| text.contains(code))
        }),
        _ => false,
    }
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
    fn throttling_and_timeouts_are_unavailable_and_a_failed_condition_is_not() {
        let throttled = answered(PutItemError::ProvisionedThroughputExceededException(
            ProvisionedThroughputExceededException::builder()
                .message("slow down")
                .build(),
        ));
        assert!(matches!(backend(throttled), StoreError::Unavailable(..)));
        let timed_out: SdkError<PutItemError, Response> =
            SdkError::timeout_error("the call took too long");
        assert!(matches!(backend(timed_out), StoreError::Unavailable(..)));
        let condition = answered(PutItemError::ConditionalCheckFailedException(
            ConditionalCheckFailedException::builder().build(),
        ));
        assert!(matches!(backend(condition), StoreError::Backend(..)));
    }
}
