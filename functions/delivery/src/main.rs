//! The delivery Lambda function: consumes the delivery FIFO queue (or, with
//! `HOOKLANE_POOL=slow`, the slow pool's) and makes one attempt per due
//! message, groups concurrently, each group in order.
//! Thin: tracing, clients and the engine are built once per cold start; the
//! handler lives in `hooklane_aws::handlers::delivery`.

use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent};
use hooklane_aws::handlers::delivery::{handle, Deliver};
use lambda_runtime::{service_fn, LambdaEvent};

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    hooklane_core::telemetry::init();
    let (store, engine) =
        hooklane_aws::wiring::delivery_from_env(&hooklane_aws::AwsEnv::from_env()?).await?;
    let function = match store.pool() {
        hooklane_aws::Pool::Main => "delivery",
        hooklane_aws::Pool::Slow => "slow-delivery",
    };
    let ctx = Deliver { engine, store };
    let ctx = &ctx;
    lambda_runtime::run(service_fn(|event: LambdaEvent<SqsEvent>| async move {
        let response = handle(ctx, event.payload).await;
        hooklane_aws::wiring::batch_done(&ctx.engine, &ctx.store, function).await;
        Ok::<SqsBatchResponse, lambda_runtime::Error>(response)
    }))
    .await
}
