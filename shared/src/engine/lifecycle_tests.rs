//! Tests of the suspension rules (G8) on the core with the embedded
//! store: one notice per suspension, and what a delivery in retry reads.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use super::*;
use crate::config::Config;
use crate::contract;
use crate::domain::{BackfillJob, SubscriptionId, TenantId};
use crate::engine::Ports;
use crate::ports::Backfills;
use crate::ports::{NoWakeup, Notifier, SubscriptionStore};
use crate::sqlite::SqliteStore;

/// Counts notices (a hand-written fake: this tests the core alone).
#[derive(Default)]
struct Counting(AtomicUsize);

#[async_trait::async_trait]
impl Notifier for Counting {
    async fn send(
        &self,
        _: crate::domain::OperatorEvent,
        _: &serde_json::Value,
    ) -> StoreResult<()> {
        self.0.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
}

#[tokio::test]
async fn two_concurrent_suspensions_of_one_subscription_send_exactly_one_notice() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&dir.path().join("t.db")).unwrap();
    let notices = Arc::new(Counting::default());
    let ports = Ports::build(
        store.clone(),
        &Config::default(),
        crate::engine::Outside::default(),
        Arc::new(NoWakeup),
        notices.clone(),
    )
    .unwrap();
    let config = Config {
        suspend_policy: crate::health::SuspendPolicy::parse("retryable=1/0s").unwrap(),
        ..Config::default()
    };
    let engine = Engine::new(ports, config);
    let tenant = TenantId::parse("acme").unwrap();
    let sub = contract::subscription(&tenant, &["*"]);
    store.insert(&sub).await.unwrap();
    let now = OffsetDateTime::now_utc();
    let health = Health {
        consecutive_failures: 1,
        retryable_failures: 1,
        first_failure_at: Some(now),
        ..Health::default()
    };
    let last = Attempt {
        status_code: Some(503),
        outcome: "parked".into(),
        error: Some("status 503".into()),
        ..attempt(&sub, now)
    };
    let (a, b) = tokio::join!(
        engine.suspend_if_due(&sub, &health, &last),
        engine.suspend_if_due(&sub, &health, &last)
    );
    a.unwrap();
    b.unwrap();
    assert_eq!(notices.0.load(Ordering::SeqCst), 1, "exactly one notice");
    assert_eq!(
        engine
            .metrics
            .suspensions_of(crate::policy::FailureClass::Retryable),
        1
    );
    let now_suspended = store.get(&tenant, &sub.id).await.unwrap().unwrap();
    assert_eq!(now_suspended.status, SubscriptionStatus::Suspended);
    assert!(now_suspended.status_reason.unwrap().contains("retryable"));
}

/// A first attempt to `sub` at `now` that timed out.
fn attempt(sub: &Subscription, now: OffsetDateTime) -> Attempt {
    Attempt {
        id: AttemptId::generate(),
        tenant: sub.tenant.clone(),
        subscription_id: sub.id.clone(),
        event_id: EventId::generate(),
        event_type: None,
        attempt: 1,
        started_at: now,
        duration_ms: 1000,
        status_code: None,
        outcome: "retrying".into(),
        error: Some("timeout".into()),
        response_excerpt: None,
        response_headers: None,
    }
}

/// Counts the reads of how many deliveries are failing (a hand-written
/// fake around the embedded store: this tests the core alone).
struct CountingFailing {
    store: SqliteStore,
    reads: AtomicUsize,
}

#[async_trait::async_trait]
impl Backfills for CountingFailing {
    async fn start(&self, job: &BackfillJob) -> StoreResult<()> {
        self.store.start(job).await
    }
    async fn load(&self, t: &TenantId, s: &SubscriptionId) -> StoreResult<Option<BackfillJob>> {
        self.store.load(t, s).await
    }
    async fn save(&self, job: &BackfillJob) -> StoreResult<()> {
        self.store.save(job).await
    }
    async fn end(&self, job: &BackfillJob) -> StoreResult<()> {
        Backfills::end(&self.store, job).await
    }
    async fn waiting(&self, sub: &Subscription) -> StoreResult<u64> {
        self.store.waiting(sub).await
    }
    async fn failing(&self, sub: &Subscription) -> StoreResult<u64> {
        self.reads.fetch_add(1, Ordering::SeqCst);
        self.store.failing(sub).await
    }
}

/// A delivery gone into retry reads how many others are failing only when
/// the streak could reach a limit: at the default policy (retryable
/// failures suspend after 12 h), not at a first failure, and at one whose
/// streak began 13 h ago.
#[tokio::test]
async fn a_first_failure_in_retry_reads_nothing_more_and_a_long_streak_does() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&dir.path().join("t.db")).unwrap();
    let counting = Arc::new(CountingFailing {
        store: store.clone(),
        reads: AtomicUsize::new(0),
    });
    let mut ports = Ports::build(
        store.clone(),
        &Config::default(),
        crate::engine::Outside::default(),
        Arc::new(NoWakeup),
        Arc::new(Counting::default()),
    )
    .unwrap();
    ports.backfills = counting.clone();
    let engine = Engine::new(ports, Config::default());
    let tenant = TenantId::parse("acme").unwrap();
    let mut sub = contract::subscription(&tenant, &["*"]);
    store.insert(&sub).await.unwrap();
    let now = OffsetDateTime::now_utc();
    let last = attempt(&sub, now);
    let retryable = FailureClass::Retryable;
    engine
        .suspend_if_due_in_retry(&sub, retryable, now, &last)
        .await
        .unwrap();
    assert_eq!(counting.reads.load(Ordering::SeqCst), 0, "a first failure");
    sub.health.first_failure_at = Some(now - time::Duration::hours(13));
    sub.health.consecutive_failures = 3;
    engine
        .suspend_if_due_in_retry(&sub, retryable, now, &last)
        .await
        .unwrap();
    assert_eq!(counting.reads.load(Ordering::SeqCst), 1, "a 13 h streak");
    // Classes mixed: a TLS failure (permanent) 2 h into a streak with a
    // fatal and three permanent failures could reach the permanent limit
    // (5 after 1 h), so it reads.
    sub.health.first_failure_at = Some(now - time::Duration::hours(2));
    sub.health.fatal_failures = 1;
    sub.health.permanent_failures = 3;
    sub.health.consecutive_failures = 4;
    engine
        .suspend_if_due_in_retry(&sub, FailureClass::Permanent, now, &last)
        .await
        .unwrap();
    assert_eq!(counting.reads.load(Ordering::SeqCst), 2, "mixed classes");
}
