//! The backfill bound (G8): a subscription suspended 30 days ago, with
//! archived events throughout, replays only the 14-day retention window,
//! in order, no faster than the configured rate.

use std::time::{Duration, Instant};

use hooklane_core::config::Config;
use hooklane_core::contract;
use hooklane_core::domain::{Event, EventId, EventType, Health, SubscriptionStatus, TenantId};
use hooklane_core::embedded::Embedded;
use hooklane_core::ports::{EventArchive, SubscriptionStore, Suspensions};
use hooklane_tests::{eventually, test_env, Receiver};
use time::OffsetDateTime;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backfill_after_30_days_replays_only_the_retention_window_in_order_at_the_rate() {
    let rx = Receiver::start().await;
    let env = test_env(&[("HOOKLANE_BACKFILL_RATE", "8")]);
    let config = Config::from_lookup(|k| env.get(k).cloned()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let embedded = Embedded::start(config, &dir.path().join("b.db"))
        .await
        .unwrap();
    let (engine, store) = (embedded.engine.clone(), embedded.store.clone());

    let tenant = TenantId::parse("acme").unwrap();
    let now = OffsetDateTime::now_utc();
    let mut sub = contract::subscription(&tenant, &["*"]);
    sub.url = url::Url::parse(&rx.url("back")).unwrap();
    sub.health = Health {
        consecutive_failures: 40,
        first_failure_at: Some(now - time::Duration::days(30)),
        streak_events_since: Some(now - time::Duration::days(30)),
        ..Health::default()
    };
    store.insert(&sub).await.unwrap();
    assert!(store
        .suspend(
            &tenant,
            &sub.id,
            now - time::Duration::days(30),
            "dead",
            &sub.health,
        )
        .await
        .unwrap());

    // One event every 3 days for 30 days: those in the last 14 days count.
    let mut recent = Vec::new();
    for days_ago in (0..30).rev().step_by(3) {
        let at = now - time::Duration::days(days_ago) - time::Duration::hours(1);
        let event = Event {
            id: EventId::generate(),
            tenant: tenant.clone(),
            event_type: EventType::parse("order.created").unwrap(),
            created_at: at,
            payload: bytes::Bytes::from(format!(
                r#"{{"type":"order.created","data":{{"days_ago":{days_ago}}}}}"#
            )),
            ordering_key: None,
            traceparent: None,
            only_for: None,
        };
        store.accept(event.clone()).await.unwrap();
        if days_ago < 14 {
            recent.push(event.id.as_str().to_owned());
        }
    }
    let suspended = SubscriptionStore::get(&store, &tenant, &sub.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(suspended.status, SubscriptionStatus::Suspended);
    let started = Instant::now();
    let enabled = engine.enable(suspended).await.unwrap();
    assert_eq!(enabled.status, SubscriptionStatus::Active);
    let ids = || -> Vec<String> {
        rx.requests("back")
            .iter()
            .skip(1)
            .map(|r| r.header("webhook-id"))
            .collect()
    };
    assert!(eventually(Duration::from_secs(30), || ids().len() >= recent.len()).await);
    let took = started.elapsed();
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(ids(), recent, "only the retention window, in order");
    // Paced: starting at a quarter of 8/s, the first gaps are ~0.5 s each.
    let floor = Duration::from_secs_f64((recent.len() - 1) as f64 / 8.0);
    assert!(
        took >= floor,
        "{} deliveries in {took:?}, faster than 8/s",
        recent.len()
    );
}
