//! The identifiers and names every request is parsed into at the edge:
//! tenant, subscription, event and attempt ids, event types and filters.

use std::fmt;

use super::Invalid;

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
prefixed_id!(KeyId, "key_", "tenant key");

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
