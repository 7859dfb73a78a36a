//! The API Lambda function: every route of the HTTP API behind API Gateway
//! (which authenticates callers with IAM or JWT before the request gets
//! here). Thin: the app is `hooklane_api::app` over the engine on the AWS
//! adapters, built once per cold start.

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    hooklane_core::telemetry::init();
    let env = hooklane_aws::AwsEnv::from_env()?;
    let (_store, engine) = hooklane_aws::wiring::from_env(&env).await?;
    // Spans go out before the instance is frozen (when traces are on).
    let app = hooklane_api::app(engine, env.auth_mode).layer(axum::middleware::map_response(
        |response: axum::response::Response| async {
            hooklane_core::trace::flush_done().await;
            response
        },
    ));
    lambda_http::run(app).await
}
