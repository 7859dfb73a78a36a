//! The event-type catalog (`GET …/event-types`): what an operator
//! registered of an event type (a description and a JSON example of its
//! data), kept per tenant. The catalog a tenant sees also lists the types
//! its events and subscriptions use, registered or not (the engine merges
//! them).

use time::OffsetDateTime;

use super::{EventType, Invalid, TenantId};

/// The longest description, in characters.
pub const MAX_DESCRIPTION_CHARS: usize = 1_000;
/// The longest example, in bytes of its JSON text.
pub const MAX_EXAMPLE_BYTES: usize = 16 * 1024;

/// An event type as an operator registered it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventTypeInfo {
    /// The tenant whose catalog it is in.
    pub tenant: TenantId,
    /// The type.
    pub name: EventType,
    /// What it means, for the tenant's developers.
    pub description: Option<String>,
    /// An example of its `data`, as JSON text.
    pub example: Option<String>,
    /// When it was last registered.
    pub updated_at: OffsetDateTime,
}

/// A description as given: trimmed, at most [`MAX_DESCRIPTION_CHARS`].
pub fn description(raw: &str) -> Result<String, Invalid> {
    let text = raw.trim();
    if text.chars().count() > MAX_DESCRIPTION_CHARS {
        return Err(Invalid(format!(
            "a description is at most {MAX_DESCRIPTION_CHARS} characters"
        )));
    }
    Ok(text.to_owned())
}

/// An example's JSON text, at most [`MAX_EXAMPLE_BYTES`].
pub fn example(text: &str) -> Result<String, Invalid> {
    if text.len() > MAX_EXAMPLE_BYTES {
        return Err(Invalid(format!(
            "an example is at most {MAX_EXAMPLE_BYTES} bytes of JSON"
        )));
    }
    Ok(text.trim().to_owned())
}
