//! Domain types: the newtypes every request is parsed into at the edge
//! (tenant, ids, event types and filters) and the records the engine moves
//! through the ports (subscription, event, delivery, attempt).
//!
//! Parse, don't validate: each newtype has a private field and a `parse`
//! that names what is wrong, so the engine never sees a raw string.

use std::collections::BTreeMap;
use std::fmt;

use time::OffsetDateTime;

use crate::signing::Secret;

/// Why a value given at the edge was refused; the API maps it to a 4xx
/// naming the field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Invalid(pub String);

fn is_id_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '-'
}

/// A tenant id: 1–64 of `[A-Za-z0-9_-]`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TenantId(String);

impl TenantId {
    /// Parses a tenant id from a path segment.
    pub fn parse(raw: &str) -> Result<Self, Invalid> {
        if raw.is_empty() || raw.len() > 64 || !raw.chars().all(is_id_char) {
            return Err(Invalid(
                "a tenant id is 1 to 64 characters of A-Z, a-z, 0-9, _ and -".into(),
            ));
        }
        Ok(Self(raw.to_owned()))
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// Generates a time-ordered id with the given prefix (`sub_`, `evt_`,
/// `att_`). One monotonic generator per process, so ids made within the same
/// millisecond still sort in creation order.
fn new_prefixed(prefix: &str) -> String {
    static GENERATOR: std::sync::Mutex<Option<ulid::Generator>> = std::sync::Mutex::new(None);
    let id = GENERATOR
        .lock()
        .ok()
        .and_then(|mut g| g.get_or_insert_with(ulid::Generator::new).generate().ok())
        .unwrap_or_else(ulid::Ulid::generate);
    format!("{prefix}{}", id.to_string().to_lowercase())
}

macro_rules! prefixed_id {
    ($name:ident, $prefix:literal, $what:literal) => {
        #[doc = concat!("A ", $what, " id: `", $prefix, "` followed by a time-ordered ULID.")]
        #[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(String);

        impl $name {
            /// A new, time-ordered id.
            pub fn generate() -> Self {
                Self(new_prefixed($prefix))
            }

            /// Parses an id read from a path or body.
            pub fn parse(raw: &str) -> Result<Self, Invalid> {
                let ok = raw.len() <= 64
                    && raw.starts_with($prefix)
                    && raw.len() > $prefix.len()
                    && raw.chars().all(is_id_char);
                if ok {
                    Ok(Self(raw.to_owned()))
                } else {
                    Err(Invalid(format!("not a {} id", $what)))
                }
            }

            /// The id as text.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }
    };
}

prefixed_id!(SubscriptionId, "sub_", "subscription");
prefixed_id!(AttemptId, "att_", "attempt");

/// An event id: generated (`evt_…`) or given by the publisher (1–128 of
/// `[A-Za-z0-9_.:-]`), the key of idempotent publish.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct EventId(String);

impl EventId {
    /// A new, time-ordered `evt_` id.
    pub fn generate() -> Self {
        Self(new_prefixed("evt_"))
    }

    /// Parses a publisher-given id.
    pub fn parse(raw: &str) -> Result<Self, Invalid> {
        let ok = !raw.is_empty()
            && raw.len() <= 128
            && raw
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "_.:-".contains(c));
        if ok {
            Ok(Self(raw.to_owned()))
        } else {
            Err(Invalid(
                "an event id is 1 to 128 characters of A-Z, a-z, 0-9, _ . : and -".into(),
            ))
        }
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for EventId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

fn valid_segments(raw: &str) -> bool {
    raw.split('.')
        .all(|seg| !seg.is_empty() && seg.chars().all(is_id_char))
}

/// An event type: dot-separated segments of `[A-Za-z0-9_-]`, at most 128
/// characters (`invoice.paid`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct EventType(String);

impl EventType {
    /// Parses an event type.
    pub fn parse(raw: &str) -> Result<Self, Invalid> {
        if raw.is_empty() || raw.len() > 128 || !valid_segments(raw) {
            return Err(Invalid(
                "an event type is dot-separated segments of A-Z, a-z, 0-9, _ and -, at most 128 characters".into(),
            ));
        }
        Ok(Self(raw.to_owned()))
    }

    /// The type as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Every filter that matches this type: the type itself, `*`, and
    /// `prefix.*` for each proper prefix. Stores index filters by value, so
    /// matching is an `IN` over this list rather than a scan.
    pub fn matching_filters(&self) -> Vec<String> {
        let mut out = vec![self.0.clone(), "*".to_owned()];
        let mut prefix = String::new();
        let segments: Vec<&str> = self.0.split('.').collect();
        for seg in &segments[..segments.len() - 1] {
            if !prefix.is_empty() {
                prefix.push('.');
            }
            prefix.push_str(seg);
            out.push(format!("{prefix}.*"));
        }
        out
    }
}

/// A subscription's event filter: an exact type, `prefix.*` or `*`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct EventFilter(String);

impl EventFilter {
    /// Parses a filter.
    pub fn parse(raw: &str) -> Result<Self, Invalid> {
        let body = raw.strip_suffix(".*").unwrap_or(raw);
        let ok = raw == "*" || (raw.len() <= 128 && !body.is_empty() && valid_segments(body));
        if ok {
            Ok(Self(raw.to_owned()))
        } else {
            Err(Invalid(format!(
                "`{raw}` is not an event type filter: use an exact type, `prefix.*` or `*`"
            )))
        }
    }

    /// The filter as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether an event of this type matches the filter.
    pub fn matches(&self, event_type: &EventType) -> bool {
        event_type.matching_filters().iter().any(|f| f == &self.0)
    }
}

/// Parses a non-empty list of filters, deduplicated and sorted.
pub fn parse_filters(raw: &[String]) -> Result<Vec<EventFilter>, Invalid> {
    if raw.is_empty() || raw.len() > 100 {
        return Err(Invalid("give 1 to 100 event type filters".into()));
    }
    let mut out = raw
        .iter()
        .map(|f| EventFilter::parse(f))
        .collect::<Result<Vec<_>, _>>()?;
    out.sort();
    out.dedup();
    Ok(out)
}

/// Whether a subscription receives deliveries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SubscriptionStatus {
    /// Deliveries are queued and attempted.
    Active,
    /// Endpoint health suspended it; events are archived, not queued.
    Suspended,
}

impl SubscriptionStatus {
    /// The status as stored and served.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Active => "active",
            Self::Suspended => "suspended",
        }
    }

    /// Parses a stored status.
    pub fn parse(raw: &str) -> Option<Self> {
        match raw {
            "active" => Some(Self::Active),
            "suspended" => Some(Self::Suspended),
            _ => None,
        }
    }
}

/// A secret replaced by a rotation, still signing until `expires_at`.
#[derive(Debug, Clone)]
pub struct PreviousSecret {
    /// The old secret.
    pub secret: Secret,
    /// When it stops signing (rotation + 24 h).
    pub expires_at: OffsetDateTime,
}

/// The health record of G8, written when a delivery's retry sequence ends.
/// Serialized as the API's `health` object.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct Health {
    /// Failed retry sequences since the last success.
    pub consecutive_failures: u32,
    /// When the current failure streak began.
    #[serde(with = "time::serde::rfc3339::option")]
    pub first_failure_at: Option<OffsetDateTime>,
    /// `delivered` or `parked`.
    pub last_outcome: Option<String>,
    /// The last response status, if any.
    pub last_status_code: Option<u16>,
    /// The last error text, if any.
    pub last_error: Option<String>,
    /// When the last attempt started.
    #[serde(with = "time::serde::rfc3339::option")]
    pub last_attempt_at: Option<OffsetDateTime>,
    /// Failures of the streak that were retryable.
    #[serde(default)]
    pub retryable_failures: u32,
    /// Failures of the streak that were permanent.
    #[serde(default)]
    pub permanent_failures: u32,
    /// Failures of the streak that were fatal (the host no longer resolves).
    #[serde(default)]
    pub fatal_failures: u32,
    /// When the event of the streak's first failed delivery was accepted:
    /// a backfill after re-enabling starts there.
    #[serde(default, with = "time::serde::rfc3339::option")]
    pub streak_events_since: Option<OffsetDateTime>,
}

