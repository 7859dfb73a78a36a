//! Request parsing at the edge: path segments, `limit` and `cursor` (JSON
//! bodies are `body`'s). Everything here answers 4xx before any state is
//! touched.

use std::collections::HashMap;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;

use super::error::ApiError;
use crate::domain::{SubscriptionId, TenantId};

/// Parses the `{tenant}` path segment.
pub fn tenant(raw: &str) -> Result<TenantId, ApiError> {
    TenantId::parse(raw).map_err(|e| ApiError::bad_request("tenant", e.0))
}

/// Parses a `{id}` path segment; an id that cannot exist is a 404.
pub fn subscription_id(raw: &str) -> Result<SubscriptionId, ApiError> {
    SubscriptionId::parse(raw).map_err(|_| ApiError::not_found("subscription"))
}

/// Query parameters of a list request.
pub struct Page {
    /// 1–250, default 50.
    pub limit: usize,
    /// The decoded cursor, if one was given.
    pub cursor: Option<String>,
    /// Every parameter, for route-specific ones.
    pub params: HashMap<String, String>,
}

/// Parses `limit` and `cursor` (and keeps the rest).
pub fn page(query: Option<&str>) -> Result<Page, ApiError> {
    let params: HashMap<String, String> =
        url::form_urlencoded::parse(query.unwrap_or("").as_bytes())
            .into_owned()
            .collect();
    let limit = match params.get("limit") {
        None => 50,
        Some(v) => v
            .parse::<usize>()
            .ok()
            .filter(|n| (1..=250).contains(n))
            .ok_or_else(|| {
                ApiError::bad_request("limit", "limit is a whole number from 1 to 250")
            })?,
    };
    let cursor = match params.get("cursor").filter(|c| !c.is_empty()) {
        None => None,
        Some(c) => Some(decode_cursor(c)?),
    };
    Ok(Page {
        limit,
        cursor,
        params,
    })
}

/// An opaque cursor for a position.
pub fn encode_cursor(position: &str) -> String {
    URL_SAFE_NO_PAD.encode(format!("c1:{position}"))
}

fn decode_cursor(raw: &str) -> Result<String, ApiError> {
    let bad = || ApiError::bad_request("cursor", "the cursor is not one this API gave out");
    let bytes = URL_SAFE_NO_PAD.decode(raw).map_err(|_| bad())?;
    let text = String::from_utf8(bytes).map_err(|_| bad())?;
    text.strip_prefix("c1:").map(str::to_owned).ok_or_else(bad)
}

/// A cursor that must hold a sequence number.
pub fn seq_cursor(cursor: Option<&str>) -> Result<Option<i64>, ApiError> {
    cursor
        .map(|c| {
            c.parse::<i64>().map_err(|_| {
                ApiError::bad_request("cursor", "the cursor is not one this API gave out")
            })
        })
        .transpose()
}

/// RFC 3339 UTC with milliseconds.
pub fn rfc3339(t: time::OffsetDateTime) -> String {
    let t = t.to_offset(time::UtcOffset::UTC);
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z",
        t.year(),
        u8::from(t.month()),
        t.day(),
        t.hour(),
        t.minute(),
        t.second(),
        t.millisecond()
    )
}
