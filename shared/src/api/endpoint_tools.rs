//! The endpoint tools of `../shared/API.md` "Endpoint options": send a
//! test event to one subscription (`POST …/test`) and recover what a
//! subscription missed in a time window (`POST …/recover`). Both go
//! through the engine's usual paths: the test event is archived and fanned
//! out to its subscription alone, and a recovery is a backfill of the
//! window on the subscription's backfill lane.

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;
use time::OffsetDateTime;

use super::body::{self, Fields};
use super::error::ApiError;
use super::AppState;
use crate::domain::{Subscription, SubscriptionStatus, ARCHIVE_RETENTION};

/// The members of a test request (none required).
pub(super) const TEST: Fields = Fields {
    allowed: &["event_type", "data"],
    required: &[],
};

/// The members of a recovery request.
pub(super) const RECOVER: Fields = Fields {
    allowed: &["since", "until"],
    required: &["since"],
};

/// The subscription a tool's path names (404 when there is none), then
/// the request's body.
async fn target(
    state: &AppState,
    tenant: &str,
    id: &str,
    body: Result<Bytes, BytesRejection>,
) -> Result<(Subscription, Bytes), ApiError> {
    let sub = super::subscriptions::load(state, tenant, id).await?;
    Ok((sub, body::bytes(body)?))
}

/// The test event's type when the request names none.
pub const TEST_EVENT_TYPE: &str = "webhook.test";

/// `POST …/subscriptions/{id}/test`: one signed delivery of a test event
/// to this subscription alone (whatever its event types and filter), on
/// its lane, in its attempt log; 202 with the event's id. A suspended
/// subscription answers 409: `enable` sends its probe.
pub(super) async fn test(
    State(state): State<AppState>,
    Path((tenant, id)): Path<(String, String)>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let (sub, bytes) = target(&state, &tenant, &id, body).await?;
    let bytes = if bytes.iter().all(u8::is_ascii_whitespace) {
        Bytes::from_static(b"{}")
    } else {
        bytes
    };
    let body = body::object(&bytes, &TEST)?;
    if sub.status == SubscriptionStatus::Suspended {
        return Err(ApiError::conflict(
            None,
            "the subscription is suspended: `enable` probes it",
        ));
    }
    let event_type = body
        .string("event_type")?
        .unwrap_or_else(|| TEST_EVENT_TYPE.to_owned());
    let data = body.json_text("data")?.map_or("{}", |d| d.get());
    // Published as `POST /events` would be, then aimed at this one.
    let publish = format!(
        r#"{{"type":{},"data":{data}}}"#,
        serde_json::Value::String(event_type)
    );
    let mut event = super::events::event_of(&sub.tenant, publish.as_bytes(), state.engine.now())
        .map_err(|e| e.renamed("type", "event_type"))?;
    event.only_for = Some(sub.id.clone());
    let accepted = state.engine.publish(event).await?;
    let answer = json!({"event_id": accepted.event().id.as_str()});
    Ok((StatusCode::ACCEPTED, Json(answer)).into_response())
}

/// A time member (RFC 3339).
fn time_of(body: &body::Body<'_>, key: &str) -> Result<Option<OffsetDateTime>, ApiError> {
    body.string(key)?
        .map(|v| {
            OffsetDateTime::parse(&v, &time::format_description::well_known::Rfc3339)
                .map_err(|_| ApiError::invalid(key, format!("`{key}` is an RFC 3339 time")))
        })
        .transpose()
}

/// `POST …/subscriptions/{id}/recover {since, until?}`: delivers again,
/// in acceptance order on the subscription's backfill lane and paced as a
/// backfill, every archived event of the window it receives and did not
/// get (parked, held while suspended, never attempted); 202 with how many
/// events of the window it receives (those it got, or that are pending,
/// are looked at and left). A window already recovering starts over: what
/// it queued is pending and is not queued twice.
pub(super) async fn recover(
    State(state): State<AppState>,
    Path((tenant, id)): Path<(String, String)>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let (sub, bytes) = target(&state, &tenant, &id, body).await?;
    let body = body::object(&bytes, &RECOVER)?;
    let now = state.engine.now();
    let since = time_of(&body, "since")?.unwrap_or(now);
    if since < now - ARCHIVE_RETENTION || since > now {
        return Err(ApiError::invalid(
            "since",
            "`since` is within the archive's 14 days, and not in the future",
        ));
    }
    let until = time_of(&body, "until")?.unwrap_or(now).min(now);
    if until < since {
        return Err(ApiError::invalid("until", "`until` is not before `since`"));
    }
    if sub.status == SubscriptionStatus::Suspended {
        return Err(ApiError::conflict(
            None,
            "the subscription is suspended: `enable` starts its backfill",
        ));
    }
    let n = state.engine.recover(&sub, since, until).await?;
    Ok((StatusCode::ACCEPTED, Json(json!({"recovering": n}))).into_response())
}
