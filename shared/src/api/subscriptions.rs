//! Subscription routes: register (egress-checked URL, filters, secret),
//! list, read (with health), update, unregister (tombstone, G4), rotate the
//! secret (24 h overlap, G7), and the attempt log.
//!
//! The secret is shown when a subscription is created and when it is
//! rotated, never in reads or lists (as Stripe shows a signing secret once).

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, RawQuery, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};

use super::body::{self, Body, Fields};
use super::error::ApiError;
use super::input::{self, page, rfc3339, CursorKind, Query};
use super::AppState;
use crate::domain::{
    parse_filters, parse_headers, ContentFilter, EndpointAuth, Health, LaneCount, RateLimit,
    Subscription, SubscriptionId, SubscriptionStatus, TenantId,
};
use crate::engine::EnableError;
use crate::health::Breaker;
use crate::signing::Secret;

/// The members of a create request.
pub(super) const CREATE: Fields = Fields {
    allowed: &[
        "url",
        "event_types",
        "description",
        "metadata",
        "secret",
        "lanes",
        "rate_limit",
        "filter",
        "headers",
        "auth",
    ],
    required: &["url", "event_types"],
};

/// The members of an update request (at least one).
pub(super) const UPDATE: Fields = Fields {
    allowed: &[
        "url",
        "event_types",
        "description",
        "metadata",
        "lanes",
        "rate_limit",
        "filter",
        "headers",
        "auth",
    ],
    required: &[],
};

/// The query of the subscription list.
pub(super) const LIST_QUERY: Query = Query {
    allowed: &["limit", "cursor"],
    cursor: CursorKind::SubscriptionId,
};

/// The subscription as the API shows it, with its circuit breaker's state
/// in `health.breaker`.
pub(super) fn view(state: &AppState, sub: &Subscription, with_secret: bool) -> Value {
    let breaker = state.engine.breakers.state(&sub.id);
    let mut v = json!({
        "id": sub.id.as_str(),
        "tenant_id": sub.tenant.as_str(),
        "url": sub.url.as_str(),
        "event_types": sub.filters.iter().map(|f| f.as_str()).collect::<Vec<_>>(),
        "description": sub.description,
        "metadata": sub.metadata,
        "status": sub.status.as_str(),
        "created_at": rfc3339(sub.created_at),
        "updated_at": rfc3339(sub.updated_at),
        "health": health_view(&sub.health, breaker),
        "lanes": sub.lanes.get(),
        "rate_limit": sub.rate_limit.map(RateLimit::per_second),
        "headers": sub.options.headers,
        "auth": sub.options.auth.as_ref().map(EndpointAuth::shown),
        "filter": sub.options.filter.as_ref().map(filter_view),
    });
    if let Some(warnings) = sub.options.filter.as_ref().map(ContentFilter::warnings) {
        if !warnings.is_empty() {
            v["warnings"] = json!(warnings);
        }
    }
    if with_secret {
        v["secret"] = json!(sub.secret.expose());
    }
    if sub.status == SubscriptionStatus::Suspended {
        v["suspended_at"] = json!(sub.suspended_at.map(rfc3339));
        v["status_reason"] = json!(sub.status_reason);
    }
    v
}

/// A content filter as reads show it: its JSON text as a document (a
/// number past what a 64-bit float holds exactly is shown rounded; the
/// filter compares it exactly).
fn filter_view(f: &ContentFilter) -> Value {
    serde_json::from_str(f.text()).unwrap_or(Value::Null)
}

fn health_view(h: &Health, breaker: Breaker) -> Value {
    let open_until = match breaker {
        Breaker::Open { until, .. } => Some(rfc3339(until)),
        _ => None,
    };
    json!({
        "breaker": {"state": breaker.name(), "open_until": open_until},
        "consecutive_failures": h.consecutive_failures,
        "first_failure_at": h.first_failure_at.map(rfc3339),
        "last_outcome": h.last_outcome,
        "last_status_code": h.last_status_code,
        "last_error": h.last_error,
        "last_attempt_at": h.last_attempt_at.map(rfc3339),
    })
}

