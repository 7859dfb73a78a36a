//! Domain types: the newtypes every request is parsed into at the edge
//! (tenant, ids, event types and filters) and the records the engine moves
//! through the ports (subscription, event, delivery, attempt).
//!
//! Parse, don't validate: each newtype has a private field and a `parse`
//! that names what is wrong, so the engine never sees a raw string.

mod ids;
mod records;

pub use ids::*;
pub use records::*;

use time::OffsetDateTime;

/// Why a value given at the edge was refused; the API maps it to a 4xx
/// naming the field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Invalid(pub String);

/// A time as the API and every stored or sent document writes it: RFC 3339,
/// UTC, with milliseconds.
pub fn rfc3339(t: OffsetDateTime) -> String {
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
