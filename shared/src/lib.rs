//! hooklane's library: everything between an HTTP request and a signed
//! POST to a subscriber.
//!
//! The flow, and the module that owns each step:
//!
//! ```text
//! api ──publish──▶ engine ──EventArchive::accept──▶ store
//!                    │  fan-out: SubscriptionStore::matching, LaneQueue::enqueue
//!                    │  deliver: SubscriptionStore::get (tombstone), LaneQueue::begin,
//!                    │           sign, Sender::send, classify, LaneQueue::finish(Finish)
//!                    │  health:  suspension (Suspensions), notice, probe, re-enable
//!                    │  requeue: replay (DeadLetters::list) and paced backfill passes
//!                    │           (EventArchive::window, Backfills), one rule (Retake)
//!                    ▼
//!          ports: one trait per capability; adapters: sqlite (here), AWS (hooklane-aws)
//! ```
//!
//! - [`api`]: the HTTP API of `../shared/API.md`; parses input into
//!   [`domain`] newtypes (checking URLs with [`egress`]) and calls the engine.
//! - [`engine`]: publish, fan-out, one delivery attempt (prepare, sign with
//!   [`signing`], send through [`sender`], classify with [`policy`], record),
//!   endpoint health ([`health`]) and requeues, over [`engine::Ports`]
//!   built once ([`engine::Ports::build`]).
//! - [`domain`]: the newtypes, the records, and the rules the stores share:
//!   the delivery state and its one view mapping, the requeue rule; with
//!   [`record`], the one stored form of a subscription.
//! - [`ports`]: the narrow traits the engine works through.
//! - [`sqlite`]: the embedded adapter of every store port; [`embedded`] runs
//!   the fan-out worker, the backfill passes and one task per lane with work
//!   over it (`hooklane serve`).
//! - [`config`]: typed configuration read once from `HOOKLANE_*`.

pub mod access;
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
pub mod lane_rules;
pub mod policy;
pub mod ports;
pub mod rate;
pub mod record;
pub mod sender;
pub mod signing;
#[cfg(feature = "embedded")]
pub mod sqlite;
pub mod telemetry;
pub mod trace;
