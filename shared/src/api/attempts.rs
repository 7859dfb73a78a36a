//! The attempt log routes. `GET …/subscriptions/{id}/attempts`: newest
//! first, in pages, optionally only the attempts of one outcome
//! (`outcome=delivered` or `failed`) or started by a time (`until`). A
//! filtered page is found by reading the log in pages and keeping what
//! matches, at most [`SCAN`] entries per request: a page can then hold
//! fewer items than asked, with a `next_cursor` to read on from.
//! `GET …/attempts/{attempt_id}`: one attempt in detail, among the latest
//! [`SCAN`], with the request as hooklane sends it (its signature left
//! out, the endpoint's own headers as they are now, a credential
//! redacted, the event's body as its text while the archive keeps it) and the
//! response's status, headers and body excerpt.

use axum::extract::{Path, RawQuery, State};
use axum::Json;
use serde_json::{json, Value};

use super::error::ApiError;
use super::event_list::time_param;
use super::input::{page, rfc3339, CursorKind, Query};
use super::subscriptions::load;
use super::AppState;
use crate::domain::{Attempt, AttemptId, Subscription};
use crate::engine::deliver::request_headers;
use crate::sender::USER_AGENT;

/// The query of the attempt log.
pub(super) const ATTEMPTS_QUERY: Query = Query {
    allowed: &["limit", "cursor", "outcome", "until"],
    cursor: CursorKind::Seq,
};

/// Log entries one filtered request reads at most.
const SCAN: usize = 1_000;

fn view(a: &Attempt) -> Value {
    let headers = a
        .response_headers
        .as_deref()
        .and_then(|h| serde_json::from_str::<Value>(h).ok());
    json!({
        "id": a.id.as_str(),
        "event_id": a.event_id.as_str(),
        "event_type": a.event_type.as_ref().map(|t| t.as_str()),
        "attempt": a.attempt,
        "started_at": rfc3339(a.started_at),
        "duration_ms": a.duration_ms,
        "status_code": a.status_code,
        "outcome": a.outcome,
        "error": a.error,
        "response_excerpt": a.response_excerpt,
        "response_headers": headers,
    })
}

pub(super) async fn attempts(
    State(state): State<AppState>,
    Path((tenant, id)): Path<(String, String)>,
    RawQuery(query): RawQuery,
) -> Result<Json<Value>, ApiError> {
    let page = page(query.as_deref(), &ATTEMPTS_QUERY)?;
    let delivered = match page.params.get("outcome").map(String::as_str) {
        None => None,
        Some("delivered") => Some(true),
        Some("failed") => Some(false),
        Some(_) => {
            return Err(ApiError::bad_request(
                "outcome",
                "`outcome` is delivered or failed",
            ))
        }
    };
    let until = time_param(page.params.get("until"), "until")?;
    let sub = load(&state, &tenant, &id).await?;
    let keep = |a: &Attempt| {
        // A re-enable probe that got a 2xx succeeded too.
        let got_2xx = matches!(a.outcome.as_str(), "delivered" | "probe_succeeded");
        delivered.is_none_or(|d| got_2xx == d) && until.is_none_or(|t| a.started_at <= t)
    };
    let mut items = Vec::new();
    let scanned = state
        .engine
        .scan_attempts(&sub, page.seq(), SCAN, |seq, a| {
            if keep(&a) {
                items.push((seq, a));
            }
            items.len() <= page.limit
        })
        .await?;
    let next = if items.len() > page.limit {
        items.truncate(page.limit);
        items.last().map(|(seq, _)| seq.to_string())
    } else if scanned.ended {
        None
    } else {
        // The read's bound came first: on from the last entry read.
        scanned.last.map(|seq| seq.to_string())
    };
    let items: Vec<Value> = items.iter().map(|(_, a)| view(a)).collect();
    Ok(Json(json!({ "items": items, "next_cursor": next })))
}

/// The request an attempt sent, as hooklane builds it: its signature is
/// not kept, and the endpoint's own headers are as they are now.
fn request(sub: &Subscription, a: &Attempt, body: Option<String>) -> Value {
    let mut headers = serde_json::Map::new();
    headers.insert("content-type".into(), "application/json".into());
    headers.insert("user-agent".into(), USER_AGENT.into());
    let sent = request_headers(sub, &[], a.event_id.as_str(), a.started_at, a.attempt, b"");
    for (k, v) in sent {
        let shown = match k.as_ref() {
            "authorization" => format!("{} [redacted]", v.split(' ').next().unwrap_or("")),
            "webhook-signature" => "v1,… (not kept)".to_owned(),
            _ => v,
        };
        headers.insert(k.into_owned(), shown.into());
    }
    json!({"method": "POST", "url": sub.url.as_str(), "headers": headers, "body": body})
}

pub(super) async fn detail(
    State(state): State<AppState>,
    Path((tenant, id, attempt)): Path<(String, String, String)>,
) -> Result<Json<Value>, ApiError> {
    let sub = load(&state, &tenant, &id).await?;
    let wanted =
        AttemptId::parse(&attempt).map_err(|e| ApiError::bad_request("attempt_id", e.0))?;
    let mut found = None;
    state
        .engine
        .scan_attempts(&sub, None, SCAN, |_, a| {
            let hit = a.id == wanted;
            if hit {
                found = Some(a);
            }
            !hit
        })
        .await?;
    let a = found.ok_or_else(|| ApiError::not_found("attempt").field("attempt_id"))?;
    let body = state
        .engine
        .event(&sub.tenant, &a.event_id)
        .await?
        // The bytes as sent (and signed), not a document re-serialized.
        .and_then(|e| String::from_utf8(e.payload.to_vec()).ok());
    let mut out = view(&a);
    out["request"] = request(&sub, &a, body);
    Ok(Json(out))
}