/// The body's `url`, checked by the egress guard (resolving its host).
async fn checked_url(state: &AppState, body: &Body<'_>) -> Result<url::Url, ApiError> {
    let raw = body.required_string("url")?;
    state
        .engine
        .check_url(&raw)
        .await
        .map_err(|e| ApiError::invalid("url", e.to_string()))
}

/// Applies the editable fields other than `url` present in `body`.
/// Lengths are counted in characters, as the OpenAPI document's
/// `maxLength` counts them.
fn apply_fields(body: &Body<'_>, sub: &mut Subscription) -> Result<(), ApiError> {
    let chars = |s: &str| s.chars().count();
    if let Some(raw) = body.strings("event_types")? {
        sub.filters = parse_filters(&raw).map_err(|e| ApiError::invalid("event_types", e.0))?;
    }
    if let Some(d) = body.nullable_string("description")? {
        if d.as_deref().is_some_and(|d| chars(d) > 1024) {
            return Err(ApiError::invalid("description", "at most 1024 characters"));
        }
        sub.description = d;
    }
    if let Some(m) = body.string_map("metadata")? {
        if m.len() > 50 || m.iter().any(|(k, v)| chars(k) > 128 || chars(v) > 1024) {
            return Err(ApiError::invalid(
                "metadata",
                "at most 50 keys of up to 128 characters, values up to 1024 characters",
            ));
        }
        sub.metadata = m;
    }
    if let Some(n) = body.integer("lanes")? {
        sub.lanes = LaneCount::parse(n).map_err(|e| ApiError::invalid("lanes", e.0))?;
    }
    if let Some(limit) = body.nullable_integer("rate_limit")? {
        sub.rate_limit = limit
            .map(RateLimit::parse)
            .transpose()
            .map_err(|e| ApiError::invalid("rate_limit", e.0))?;
    }
    apply_options(body, sub)
}

/// Applies the endpoint options present in `body` (each `null` clears
/// it); the filter is read from its JSON text as given, so its numbers
/// keep their exact value.
fn apply_options(body: &Body<'_>, sub: &mut Subscription) -> Result<(), ApiError> {
    if let Some(raw) = body.raw("filter") {
        sub.options.filter = match raw.get().trim() {
            "null" => None,
            text => Some(ContentFilter::parse(text).map_err(|e| ApiError::invalid("filter", e.0))?),
        };
    }
    if let Some(headers) = body.nullable_string_map("headers")? {
        sub.options.headers = match headers {
            None => Default::default(),
            Some(map) => parse_headers(&map).map_err(|e| ApiError::invalid("headers", e.0))?,
        };
    }
    if let Some(raw) = body.raw("auth") {
        let v: Value = serde_json::from_str(raw.get())
            .map_err(|_| ApiError::invalid("auth", "is not JSON"))?;
        sub.options.auth = match v {
            Value::Null => None,
            v => Some(EndpointAuth::parse(&v).map_err(|e| ApiError::invalid("auth", e.0))?),
        };
    }
    Ok(())
}

pub(super) async fn load(
    state: &AppState,
    tenant: &str,
    id: &str,
) -> Result<Subscription, ApiError> {
    let (tenant, id) = (input::tenant(tenant)?, input::subscription_id(id)?);
    state
        .engine
        .subscription(&tenant, &id)
        .await?
        .ok_or_else(|| ApiError::not_found("subscription").field("id"))
}

pub(super) async fn create(
    State(state): State<AppState>,
    Path(tenant): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let tenant = input::tenant(&tenant)?;
    let bytes = body::bytes(body)?;
    let body = body::object(&bytes, &CREATE)?;
    let secret = match body.string("secret")? {
        Some(s) => Secret::parse(&s).map_err(|e| ApiError::invalid("secret", e.0))?,
        None => Secret::generate(),
    };
    let url = checked_url(&state, &body).await?;
    let now = state.engine.now();
    let mut sub = Subscription {
        id: SubscriptionId::generate(),
        tenant,
        url,
        filters: Vec::new(),
        description: None,
        metadata: Default::default(),
        secret,
        previous_secret: None,
        status: SubscriptionStatus::Active,
        health: Health::default(),
        suspended_at: None,
        status_reason: None,
        created_at: now,
        updated_at: now,
        lanes: LaneCount::default(),
        rate_limit: None,
        options: Default::default(),
    };
    apply_fields(&body, &mut sub)?;
    state.engine.register(&sub).await?;
    Ok((StatusCode::CREATED, Json(view(&state, &sub, true))).into_response())
}