/// A registered endpoint of one tenant.
#[derive(Debug, Clone)]
pub struct Subscription {
    /// Its id.
    pub id: SubscriptionId,
    /// The owning tenant.
    pub tenant: TenantId,
    /// The endpoint, checked by the egress guard.
    pub url: url::Url,
    /// Which event types it receives.
    pub filters: Vec<EventFilter>,
    /// Free text.
    pub description: Option<String>,
    /// Free string pairs.
    pub metadata: BTreeMap<String, String>,
    /// The signing secret.
    pub secret: Secret,
    /// The secret before the last rotation, while it still signs.
    pub previous_secret: Option<PreviousSecret>,
    /// Active or suspended.
    pub status: SubscriptionStatus,
    /// Health record.
    pub health: Health,
    /// When suspended, since when.
    pub suspended_at: Option<OffsetDateTime>,
    /// When suspended, why.
    pub status_reason: Option<String>,
    /// Its lane is failing: new deliveries wait in the spill store instead
    /// of the queue (AWS, where a FIFO queue scans only its first 120,000
    /// messages). The embedded store has no such scan and ignores it.
    pub spilling: bool,
    /// Creation time.
    pub created_at: OffsetDateTime,
    /// Last change.
    pub updated_at: OffsetDateTime,
}

impl Subscription {
    /// The secrets that sign a request sent at `now`: the current one and,
    /// for 24 h after a rotation, the previous one.
    pub fn signing_secrets(&self, now: OffsetDateTime) -> Vec<&Secret> {
        let mut out = vec![&self.secret];
        if let Some(prev) = &self.previous_secret {
            if prev.expires_at > now {
                out.push(&prev.secret);
            }
        }
        out
    }
}

