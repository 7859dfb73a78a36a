//! The HTTP API of `../shared/API.md`: routes, bearer-token auth, and the
//! handlers that parse input at the edge and call the engine and ports.
//! Every route is scoped to the `{tenant}` in its path (G10): another
//! tenant's resources answer 404.

mod access;
mod attempts;
mod auth;
pub mod body;
mod dead_letters;
mod endpoint_tools;
pub mod error;
mod event_list;
mod event_types;
mod events;
pub mod input;
mod json_text;
#[cfg(test)]
mod openapi_tests;
mod portal;
pub mod serve;
mod stats;
mod subscriptions;

use std::sync::Arc;

use axum::extract::{DefaultBodyLimit, State};
use axum::http::{header, StatusCode};
use axum::middleware;
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post, put};
use axum::Router;

use crate::engine::Engine;
use error::ApiError;

/// The OpenAPI 3.1 document of this API.
pub const OPENAPI: &str = include_str!("openapi.json");

/// Every route served, as (method, path) in OpenAPI form; a test checks the
/// OpenAPI document against it.
pub const ROUTES: &[(&str, &str)] = &[
    ("get", "/healthz"),
    ("get", "/openapi.json"),
    ("get", "/portal/"),
    ("get", "/metrics"),
    ("get", "/status"),
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
    (
        "get",
        "/v1/tenants/{tenant}/subscriptions/{id}/attempts/{attempt_id}",
    ),
    ("get", "/v1/tenants/{tenant}/subscriptions/{id}/stats"),
    ("get", "/v1/tenants/{tenant}/subscriptions/{id}/secret"),
    ("post", "/v1/tenants/{tenant}/subscriptions/{id}/enable"),
    ("post", "/v1/tenants/{tenant}/subscriptions/{id}/test"),
    ("post", "/v1/tenants/{tenant}/subscriptions/{id}/recover"),
    ("post", "/v1/tenants/{tenant}/events"),
    ("get", "/v1/tenants/{tenant}/events"),
    ("post", "/v1/tenants/{tenant}/event-batches"),
    ("get", "/v1/tenants/{tenant}/events/{id}"),
    ("get", "/v1/tenants/{tenant}/event-types"),
    ("put", "/v1/tenants/{tenant}/event-types/{name}"),
    ("delete", "/v1/tenants/{tenant}/event-types/{name}"),
    ("get", "/v1/tenants/{tenant}/dead-letters"),
    ("post", "/v1/tenants/{tenant}/dead-letters/replay"),
    ("post", "/v1/tenants/{tenant}/api-keys"),
    ("get", "/v1/tenants/{tenant}/api-keys"),
    ("delete", "/v1/tenants/{tenant}/api-keys/{id}"),
    ("post", "/v1/tenants/{tenant}/portal-sessions"),
];

/// A route's body members, if it reads a JSON body.
type BodyReads = Option<&'static body::Fields>;

/// A route's query parameters, if it reads any.
type QueryReads = Option<&'static input::Query>;

