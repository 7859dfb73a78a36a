//! The fan-out Lambda function: consumes the ingest FIFO queue and enqueues
//! one delivery per matching subscription. Thin: tracing, clients and the
//! engine are built once per cold start; the handler lives in
//! `hooklane_aws::handlers::fanout`.

use std::time::Duration;

use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent};
use hooklane_aws::handlers::fanout::{handle, FanOut};
use lambda_runtime::{service_fn, LambdaEvent};

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    hooklane_core::telemetry::init();
    let (store, engine) =
        hooklane_aws::wiring::from_env(&hooklane_aws::AwsEnv::from_env()?).await?;
    let ctx = FanOut {
        engine,
        store,
        budget: Duration::ZERO,
    };
    let ctx = &ctx;
    lambda_runtime::run(service_fn(|event: LambdaEvent<SqsEvent>| async move {
        // Leave a margin of the invocation's deadline to save the cursor.
        let left = event
            .context
            .deadline()
            .duration_since(std::time::SystemTime::now())
            .unwrap_or_default();
        let ctx = FanOut {
            budget: left.saturating_sub(Duration::from_secs(20)),
            ..ctx.clone()
        };
        let response = handle(&ctx, event.payload).await;
        hooklane_aws::wiring::batch_done(&ctx.engine, &ctx.store, "fanout").await;
        Ok::<SqsBatchResponse, lambda_runtime::Error>(response)
    }))
    .await
}
