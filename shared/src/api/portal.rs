//! The tenant portal's page (G14), compiled into the binary: `GET
//! /portal/` and its scripts, stylesheet and icon, with no auth (every call the
//! page makes carries its session). Served with a Content-Security-Policy
//! that allows scripts, styles and calls from this origin only (no inline
//! script), frames only from `HOOKLANE_PORTAL_FRAME_ANCESTORS`, no
//! `Referer`, and no caching.

use axum::extract::State;
use axum::http::{header, HeaderName, HeaderValue};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;
use axum::Router;

use super::AppState;

const INDEX: &str = include_str!("portal/index.html");
const SCRIPT: &str = include_str!("portal/portal.js");
const OPTIONS_SCRIPT: &str = include_str!("portal/options.js");
const TIMES_SCRIPT: &str = include_str!("portal/times.js");
const HISTORY_SCRIPT: &str = include_str!("portal/history.js");
const STYLE: &str = include_str!("portal/portal.css");
const ICON: &str = include_str!("portal/favicon.svg");

/// The policy of every portal response, with who may frame it.
fn policy(frame_ancestors: Option<&str>) -> String {
    format!(
        "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; \
         img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors {}",
        frame_ancestors.unwrap_or("'none'")
    )
}

fn asset(state: &AppState, content_type: &'static str, body: &'static str) -> Response {
    let csp = policy(state.engine.config.portal_frame_ancestors.as_deref());
    let headers: [(HeaderName, HeaderValue); 5] = [
        (header::CONTENT_TYPE, HeaderValue::from_static(content_type)),
        (
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_str(&csp).unwrap_or(HeaderValue::from_static("default-src 'none'")),
        ),
        (
            header::REFERRER_POLICY,
            HeaderValue::from_static("no-referrer"),
        ),
        (
            header::X_CONTENT_TYPE_OPTIONS,
            HeaderValue::from_static("nosniff"),
        ),
        (header::CACHE_CONTROL, HeaderValue::from_static("no-store")),
    ];
    (headers, body).into_response()
}

/// The portal's routes.
pub(super) fn routes() -> Router<AppState> {
    Router::new()
        .route("/portal", get(|| async { Redirect::permanent("/portal/") }))
        .route(
            "/portal/",
            get(|State(s): State<AppState>| async move {
                asset(&s, "text/html; charset=utf-8", INDEX)
            }),
        )
        .route(
            "/portal/portal.js",
            get(|State(s): State<AppState>| async move {
                asset(&s, "text/javascript; charset=utf-8", SCRIPT)
            }),
        )
        .route(
            "/portal/options.js",
            get(|State(s): State<AppState>| async move {
                asset(&s, "text/javascript; charset=utf-8", OPTIONS_SCRIPT)
            }),
        )
        .route(
            "/portal/times.js",
            get(|State(s): State<AppState>| async move {
                asset(&s, "text/javascript; charset=utf-8", TIMES_SCRIPT)
            }),
        )
        .route(
            "/portal/history.js",
            get(|State(s): State<AppState>| async move {
                asset(&s, "text/javascript; charset=utf-8", HISTORY_SCRIPT)
            }),
        )
        .route(
            "/portal/portal.css",
            get(|State(s): State<AppState>| async move {
                asset(&s, "text/css; charset=utf-8", STYLE)
            }),
        )
        .route(
            "/portal/favicon.svg",
            get(|State(s): State<AppState>| async move { asset(&s, "image/svg+xml", ICON) }),
        )
}

#[cfg(test)]
mod tests {
    use super::policy;

    #[test]
    fn the_policy_allows_this_origin_only_and_frames_as_configured() {
        let none = policy(None);
        assert!(none.contains("script-src 'self';") && !none.contains("unsafe-inline"));
        assert!(none.ends_with("frame-ancestors 'none'"));
        let some = policy(Some("https://app.example.com 'self'"));
        assert!(some.ends_with("frame-ancestors https://app.example.com 'self'"));
    }
}
