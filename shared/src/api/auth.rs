//! Who a request speaks for, and whether it may (G14): the operator token
//! (or, on AWS, the gateway's IAM or JWT check), a tenant key, or a portal
//! session, resolved once per request and checked against the route's
//! tenant and kind before any handler runs.

use axum::extract::{Request, State};
use axum::http::{header, Method};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use subtle::ConstantTimeEq;

use super::error::ApiError;
use super::{AppState, Auth};
use crate::access::{Principal, RouteKind, Verdict, KEY_PREFIX, SESSION_PREFIX};
use crate::domain::TenantId;

/// The bearer token a request presents, if any.
fn bearer(req: &Request) -> &str {
    req.headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or("")
}

/// Who the request speaks for; `None` answers 401.
async fn principal(state: &AppState, presented: &str) -> Result<Option<Principal>, ApiError> {
    let tenant_credential =
        presented.starts_with(KEY_PREFIX) || presented.starts_with(SESSION_PREFIX);
    if tenant_credential {
        return Ok(state.engine.principal_of(presented).await?);
    }
    Ok(match &state.auth {
        // API Gateway let the request through: it is the operator's.
        Auth::Gateway => Some(Principal::Operator),
        Auth::Token(token) => {
            let same: bool = presented.as_bytes().ct_eq(token.as_bytes()).into();
            (same && !presented.is_empty()).then_some(Principal::Operator)
        }
    })
}

/// The tenant a path is for and the kind of route it is; `None` for the
/// routes outside a tenant (`/metrics`).
fn route_of(method: &Method, path: &str) -> Option<(Option<TenantId>, RouteKind)> {
    let rest = path.strip_prefix("/v1/tenants/")?;
    let (tenant, rest) = rest.split_once('/').unwrap_or((rest, ""));
    let kind = match rest.split('/').next() {
        Some("api-keys") => RouteKind::Keys,
        Some("portal-sessions") => RouteKind::Sessions,
        // Revealing a signing secret is for credentials that may write.
        _ if rest.ends_with("/secret") => RouteKind::Write,
        _ if matches!(*method, Method::GET | Method::HEAD) => RouteKind::Read,
        _ => RouteKind::Write,
    };
    Some((TenantId::parse(tenant).ok(), kind))
}

/// Refuses a request that presents no credential it may use here: 401
/// without one, 404 for another tenant's routes, 403 for what its own
/// tenant's credential may not do. The principal goes on in the request's
/// extensions.
pub(super) async fn authenticate(
    State(state): State<AppState>,
    mut req: Request,
    next: Next,
) -> Response {
    let who = match principal(&state, bearer(&req)).await {
        Ok(Some(who)) => who,
        Ok(None) => return ApiError::unauthorized().into_response(),
        Err(e) => return e.into_response(),
    };
    let verdict = match (&who, route_of(req.method(), req.uri().path())) {
        (Principal::Operator, _) => Verdict::Allowed,
        // Outside a tenant (metrics): the operator's only.
        (_, None) => Verdict::Forbidden,
        (_, Some((None, _))) => Verdict::Elsewhere,
        (who, Some((Some(tenant), kind))) => who.may(&tenant, kind),
    };
    match verdict {
        Verdict::Allowed => {
            req.extensions_mut().insert(who);
            next.run(req).await
        }
        Verdict::Elsewhere => ApiError::not_found("route").into_response(),
        Verdict::Forbidden => ApiError::forbidden().into_response(),
    }
}
