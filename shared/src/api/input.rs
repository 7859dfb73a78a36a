//! Request parsing at the edge: path segments, event ids, and list queries
//! (only the parameters a route accepts, `limit`, `cursor`); JSON bodies
//! are `body`'s. Everything here answers 4xx before any state is touched.
//!
//! A cursor is the position of the last item of a page, as text: a
//! subscription id, or a sequence number. Clients pass `next_cursor` back
//! as given; the OpenAPI document states each form as a pattern.

use std::collections::HashMap;

use super::error::ApiError;
use crate::domain::{EventId, SubscriptionId, TenantId};

/// Parses the `{tenant}` path segment.
pub fn tenant(raw: &str) -> Result<TenantId, ApiError> {
    TenantId::parse(raw).map_err(|e| ApiError::bad_request("tenant", e.0))
}

/// Parses a `{id}` path segment; an id that cannot exist is a 404.
pub fn subscription_id(raw: &str) -> Result<SubscriptionId, ApiError> {
    SubscriptionId::parse(raw).map_err(|_| ApiError::not_found("subscription").field("id"))
}

/// Parses an event id a publisher gives (422 naming `field`): besides
/// [`EventId::parse`]'s rules, not `.` or `..`, which no URL path can carry
/// to `GET /events/{id}` (clients resolve them as dot-segments).
pub fn event_id(raw: &str, field: &str) -> Result<EventId, ApiError> {
    if raw == "." || raw == ".." {
        return Err(ApiError::invalid(
            field,
            "an event id cannot be `.` or `..`",
        ));
    }
    EventId::parse(raw).map_err(|e| ApiError::invalid(field, e.0))
}

/// Largest page a list request may ask for.
pub const MAX_LIMIT: usize = 250;

/// How a list's cursor is read: the position it names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CursorKind {
    /// The last subscription id of the previous page.
    SubscriptionId,
    /// A sequence number of 1 to 18 digits, or 19 below 9 × 10¹⁸ (the AWS
    /// store's dead-letter positions are milliseconds × 10⁶ and a part).
    Seq,
    /// An archived event's position: `{unix ms}~{event id}`.
    Event,
}

/// The query parameters a list route accepts.
#[derive(Debug, Clone, Copy)]
pub struct Query {
    /// Every parameter accepted (others answer 400).
    pub allowed: &'static [&'static str],
    /// How its `cursor` is read.
    pub cursor: CursorKind,
}

/// Query parameters of a list request.
pub struct Page {
    /// 1–250, default 50.
    pub limit: usize,
    /// The position after which the page starts, if a cursor was given.
    pub cursor: Option<Cursor>,
    /// Every parameter, for route-specific ones.
    pub params: HashMap<String, String>,
}

/// A cursor's position.
pub enum Cursor {
    /// After (or before) this subscription.
    SubscriptionId(SubscriptionId),
    /// After (or before) this sequence number.
    Seq(i64),
    /// Before this archived event.
    Event(crate::domain::ArchivePosition),
}

/// Parses the query of a list request: only `query.allowed` parameters,
/// `limit` 1–250 and a `cursor` this API gave out (empty: the first page).
pub fn page(raw: Option<&str>, query: &Query) -> Result<Page, ApiError> {
    let params: HashMap<String, String> = url::form_urlencoded::parse(raw.unwrap_or("").as_bytes())
        .into_owned()
        .collect();
    if let Some(unknown) = params.keys().find(|k| !query.allowed.contains(&k.as_str())) {
        return Err(ApiError::bad_request(
            unknown.clone(),
            format!(
                "unknown query parameter `{unknown}`; allowed: {}",
                query.allowed.join(", ")
            ),
        ));
    }
    let limit = match params.get("limit") {
        None => 50,
        Some(v) => Some(v)
            .filter(|v| !v.is_empty() && v.len() <= 3 && v.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|v| v.parse::<usize>().ok())
            .filter(|n| (1..=MAX_LIMIT).contains(n))
            .ok_or_else(|| {
                ApiError::bad_request("limit", "limit is a whole number from 1 to 250")
            })?,
    };
    let cursor = match params.get("cursor").filter(|c| !c.is_empty()) {
        None => None,
        Some(c) => Some(decode_cursor(c, query.cursor)?),
    };
    Ok(Page {
        limit,
        cursor,
        params,
    })
}

fn decode_cursor(raw: &str, kind: CursorKind) -> Result<Cursor, ApiError> {
    let bad = || ApiError::bad_request("cursor", "the cursor is not one this API gave out");
    match kind {
        CursorKind::SubscriptionId => SubscriptionId::parse(raw)
            .map(Cursor::SubscriptionId)
            .map_err(|_| bad()),
        CursorKind::Seq => Some(raw)
            .filter(|r| r.bytes().all(|b| b.is_ascii_digit()))
            // 19 digits only below 9 × 10¹⁸, so that every one fits `i64`.
            .filter(|r| r.len() <= 18 || (r.len() == 19 && r.as_bytes()[0] <= b'8'))
            .and_then(|r| r.parse::<i64>().ok())
            .map(Cursor::Seq)
            .ok_or_else(bad),
        CursorKind::Event => {
            // A position, not an event: its id part is checked for the
            // characters of an event id, not for one that exists.
            let (at, id) = raw.split_once('~').ok_or_else(bad)?;
            let at = Some(at)
                .filter(|a| (1..=15).contains(&a.len()) && a.bytes().all(|b| b.is_ascii_digit()))
                .and_then(|a| a.parse::<i64>().ok())
                // A time this API gave out: year 9999 at the latest.
                .filter(|a| *a <= 253_402_300_799_999)
                .ok_or_else(bad)?;
            let id_chars = |b: u8| b.is_ascii_alphanumeric() || b"_.:-".contains(&b);
            let fits = raw.chars().count() <= 144 && !id.is_empty() && id != "." && id != "..";
            if !fits || !id.bytes().all(id_chars) {
                return Err(bad());
            }
            Ok(Cursor::Event(crate::domain::ArchivePosition {
                at: crate::record::from_ms(at),
                id: id.to_owned(),
            }))
        }
    }
}

impl Page {
    /// The cursor's sequence number, for routes whose cursor is one.
    pub fn seq(&self) -> Option<i64> {
        match self.cursor {
            Some(Cursor::Seq(n)) => Some(n),
            _ => None,
        }
    }

    /// The cursor's subscription id, for routes whose cursor is one.
    pub fn subscription_id(&self) -> Option<&SubscriptionId> {
        match &self.cursor {
            Some(Cursor::SubscriptionId(id)) => Some(id),
            _ => None,
        }
    }
}

pub use crate::domain::rfc3339;
