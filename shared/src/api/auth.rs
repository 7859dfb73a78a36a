//! Who a request speaks for, and whether it may (G14): the operator token
//! (or, on AWS, the gateway's IAM or JWT check), a tenant key, or a portal
//! session, resolved once per request and checked against the route's
//! tenant and kind before any handler runs.
//!
//! Every tenant route is also served under [`PORTAL_API`], for tenant
//! credentials only: the operator's token (or the gateway's word) is not
//! taken there. On AWS the gateway passes that prefix to the function
//! without its own check (IAM or JWT could not carry a hooklane key), so
//! the portal and tenant keys reach the deployed API through it; the
//! function checks the credential itself.

use axum::extract::{Request, State};
use axum::http::{header, Method};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use subtle::ConstantTimeEq;

use super::error::ApiError;
use super::{AppState, Auth};
use crate::access::{Principal, RouteKind, Unrecognized, Verdict, KEY_PREFIX, SESSION_PREFIX};
use crate::domain::TenantId;

/// The prefix of the tenant routes that take tenant credentials only.
pub const PORTAL_API: &str = "/portal/api";

/// The bearer token a request presents. The scheme's name is
/// case-insensitive (RFC 9110 §11.1): `bearer` and `BEARER` are taken.
fn bearer(req: &Request) -> Result<&str, Unrecognized> {
    let value = req
        .headers()
        .get(header::AUTHORIZATION)
        .ok_or(Unrecognized::Missing)?;
    let value = value.to_str().map_err(|_| Unrecognized::NotBearer)?;
    let (scheme, token) = value.split_once(' ').ok_or(Unrecognized::NotBearer)?;
    if !scheme.eq_ignore_ascii_case("bearer") {
        return Err(Unrecognized::NotBearer);
    }
    Ok(token.trim_start_matches(' '))
}

/// Who the request speaks for, or why nobody (a 401). Under
/// [`PORTAL_API`] only a tenant credential speaks; behind the gateway
/// (which checked it) no header is needed elsewhere.
async fn principal(
    state: &AppState,
    presented: Result<&str, Unrecognized>,
    portal_api: bool,
) -> Result<Result<Principal, Unrecognized>, ApiError> {
    let presented = match (presented, &state.auth) {
        (Ok(presented), _) => presented,
        (Err(_), Auth::Gateway) if !portal_api => return Ok(Ok(Principal::Operator)),
        (Err(why), _) => return Ok(Err(why)),
    };
    let tenant_credential =
        presented.starts_with(KEY_PREFIX) || presented.starts_with(SESSION_PREFIX);
    if tenant_credential {
        return Ok(state.engine.principal_of(presented).await?);
    }
    if portal_api {
        return Ok(Err(Unrecognized::OperatorHere));
    }
    Ok(match &state.auth {
        // API Gateway let the request through: it is the operator's.
        Auth::Gateway => Ok(Principal::Operator),
        Auth::Token(token) => {
            let same: bool = presented.as_bytes().ct_eq(token.as_bytes()).into();
            if same && !presented.is_empty() {
                Ok(Principal::Operator)
            } else {
                Err(Unrecognized::WrongToken)
            }
        }
    })
}

/// The tenant a path is for and the kind of route it is; `None` for the
/// routes outside a tenant (`/metrics`, `/status`).
fn route_of(method: &Method, path: &str) -> Option<(Option<TenantId>, RouteKind)> {
    let rest = path.strip_prefix("/v1/tenants/")?;
    let (tenant, rest) = rest.split_once('/').unwrap_or((rest, ""));
    let segments: Vec<&str> = rest.split('/').collect();
    let kind = match segments.as_slice() {
        ["api-keys", ..] => RouteKind::Keys,
        // The catalog is the operator's to write, the tenant's to read.
        ["event-types", _] if *method != Method::GET => RouteKind::Keys,
        ["portal-sessions", ..] => RouteKind::Sessions,
        // Revealing a signing secret is for credentials that may write.
        ["subscriptions", _, "secret"] => RouteKind::Write,
        _ if matches!(*method, Method::GET | Method::HEAD) => RouteKind::Read,
        _ => RouteKind::Write,
    };
    Some((TenantId::parse(tenant).ok(), kind))
}

