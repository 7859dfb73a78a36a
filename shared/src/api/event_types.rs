//! The event-type catalog routes: `GET …/event-types` (every type the
//! tenant's catalog holds: registered, named by a subscription, or seen in
//! a recent event), and, for the operator, `PUT` and `DELETE
//! …/event-types/{name}` to register a type's description and example.

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use serde_json::{json, Value};

use super::body::{self, Fields};
use super::error::ApiError;
use super::input::{self, rfc3339};
use super::AppState;
use crate::domain::{self, EventType, EventTypeInfo};
use crate::engine::catalog::CatalogEntry;

/// The members of a registration.
pub(super) const REGISTER: Fields = Fields {
    allowed: &["description", "example"],
    required: &[],
};

fn view(e: &CatalogEntry) -> Value {
    let registered = e.registered.as_ref();
    json!({
        "name": e.name.as_str(),
        "registered": registered.is_some(),
        "description": registered.and_then(|r| r.description.as_deref()),
        "example": registered
            .and_then(|r| r.example.as_deref())
            .and_then(|text| serde_json::from_str::<Value>(text).ok()),
        "subscriptions": e.subscriptions,
        "last_seen_at": e.last_seen.map(rfc3339),
    })
}

fn name(raw: &str) -> Result<EventType, ApiError> {
    EventType::parse(raw).map_err(|e| ApiError::invalid("name", e.0))
}

pub(super) async fn list(
    State(state): State<AppState>,
    Path(tenant): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let tenant = input::tenant(&tenant)?;
    let catalog = state.engine.event_type_catalog(&tenant).await?;
    Ok(Json(
        json!({ "items": catalog.iter().map(view).collect::<Vec<_>>() }),
    ))
}

pub(super) async fn register(
    State(state): State<AppState>,
    Path((tenant, raw_name)): Path<(String, String)>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<Value>, ApiError> {
    let tenant = input::tenant(&tenant)?;
    let name = name(&raw_name)?;
    let bytes = body::bytes(body)?;
    let body = body::object(&bytes, &REGISTER)?;
    let description = body
        .string("description")?
        .map(|d| domain::description(&d))
        .transpose()
        .map_err(|e| ApiError::invalid("description", e.0))?;
    let example = body
        .raw("example")
        .map(|raw| domain::example(raw.get()))
        .transpose()
        .map_err(|e| ApiError::invalid("example", e.0))?;
    let info = EventTypeInfo {
        tenant,
        name: name.clone(),
        description,
        example,
        updated_at: time::OffsetDateTime::now_utc(),
    };
    state.engine.register_event_type(&info).await?;
    let entry = state
        .engine
        .event_type_catalog(&info.tenant)
        .await?
        .into_iter()
        .find(|e| e.name == name)
        .ok_or_else(|| ApiError::not_found("event type").field("name"))?;
    Ok(Json(view(&entry)))
}

pub(super) async fn unregister(
    State(state): State<AppState>,
    Path((tenant, raw_name)): Path<(String, String)>,
) -> Result<StatusCode, ApiError> {
    let tenant = input::tenant(&tenant)?;
    // A name that cannot be a type was never registered.
    let name =
        EventType::parse(&raw_name).map_err(|_| ApiError::not_found("event type").field("name"))?;
    if state.engine.unregister_event_type(&tenant, &name).await? {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(ApiError::not_found("event type").field("name"))
    }
}
