//! Request parsing at the edge: JSON bodies (malformed, unknown, missing
//! and mistyped fields each named), path segments, `limit` and `cursor`.
//! Everything here answers 4xx before any state is touched.

use std::collections::HashMap;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use serde_json::{Map, Value};

use super::error::ApiError;
use crate::domain::{SubscriptionId, TenantId};

/// The largest request body accepted (256 KiB).
pub const MAX_BODY: usize = 256 * 1024;

/// A JSON object body whose keys were checked.
pub struct Body(pub Map<String, Value>);

/// Parses a body as a JSON object with only `allowed` keys and every
/// `required` one present.
pub fn object(
    body: Result<Bytes, BytesRejection>,
    allowed: &[&str],
    required: &[&str],
) -> Result<Body, ApiError> {
    let bytes = body.map_err(|rej| {
        if rej.status() == axum::http::StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::too_large(MAX_BODY)
        } else {
            ApiError::bad_request("body", "the body could not be read")
        }
    })?;
    if bytes.len() > MAX_BODY {
        return Err(ApiError::too_large(MAX_BODY));
    }
    let value: Value = serde_json::from_slice(&bytes)
        .map_err(|e| ApiError::bad_request("body", format!("malformed JSON: {e}")))?;
    let Value::Object(map) = value else {
        return Err(ApiError::bad_request(
            "body",
            "the body must be a JSON object",
        ));
    };
    if let Some(unknown) = map.keys().find(|k| !allowed.contains(&k.as_str())) {
        return Err(ApiError::bad_request(
            unknown.clone(),
            format!("unknown field `{unknown}`; allowed: {}", allowed.join(", ")),
        ));
    }
    if let Some(missing) = required.iter().find(|k| !map.contains_key(**k)) {
        return Err(ApiError::bad_request(
            *missing,
            format!("`{missing}` is required"),
        ));
    }
    Ok(Body(map))
}

impl Body {
    /// Whether the key is present.
    pub fn has(&self, key: &str) -> bool {
        self.0.contains_key(key)
    }

    /// A string field (absent or null is `None`).
    pub fn string(&self, key: &str) -> Result<Option<String>, ApiError> {
        match self.0.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(ApiError::bad_request(
                key,
                format!("`{key}` must be a string"),
            )),
        }
    }

    /// A required string field.
    pub fn required_string(&self, key: &str) -> Result<String, ApiError> {
        self.string(key)?
            .ok_or_else(|| ApiError::bad_request(key, format!("`{key}` is required")))
    }

    /// An array of strings (absent or null is `None`).
    pub fn strings(&self, key: &str) -> Result<Option<Vec<String>>, ApiError> {
        let bad = || ApiError::bad_request(key, format!("`{key}` must be an array of strings"));
        match self.0.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Array(items)) => items
                .iter()
                .map(|v| v.as_str().map(str::to_owned).ok_or_else(bad))
                .collect::<Result<Vec<_>, _>>()
                .map(Some),
            Some(_) => Err(bad()),
        }
    }

    /// An object of string values (absent or null is `None`).
    pub fn string_map(
        &self,
        key: &str,
    ) -> Result<Option<std::collections::BTreeMap<String, String>>, ApiError> {
        let bad = || ApiError::bad_request(key, format!("`{key}` must be an object of strings"));
        match self.0.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Object(m)) => m
                .iter()
                .map(|(k, v)| {
                    v.as_str()
                        .map(|s| (k.clone(), s.to_owned()))
                        .ok_or_else(bad)
                })
                .collect::<Result<_, _>>()
                .map(Some),
            Some(_) => Err(bad()),
        }
    }

    /// Any JSON value.
    pub fn value(&self, key: &str) -> Option<&Value> {
        self.0.get(key)
    }
}

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

pub use crate::domain::rfc3339;
