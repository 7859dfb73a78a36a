//! hooklane's library: everything between an HTTP request and a signed
//! POST to a subscriber.
//!
//! The flow, and the module that owns each step:
//! - [`api`]: the HTTP API of `../shared/API.md`; parses input into
//!   [`domain`] newtypes (checking URLs with [`egress`]) and calls the engine.
//! - [`engine`]: publish (archive + schedule fan-out), fan-out (one delivery
//!   per matching subscription) and one delivery attempt (prepare, sign with
//!   [`signing`], send through [`sender`], classify with [`policy`], record).
//! - [`ports`]: the narrow traits the engine works through.
//! - [`sqlite`]: the embedded adapter of every port; [`embedded`] runs the
//!   fan-out worker and one lane per subscription over it (`hooklane serve`).
//! - [`config`]: typed configuration read once from `HOOKLANE_*`.

pub mod api;
pub mod config;
#[cfg(any(test, feature = "contract"))]
pub mod contract;
pub mod domain;
pub mod egress;
#[cfg(feature = "embedded")]
pub mod embedded;
pub mod engine;
pub mod health;
pub mod policy;
pub mod ports;
pub mod record;
pub mod sender;
pub mod signing;
#[cfg(feature = "embedded")]
pub mod sqlite;
pub mod telemetry;
