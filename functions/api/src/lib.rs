//! The API function's app: the shared router in gateway-auth mode (API
//! Gateway authenticated the caller before the request got here), plus the
//! tenant scope of JWT callers.
//!
//! Which tenants a caller may use: IAM callers are scoped by the
//! `execute-api:Invoke` resources in their policy (paths
//! `/v1/tenants/<tenant>/*`), which API Gateway enforces. JWT callers carry
//! a `hooklane_tenants` claim: space-separated tenant ids, or `*`. A tenant
//! outside it answers 404, as any other tenant's resource does (G10).

use std::sync::Arc;

use axum::extract::Request;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::Router;
use hooklane_core::api::error::ApiError;
use hooklane_core::api::{router, AppState, Auth};
use hooklane_core::engine::Engine;
use lambda_http::request::RequestContext;

pub use hooklane_aws::AuthMode;

/// The app served by the function.
pub fn app(engine: Arc<Engine>, mode: AuthMode) -> Router {
    let app = router(AppState {
        engine,
        auth: Auth::Gateway,
    });
    match mode {
        AuthMode::Iam => app,
        AuthMode::Jwt => app.layer(middleware::from_fn(jwt_tenant_scope)),
    }
}

/// The tenant named by a `/v1/tenants/{tenant}/…` path.
fn path_tenant(path: &str) -> Option<&str> {
    path.strip_prefix("/v1/tenants/")?.split('/').next()
}

/// Whether a `hooklane_tenants` claim lets its holder use `tenant`.
pub fn claim_allows(claim: Option<&str>, tenant: &str) -> bool {
    claim.is_some_and(|c| c.split_whitespace().any(|t| t == "*" || t == tenant))
}

fn jwt_claim(req: &Request) -> Option<String> {
    match req.extensions().get::<RequestContext>()? {
        RequestContext::ApiGatewayV2(ctx) => ctx
            .authorizer
            .as_ref()?
            .jwt
            .as_ref()?
            .claims
            .get("hooklane_tenants")
            .cloned(),
        _ => None,
    }
}

async fn jwt_tenant_scope(req: Request, next: Next) -> Response {
    let Some(tenant) = path_tenant(req.uri().path()).map(str::to_owned) else {
        return next.run(req).await;
    };
    if claim_allows(jwt_claim(&req).as_deref(), &tenant) {
        next.run(req).await
    } else {
        ApiError::not_found("tenant")
            .field("tenant")
            .into_response()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tenant_claim_lists_tenants_or_allows_all() {
        assert!(claim_allows(Some("acme globex"), "globex"));
        assert!(claim_allows(Some("*"), "anyone"));
        assert!(!claim_allows(Some("acme"), "globex"));
        assert!(!claim_allows(Some("acme-2"), "acme"));
        assert!(!claim_allows(None, "acme"));
    }

    #[test]
    fn the_tenant_is_read_from_the_path() {
        assert_eq!(path_tenant("/v1/tenants/acme/subscriptions"), Some("acme"));
        assert_eq!(path_tenant("/healthz"), None);
    }

    #[tokio::test]
    async fn a_jwt_caller_gets_404_for_a_tenant_outside_its_claim() {
        use aws_lambda_events::apigw::{
            ApiGatewayRequestAuthorizer, ApiGatewayRequestAuthorizerJwtDescription,
            ApiGatewayV2httpRequestContext,
        };
        use tower::ServiceExt as _;
        let guarded = Router::new()
            .route(
                "/v1/tenants/{tenant}/events",
                axum::routing::get(|| async { "ok" }),
            )
            .layer(middleware::from_fn(jwt_tenant_scope));
        let call = |tenant: &'static str| {
            let mut jwt = ApiGatewayRequestAuthorizerJwtDescription::default();
            jwt.claims.insert("hooklane_tenants".into(), "acme".into());
            let mut auth = ApiGatewayRequestAuthorizer::default();
            auth.jwt = Some(jwt);
            let mut ctx = ApiGatewayV2httpRequestContext::default();
            ctx.authorizer = Some(auth);
            let mut req = Request::new(axum::body::Body::empty());
            *req.uri_mut() = format!("/v1/tenants/{tenant}/events").parse().unwrap();
            req.extensions_mut()
                .insert(RequestContext::ApiGatewayV2(ctx));
            guarded.clone().oneshot(req)
        };
        assert_eq!(call("acme").await.unwrap().status(), 200);
        assert_eq!(call("globex").await.unwrap().status(), 404);
    }
}