/// Refuses a request that presents no credential it may use here: 401
/// without one, 404 for another tenant's routes, 403 for what its own
/// tenant's credential may not do. The principal goes on in the
/// request's extensions.
pub(super) async fn authenticate(
    State(state): State<AppState>,
    mut req: Request,
    next: Next,
) -> Response {
    let portal_api = req.uri().path().starts_with(PORTAL_API);
    let who = match principal(&state, bearer(&req), portal_api).await {
        Ok(Ok(who)) => who,
        Ok(Err(why)) => return ApiError::unauthorized(why).into_response(),
        Err(e) => return e.into_response(),
    };
    // The operator's requests (every publish) skip the route's reading.
    let verdict = match &who {
        Principal::Operator => Verdict::Allowed,
        tenant_credential => {
            let path = req.uri().path();
            let path = path.strip_prefix(PORTAL_API).unwrap_or(path);
            match route_of(req.method(), path) {
                // Outside a tenant (metrics, status): the operator's only.
                None => Verdict::Forbidden,
                Some((None, _)) => Verdict::Elsewhere,
                Some((Some(tenant), kind)) => tenant_credential.may(&tenant, kind),
            }
        }
    };
    match verdict {
        Verdict::Allowed => {
            // For the handlers that depend on who asks (a session minted
            // by a key names it).
            req.extensions_mut().insert(who);
            next.run(req).await
        }
        Verdict::Elsewhere => ApiError::not_found("route").into_response(),
        Verdict::Forbidden => ApiError::forbidden().into_response(),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use axum::body::Body;
    use axum::http::Request;
    use tower::ServiceExt as _;

    use super::super::{router, AppState, Auth};
    use crate::config::Config;
    use crate::engine::{Engine, Outside, Ports};
    use crate::ports::{NoNotifier, NoWakeup};
    use crate::sqlite::SqliteStore;

    async fn status(app: &axum::Router, path: &str, bearer: Option<&str>) -> u16 {
        let mut req = Request::get(path);
        if let Some(b) = bearer {
            req = req.header("authorization", format!("Bearer {b}"));
        }
        let res = app.clone().oneshot(req.body(Body::empty()).unwrap()).await;
        res.unwrap().status().as_u16()
    }

    /// Behind the gateway (AWS), a request the gateway let through speaks
    /// for the operator on the API's own paths, and for nobody under the
    /// portal's prefix, which the gateway passes unchecked.
    #[tokio::test]
    async fn behind_the_gateway_the_portal_prefix_takes_tenant_credentials_only() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(&dir.path().join("t.db")).unwrap();
        let (wake, note) = (Arc::new(NoWakeup), Arc::new(NoNotifier));
        let ports = Ports::build(store, &Config::default(), Outside::default(), wake, note);
        let engine = Engine::new(ports.unwrap(), Config::default());
        let tenant = crate::domain::TenantId::parse("a").unwrap();
        let (_, key) = engine.create_key(&tenant, "k".into(), true).await.unwrap();
        let app = router(AppState {
            engine,
            auth: Auth::Gateway,
        });
        let (own, portal) = (
            "/v1/tenants/a/subscriptions",
            "/portal/api/v1/tenants/a/subscriptions",
        );
        assert_eq!(status(&app, own, None).await, 200);
        assert_eq!(status(&app, portal, None).await, 401);
        assert_eq!(status(&app, portal, Some("anything")).await, 401);
        assert_eq!(status(&app, portal, Some("hlk_not-a-key")).await, 401);
        assert_eq!(status(&app, portal, Some(&key)).await, 200);
        assert_eq!(
            status(&app, "/portal/api/v1/tenants/b/subscriptions", Some(&key)).await,
            404
        );
        assert_eq!(status(&app, "/portal/api/metrics", Some(&key)).await, 404);
    }
}
