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

/// The portal's files: path, content type, body.
const ASSETS: [(&str, &str, &str); 10] = [
    (
        "/portal/",
        "text/html; charset=utf-8",
        include_str!("portal/index.html"),
    ),
    ("/portal/portal.js", JS, include_str!("portal/portal.js")),
    ("/portal/options.js", JS, include_str!("portal/options.js")),
    ("/portal/times.js", JS, include_str!("portal/times.js")),
    ("/portal/history.js", JS, include_str!("portal/history.js")),
    ("/portal/stats.js", JS, include_str!("portal/stats.js")),
    ("/portal/catalog.js", JS, include_str!("portal/catalog.js")),
    ("/portal/attempt.js", JS, include_str!("portal/attempt.js")),
    (
        "/portal/portal.css",
        "text/css; charset=utf-8",
        include_str!("portal/portal.css"),
    ),
    (
        "/portal/favicon.svg",
        "image/svg+xml",
        include_str!("portal/favicon.svg"),
    ),
];
const JS: &str = "text/javascript; charset=utf-8";

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
    let router = Router::new().route("/portal", get(|| async { Redirect::permanent("/portal/") }));
    ASSETS
        .into_iter()
        .fold(router, |router, (path, content_type, body)| {
            router.route(
                path,
                get(move |State(s): State<AppState>| async move { asset(&s, content_type, body) }),
            )
        })
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
