//! Event routes: publish (validate, fix the body bytes, accept; idempotent
//! by id for 24 h, G12) and read an event with each delivery's state.
//!
//! `data` is never parsed into values (G13): the publisher's JSON text is
//! spliced into the body every receiver gets, and spliced back out of the
//! archived body when the event is read.

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{json, Value};

use super::body::{self, Fields};
use super::error::ApiError;
use super::input::{self, rfc3339};
use super::AppState;
use crate::domain::{Event, EventId, EventType, OrderingKey};
use crate::ports::{Accepted, StoreError};

/// The body every receiver gets, in this field order, serialized once at
/// publish so every attempt sends the same bytes.
#[derive(Serialize)]
struct Payload<'a> {
    #[serde(rename = "type")]
    event_type: &'a str,
    timestamp: String,
    data: &'a RawValue,
}

/// The members of a publish request.
pub(super) const PUBLISH: Fields = Fields {
    allowed: &["type", "data", "id", "ordering_key"],
    required: &["type", "data"],
};

/// The `data` of an archived body, as archived.
#[derive(Deserialize)]
struct Archived<'a> {
    #[serde(borrow)]
    data: Option<&'a RawValue>,
}

/// An event as read back, `data` as published.
#[derive(Serialize)]
struct EventView<'a> {
    id: &'a str,
    #[serde(rename = "type")]
    event_type: &'a str,
    created_at: String,
    ordering_key: Option<&'a str>,
    data: Option<&'a RawValue>,
    deliveries: Vec<Value>,
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
    let bytes = body::bytes(body)?;
    let body = body::object(&bytes, &PUBLISH)?;
    let event_type = EventType::parse(&body.required_string("type")?)
        .map_err(|e| ApiError::invalid("type", e.0))?;
    let id = match body.string("id")? {
        Some(raw) => input::event_id(&raw, "id")?,
        None => EventId::generate(),
    };
    let ordering_key = body
        .string("ordering_key")?
        .map(|raw| OrderingKey::parse(&raw).map_err(|e| ApiError::invalid("ordering_key", e.0)))
        .transpose()?;
    let data = body
        .json_text("data")?
        .ok_or_else(|| ApiError::bad_request("data", "`data` is required"))?;
    let created_at = state.engine.ports.clock.now();
    // Sized for `{"type":…,"timestamp":…,"data":…}` up front: the body is
    // kept as written (archive, fan-out), so no doubled allocation with it.
    let mut payload = Vec::with_capacity(data.get().len() + event_type.as_str().len() + 64);
    serde_json::to_writer(
        &mut payload,
        &Payload {
            event_type: event_type.as_str(),
            timestamp: rfc3339(created_at),
            data,
        },
    )
    .map_err(ApiError::internal)?;
    let event = Event {
        id,
        tenant,
        event_type,
        created_at,
        payload: payload.into(),
        ordering_key,
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
) -> Result<Response, ApiError> {
    let tenant = input::tenant(&tenant)?;
    let id = input::event_id(&id, "id").map_err(|_| ApiError::not_found("event").field("id"))?;
    let ports = &state.engine.ports;
    let event = ports
        .events
        .get(&tenant, &id)
        .await?
        .ok_or_else(|| ApiError::not_found("event").field("id"))?;
    let deliveries = ports.views.of_event(&tenant, &id).await?;
    let archived: Archived<'_> =
        serde_json::from_slice(&event.payload).map_err(ApiError::internal)?;
    let view = EventView {
        id: event.id.as_str(),
        event_type: event.event_type.as_str(),
        created_at: rfc3339(event.created_at),
        ordering_key: event.ordering_key.as_ref().map(OrderingKey::as_str),
        data: archived.data,
        deliveries: deliveries
            .iter()
            .map(|(sub, d)| {
                json!({
                    "subscription_id": sub.as_str(),
                    "state": d.shown_state(),
                    "attempts": d.attempts,
                    "last_status_code": d.last_status_code,
                    "next_attempt_at": d.shown_next_attempt_at().map(rfc3339),
                    "lane": d.lane,
                })
            })
            .collect(),
    };
    let json = serde_json::to_vec(&view).map_err(ApiError::internal)?;
    Ok(([(header::CONTENT_TYPE, "application/json")], json).into_response())
}
