//! Ports: one narrow trait per capability the engine needs. The stores
//! ([`store`]: subscriptions, suspensions, the event archive, lanes, dead
//! letters, delivery views, backfills, the attempt log) have two adapters,
//! embedded SQLite and AWS, which pass one contract suite; the world
//! outside ([`outside`]: clock, sender, DNS, wake-ups, notices) is
//! injected. The engine never names a backend.

pub mod access;
pub mod outside;
pub mod records;
pub mod store;
pub mod turn;

pub use crate::egress::{Dns, SystemDns};
pub use access::*;
pub use outside::*;
pub use records::*;
pub use store::*;
pub use turn::*;

/// What caused a store error: the backend's own error, kept as the
/// error's source so that a log line shows the whole chain
/// ([`crate::telemetry::Chain`]).
pub type Cause = Box<dyn std::error::Error + Send + Sync + 'static>;

/// A storage failure. Carries its cause; the API answers 500 or 503
/// without the detail, which goes to the log.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The backend failed (corruption, a lost connection, a bug): what was
    /// being done, and the backend's error when there is one.
    #[error("storage backend: {0}")]
    Backend(String, #[source] Option<Cause>),
    /// The backend cannot take the operation for now (its disk is full, a
    /// write failed, it is locked or throttling): nothing changed, and the
    /// same call can succeed later. The API answers 503 with `Retry-After`.
    #[error("storage unavailable: {0}")]
    Unavailable(String, #[source] Option<Cause>),
    /// The write conflicts with existing state.
    #[error("conflict: {0}")]
    Conflict(String),
    /// A stored record does not parse back. The record is kept (never
    /// deleted, never read as a default), logged with its key and counted
    /// ([`crate::record::unreadable`]); a delivery is parked with the reason.
    #[error("unreadable record: {0}")]
    Unreadable(String),
}

impl StoreError {
    /// A backend failure that has no error of its own to carry.
    pub fn backend(what: impl Into<String>) -> Self {
        Self::Backend(what.into(), None)
    }

    /// A backend failure while `doing`, caused by `cause`.
    pub fn backend_from(doing: impl Into<String>, cause: impl Into<Cause>) -> Self {
        Self::Backend(doing.into(), Some(cause.into()))
    }

    /// The backend cannot take the operation for now, with no error of its
    /// own to carry.
    pub fn unavailable(what: impl Into<String>) -> Self {
        Self::Unavailable(what.into(), None)
    }

    /// The backend cannot take the operation for now while `doing`,
    /// because of `cause`.
    pub fn unavailable_from(doing: impl Into<String>, cause: impl Into<Cause>) -> Self {
        Self::Unavailable(doing.into(), Some(cause.into()))
    }
}

/// Shorthand for port results.
pub type StoreResult<T> = Result<T, StoreError>;
