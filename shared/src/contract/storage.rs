//! The storage checks: subscriptions, matching, idempotent accept, the
//! lease-finish-park-replay cycle, deletion and suspension.

use time::{Duration, OffsetDateTime};

use super::{attempt, event, new_delivery, subscription, tenant, Harness};
use crate::domain::{Delivery, EventType, SubscriptionId, SubscriptionStatus};
use crate::domain::{Health, Retake};
use crate::ports::{Accepted, End, Finish, StoreError};

/// Subscriptions round-trip, are scoped to their tenant, and stay gone
/// once deleted.
pub async fn subscriptions_are_tenant_scoped_and_tombstoned(h: &dyn Harness) {
    let store = h.ports().store.subscriptions;
    let (a, b) = (tenant("a"), tenant("b"));
    let sub = subscription(&a, &["invoice.*"]);
    store.insert(&sub).await.expect("insert");
    let got = store.get(&a, &sub.id).await.expect("get").expect("found");
    assert_eq!(got.url, sub.url);
    assert_eq!(got.secret, sub.secret);
    assert_eq!(got.metadata, sub.metadata);
    assert!(
        store.get(&b, &sub.id).await.expect("get").is_none(),
        "other tenant"
    );
    assert!(store.list(&b, None, 10).await.expect("list").is_empty());
    assert_eq!(store.list(&a, None, 10).await.expect("list").len(), 1);
    assert_eq!(
        store.delete(&b, &sub.id).await.expect("delete"),
        None,
        "other tenant"
    );
    assert_eq!(store.delete(&a, &sub.id).await.expect("delete"), Some(0));
    assert!(store.get(&a, &sub.id).await.expect("get").is_none());
    assert_eq!(store.delete(&a, &sub.id).await.expect("delete"), None);
    let mut gone = sub.clone();
    gone.description = Some("changed".into());
    assert!(!store.update(&gone).await.expect("update"));
}

/// Matching finds exact, prefix and star filters of active subscriptions
/// of the tenant only, page by page.
pub async fn matching_respects_filters_tenants_and_pages(h: &dyn Harness) {
    let store = h.ports().store.subscriptions;
    let (a, b) = (tenant("a"), tenant("b"));
    let mut want = Vec::new();
    for f in ["invoice.paid", "invoice.*", "*"] {
        let s = subscription(&a, &[f]);
        store.insert(&s).await.expect("insert");
        want.push(s.id);
    }
    for (t, f) in [(&a, "order.*"), (&a, "invoice.paid.late"), (&b, "*")] {
        store.insert(&subscription(t, &[f])).await.expect("insert");
    }
    let deleted = subscription(&a, &["*"]);
    store.insert(&deleted).await.expect("insert");
    store.delete(&a, &deleted.id).await.expect("delete");
    let ty = EventType::parse("invoice.paid").expect("type");
    let first = store.matching(&a, &ty, None, 2).await.expect("page 1");
    let rest = store
        .matching(&a, &ty, first.last().map(|s| &s.id), 2)
        .await
        .expect("page 2");
    let got: Vec<SubscriptionId> = first.into_iter().chain(rest).map(|s| s.id).collect();
    want.sort();
    assert_eq!(got, want);
}

/// The same event id within 24 h answers the original; later it conflicts.
pub async fn accepting_is_idempotent_for_a_day(h: &dyn Harness) {
    let events = h.ports().store.events;
    let t = tenant("a");
    let now = OffsetDateTime::now_utc();
    let e = event(&t, "a.b", now);
    assert!(matches!(
        events.accept(e.clone()).await.expect("accept"),
        Accepted::New(_)
    ));
    let mut again = e.clone();
    again.created_at = now + Duration::hours(1);
    match events.accept(again).await.expect("accept") {
        Accepted::Duplicate(orig) => {
            assert_eq!(orig.created_at.unix_timestamp(), now.unix_timestamp())
        }
        Accepted::New(_) => panic!("a duplicate was accepted as new"),
    }
    let mut late = e.clone();
    late.created_at = now + Duration::hours(25);
    assert!(matches!(
        events.accept(late).await,
        Err(StoreError::Conflict(_))
    ));
    let got = events.get(&t, &e.id).await.expect("get").expect("archived");
    assert_eq!(got.payload, e.payload);
    assert!(events
        .get(&tenant("b"), &e.id)
        .await
        .expect("get")
        .is_none());
}

