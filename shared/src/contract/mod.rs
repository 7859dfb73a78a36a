//! The storage contract every adapter must pass: the same checks run over
//! the embedded SQLite adapter (in this crate's tests) and over any other
//! adapter (behind the `contract` feature). Each check builds its own
//! tenant, so one store can run them all.

mod access;
mod filters;
mod health;
mod rules;
mod storage;

pub use access::*;
pub use filters::*;
pub use health::*;
pub use rules::*;
pub use storage::*;

use std::sync::Arc;

use time::OffsetDateTime;

use crate::config::Config;
use crate::domain::{
    Attempt, AttemptId, Delivery, Event, EventFilter, EventId, EventType, Health, Subscription,
    SubscriptionId, SubscriptionStatus, TenantId,
};
use crate::engine::{Outside, Ports, Store};
use crate::ports::{NewDelivery, NoNotifier, NoWakeup};
use crate::signing::Secret;

/// What the contract needs from an adapter under test.
#[async_trait::async_trait]
pub trait Harness: Send + Sync {
    /// The engine's ports over the adapter ([`Ports::build`]).
    fn ports(&self) -> Ports;
    /// The next due delivery of a subscription's lane, as the adapter's
    /// runner would receive it.
    async fn next_delivery(&self, sub: &SubscriptionId) -> Option<Delivery>;
    /// Everything the store holds, as text (every row or item, in any
    /// form), to show what is and is not stored.
    async fn raw_contents(&self) -> String;
}

/// The ports over `store` that the contract drives: the store ports, a
/// default configuration, the system clock and DNS, nothing to wake.
pub fn ports_over<S: Store>(store: S) -> Ports {
    Ports::build(
        store,
        &Config::default(),
        Outside::default(),
        Arc::new(NoWakeup),
        Arc::new(NoNotifier),
    )
    .expect("the sender builds")
}

pub(crate) fn tenant(name: &str) -> TenantId {
    TenantId::parse(&format!(
        "{name}-{}",
        &SubscriptionId::generate().as_str()[20..]
    ))
    .expect("tenant")
}

/// A subscription of `tenant` for `filters`.
pub fn subscription(tenant: &TenantId, filters: &[&str]) -> Subscription {
    let now = OffsetDateTime::now_utc();
    Subscription {
        id: SubscriptionId::generate(),
        tenant: tenant.clone(),
        url: url::Url::parse("https://example.com/hook").expect("url"),
        filters: filters
            .iter()
            .map(|f| EventFilter::parse(f).expect("filter"))
            .collect(),
        description: Some("contract".into()),
        metadata: [("k".to_owned(), "v".to_owned())].into_iter().collect(),
        secret: Secret::generate(),
        previous_secret: None,
        status: SubscriptionStatus::Active,
        health: Health::default(),
        suspended_at: None,
        status_reason: None,
        created_at: now,
        updated_at: now,
        lanes: Default::default(),
        rate_limit: None,
        options: Default::default(),
    }
}

pub(crate) fn event(tenant: &TenantId, ty: &str, at: OffsetDateTime) -> Event {
    Event {
        id: EventId::generate(),
        tenant: tenant.clone(),
        event_type: EventType::parse(ty).expect("type"),
        created_at: at,
        payload: bytes::Bytes::from_static(b"{\"type\":\"x\"}"),
        ordering_key: None,
        traceparent: None,
        only_for: None,
    }
}

pub(crate) fn attempt(d: &Delivery, n: u32, outcome: &str, status: Option<u16>) -> Attempt {
    Attempt {
        id: AttemptId::generate(),
        tenant: d.tenant.clone(),
        subscription_id: d.subscription_id.clone(),
        event_id: d.event_id.clone(),
        event_type: Some(d.event_type.clone()),
        attempt: n,
        started_at: OffsetDateTime::now_utc(),
        duration_ms: 3,
        status_code: status,
        outcome: outcome.into(),
        error: None,
        response_excerpt: Some("ok".into()),
        response_headers: Some(r#"{"content-type":"text/plain","x-request-id":"r1"}"#.into()),
    }
}

pub(crate) fn new_delivery(sub: &Subscription, e: &Event) -> NewDelivery {
    NewDelivery::to(sub, &e.id, &e.event_type, e.ordering_key.as_ref())
}
/// Every check, in order.
pub async fn run_all(h: &dyn Harness) {
    a_subscription_reads_back_field_for_field(h).await;
    subscriptions_are_tenant_scoped_and_tombstoned(h).await;
    matching_respects_filters_tenants_and_pages(h).await;
    accepting_is_idempotent_for_a_day(h).await;
    deliveries_lease_finish_park_and_replay(h).await;
    a_later_attempt_takes_the_outcome_over(h).await;
    failed_sequences_each_count_over_the_stored_record(h).await;
    a_deleted_subscription_is_gone_for_attempts_and_fan_out(h).await;
    suspension_is_a_guarded_transition(h).await;
    tenant_keys_are_kept_by_hash_and_revoked(h).await;
    event_types_are_registered_per_tenant(h).await;
    a_replaced_backfill_is_left_to_its_replacement(h).await;
    // Last: it leaves deliveries in the lanes.
    requeues_take_what_the_rule_takes_and_views_show_one_mapping(h).await;
}
