//! The table's items, at the bottom of the store: every key
//! ([`keys`]), the typed reads of an item's attributes ([`attrs`]), what
//! an AWS call's failure means ([`errors`]), and the mapping between each
//! of the core's records and its item. Every
//! port module reads and writes items through here; nothing here names a
//! module of the store above it (`tests/layout.py` checks).

pub(crate) mod api_key;
pub(crate) mod attempt;
pub(crate) mod attrs;
pub(crate) mod backfill;
pub(crate) mod dead_letter;
pub(crate) mod errors;
pub(crate) mod event;
pub(crate) mod event_payload;
pub(crate) mod keys;
pub(crate) mod lanes;
pub(crate) mod placement;
pub(crate) mod record;
pub(crate) mod subscription;