/// A delivery is queued once per pair, leased by its attempt, and finished
/// into the state the API shows.
pub async fn deliveries_lease_finish_park_and_replay(h: &dyn Harness) {
    let ports = h.ports();
    let (subs, queue, log) = (&ports.subscriptions, &ports.lanes, &ports.attempts);
    let t = tenant("a");
    let sub = subscription(&t, &["*"]);
    subs.insert(&sub).await.expect("insert");
    let e = event(&t, "a.b", OffsetDateTime::now_utc());
    queue
        .enqueue(&[new_delivery(&sub, &e)])
        .await
        .expect("enqueue");
    queue
        .enqueue(&[new_delivery(&sub, &e)])
        .await
        .expect("enqueue twice");
    let d = h.next_delivery(&sub.id).await.expect("queued");
    assert_eq!(d.attempts, 0);
    let now = OffsetDateTime::now_utc();
    assert!(queue
        .begin(&d, now, now + Duration::seconds(30))
        .await
        .expect("begin"));
    assert!(
        !queue
            .begin(&d, now, now + Duration::seconds(30))
            .await
            .expect("begin"),
        "stale attempt count"
    );
    let a1 = attempt(&d, 1, "parked", Some(410));
    let parked = Finish {
        end: End::Parked("status 410".into()),
        attempt: Some(a1),
        health: None,
        timed_out: false,
    };
    assert!(
        queue.finish(&d, &parked).await.expect("finish").took,
        "this call recorded the outcome"
    );
    let again = Finish {
        attempt: None,
        ..parked.clone()
    };
    assert!(
        !queue.finish(&d, &again).await.expect("finish again").took,
        "an outcome recorded before is not this call's: of two processes that race, one acts on it"
    );
    assert!(
        h.next_delivery(&sub.id).await.is_none(),
        "a parked delivery leaves the lane"
    );
    let views = ports.views.of_event(&t, &e.id).await.expect("views");
    assert_eq!(
        (
            views.len(),
            views[0].1.shown_state(),
            views[0].1.last_status_code
        ),
        (1, "parked", Some(410))
    );
    let parked = ports
        .dead_letters
        .list(&t, Some(&sub.id), None, 10)
        .await
        .expect("dead letters");
    assert_eq!(parked.len(), 1);
    assert_eq!(
        (parked[0].1.attempts, parked[0].1.reason.as_str()),
        (1, "status 410")
    );
    assert!(ports
        .dead_letters
        .list(&tenant("b"), None, None, 10)
        .await
        .expect("dl")
        .is_empty());

    let replayed = queue
        .requeue(&[new_delivery(&sub, &e)], Retake::Parked, false)
        .await
        .expect("replay");
    assert_eq!(replayed, vec![true]);
    let again = h.next_delivery(&sub.id).await.expect("back in the lane");
    assert_eq!(again.attempts, 0, "a fresh ladder");
    assert!(ports
        .dead_letters
        .list(&t, None, None, 10)
        .await
        .expect("dl")
        .is_empty());

    let listed = log.list(&t, &sub.id, None, 10).await.expect("attempts");
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].1.status_code, Some(410));
    assert_eq!(
        listed[0].1.event_type,
        Some(d.event_type.clone()),
        "the log keeps the type"
    );
}

/// Deleting a subscription hides it from the read every attempt starts
/// with (so the engine drops its deliveries, G4) and from fan-out.
pub async fn a_deleted_subscription_is_gone_for_attempts_and_fan_out(h: &dyn Harness) {
    let ports = h.ports();
    let (subs, queue) = (&ports.subscriptions, &ports.lanes);
    let t = tenant("a");
    let sub = subscription(&t, &["*"]);
    subs.insert(&sub).await.expect("insert");
    let e = event(&t, "a.b", OffsetDateTime::now_utc());
    queue
        .enqueue(&[new_delivery(&sub, &e)])
        .await
        .expect("enqueue");
    assert!(subs.delete(&t, &sub.id).await.expect("delete").is_some());
    assert!(subs.get(&t, &sub.id).await.expect("get").is_none());
    let ty = EventType::parse("a.b").expect("type");
    assert!(subs
        .matching(&t, &ty, None, 10)
        .await
        .expect("matching")
        .is_empty());
    // A store that keeps the queued delivery until its turn (AWS): the
    // engine's read finds no subscription and drops it, without an
    // attempt. (SQLite drops queued deliveries with the delete.)
    if let Some(d) = h.next_delivery(&sub.id).await {
        let engine = crate::engine::Engine::new(h.ports(), crate::config::Config::default());
        let step = engine.deliver(&d, Some(e.clone())).await.expect("deliver");
        assert!(
            matches!(step, crate::engine::Step::Ended(End::Dropped)),
            "{step:?}"
        );
    }
    let views = ports.views.of_event(&t, &e.id).await.expect("views");
    assert!(!views.is_empty(), "the delivery is shown");
    assert!(
        views.iter().all(|(_, v)| v.shown_state() == "dropped"),
        "never pending again: {views:?}"
    );
}

