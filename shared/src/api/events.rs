//! Event routes: publish (validate, fix the body bytes, accept; idempotent
//! by id for 24 h, G12) and read an event with each delivery's state.
//!
//! `data` is never parsed into values (G13): the publisher's JSON text is
//! spliced into the body every receiver gets, and spliced back out of the
//! archived body when the event is read.

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{json, Value};
use tracing::Instrument;

use super::body::{self, Fields};
use super::error::ApiError;
use super::input::{self, rfc3339};
use super::AppState;
use crate::domain::{Event, EventId, EventType, OrderingKey, TenantId};
use crate::ports::{Accepted, StoreError, StoreResult};

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

/// The members of an event batch.
pub(super) const BATCH: Fields = Fields {
    allowed: &["events"],
    required: &["events"],
};

/// The most events one batch holds.
pub const BATCH_MAX_EVENTS: usize = 100;

/// The largest batch body (each of its events at most [`body::MAX_BODY`]).
pub const BATCH_MAX_BODY: usize = 1024 * 1024;

/// One event of a publish request, checked and ready to accept.
pub(super) fn event_of(
    tenant: &TenantId,
    bytes: &[u8],
    created_at: time::OffsetDateTime,
) -> Result<Event, ApiError> {
    if bytes.len() > body::MAX_BODY {
        return Err(ApiError::too_large(body::MAX_BODY));
    }
    let body = body::object(bytes, &PUBLISH)?;
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
    Ok(Event {
        id,
        tenant: tenant.clone(),
        event_type,
        created_at,
        payload: payload.into(),
        ordering_key,
        traceparent: None,
        only_for: None,
    })
}

/// Accepts an event: 202 when new, 200 with the original when its id was
/// published within the last 24 h (G12).
async fn accept(state: &AppState, event: Event) -> Result<(StatusCode, Value), ApiError> {
    answer(state.engine.publish(event).await)
}

/// How an accept is answered.
fn answer(accepted: StoreResult<Accepted>) -> Result<(StatusCode, Value), ApiError> {
    match accepted {
        Ok(Accepted::New(e)) => Ok((StatusCode::ACCEPTED, accepted_view(&e))),
        Ok(Accepted::Duplicate(e)) => Ok((StatusCode::OK, accepted_view(&e))),
        Err(StoreError::Conflict(detail)) => Err(ApiError::conflict(Some("id"), detail)),
        Err(e) => Err(e.into()),
    }
}

pub(super) async fn publish(
    State(state): State<AppState>,
    Path(tenant): Path<String>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let tenant = input::tenant(&tenant)?;
    let bytes = body::bytes(body)?;
    let mut event = event_of(&tenant, &bytes, state.engine.now())?;
    let span = crate::trace::publishing(&tenant, std::slice::from_mut(&mut event), &headers);
    let (status, view) = accept(&state, event).instrument(span).await?;
    Ok((status, Json(view)).into_response())
}

/// `POST /event-batches`: up to [`BATCH_MAX_EVENTS`] events accepted one
/// after another in the order given, each answered as `POST /events`
/// would (`status` beside the answer), or refused alone with its problem.
/// Where the API fans out itself (AWS), the batch's events are fanned out
/// together ([`crate::engine::Engine::publish_all`]).
/// A body that is not a batch (not an object with `events`, not 1 to 100
/// objects, over [`BATCH_MAX_BODY`]) is one problem and accepts nothing.
///
/// A storage failure stops the batch there: the events before it stay
/// accepted, it and every later one answer the failure's status (5xx: 503
/// when storage is unavailable), so no event is accepted ahead of an
/// earlier one of the batch that was not.
pub(super) async fn publish_batch(
    State(state): State<AppState>,
    Path(tenant): Path<String>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let tenant = input::tenant(&tenant)?;
    let bytes = body::bytes_up_to(body, BATCH_MAX_BODY)?;
    let body = body::object(&bytes, &BATCH)?;
    let events = batch_events(&body)?;
    // Each event read and checked first (a bad one refused alone), then
    // the good ones accepted together, in order.
    // Each a millisecond after the one before at least: the archive reads
    // acceptance order back as (time, then id), as a backfill replays it,
    // and a batch's order is the order given whatever its ids.
    let mut valid: Vec<Event> = Vec::with_capacity(events.len());
    let checked: Vec<Result<(), ApiError>> = events
        .iter()
        .map(|raw| {
            let mut at = state.engine.now();
            if let Some(before) = valid.last() {
                at = at.max(before.created_at + std::time::Duration::from_millis(1));
            }
            event_of(&tenant, raw.get().as_bytes(), at).map(|e| valid.push(e))
        })
        .collect();
    let span = crate::trace::publishing(&tenant, &mut valid, &headers);
    let mut accepted = state
        .engine
        .publish_all(valid)
        .instrument(span)
        .await
        .into_iter();
    let mut items = Vec::with_capacity(events.len());
    let mut failed: Option<ApiError> = None;
    for check in checked {
        let answer = match (&failed, check) {
            (Some(e), _) => Err(e.clone()),
            (None, Err(e)) => Err(e),
            // Past the last answer only after a failure, which set `failed`.
            (None, Ok(())) => accepted.next().map_or_else(
                || Err(ApiError::internal("an event of the batch was not answered")),
                answer,
            ),
        };
        items.push(match answer {
            Ok((status, mut view)) => {
                view["status"] = json!(status.as_u16());
                view
            }
            Err(e) => {
                if e.status().is_server_error() && failed.is_none() {
                    failed = Some(e.clone());
                }
                json!({ "status": e.status().as_u16(), "problem": e.problem() })
            }
        });
    }
    Ok((StatusCode::OK, Json(json!({ "items": items }))).into_response())
}

/// The batch's `events`: 1 to [`BATCH_MAX_EVENTS`] JSON objects, each
/// unchecked here (each event's `data` is checked with the event, so a bad
/// one is refused alone).
fn batch_events<'a>(body: &body::Body<'a>) -> Result<Vec<&'a RawValue>, ApiError> {
    let not_a_batch = || {
        ApiError::invalid(
            "events",
            format!("`events` must be an array of 1 to {BATCH_MAX_EVENTS} event objects"),
        )
    };
    let events: Vec<&RawValue> = body
        .raw("events")
        .and_then(|raw| serde_json::from_str(raw.get()).ok())
        .ok_or_else(not_a_batch)?;
    let objects = events.iter().all(|e| e.get().starts_with('{'));
    if events.is_empty() || events.len() > BATCH_MAX_EVENTS || !objects {
        return Err(not_a_batch());
    }
    Ok(events)
}

pub(super) async fn read(
    State(state): State<AppState>,
    Path((tenant, id)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    let tenant = input::tenant(&tenant)?;
    let id = input::event_id(&id, "id").map_err(|_| ApiError::not_found("event").field("id"))?;
    let (event, deliveries) = state
        .engine
        .event_and_deliveries(&tenant, &id)
        .await?
        .ok_or_else(|| ApiError::not_found("event").field("id"))?;
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
