//! The endpoint statistics route (`GET …/subscriptions/{id}/stats`): the
//! engine's [`EndpointStats`] as JSON, for the portal's endpoint page and
//! for a platform's own dashboards.

use axum::extract::{Path, State};
use axum::Json;
use serde_json::{json, Value};

use super::error::ApiError;
use super::input::rfc3339;
use super::subscriptions::load;
use super::AppState;
use crate::engine::stats::{Bucket, EndpointStats, Window};

fn window(w: &Window) -> Value {
    json!({
        "attempts": w.attempts,
        "delivered": w.delivered,
        "failed": w.attempts - w.delivered,
        "success_rate": w.success_rate(),
        "latency_ms": w.latency_ms.map(|(p50, p95)| json!({"p50": p50, "p95": p95})),
    })
}

fn buckets(b: &[Bucket]) -> Vec<Value> {
    b.iter()
        .map(|b| json!({"start": rfc3339(b.start), "delivered": b.delivered, "failed": b.failed}))
        .collect()
}

fn view(s: &EndpointStats) -> Value {
    json!({
        "generated_at": rfc3339(s.at),
        "complete": s.complete,
        "attempts_read": s.read,
        "last_24h": window(&s.day),
        "last_7d": window(&s.week),
        "hourly": buckets(&s.hourly),
        "daily": buckets(&s.daily),
    })
}

pub(super) async fn stats(
    State(state): State<AppState>,
    Path((tenant, id)): Path<(String, String)>,
) -> Result<Json<Value>, ApiError> {
    let sub = load(&state, &tenant, &id).await?;
    Ok(Json(view(&state.engine.stats(&sub).await?)))
}
