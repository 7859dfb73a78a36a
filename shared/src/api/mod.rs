//! The HTTP API of `../shared/API.md`: routes, bearer-token auth, and the
//! handlers that parse input at the edge and call the engine and ports.
//! Every route is scoped to the `{tenant}` in its path (G10): another
//! tenant's resources answer 404.

pub mod body;
mod dead_letters;
pub mod error;
mod events;
pub mod input;
mod subscriptions;

use std::sync::Arc;

use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use subtle::ConstantTimeEq;

use crate::engine::Engine;
use error::ApiError;

/// The OpenAPI 3.1 document of this API.
pub const OPENAPI: &str = include_str!("openapi.json");

/// Every route served, as (method, path) in OpenAPI form; a test checks the
/// OpenAPI document against it.
pub const ROUTES: &[(&str, &str)] = &[
    ("get", "/healthz"),
    ("get", "/openapi.json"),
    ("get", "/metrics"),
    ("post", "/v1/tenants/{tenant}/subscriptions"),
    ("get", "/v1/tenants/{tenant}/subscriptions"),
    ("get", "/v1/tenants/{tenant}/subscriptions/{id}"),
    ("patch", "/v1/tenants/{tenant}/subscriptions/{id}"),
    ("delete", "/v1/tenants/{tenant}/subscriptions/{id}"),
    (
        "post",
        "/v1/tenants/{tenant}/subscriptions/{id}/rotate-secret",
    ),
    ("get", "/v1/tenants/{tenant}/subscriptions/{id}/attempts"),
    ("post", "/v1/tenants/{tenant}/subscriptions/{id}/enable"),
    ("post", "/v1/tenants/{tenant}/events"),
    ("get", "/v1/tenants/{tenant}/events/{id}"),
    ("get", "/v1/tenants/{tenant}/dead-letters"),
    ("post", "/v1/tenants/{tenant}/dead-letters/replay"),
];

/// How callers are authenticated.
#[derive(Clone, Debug)]
pub enum Auth {
    /// `Authorization: Bearer <token>` (`hooklane serve`).
    Token(Arc<str>),
    /// API Gateway authenticated the caller (IAM or JWT) before the
    /// request reached the function; which tenants a caller may use is
    /// expressed in its IAM policy or JWT authorizer scopes by path.
    Gateway,
}

/// What every handler shares.
#[derive(Clone)]
pub struct AppState {
    /// The engine and its ports.
    pub engine: Arc<Engine>,
    /// How callers are authenticated.
    pub auth: Auth,
}

/// The API router.
pub fn router(state: AppState) -> Router {
    let tenant_routes = Router::new()
        .route(
            "/subscriptions",
            post(subscriptions::create).get(subscriptions::list),
        )
        .route(
            "/subscriptions/{id}",
            get(subscriptions::read)
                .patch(subscriptions::update)
                .delete(subscriptions::delete),
        )
        .route(
            "/subscriptions/{id}/rotate-secret",
            post(subscriptions::rotate_secret),
        )
        .route("/subscriptions/{id}/attempts", get(subscriptions::attempts))
        .route("/subscriptions/{id}/enable", post(subscriptions::enable))
        .route("/events", post(events::publish))
        .route("/events/{id}", get(events::read))
        .route("/dead-letters", get(dead_letters::list))
        .route("/dead-letters/replay", post(dead_letters::replay));
    let authed = Router::new()
        .nest("/v1/tenants/{tenant}", tenant_routes)
        .route("/metrics", get(metrics))
        .route_layer(middleware::from_fn_with_state(state.clone(), require_token));
    Router::new()
        .route("/healthz", get(|| async { (StatusCode::OK, "ok") }))
        .route("/openapi.json", get(openapi))
        .merge(authed)
        .fallback(|| async { ApiError::not_found("route") })
        // Bodies are read whole only up to the limit; larger ones get 413
        // from the handler's own parse.
        .layer(DefaultBodyLimit::max(body::MAX_BODY))
        .with_state(state)
}

async fn openapi() -> Response {
    ([(header::CONTENT_TYPE, "application/json")], OPENAPI).into_response()
}

async fn metrics(State(state): State<AppState>) -> String {
    state.engine.metrics.render()
}

/// Refuses requests without the right bearer token (constant-time compare).
async fn require_token(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let token = match &state.auth {
        Auth::Gateway => return next.run(req).await,
        Auth::Token(t) => t,
    };
    let presented = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or("");
    if presented.as_bytes().ct_eq(token.as_bytes()).into() && !presented.is_empty() {
        next.run(req).await
    } else {
        ApiError::unauthorized().into_response()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_openapi_document_lists_exactly_the_routes_served() {
        let doc: serde_json::Value = serde_json::from_str(OPENAPI).unwrap();
        let paths = doc["paths"].as_object().unwrap();
        for (method, path) in ROUTES {
            assert!(
                paths.get(*path).and_then(|p| p.get(*method)).is_some(),
                "{method} {path} is served but not documented"
            );
        }
        let documented = paths
            .iter()
            .flat_map(|(path, item)| {
                ["get", "post", "patch", "delete", "put"]
                    .into_iter()
                    .filter(|m| item.get(*m).is_some())
                    .map(move |m| (m, path.as_str()))
            })
            .count();
        assert_eq!(
            documented,
            ROUTES.len(),
            "the document lists routes that are not served"
        );
    }
}