pub(super) async fn list(
    State(state): State<AppState>,
    Path(tenant): Path<String>,
    RawQuery(query): RawQuery,
) -> Result<Json<Value>, ApiError> {
    let tenant = input::tenant(&tenant)?;
    let page = page(query.as_deref(), &LIST_QUERY)?;
    let mut items = state
        .engine
        .subscriptions(&tenant, page.subscription_id(), page.limit + 1)
        .await?;
    let next = next_cursor(&mut items, page.limit, |s| s.id.as_str().to_owned());
    Ok(Json(json!({
        "items": items.iter().map(|s| view(&state, s, false)).collect::<Vec<_>>(),
        "next_cursor": next,
    })))
}

/// Trims a page fetched with one extra item and returns the cursor of the
/// last kept item (its position, `key`) when there are more.
pub(super) fn next_cursor<T>(
    items: &mut Vec<T>,
    limit: usize,
    key: impl Fn(&T) -> String,
) -> Option<String> {
    if items.len() <= limit {
        return None;
    }
    items.truncate(limit);
    items.last().map(key)
}

pub(super) async fn read(
    State(state): State<AppState>,
    Path((tenant, id)): Path<(String, String)>,
) -> Result<Json<Value>, ApiError> {
    let sub = load(&state, &tenant, &id).await?;
    Ok(Json(view(&state, &sub, false)))
}

pub(super) async fn update(
    State(state): State<AppState>,
    Path((tenant, id)): Path<(String, String)>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<Value>, ApiError> {
    let bytes = body::bytes(body)?;
    let body = body::object(&bytes, &UPDATE)?;
    if body.is_empty() {
        return Err(ApiError::bad_request(
            "body",
            "give at least one of url, event_types, description, metadata, lanes, rate_limit",
        ));
    }
    let mut sub = load(&state, &tenant, &id).await?;
    if body.has("url") {
        sub.url = checked_url(&state, &body).await?;
    }
    apply_fields(&body, &mut sub)?;
    if !state.engine.save(&mut sub).await? {
        return Err(ApiError::not_found("subscription").field("id"));
    }
    Ok(Json(view(&state, &sub, false)))
}

pub(super) async fn delete(
    State(state): State<AppState>,
    Path((tenant, id)): Path<(String, String)>,
) -> Result<StatusCode, ApiError> {
    let (tenant, id): (TenantId, SubscriptionId) =
        (input::tenant(&tenant)?, input::subscription_id(&id)?);
    state
        .engine
        .unregister(&tenant, &id)
        .await?
        .ok_or_else(|| ApiError::not_found("subscription").field("id"))?;
    Ok(StatusCode::NO_CONTENT)
}

pub(super) async fn rotate_secret(
    State(state): State<AppState>,
    Path((tenant, id)): Path<(String, String)>,
) -> Result<super::Secret, ApiError> {
    let mut sub = load(&state, &tenant, &id).await?;
    if !state.engine.rotate_secret(&mut sub).await? {
        return Err(ApiError::not_found("subscription").field("id"));
    }
    Ok(super::no_store(json!({ "secret": sub.secret.expose() })))
}

/// The current signing secret (a write-class route: a read-only
/// credential answers 403, see `super::auth`).
pub(super) async fn secret(
    State(state): State<AppState>,
    Path((tenant, id)): Path<(String, String)>,
) -> Result<super::Secret, ApiError> {
    let sub = load(&state, &tenant, &id).await?;
    Ok(super::no_store(json!({ "secret": sub.secret.expose() })))
}

pub(super) async fn enable(
    State(state): State<AppState>,
    Path((tenant, id)): Path<(String, String)>,
) -> Result<Json<Value>, ApiError> {
    let sub = load(&state, &tenant, &id).await?;
    match state.engine.enable(sub).await {
        Ok(sub) => Ok(Json(view(&state, &sub, false))),
        Err(EnableError::ProbeFailed(reason)) => Err(ApiError::conflict(None, reason)),
        Err(EnableError::Store(e)) => Err(e.into()),
    }
}
