//! Retries of plain writes that a transaction got in the way of. DynamoDB
//! refuses a `PutItem`, `UpdateItem` or `DeleteItem` on an item that a
//! transaction is changing at that moment (`TransactionConflictException`),
//! and the SDK's standard retry does not take that error. The spill
//! transactions ([`super::spill`]) change a subscription's item, so a
//! health write or a status change landing at the same instant would fail
//! its whole delivery step. The adapter's DynamoDB client retries them
//! instead, with the SDK's own backoff and retry budget.

use aws_sdk_dynamodb::error::ProvideErrorMetadata;
use aws_sdk_dynamodb::operation::{
    delete_item::DeleteItemError, put_item::PutItemError, update_item::UpdateItemError,
};
use aws_smithy_runtime_api::client::interceptors::context::InterceptorContext;
use aws_smithy_runtime_api::client::retries::classifiers::{ClassifyRetry, RetryAction};

/// Classifies a plain write's `TransactionConflictException` as transient.
#[derive(Debug, Default)]
pub(crate) struct RetryTransactionConflicts;

impl ClassifyRetry for RetryTransactionConflicts {
    fn classify_retry(&self, ctx: &InterceptorContext) -> RetryAction {
        let Some(Err(err)) = ctx.output_or_error() else {
            return RetryAction::NoActionIndicated;
        };
        let Some(err) = err.as_operation_error() else {
            return RetryAction::NoActionIndicated;
        };
        let code = err
            .downcast_ref::<UpdateItemError>()
            .and_then(|e| e.code())
            .or_else(|| err.downcast_ref::<PutItemError>().and_then(|e| e.code()))
            .or_else(|| err.downcast_ref::<DeleteItemError>().and_then(|e| e.code()));
        if code == Some("TransactionConflictException") {
            RetryAction::transient_error()
        } else {
            RetryAction::NoActionIndicated
        }
    }

    fn name(&self) -> &'static str {
        "hooklane: retry transaction conflicts"
    }
}

#[cfg(test)]
mod tests {
    use aws_sdk_dynamodb::config::{BehaviorVersion, Credentials, Region};
    use aws_smithy_http_client::test_util::{ReplayEvent, StaticReplayClient};
    use aws_smithy_types::body::SdkBody;

    use super::RetryTransactionConflicts;

    fn reply(status: u16, body: &'static str) -> ReplayEvent {
        ReplayEvent::new(
            http::Request::builder()
                .uri("http://127.0.0.1:1/")
                .body(SdkBody::empty())
                .unwrap(),
            http::Response::builder()
                .status(status)
                .header("content-type", "application/x-amz-json-1.0")
                .body(SdkBody::from(body))
                .unwrap(),
        )
    }

    async fn update_through(replies: Vec<ReplayEvent>, retry_conflicts: bool) -> (bool, usize) {
        let http = StaticReplayClient::new(replies);
        let mut config = aws_sdk_dynamodb::Config::builder()
            .behavior_version(BehaviorVersion::latest())
            .region(Region::new("us-east-1"))
            .credentials_provider(Credentials::new("id", "secret", None, None, "test"))
            .endpoint_url("http://127.0.0.1:1")
            .retry_config(
                aws_smithy_types::retry::RetryConfig::standard()
                    .with_initial_backoff(std::time::Duration::from_millis(1)),
            )
            .http_client(http.clone());
        if retry_conflicts {
            config = config.retry_classifier(RetryTransactionConflicts);
        }
        let ddb = aws_sdk_dynamodb::Client::from_conf(config.build());
        let res = ddb
            .update_item()
            .table_name("t")
            .key("pk", aws_sdk_dynamodb::types::AttributeValue::S("p".into()))
            .update_expression("SET a = :a")
            .expression_attribute_values(
                ":a",
                aws_sdk_dynamodb::types::AttributeValue::N("1".into()),
            )
            .send()
            .await;
        (res.is_ok(), http.actual_requests().count())
    }

    const CONFLICT: &str = r#"{"__type":"com.amazonaws.dynamodb.v20120810#TransactionConflictException","message":"Transaction is ongoing for the item"}"#;
    const CONDITION: &str = r#"{"__type":"com.amazonaws.dynamodb.v20120810#ConditionalCheckFailedException","message":"The conditional request failed"}"#;

    #[tokio::test]
    async fn a_write_refused_for_a_transaction_in_progress_is_tried_again() {
        let replies = || vec![reply(400, CONFLICT), reply(200, "{}")];
        assert_eq!(update_through(replies(), true).await, (true, 2));
        assert_eq!(
            update_through(replies(), false).await,
            (false, 1),
            "without the classifier the SDK gives up at once"
        );
    }

    #[tokio::test]
    async fn a_failed_condition_is_not_tried_again() {
        let replies = vec![reply(400, CONDITION), reply(200, "{}")];
        assert_eq!(update_through(replies, true).await, (false, 1));
    }
}
