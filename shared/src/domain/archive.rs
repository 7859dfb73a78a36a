//! The records of the archive as backfills read it: a position in a
//! tenant's archive, an archived event without its payload, and a backfill
//! in progress (G8).

use time::OffsetDateTime;

use super::{EventId, EventType, OrderingKey, SubscriptionId, TenantId};

/// How long the archive keeps an event: what a list, a backfill or a
/// recovery can reach back to.
pub const ARCHIVE_RETENTION: time::Duration = time::Duration::days(14);

/// A position in a tenant's archive, in acceptance order: events accepted
/// after `at`, or at `at` with an id after `id`, come after it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct ArchivePosition {
    /// Acceptance time.
    pub at: OffsetDateTime,
    /// Event id at that time (empty: before every event of that time).
    pub id: String,
}

impl ArchivePosition {
    /// Just before every event accepted at `at` or later.
    pub fn before(at: OffsetDateTime) -> Self {
        Self {
            at,
            id: String::new(),
        }
    }
}

/// An archived event as a backfill scans it: no payload.
#[derive(Debug, Clone, PartialEq)]
pub struct ArchivedEvent {
    /// Its id.
    pub id: EventId,
    /// Its type.
    pub event_type: EventType,
    /// When it was accepted.
    pub created_at: OffsetDateTime,
    /// Its ordering key, when it has one.
    pub ordering_key: Option<OrderingKey>,
    /// A test event's one subscription.
    pub only_for: Option<SubscriptionId>,
}

impl ArchivedEvent {
    /// The archive position just after this event.
    pub fn position(&self) -> ArchivePosition {
        ArchivePosition {
            at: self.created_at,
            id: self.id.as_str().to_owned(),
        }
    }
}

/// Which of a tenant's archived events a list asks for, newest first:
/// accepted in `since..=until`, of `event_type` when given, before
/// `before` (the last of the previous page) when given.
#[derive(Debug, Clone, PartialEq)]
pub struct RecentEvents {
    /// Only events of this type.
    pub event_type: Option<EventType>,
    /// Accepted at this time or later.
    pub since: OffsetDateTime,
    /// Accepted at this time or earlier.
    pub until: OffsetDateTime,
    /// Only events before this position.
    pub before: Option<ArchivePosition>,
    /// At most this many.
    pub limit: usize,
}

impl RecentEvents {
    /// Keeps what the list asks for of `events` (read between `since` and
    /// `until`, in any order), newest first.
    pub fn pick(&self, mut events: Vec<ArchivedEvent>) -> Vec<ArchivedEvent> {
        events.retain(|e| {
            self.event_type.as_ref().is_none_or(|t| *t == e.event_type)
                && self.before.as_ref().is_none_or(|b| e.position() < *b)
        });
        events.sort_by(|a, b| (b.created_at, &b.id).cmp(&(a.created_at, &a.id)));
        events.truncate(self.limit);
        events
    }
}

/// A backfill in progress (G8): the re-enabled subscription, the archive
/// window it covers, and how far it got.
#[derive(Debug, Clone, PartialEq)]
pub struct BackfillJob {
    /// The tenant.
    pub tenant: TenantId,
    /// The re-enabled subscription.
    pub subscription_id: SubscriptionId,
    /// Events after this position are still to be looked at.
    pub after: ArchivePosition,
    /// The last acceptance time covered.
    pub until: OffsetDateTime,
    /// When it started (the pace ramps up from then).
    pub started_at: OffsetDateTime,
}
