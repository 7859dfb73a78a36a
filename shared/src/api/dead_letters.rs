//! Dead-letter routes: list parked deliveries (with why) and replay them
//! onto their lanes with a fresh ladder.

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, RawQuery, State};
use axum::http::StatusCode;
use axum::Json;
use serde_json::{json, Value};

use super::body::{self, Fields};
use super::error::ApiError;
use super::input::{self, page, rfc3339, CursorKind, Query};
use super::subscriptions::next_cursor;
use super::AppState;
use crate::domain::SubscriptionId;

/// The members of a replay request.
pub(super) const REPLAY: Fields = Fields {
    allowed: &["subscription_id", "event_ids"],
    required: &[],
};

/// The query of the dead-letter list.
pub(super) const LIST_QUERY: Query = Query {
    allowed: &["subscription_id", "limit", "cursor"],
    cursor: CursorKind::Seq,
};

/// Most event ids one replay request may name.
pub(super) const MAX_REPLAY_IDS: usize = 1000;

pub(super) async fn list(
    State(state): State<AppState>,
    Path(tenant): Path<String>,
    RawQuery(query): RawQuery,
) -> Result<Json<Value>, ApiError> {
    let tenant = input::tenant(&tenant)?;
    let page = page(query.as_deref(), &LIST_QUERY)?;
    let sub = page
        .params
        .get("subscription_id")
        .map(|s| {
            SubscriptionId::parse(s).map_err(|e| ApiError::bad_request("subscription_id", e.0))
        })
        .transpose()?;
    let mut items = state
        .engine
        .dead_letters(&tenant, sub.as_ref(), page.seq(), page.limit + 1)
        .await?;
    let next = next_cursor(&mut items, page.limit, |(seq, _)| seq.to_string());
    let items: Vec<Value> = items
        .iter()
        .map(|(_, d)| {
            json!({
                "subscription_id": d.subscription_id.as_str(),
                "event_id": d.event_id.as_str(),
                "event_type": d.event_type.as_str(),
                "attempts": d.attempts,
                "last_status_code": d.last_status_code,
                "reason": d.reason,
                "first_attempt_at": d.first_attempt_at.map(rfc3339),
                "parked_at": rfc3339(d.parked_at),
            })
        })
        .collect();
    Ok(Json(json!({ "items": items, "next_cursor": next })))
}

pub(super) async fn replay(
    State(state): State<AppState>,
    Path(tenant): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let tenant = input::tenant(&tenant)?;
    let bytes = body::bytes(body)?;
    let body = body::object(&bytes, &REPLAY)?;
    let sub = body
        .string("subscription_id")?
        .map(|raw| {
            SubscriptionId::parse(&raw).map_err(|e| ApiError::invalid("subscription_id", e.0))
        })
        .transpose()?;
    let event_ids = match body.strings("event_ids")? {
        None => None,
        Some(raw) if raw.len() > MAX_REPLAY_IDS => {
            return Err(ApiError::invalid("event_ids", "at most 1000 event ids"));
        }
        Some(raw) => Some(
            raw.iter()
                .map(|r| input::event_id(r, "event_ids"))
                .collect::<Result<Vec<_>, _>>()?,
        ),
    };
    if let Some(id) = &sub {
        state
            .engine
            .subscription(&tenant, id)
            .await?
            .ok_or_else(|| ApiError::not_found("subscription").field("subscription_id"))?;
    }
    let replayed = state
        .engine
        .replay(&tenant, sub.as_ref(), event_ids.as_deref())
        .await?
        .len();
    Ok((StatusCode::ACCEPTED, Json(json!({ "replayed": replayed }))))
}
