//! Tests of the operator events on the core with the embedded store: one
//! event per occurrence when two processes see it, the kinds chosen, and
//! nothing about the operator tenant itself.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use super::*;
use crate::config::Config;
use crate::contract;
use crate::domain::OperatorEvents;
use crate::engine::Ports;
use crate::ports::{NoWakeup, Notifier, SubscriptionStore};
use crate::sqlite::SqliteStore;

/// Counts the events sent (a hand-written fake: this tests the core alone).
#[derive(Default)]
struct Counting(AtomicUsize);

#[async_trait::async_trait]
impl Notifier for Counting {
    async fn send(&self, _: OperatorEvent, _: &Value) -> StoreResult<()> {
        self.0.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
}

/// An engine over `store` with `config`, telling `sent`.
fn engine(store: &SqliteStore, config: Config, sent: &Arc<Counting>) -> Arc<Engine> {
    let ports = Ports::build(
        store.clone(),
        &config,
        crate::engine::Outside::default(),
        Arc::new(NoWakeup),
        sent.clone(),
    )
    .unwrap();
    Engine::new(ports, config)
}

/// A delivery to `sub` on its third attempt, failing since `first`.
fn retried(sub: &Subscription, first: OffsetDateTime) -> Delivery {
    Delivery {
        seq: 1,
        tenant: sub.tenant.clone(),
        subscription_id: sub.id.clone(),
        event_id: EventId::generate(),
        event_type: EventType::parse("a.b").unwrap(),
        lane: 0,
        attempts: 2,
        first_attempt_at: Some(first),
        next_attempt_at: first,
    }
}

fn ended(end: End) -> Finish {
    Finish {
        end,
        attempt: None,
        health: None,
        timed_out: false,
    }
}

#[tokio::test]
async fn two_processes_ending_one_streak_send_one_recovered_event() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&dir.path().join("t.db")).unwrap();
    let sent = Arc::new(Counting::default());
    let (a, b) = (
        engine(&store, Config::default(), &sent),
        engine(&store, Config::default(), &sent),
    );
    let sub = contract::subscription(&TenantId::parse("acme").unwrap(), &["*"]);
    store.insert(&sub).await.unwrap();
    let now = OffsetDateTime::now_utc();
    let (da, db) = (
        retried(&sub, now - time::Duration::minutes(5)),
        retried(&sub, now - time::Duration::minutes(4)),
    );
    let delivered = ended(End::Delivered);
    tokio::join!(
        a.tell_operators_of_end(&da, &sub, &delivered, now),
        b.tell_operators_of_end(&db, &sub, &delivered, now)
    );
    assert_eq!(sent.0.load(Ordering::SeqCst), 1, "one event for one streak");
    // A success after a short failure is no recovery to tell.
    let short = retried(&sub, now - time::Duration::seconds(30));
    a.tell_operators_of_end(&short, &sub, &delivered, now).await;
    assert_eq!(sent.0.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn kinds_not_chosen_and_the_operator_tenant_itself_send_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&dir.path().join("t.db")).unwrap();
    let sent = Arc::new(Counting::default());
    let config = Config {
        operator_events: OperatorEvents::parse("subscription.recovered").unwrap(),
        ..Config::default()
    };
    let engine = engine(&store, config, &sent);
    let now = OffsetDateTime::now_utc();
    let sub = contract::subscription(&TenantId::parse("acme").unwrap(), &["*"]);
    store.insert(&sub).await.unwrap();
    let parked = ended(End::Parked("status 500".into()));
    let d = retried(&sub, now - time::Duration::minutes(5));
    engine.tell_operators_of_end(&d, &sub, &parked, now).await;
    assert_eq!(sent.0.load(Ordering::SeqCst), 0, "parked is not chosen");
    let operator = contract::subscription(&TenantId::parse(OPERATOR_TENANT).unwrap(), &["*"]);
    let own = retried(&operator, now - time::Duration::minutes(5));
    let delivered = ended(End::Delivered);
    engine
        .tell_operators_of_end(&own, &operator, &delivered, now)
        .await;
    assert_eq!(sent.0.load(Ordering::SeqCst), 0, "nothing about itself");
    engine
        .tell_operators_of_end(&d, &sub, &delivered, now)
        .await;
    assert_eq!(sent.0.load(Ordering::SeqCst), 1, "recovered is chosen");
}