/// Suspension is a guarded transition: of two attempts exactly one takes
/// effect; re-enabling likewise, and it resets health (G8).
pub async fn suspension_is_a_guarded_transition(h: &dyn Harness) {
    let ports = h.ports();
    let (subs, suspensions) = (&ports.subscriptions, &ports.suspensions);
    let t = tenant("a");
    let mut sub = subscription(&t, &["*"]);
    sub.health.consecutive_failures = 7;
    subs.insert(&sub).await.expect("insert");
    let now = OffsetDateTime::now_utc();
    // The record that reached the limit: the stored one and two deliveries
    // in retry.
    let reached = Health {
        consecutive_failures: 9,
        first_failure_at: Some(now),
        ..sub.health.clone()
    };
    // At once, as two processes race on it.
    let (a, b) = tokio::join!(
        suspensions.suspend(&t, &sub.id, now, "permanent failures", &reached),
        suspensions.suspend(&t, &sub.id, now, "permanent failures", &reached),
    );
    assert_eq!(
        u8::from(a.expect("suspend")) + u8::from(b.expect("suspend")),
        1,
        "exactly one"
    );
    let got = subs.get(&t, &sub.id).await.expect("get").expect("kept");
    assert_eq!(got.status, SubscriptionStatus::Suspended);
    assert_eq!(got.status_reason.as_deref(), Some("permanent failures"));
    assert!(got.suspended_at.is_some(), "suspended_at set");
    assert_eq!(
        (
            got.health.consecutive_failures,
            got.health.first_failure_at.is_some()
        ),
        (9, true),
        "a suspension writes the health record that reached the limit"
    );
    assert_eq!(got.secret, sub.secret, "secret survives");
    assert_eq!(got.filters, sub.filters, "filters survive");
    let ty = EventType::parse("a.b").expect("type");
    assert!(
        subs.matching(&t, &ty, None, 10)
            .await
            .expect("matching")
            .is_empty(),
        "no fan-out"
    );
    assert!(suspensions
        .activate(&t, &sub.id, now)
        .await
        .expect("activate"));
    assert!(
        !suspensions
            .activate(&t, &sub.id, now)
            .await
            .expect("activate"),
        "already active"
    );
    let got = subs.get(&t, &sub.id).await.expect("get").expect("kept");
    assert_eq!(got.status, SubscriptionStatus::Active);
    assert_eq!(got.health.consecutive_failures, 0, "health reset");
    assert!(got.suspended_at.is_none());
    assert_eq!(
        got.status_reason, None,
        "the reason goes with the suspension"
    );
}

/// An attempt's outcome stands only at that attempt: once a later attempt
/// began (after the first one's lease), the first one's finish records
/// nothing and says so, and the later one's does.
pub async fn a_later_attempt_takes_the_outcome_over(h: &dyn Harness) {
    let ports = h.ports();
    let queue = &ports.lanes;
    let t = tenant("later");
    let sub = subscription(&t, &["*"]);
    ports.subscriptions.insert(&sub).await.expect("insert");
    let e = event(&t, "a.b", OffsetDateTime::now_utc());
    queue
        .enqueue(&[new_delivery(&sub, &e)])
        .await
        .expect("enqueue");
    let first = h.next_delivery(&sub.id).await.expect("queued");
    let now = OffsetDateTime::now_utc();
    assert!(queue.begin(&first, now, now).await.expect("begin"));
    let second = Delivery {
        attempts: first.attempts + 1,
        ..first.clone()
    };
    assert!(queue
        .begin(&second, now, now + Duration::seconds(30))
        .await
        .expect("begin"));
    let parked = |d: &Delivery| Finish {
        end: End::Parked("status 410".into()),
        attempt: Some(attempt(d, d.attempts + 1, "parked", Some(410))),
        health: None,
        timed_out: false,
    };
    assert!(
        !queue
            .finish(&first, &parked(&first))
            .await
            .expect("finish")
            .took,
        "a later attempt took over"
    );
    assert!(
        queue
            .finish(&second, &parked(&second))
            .await
            .expect("finish")
            .took
    );
}