/// What routes read besides their path: the members of a JSON body and the
/// query parameters, as the handlers pass them to [`body::object`] and
/// [`input::page`] (routes not listed read neither). A test checks the
/// OpenAPI document against it both ways.
pub const READS: &[(&str, &str, BodyReads, QueryReads)] = &[
    (
        "put",
        "/v1/tenants/{tenant}/event-types/{name}",
        Some(&event_types::REGISTER),
        None,
    ),
    (
        "post",
        "/v1/tenants/{tenant}/subscriptions",
        Some(&subscriptions::CREATE),
        None,
    ),
    (
        "get",
        "/v1/tenants/{tenant}/subscriptions",
        None,
        Some(&subscriptions::LIST_QUERY),
    ),
    (
        "patch",
        "/v1/tenants/{tenant}/subscriptions/{id}",
        Some(&subscriptions::UPDATE),
        None,
    ),
    (
        "get",
        "/v1/tenants/{tenant}/subscriptions/{id}/attempts",
        None,
        Some(&attempts::ATTEMPTS_QUERY),
    ),
    (
        "post",
        "/v1/tenants/{tenant}/subscriptions/{id}/test",
        Some(&endpoint_tools::TEST),
        None,
    ),
    (
        "post",
        "/v1/tenants/{tenant}/subscriptions/{id}/recover",
        Some(&endpoint_tools::RECOVER),
        None,
    ),
    (
        "post",
        "/v1/tenants/{tenant}/events",
        Some(&events::PUBLISH),
        None,
    ),
    (
        "get",
        "/v1/tenants/{tenant}/events",
        None,
        Some(&event_list::LIST_QUERY),
    ),
    (
        "post",
        "/v1/tenants/{tenant}/event-batches",
        Some(&events::BATCH),
        None,
    ),
    (
        "get",
        "/v1/tenants/{tenant}/dead-letters",
        None,
        Some(&dead_letters::LIST_QUERY),
    ),
    (
        "post",
        "/v1/tenants/{tenant}/dead-letters/replay",
        Some(&dead_letters::REPLAY),
        None,
    ),
    (
        "post",
        "/v1/tenants/{tenant}/api-keys",
        Some(&access::CREATE_KEY),
        None,
    ),
    (
        "post",
        "/v1/tenants/{tenant}/portal-sessions",
        Some(&access::CREATE_SESSION),
        None,
    ),
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

/// The routes under a tenant (`/v1/tenants/{tenant}/…`).
fn tenant_routes() -> Router<AppState> {
    Router::new()
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
        .route("/subscriptions/{id}/attempts", get(attempts::attempts))
        .route(
            "/subscriptions/{id}/attempts/{attempt_id}",
            get(attempts::detail),
        )
        .route("/subscriptions/{id}/stats", get(stats::stats))
        .route("/subscriptions/{id}/secret", get(subscriptions::secret))
        .route("/subscriptions/{id}/enable", post(subscriptions::enable))
        .route("/subscriptions/{id}/test", post(endpoint_tools::test))
        .route("/subscriptions/{id}/recover", post(endpoint_tools::recover))
        .route("/events", post(events::publish).get(event_list::list))
        .route(
            "/event-batches",
            post(events::publish_batch).layer(DefaultBodyLimit::max(events::BATCH_MAX_BODY)),
        )
        .route("/events/{id}", get(events::read))
        .route("/event-types", get(event_types::list))
        .route(
            "/event-types/{name}",
            put(event_types::register).delete(event_types::unregister),
        )
        .route("/dead-letters", get(dead_letters::list))
        .route("/dead-letters/replay", post(dead_letters::replay))
        .route("/api-keys", post(access::create_key).get(access::list_keys))
        .route("/api-keys/{id}", delete(access::revoke_key))
        .route("/portal-sessions", post(access::create_session))
}

/// The API router.
pub fn router(state: AppState) -> Router {
    let tenant_routes = tenant_routes();
    let authed = Router::new()
        .nest("/v1/tenants/{tenant}", tenant_routes.clone())
        // The same routes for tenant credentials only (`auth::PORTAL_API`).
        .nest("/portal/api/v1/tenants/{tenant}", tenant_routes)
        .route("/metrics", get(metrics))
        .route("/status", get(status))
        .route_layer(middleware::from_fn_with_state(
            state.clone(),
            auth::authenticate,
        ));
    Router::new()
        .route("/healthz", get(|| async { (StatusCode::OK, "ok") }))
        .route("/openapi.json", get(openapi))
        .merge(portal::routes())
        .merge(authed)
        .fallback(|| async { ApiError::not_found("route") })
        // Bodies are read whole only up to the limit; larger ones get 413
        // from the handler's own parse.
        .layer(DefaultBodyLimit::max(body::MAX_BODY))
        .with_state(state)
}

/// A JSON answer that carries a secret, a key or a session: never cached.
pub(crate) type Secret = (
    [(header::HeaderName, &'static str); 1],
    axum::Json<serde_json::Value>,
);

/// Wraps a JSON answer that carries a secret, a key or a session.
pub(crate) fn no_store(body: serde_json::Value) -> Secret {
    ([(header::CACHE_CONTROL, "no-store")], axum::Json(body))
}

async fn openapi() -> Response {
    ([(header::CONTENT_TYPE, "application/json")], OPENAPI).into_response()
}

async fn metrics(State(state): State<AppState>) -> Response {
    let body = state.engine.metrics_now().await;
    (
        [(header::CONTENT_TYPE, crate::engine::METRICS_CONTENT_TYPE)],
        body,
    )
        .into_response()
}

async fn status(State(state): State<AppState>) -> Result<axum::Json<serde_json::Value>, ApiError> {
    Ok(axum::Json(state.engine.status().await?))
}