/// An accepted event as archived: the body bytes are fixed at publish so
/// every attempt sends the same bytes.
#[derive(Debug, Clone)]
pub struct Event {
    /// Its id (generated or the publisher's).
    pub id: EventId,
    /// The owning tenant.
    pub tenant: TenantId,
    /// Its type.
    pub event_type: EventType,
    /// When it was accepted.
    pub created_at: OffsetDateTime,
    /// The exact request body: `{"type","timestamp","data"}`.
    pub payload: bytes::Bytes,
}

/// One queued delivery of one event to one subscription.
#[derive(Debug, Clone)]
pub struct Delivery {
    /// The queue's key for it (acceptance order within the lane on the
    /// embedded store).
    pub seq: i64,
    /// The tenant.
    pub tenant: TenantId,
    /// The subscription (the lane).
    pub subscription_id: SubscriptionId,
    /// The event.
    pub event_id: EventId,
    /// The event's type.
    pub event_type: EventType,
    /// Attempts already started (from the engine's own record).
    pub attempts: u32,
    /// When the first attempt started.
    pub first_attempt_at: Option<OffsetDateTime>,
    /// When the next attempt is due.
    pub next_attempt_at: OffsetDateTime,
}

/// One attempt as logged for `/attempts`.
#[derive(Debug, Clone)]
pub struct Attempt {
    /// Its id.
    pub id: AttemptId,
    /// The tenant.
    pub tenant: TenantId,
    /// The subscription.
    pub subscription_id: SubscriptionId,
    /// The event.
    pub event_id: EventId,
    /// 1-based attempt number.
    pub attempt: u32,
    /// When it started.
    pub started_at: OffsetDateTime,
    /// How long it took.
    pub duration_ms: u64,
    /// The response status, if one came.
    pub status_code: Option<u16>,
    /// `delivered`, `retrying` or `parked`.
    pub outcome: String,
    /// What went wrong, if anything.
    pub error: Option<String>,
    /// The start of the response body, at most 1 KiB.
    pub response_excerpt: Option<String>,
}

/// A parked delivery as listed by `/dead-letters`.
#[derive(Debug, Clone)]
pub struct DeadLetter {
    /// The subscription.
    pub subscription_id: SubscriptionId,
    /// The event.
    pub event_id: EventId,
    /// The event's type.
    pub event_type: EventType,
    /// Attempts made.
    pub attempts: u32,
    /// The last response status, if any.
    pub last_status_code: Option<u16>,
    /// Why it was parked.
    pub reason: String,
    /// When the first attempt started.
    pub first_attempt_at: Option<OffsetDateTime>,
    /// When it was parked.
    pub parked_at: OffsetDateTime,
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tenant_ids_refuse_slashes_and_long_names() {
        assert!(TenantId::parse("acme_1-x").is_ok());
        assert!(TenantId::parse("a/b").is_err());
        assert!(TenantId::parse("").is_err());
        assert!(TenantId::parse(&"a".repeat(65)).is_err());
    }

    #[test]
    fn a_type_matches_exact_prefix_and_star_filters_only() {
        let t = EventType::parse("invoice.paid.late").unwrap();
        for f in ["invoice.paid.late", "invoice.*", "invoice.paid.*", "*"] {
            assert!(EventFilter::parse(f).unwrap().matches(&t), "{f}");
        }
        for f in ["invoice.paid", "invoice.paid.late.*", "inv.*", "order.*"] {
            assert!(!EventFilter::parse(f).unwrap().matches(&t), "{f}");
        }
    }

    #[test]
    fn malformed_filters_and_types_are_refused() {
        for f in ["", ".*", "a..b", "a.*.b", "a b", "**", "a.**"] {
            assert!(EventFilter::parse(f).is_err(), "{f}");
        }
        for t in ["", "a.", ".a", "a..b", "a.*", "a b"] {
            assert!(EventType::parse(t).is_err(), "{t}");
        }
        assert!(parse_filters(&[]).is_err());
    }

    #[test]
    fn generated_ids_are_prefixed_and_time_ordered() {
        let a = SubscriptionId::generate();
        std::thread::sleep(std::time::Duration::from_millis(2));
        let b = SubscriptionId::generate();
        assert!(a.as_str().starts_with("sub_"));
        assert!(a < b);
        assert!(SubscriptionId::parse(a.as_str()).is_ok());
        assert!(SubscriptionId::parse("evt_123").is_err());
    }
}
