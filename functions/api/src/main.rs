//! The API Lambda function: every route of the HTTP API behind API Gateway
//! (which authenticates callers with IAM or JWT before the request gets
//! here). Thin: the router is `hooklane_core::api::router` over the engine
//! on the AWS adapters, built once per cold start.

use hooklane_core::api::{router, AppState, Auth};

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    hooklane_core::telemetry::init();
    let (_store, engine) = hooklane_aws::local::from_env().await?;
    let app = router(AppState {
        engine,
        auth: Auth::Gateway,
    });
    lambda_http::run(app).await
}
