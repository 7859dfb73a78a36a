//! Event routes: publish (validate, fix the body bytes, accept; idempotent
//! by id for 24 h, G12) and read an event with each delivery's state.

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Serialize;
use serde_json::{json, Value};

use super::error::ApiError;
use super::input::{self, rfc3339};
use super::AppState;
use crate::domain::{Event, EventId, EventType};
use crate::ports::{Accepted, StoreError};

/// The body every receiver gets, in this field order, serialized once at
/// publish so every attempt sends the same bytes.
#[derive(Serialize)]
struct Payload<'a> {
    #[serde(rename = "type")]
    event_type: &'a str,
    timestamp: String,
    data: &'a Value,
}

fn accepted_view(e: &Event) -> Value {
    json!({
        "id": e.id.as_str(),
        "type": e.event_type.as_str(),
        "created_at": rfc3339(e.created_at),
    })
}

pub(super) async fn publish(
    State(state): State<AppState>,
    Path(tenant): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let tenant = input::tenant(&tenant)?;
    let body = input::object(body, &["type", "data", "id"], &["type", "data"])?;
    let event_type = EventType::parse(&body.required_string("type")?)
        .map_err(|e| ApiError::invalid("type", e.0))?;
    let id = match body.string("id")? {
        Some(raw) => EventId::parse(&raw).map_err(|e| ApiError::invalid("id", e.0))?,
        None => EventId::generate(),
    };
    let data = body.value("data").cloned().unwrap_or(Value::Null);
    let created_at = state.engine.ports.clock.now();
    let payload = serde_json::to_vec(&Payload {
        event_type: event_type.as_str(),
        timestamp: rfc3339(created_at),
        data: &data,
    })
    .map_err(ApiError::internal)?;
    let event = Event {
        id,
        tenant,
        event_type,
        created_at,
        payload: payload.into(),
    };
    match state.engine.publish(event).await {
        Ok(Accepted::New(e)) => Ok((StatusCode::ACCEPTED, Json(accepted_view(&e))).into_response()),
        Ok(Accepted::Duplicate(e)) => Ok((StatusCode::OK, Json(accepted_view(&e))).into_response()),
        Err(StoreError::Conflict(detail)) => Err(ApiError::conflict(Some("id"), detail)),
        Err(e) => Err(e.into()),
    }
}

pub(super) async fn read(
    State(state): State<AppState>,
    Path((tenant, id)): Path<(String, String)>,
) -> Result<Json<Value>, ApiError> {
    let tenant = input::tenant(&tenant)?;
    let id = EventId::parse(&id).map_err(|_| ApiError::not_found("event"))?;
    let ports = &state.engine.ports;
    let event = ports
        .events
        .get(&tenant, &id)
        .await?
        .ok_or_else(|| ApiError::not_found("event"))?;
    let deliveries = ports.views.of_event(&tenant, &id).await?;
    let payload: Value = serde_json::from_slice(&event.payload).map_err(ApiError::internal)?;
    Ok(Json(json!({
        "id": event.id.as_str(),
        "type": event.event_type.as_str(),
        "created_at": rfc3339(event.created_at),
        "data": payload.get("data").cloned().unwrap_or(Value::Null),
        "deliveries": deliveries.iter().map(|(sub, d)| json!({
            "subscription_id": sub.as_str(),
            "state": d.shown_state(),
            "attempts": d.attempts,
            "last_status_code": d.last_status_code,
            "next_attempt_at": d.shown_next_attempt_at().map(rfc3339),
        })).collect::<Vec<_>>(),
    })))
}
