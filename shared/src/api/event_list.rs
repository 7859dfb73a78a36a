//! `GET /v1/tenants/{tenant}/events`: a tenant's recent events, newest
//! first, filtered by type and acceptance time (the portal's event list).
//! Without `since` the list reaches back over the archive's 14 days.

use axum::extract::{Path, RawQuery, State};
use axum::Json;
use serde_json::{json, Value};
use time::OffsetDateTime;

use super::error::ApiError;
use super::input::{self, page, rfc3339, Cursor, CursorKind, Query};
use super::subscriptions::next_cursor;
use super::AppState;
use crate::domain::{EventType, RecentEvents};
use crate::record::ms;

/// The query of the event list.
pub(super) const LIST_QUERY: Query = Query {
    allowed: &["type", "since", "until", "limit", "cursor"],
    cursor: CursorKind::Event,
};

/// How far back the list reaches without `since`: the archive's life.
const ARCHIVE: time::Duration = crate::domain::ARCHIVE_RETENTION;

pub(super) fn time_param(
    raw: Option<&String>,
    field: &str,
) -> Result<Option<OffsetDateTime>, ApiError> {
    raw.map(|v| {
        OffsetDateTime::parse(v, &time::format_description::well_known::Rfc3339)
            .map_err(|_| ApiError::bad_request(field, format!("`{field}` is an RFC 3339 time")))
    })
    .transpose()
}

pub(super) async fn list(
    State(state): State<AppState>,
    Path(tenant): Path<String>,
    RawQuery(query): RawQuery,
) -> Result<Json<Value>, ApiError> {
    let tenant = input::tenant(&tenant)?;
    let page = page(query.as_deref(), &LIST_QUERY)?;
    let event_type = page
        .params
        .get("type")
        .map(|t| EventType::parse(t).map_err(|e| ApiError::bad_request("type", e.0)))
        .transpose()?;
    let now = state.engine.ports.clock.now();
    let until = time_param(page.params.get("until"), "until")?.unwrap_or(now);
    // Nothing older than the archive's life is shown, even where the
    // store has not deleted it yet.
    let since = time_param(page.params.get("since"), "since")?
        .unwrap_or(now - ARCHIVE)
        .max(now - ARCHIVE);
    let before = match page.cursor {
        Some(Cursor::Event(p)) => Some(p),
        _ => None,
    };
    let query = RecentEvents {
        event_type,
        since,
        until,
        before,
        limit: page.limit + 1,
    };
    let mut items = state.engine.recent_events(&tenant, &query).await?;
    let next = next_cursor(&mut items, page.limit, |e| {
        format!("{}~{}", ms(e.created_at), e.id.as_str())
    });
    let items: Vec<Value> = items
        .iter()
        .map(|e| {
            json!({
                "id": e.id.as_str(),
                "type": e.event_type.as_str(),
                "created_at": rfc3339(e.created_at),
                "ordering_key": e.ordering_key.as_ref().map(|k| k.as_str()),
            })
        })
        .collect();
    Ok(Json(json!({ "items": items, "next_cursor": next })))
}
