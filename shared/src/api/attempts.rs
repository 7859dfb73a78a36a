//! The attempt log route (`GET …/subscriptions/{id}/attempts`): newest
//! first, in pages, optionally only the attempts of one outcome
//! (`outcome=delivered` or `failed`) or started by a time (`until`). A
//! filtered page is found by reading the log in pages and keeping what
//! matches, at most [`SCAN`] entries per request: a page can then hold
//! fewer items than asked, with a `next_cursor` to read on from.

use axum::extract::{Path, RawQuery, State};
use axum::Json;
use serde_json::{json, Value};

use super::error::ApiError;
use super::event_list::time_param;
use super::input::{page, rfc3339, CursorKind, Query};
use super::subscriptions::load;
use super::AppState;
use crate::domain::Attempt;

/// The query of the attempt log.
pub(super) const ATTEMPTS_QUERY: Query = Query {
    allowed: &["limit", "cursor", "outcome", "until"],
    cursor: CursorKind::Seq,
};

/// Log entries one filtered request reads at most.
const SCAN: usize = 1_000;

fn view(a: &Attempt) -> Value {
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
    let (mut items, mut before, mut scanned) = (Vec::new(), page.seq(), 0);
    let next = loop {
        let want = page.limit + 1 - items.len();
        let read = state.engine.attempts(&sub, before, want.max(50)).await?;
        let full = read.len() == want.max(50);
        for (seq, a) in read {
            scanned += 1;
            before = Some(seq);
            if keep(&a) {
                items.push((seq, a));
            }
            if items.len() > page.limit || scanned >= SCAN {
                break;
            }
        }
        if items.len() > page.limit {
            items.truncate(page.limit);
            break items.last().map(|(seq, _)| seq.to_string());
        }
        if !full {
            break None;
        }
        if scanned >= SCAN {
            break before.map(|seq| seq.to_string());
        }
    };
    let items: Vec<Value> = items.iter().map(|(_, a)| view(a)).collect();
    Ok(Json(json!({ "items": items, "next_cursor": next })))
}
