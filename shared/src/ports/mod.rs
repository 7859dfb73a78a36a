//! Ports: one narrow trait per capability the engine needs. The stores
//! ([`store`]: subscriptions, suspensions, the event archive, lanes, dead
//! letters, delivery views, backfills, the attempt log) have two adapters,
//! embedded SQLite and AWS, which pass one contract suite; the world
//! outside ([`outside`]: clock, sender, DNS, wake-ups, notices) is
//! injected. The engine never names a backend.

pub mod outside;
pub mod records;
pub mod store;
pub mod turn;

pub use crate::egress::{Dns, SystemDns};
pub use outside::*;
pub use records::*;
pub use store::*;
pub use turn::*;

/// A storage failure. Carries its cause; the API answers 500 or 503
/// without the detail, which goes to the log.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The backend failed (corruption, a lost connection, a bug).
    #[error("storage backend: {0}")]
    Backend(String),
    /// The backend cannot take the operation for now (its disk is full, a
    /// write failed, it is locked or throttling): nothing changed, and the
    /// same call can succeed later. The API answers 503 with `Retry-After`.
    #[error("storage unavailable: {0}")]
    Unavailable(String),
    /// The write conflicts with existing state.
    #[error("conflict: {0}")]
    Conflict(String),
    /// A stored record does not parse back. The record is kept (never
    /// deleted, never read as a default), logged with its key and counted
    /// ([`crate::record::unreadable`]); a delivery is parked with the reason.
    #[error("unreadable record: {0}")]
    Unreadable(String),
}

/// Shorthand for port results.
pub type StoreResult<T> = Result<T, StoreError>;
